"""The learners' preflight (inferopt/room/preflight.py): each check is a pure function of a facts dict, so a
wrong machine is described, not found: Python 3.10 on Ubuntu 22.04, no AVX2, 2 GB of RAM, macOS, a package
index that does not answer (a closed loopback port), a room that does not answer, and a real loopback server
that answers /v1/models as vLLM does. The script itself runs with the system python3, without site-packages."""
from __future__ import annotations

import http.server
import json
import os
import re
import socket
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from inferopt.paths import REPO_ROOT
from inferopt.room import preflight as pf

LINE = re.compile(r"^(ok|FAIL|warn) [a-z-]+: \S.*$")
SYSTEM_PYTHON = "/usr/bin/python3"


def good() -> dict:
    """A machine that runs the course (every check ok)."""
    return {"python": [3, 11, 9], "executable": "/usr/bin/python3", "venv_module": True, "pythons_on_path": [],
            "uv": False,
            "system": "Linux", "machine": "x86_64", "distro": "debian", "distro_version": "12", "wsl": False,
            "cpu_flags": ["avx", "avx2", "fma", "sse4_2"], "mem_available_gb": 14.0, "mem_total_gb": 16.0,
            "disk_free_gb": 40.0, "disk_path": "/home/ana/course",
            "pip_config": {"index-url": [], "extra-index-url": [], "find-links": []},
            "indexes": {"pypi": {"status": 200}, "torch-cpu": {"status": 200}},
            "promtool": "/usr/bin/promtool", "root": False, "sudo": True, "room": None}


def levels(facts: dict) -> dict:
    return {chk: lvl for lvl, chk, _, _ in pf.evaluate(facts)}


def line(facts: dict, check: str) -> str:
    return next(pf.render([ln]) for ln in pf.evaluate(facts) if ln[1] == check)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_vllm():
    """A real loopback HTTP server that answers /health and /v1/models as vLLM's OpenAI server does."""
    body = json.dumps({"object": "list", "data": [{"id": "smollm2-135m", "object": "model", "owned_by": "vllm",
                                                   "max_model_len": 512}]}).encode()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/v1/models":
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)
            elif self.path == "/health":
                self.send_response(200)
                self.end_headers()
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_a_good_machine_passes_every_check():
    lines = pf.evaluate(good())
    assert {ln[0] for ln in lines} == {"ok"}, pf.render(lines)
    assert pf.exit_code(lines) == 0
    assert all(LINE.match(x) for x in pf.render(lines).splitlines())


def test_python_310_on_ubuntu_2204_fails_and_says_which_python_to_install():
    f = dict(good(), python=[3, 10, 12], distro="ubuntu", distro_version="22.04")
    text = line(f, "python")
    assert text.startswith("FAIL python: python3 is 3.10.12"), text
    assert "python3.11" in text and "uv python install 3.11" in text and "make setup PYTHON=python3.11" in text
    assert pf.exit_code(pf.evaluate(f)) == 1
    # a Python in range already installed: it is named instead
    text = line(dict(f, pythons_on_path=["python3.12"]), "python")
    assert "python3.12 is installed" in text and "make setup PYTHON=python3.12" in text, text
    assert levels(dict(good(), python=[3, 15, 0]))["python"] == "FAIL"
    # Ubuntu's python3.12 without python3.12-venv: `python3 -m venv` (make setup's first step) fails
    text = line(dict(good(), python=[3, 12, 3], venv_module=False), "python")
    assert text.startswith("FAIL python:") and "apt-get install python3.12-venv" in text, text


def test_no_avx2_little_ram_small_disk_and_the_wrong_os_fail():
    assert "no AVX2" in line(dict(good(), cpu_flags=["sse4_2", "avx"]), "cpu")
    assert levels(dict(good(), cpu_flags=["sse4_2", "avx"]))["cpu"] == "FAIL"
    assert "AVX-512" in line(dict(good(), cpu_flags=["avx2", "avx512f"]), "cpu")
    text = line(dict(good(), mem_available_gb=2.0, mem_total_gb=4.0), "memory")
    assert text.startswith("FAIL memory: 2.0 GB free") and "4 GB" in text, text
    assert levels(dict(good(), disk_free_gb=1.2))["disk"] == "FAIL"
    mac = line(dict(good(), system="Darwin", machine="arm64", cpu_flags=None), "platform")
    assert mac.startswith("FAIL platform: Darwin") and "room's server" in mac, mac
    assert "WSL2" in line(dict(good(), system="Windows", machine="AMD64"), "platform")


def test_an_index_that_does_not_answer_fails(tmp_path):
    dead = pf.probe(f"http://127.0.0.1:{closed_port()}/simple/", timeout=2)
    assert "error" in dead and "Connection" in dead["error"], dead
    f = dict(good(), indexes={"pypi": dead, "torch-cpu": dead})
    assert levels(f)["pypi"] == "FAIL" and levels(f)["torch-index"] == "FAIL"
    assert "download.pytorch.org does not answer" in line(f, "torch-index")
    # pip set to a mirror that does not answer: named, FAIL
    mirror = f"http://127.0.0.1:{closed_port()}/simple"
    f = dict(good(), pip_config={"index-url": [mirror], "extra-index-url": [], "find-links": []},
             indexes={"pypi": {"status": 200}, "torch-cpu": {"status": 200}, mirror: dead})
    assert levels(f)["pip-config"] == "FAIL" and mirror in line(f, "pip-config")
    # a mirror that answers stands in for unreachable public indexes (a warning, not a failure)
    f = dict(f, indexes={"pypi": dead, "torch-cpu": dead, mirror: {"status": 200}})
    assert levels(f)["pypi"] == "warn" and levels(f)["torch-index"] == "warn" and "pip-config" not in levels(f)


def test_pip_config_list_is_read(tmp_path):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = https://download.pytorch.org/whl/cpu\n", encoding="utf-8")
    env_before = os.environ.get("PIP_CONFIG_FILE")
    os.environ["PIP_CONFIG_FILE"] = str(conf)
    try:
        got = pf.pip_indexes(timeout=20)
    finally:
        os.environ.pop("PIP_CONFIG_FILE") if env_before is None else os.environ.update(PIP_CONFIG_FILE=env_before)
    assert "https://download.pytorch.org/whl/cpu" in got["extra-index-url"], got


def test_the_room_not_answering_fails_and_a_vllm_like_server_passes(fake_vllm):
    dead = f"http://127.0.0.1:{closed_port()}"
    f = dict(good(), room={"url": dead, "health": pf.probe(dead + "/health", 2), "models": pf.probe(dead + "/v1/models", 2)})
    text = line(f, "room")
    assert text.startswith(f"FAIL room: {dead}/v1/models does not answer"), text
    f = dict(good(), room={"url": fake_vllm, "health": pf.probe(fake_vllm + "/health", 2),
                           "models": pf.probe(fake_vllm + "/v1/models", 2)})
    assert line(f, "room") == f"ok room: {fake_vllm} serves smollm2-135m"
    # something answers at the address but it is not an OpenAI-compatible server
    f = dict(good(), room={"url": fake_vllm, "health": {"status": 200}, "models": {"status": 200, "body": "<html>"}})
    assert levels(f)["room"] == "FAIL"


def test_promtool_missing_without_sudo_says_the_user_space_way():
    text = line(dict(good(), promtool=None, sudo=False, root=False), "promtool")
    assert text.startswith("warn promtool:") and "apt-get download prometheus" in text and "~/.local/bin" in text
    assert "sudo" not in pf.PROMTOOL_NO_SUDO


def test_the_course_finds_promtool_in_local_bin(tmp_path):
    """monitoring/promtool.py looks in ~/.local/bin after PATH (where the preflight tells a learner without sudo
    to put it); with an empty PATH and no ~/.local/bin it says how to install it."""
    bin_ = tmp_path / ".local" / "bin"
    bin_.mkdir(parents=True)
    tool = bin_ / "promtool"
    tool.write_text("#!/bin/sh\necho promtool from local bin\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    code = "from inferopt.monitoring.promtool import promtool; print(promtool())"
    env = dict(os.environ, HOME=str(tmp_path), PATH="/nonexistent", PYTHONPATH=str(REPO_ROOT))
    env.pop("INFEROPT_PROMTOOL", None)
    import sys

    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == str(tool), res.stderr
    tool.unlink()
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "make preflight" in res.stderr, res.stderr


def run_script(*args, python=SYSTEM_PYTHON):
    """The script as a learner runs it: the system python3, no site-packages (-S: standard library only),
    from a folder outside the course."""
    return subprocess.run([python, "-S", str(REPO_ROOT / "inferopt/room/preflight.py"), "--timeout", "2", *args],
                          capture_output=True, text=True, timeout=120, cwd="/")


def test_the_script_runs_with_the_system_python(fake_vllm):
    assert Path(SYSTEM_PYTHON).exists()
    res = run_script("--room", fake_vllm)
    lines = res.stdout.strip().splitlines()
    assert all(LINE.match(x) for x in lines[:-1]), res.stdout + res.stderr
    assert {x.split(":")[0].split()[1] for x in lines[:-1]} >= {"python", "platform", "cpu", "memory", "disk",
                                                                   "pypi", "torch-index", "promtool", "room"}
    assert f"ok room: {fake_vllm} serves smollm2-135m" in lines
    assert res.returncode == (1 if any(x.startswith("FAIL") for x in lines) else 0), res.stdout
    dead = run_script("--room", f"http://127.0.0.1:{closed_port()}")
    assert dead.returncode == 1 and any(x.startswith("FAIL room:") for x in dead.stdout.splitlines()), dead.stdout
    bad = run_script("--room", "room-7")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --room 'room-7' is not an address"), bad.stderr


def test_make_preflight_needs_no_set_up():
    """`make preflight` runs the system python3 on the script and nothing else: with the venv's stamp pointed at
    a file that does not exist, a rule that depended on the set-up would print pip's steps first."""
    res = subprocess.run(["make", "--no-print-directory", "-n", "preflight", "ROOM=http://127.0.0.1:9",
                          "STAMP=/nonexistent/.installed-cpu", "BIN=/nonexistent/bin"], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines() == ["python3 inferopt/room/preflight.py --room http://127.0.0.1:9"], res.stdout
