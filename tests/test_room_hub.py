"""The workshop room for real, at small scale: ``make room``'s hub (inferopt/room/hub.py: JupyterHub, npm's
configurable-http-proxy, one JupyterLab per learner from the learner pack) on loopback with three learners,
attached to this worker's session engine as the room engine, driven in headless Chromium (tests/browser_lab.py).

Each learner signs in on the hub's login page with the room's password, runs chapter 00 (Run All Cells: its
engine cells attach to the room engine) and lab 4's answered notebook (its engine cell sweeps the room engine,
and its live check passes), all three at once. Then the wrong cases: a learner's own engine start is refused
in one line that names the room engine, a wrong password signs no one in, and one learner can neither open
another's JupyterLab nor read another's files through their own server. Each learner's server and kernels run
on the cores the room gave that learner, under its address-space limit."""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time

import pytest
import requests

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests"))
from browser_lab import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, NotebookPage, ServerAPI
from playwright.sync_api import sync_playwright

from inferopt.room.capacity import HubAdmin, learner_server_pid
from inferopt.room.hub import Room, learner_cores, split_cores

LEARNERS = ("ana", "ben", "chen")
PASSWORD = "room-" + secrets.token_hex(6)
CH00 = "chapters/00-start-here.ipynb"
LAB4 = "labs/lab4-benchmark-plotting.ipynb"
OWN = "own-engine.ipynb"
MEM_GIB = 8.0


class LearnerLab(ServerAPI):
    """One learner's JupyterLab behind the hub, with what tests/browser_lab.NotebookPage asks of a lab."""

    edition = "en"

    def __init__(self, room: Room, admin: HubAdmin, name: str):
        self.name = name
        self.root = room.room_dir / "learners" / name
        self.base = f"{room.url}/user/{name}"
        self.token = admin.user_token(name)

    def label(self, text: str) -> str:
        return text

    def url(self, path: str) -> str:
        return f"{self.base}/lab/tree/{path}?reset"

    def api(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, self.base + path, timeout=15,
                                headers={"Authorization": f"token {self.token}"}, **kw)


@pytest.fixture(scope="module")
def room(tmp_path_factory, live_server):
    tmp = tmp_path_factory.mktemp("room")
    pack = tmp / "learner-pack.tar.gz"
    subprocess.run(["make", "-s", "learner-pack", f"PACK={pack}"], cwd=REPO_ROOT, check=True, capture_output=True)
    token = secrets.token_hex(16)
    t0 = time.monotonic()
    with Room(tmp / "room", engine_urls=[live_server.base_url], pack=pack, admin_token=token, password=PASSWORD,
              mem_gib=MEM_GIB, references=REPO_ROOT / "inferopt" / "labcheck") as r:
        r.admin = HubAdmin(r.url, token)
        r.hub_start_s = time.monotonic() - t0
        yield r
        hub_pid = r.hub.proc.pid
    assert r.hub is None
    # everything the room started is gone: the hub, its proxy, every learner's server and kernel
    import psutil

    left = [p for p in psutil.process_iter(["cmdline", "environ"])
            if any(k in " ".join(p.info["cmdline"] or []) for k in ("jupyterhub", "configurable-http-proxy", "ipykernel"))
            and str(r.room_dir) in json.dumps(p.info.get("environ") or {})]
    assert not left and not psutil.pid_exists(hub_pid), [p.info["cmdline"] for p in left]
    live_server.ensure_alive()       # the room let go of its engine without stopping it


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def sign_in(browser, room, name: str, password: str = PASSWORD):
    """A fresh browser (own cookies) on the hub's login page; returns the page where the hub sent it."""
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.set_default_timeout(60_000)
    page = ctx.new_page()
    page.goto(f"{room.url}/hub/login")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    page.click("input[type=submit], button[type=submit]")
    return page


def _state(nbp, lab, path: str) -> str:
    """What the learner's notebook holds (saved from the page): each code cell's count and its error, if any."""
    nbp.page.keyboard.press("Control+s")
    nbp.page.wait_for_timeout(2000)
    nb = json.loads((lab.root / path).read_text())
    out = []
    for k, c in enumerate(x for x in nb["cells"] if x["cell_type"] == "code"):
        errs = [f"{o.get('ename')}: {o.get('evalue')}" for o in c.get("outputs", []) if o.get("output_type") == "error"]
        errs += [o["text"][-300:] for o in c.get("outputs", []) if o.get("name") == "stderr"]
        out.append(f"cell {k}: [{c.get('execution_count')}] {' | '.join(errs)}")
    return "; ".join(out)


def test_the_start_pages_course_path_without_solutions(monkeypatch, tmp_path):
    """A learner's folder holds the learner pack, which has no solutions/: the start page's first cell (the course
    path, each lab's minutes from its front matter) reads the labs/ notebooks there and gives the same path."""
    from inferopt import pacing
    from inferopt.course_map import course_path

    with_solutions = course_path()
    monkeypatch.setattr(pacing, "SOLUTIONS", tmp_path / "no-solutions")
    assert course_path() == with_solutions
    monkeypatch.setattr(pacing, "LABS", tmp_path / "no-labs")       # the wrong case: no lab anywhere
    with pytest.raises(CourseError, match="no such notebook: lab 1"):
        course_path()


def test_room_layout_and_wrong_values():
    """The core split and the policy's wrong values (no hub needed)."""
    taken, rest = split_cores(list(range(32)), 2, 2)
    assert taken == [[0, 1], [2, 3]] and rest == list(range(4, 32))
    assert [learner_cores(s, [4, 5, 6], 1) for s in range(4)] == [[4], [5], [6], [4]]
    assert learner_cores(1, list(range(4, 32)), 2) == [6, 7]
    with pytest.raises(CourseError, match="do not fit"):
        split_cores([0, 1], 2, 2)
    from inferopt.serving.engine import VLLMServer, room_policy_check

    old = os.environ.get("INFEROPT_ROOM_POLICY")
    try:
        os.environ["INFEROPT_ROOM_POLICY"] = "queue-please"
        with pytest.raises(CourseError, match="INFEROPT_ROOM_POLICY='queue-please'"):
            room_policy_check(VLLMServer())
        os.environ["INFEROPT_ROOM_POLICY"] = ""
        assert room_policy_check(VLLMServer()) is None          # no room: a learner alone starts engines
    finally:
        if old is None:
            os.environ.pop("INFEROPT_ROOM_POLICY", None)
        else:
            os.environ["INFEROPT_ROOM_POLICY"] = old
    with pytest.raises(CourseError, match="at least 8"):
        Room("/tmp/unused-room", password="short", pack=__file__)._password()


def test_three_learners_in_the_browser(room, browser, live_server):
    t0 = time.monotonic()
    labs, pages = {}, {}
    # lab 4 as a learner answered it: the worked solution in the learner's own labs/ folder
    for name in LEARNERS:
        page = sign_in(browser, room, name)
        page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=180_000)
        labs[name] = LearnerLab(room, room.admin, name)
        shutil.copy(REPO_ROOT / "solutions" / "lab4-benchmark-plotting.ipynb", labs[name].root / LAB4)
        pages[name] = page
    signed_in_s = time.monotonic() - t0

    # each learner's server, and every process it starts, on the learner's own cores and under its limit
    import psutil

    usable = sorted(os.sched_getaffinity(0))
    for slot, name in enumerate(LEARNERS):
        pid = learner_server_pid(name)
        want = set(learner_cores(slot, usable, 1))
        assert os.sched_getaffinity(pid) == want, (name, os.sched_getaffinity(pid), want)
        assert psutil.Process(pid).rlimit(psutil.RLIMIT_AS) == (int(MEM_GIB * (1 << 30)),) * 2
        env = psutil.Process(pid).environ()
        assert env["INFEROPT_ENGINE_URL"] == live_server.base_url and env["INFEROPT_ROOM_POLICY"] == "refuse"

    def run_all(path: str, timeout_s: float) -> dict:
        """Open ``path`` for every learner, start Run All Cells on each, then wait for all three."""
        nbps = {}
        for name in LEARNERS:
            nbp = NotebookPage(pages[name], labs[name], path).open()
            nbp.menu("Edit", "Clear Outputs of All Cells")
            nbp._run_menu("Run All Cells", list(range(len(nbp.code))))
            nbps[name] = nbp
        for name, nbp in nbps.items():
            try:
                nbp.wait_ran(list(range(len(nbp.code))), timeout_s)
                nbp.wait_kernel_idle(timeout_s)
                problems = nbp.problems()
                assert not problems, (name, path, problems)
            except Exception as exc:
                nbp.screenshot(f"room-{name}-{path.split('/')[-1].removesuffix('.ipynb')}-FAILED")
                raise AssertionError(f"{name}, {path}: {_state(nbp, labs[name], path)}") from exc
        return nbps

    # chapter 00, all three at once: the engine cell attaches to the room engine, the answer streams
    for name, nbp in run_all(CH00, 300).items():
        engine = nbp.text_of(nbp.code_cell_with("VLLMServer(max_model_len"), ".jp-OutputArea-output")
        assert f"attached to the engine at {live_server.base_url}" in engine, (name, engine)
        out = nbp.text_of(nbp.code_cell_with("stream_chat("), ".jp-OutputArea-output")
        assert "Paris" in out and re.search(r"TTFT \d+ ms", out), (name, out)
        assert "it keeps running for everyone else" in nbp.text_of(nbp.code_cell_with("srv.stop()"))
        labs[name].shutdown_kernels()
    ch00_s = time.monotonic() - t0 - signed_in_s

    # lab 4, all three at once: the sweep runs on the room engine and the live check passes
    for name, nbp in run_all(LAB4, 420).items():
        check = nbp.text_of(nbp.code_cell_with("labcheck.lab4.check_live("), ".jp-OutputArea-output")
        assert "all your functions agree" in check, (name, check)
        labs[name].shutdown_kernels()
    lab4_s = time.monotonic() - t0 - signed_in_s - ch00_s

    # the wrong case of the policy: a learner's own engine (its own flags) is refused in one line, in the browser
    ana = labs["ana"]
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                     "source": "from inferopt.serving.engine import VLLMServer\n\n"
                               "VLLMServer(extra_args=['--no-enable-prefix-caching']).start()"}],
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
          "nbformat": 4, "nbformat_minor": 4}
    (ana.root / OWN).write_text(json.dumps(nb))
    nbp = NotebookPage(pages["ana"], ana, OWN).open()
    nbp.menu("Edit", "Clear Outputs of All Cells")
    nbp._run_menu("Run All Cells", [0])
    nbp.wait_ran([0], 120)
    refusal = nbp.text_of(0, ".jp-OutputArea-output")
    assert ("CourseError: this room starts no engine of your own (it runs with its own vLLM flags "
            f"(--no-enable-prefix-caching)): the room engine at {live_server.base_url} is attached for you") in refusal
    assert "Traceback" not in refusal and len(refusal.strip().splitlines()) == 1, refusal
    ana.shutdown_kernels()

    # a wrong password signs no one in
    bad = sign_in(browser, room, "dan", "not-the-room-password")
    bad.wait_for_load_state()
    assert "/hub/login" in bad.url and "Invalid username or password" in bad.content(), bad.url
    assert room.admin.api("GET", "/users/dan").status_code == 404

    # one learner cannot open another's JupyterLab, nor read another's files through their own server
    resp = pages["ben"].goto(f"{room.url}/user/ana/lab/tree/{OWN}")
    assert resp.status == 403 or "/user/ben/" in pages["ben"].url, (resp.status, pages["ben"].url)
    assert not pages["ben"].locator(".jp-NotebookPanel").count()
    ben = labs["ben"]
    assert requests.get(f"{room.url}/user/ana/api/contents/{OWN}", timeout=15,
                        headers={"Authorization": f"token {ben.token}"}).status_code == 403
    assert ana.api("GET", f"/api/contents/{OWN}").status_code == 200       # (the owner can: the path is right)
    assert ben.api("GET", f"/api/contents/{OWN}").status_code == 404
    for escape in (f"../ana/{OWN}", f"%2E%2E/ana/{OWN}", str(ana.root / OWN)):
        assert ben.api("GET", f"/api/contents/{escape}").status_code in (400, 403, 404), escape
    print(f"\nroom: hub up in {room.hub_start_s:.0f} s; three learners signed in and their servers up in "
          f"{signed_in_s:.0f} s; chapter 00 x3 in {ch00_s:.0f} s; lab 4 x3 in {lab4_s:.0f} s; "
          f"total {time.monotonic() - t0:.0f} s")
