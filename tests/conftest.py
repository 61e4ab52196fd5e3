"""Shared fixtures. `live_server` is one default CPU engine for each test worker
(SmolLM2-135M, float32, 1 GiB KV, max_model_len 2048); tests that need other flags start
their own VLLMServer. Nothing is skipped: a missing engine or model fails with the fix.

`make test` runs pytest with two pytest-xdist workers (``-n 2 --dist loadgroup``) and two lanes, one
per worker, each an xdist group that runs in order:

- ``live``: the *timed* live part, at nice 0. Test modules and notebooks that start an engine,
  Prometheus, nginx or the router and measure time with it (latency, throughput, load, a canary's
  split), one engine at a time, exactly as in a plain run.
- ``rest``, at nice 10 (it gets the cycles the live lane leaves; tests/lanes.py carries the nice into
  every session the lane starts, since the kernel's autogroups weigh sessions as equals whatever their
  nice): the pure-Python tests, the notebooks without live cells, and the *untimed* live modules in
  ``BACKGROUND``, whose engines are checked for what they say and do (KV sizes, refusals, clean-up,
  attach), never for how fast. The browser test (``FOREGROUND``) runs in the live lane: it times nothing,
  but a starved browser and JupyterLab miss their own waits. The live lane mostly waits on one
  core (start-up imports, paced load): on 2 cores the suite used 72 % of both while only the live lane
  was left.

Every timed assertion is a relation within one run, so it holds beside the niced neighbour. A plain
``pytest`` (no ``-n``) ignores the lanes.

One engine per worker for the whole session: ``live_server`` (the default shape: 2048 tokens, 1 GiB KV,
float32) is also the engine the notebooks in ``SHARE_ENGINE`` attach to, through the course's own room
mechanism (``INFEROPT_ENGINE_URL``, serving/shared_engine.py) with ``INFEROPT_ENGINE_MISMATCH=start``:
their default-shape ``VLLMServer(...)`` attaches instead of starting, and any cell that asks for another
configuration (flags, another KV budget) still starts its own. Each start saved is ~20 s of imports."""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest

from inferopt.serving.engine import ENV_STARTUP_TIMEOUT
from inferopt.serving.shared_engine import ENV_MISMATCH, ENV_URL

# what a test module or notebook uses when it is live (it starts a process the suite must run one at a time)
_LIVE = re.compile(r"\b(VLLMServer|live_server|PrometheusServer|NginxGateway|VLLMRouter|mark\.engine)\b|tags: \[live\]")
_LIVE_CACHE: dict = {}
# the suite starts the engines it measures: a room's INFEROPT_ENGINE_URL in the caller's shell must not make
# its VLLMServers attach (tests/test_attach.py sets it itself where it tests that)
os.environ.pop(ENV_URL, None)
os.environ.pop(ENV_MISMATCH, None)
NICE_REST = 10
OMP_BIND = "VLLM_CPU_OMP_THREADS_BIND"
os.environ.pop(OMP_BIND, None)           # the lanes set it (see _EveryItem); a caller's value would pin every engine
# the vLLM oracle's worker stays up for each test process and answers all its batches: vLLM is imported once per
# process and platform kind, not once per call (ten calls in a fresh clone; inferopt/vllm_oracle/client.py)
os.environ.setdefault("INFEROPT_ORACLE_WORKER", "keep")
# the niced lane's engines start on what the timed lane leaves them: a start-up there is checked for what it says,
# never for how fast, and the 300 s default is a hang guard sized for a machine to itself. A fresh-clone CI run
# (2026-12-03) failed test_start_verdict_engine: its three engines, started together in the niced lane while the
# timed lane ran 2b, took 110 s to import the model worker and were still profiling KV at 300 s. The niced lane's
# engines wait up to REST_STARTUP_TIMEOUT_S (or the caller's INFEROPT_STARTUP_TIMEOUT_S where that is longer).
STARTUP_ENV = ENV_STARTUP_TIMEOUT
REST_STARTUP_TIMEOUT_S = 1200
_CALLER_STARTUP = os.environ.get(STARTUP_ENV)
# live modules that assert no time relation: they run in the niced lane beside the timed one (see above)
BACKGROUND = frozenset({
    "test_attach.py", "test_engine.py", "test_gpu_commands.py", "test_gpu_flags.py", "test_gpu_share.py",
    "test_lab_checks.py", "test_memory_engine_agreement.py", "test_router.py", "test_served_model.py",
    "test_start_verdict_engine.py", "test_bench_lesson.py", "test_cpu_isa.py", "test_bench_client.py",
    # notebooks whose live cells check what the engine says (KV sizes, the calculator), never how fast
    "00-start-here.ipynb", "05-end-to-end-deployment.ipynb", "lab2-memory-calculator.ipynb"})
# not timed, but driven through waits a starved process misses: a real browser, JupyterLab and its kernels. In
# the niced lane, beside a timed lane that fills both cores, they got ~5 % of a core once the autogroup sweeper
# made the nice bind (2026-12-03): JupyterLab lost kernels at start ("Kernel never reached an 'alive' state"
# after 60 s) and plotly figures had no traces after 120 s; three browser tests failed in a fresh-clone run and
# two again with the browser alone beside three busy sessions. Run with the timed lane, one item at a time,
# nothing timed runs beside them (and they time nothing themselves).
FOREGROUND = frozenset({"test_browser.py"})
# memory: the test modules that start several engines, or an engine beside a browser and learners' JupyterLabs, never
# run at the same time in the two lanes. A fresh-clone run (2026-12-06, 24 GiB, 2 cores) had the kernel's OOM killer
# take the session engine's worker while the room tests ran beside test_start_verdict_engine's three engines; lab 4's
# cells then found no engine. Each such module holds one machine-wide lock (_one_heavy_module_at_a_time) from before
# its module fixtures start their processes until after they stop.
HEAVY = frozenset({"test_start_verdict_engine.py", "test_room_hub.py", "test_room_netns.py", "test_gpu_share.py",
                   "test_router.py"})


@pytest.fixture(scope="module", autouse=True)
def _one_heavy_module_at_a_time(request):
    """Autouse and module-scoped, so it is set up before the module's own module fixtures (engines, the hub)."""
    if Path(str(request.path)).name not in HEAVY:
        yield
        return
    import fcntl

    from inferopt.paths import cache_dir

    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / "heavy-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


# notebooks whose default-shape engine is the worker's session engine (see the module docstring)
# (not the start page: the browser test runs it attached to the timed lane's session engine, as in a workshop
# room, and nbval runs it with an engine of its own, in the niced lane, as a learner alone does)
SHARE_ENGINE = frozenset({"05-end-to-end-deployment.ipynb", "06-monitoring-and-capacity.ipynb",
                          "lab4-benchmark-plotting.ipynb"})
_SESSION_ENGINE: list = []        # this worker's session engine, started on first use
_PRESTART: list = []              # its start in a thread, under xdist (see _prestart_session_engine)
_SESSION_LANES: set = set()       # the lanes with an item that uses the session engine


def lane(path: Path) -> str:
    """'live' (timed, nice 0) or 'rest' (pure or untimed, nice 10): the xdist group of a file's items."""
    if path.name in FOREGROUND:
        return "live"
    return "live" if _is_live(path) and path.name not in BACKGROUND else "rest"


def _is_live(path: Path) -> bool:
    if path not in _LIVE_CACHE:
        text = path.read_text(errors="replace")
        if path.suffix == ".ipynb":
            twin = path.with_suffix(".md")
            text = twin.read_text(errors="replace") if twin.exists() else text
        _LIVE_CACHE[path] = bool(_LIVE.search(text))
    return _LIVE_CACHE[path]


@pytest.hookimpl(tryfirst=True)        # before xdist's own hook turns the markers into group ids
def pytest_collection_modifyitems(config, items):
    """Under xdist: two groups, the two lanes (one worker each, in order)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:     # items are collected (and grouped) on each worker
        return
    # the browser test first in its lane: while it runs (untimed, ~4 min), the lane's session engine starts
    # beside it (_prestart_session_engine) for the timed modules after it. A stable sort: every worker
    # collects the same order, as xdist requires
    items.sort(key=lambda it: Path(str(it.path)).name not in FOREGROUND)
    for item in items:
        path = Path(str(item.path))
        name = lane(path)
        item.add_marker(pytest.mark.xdist_group(name=name))
        if "live_server" in getattr(item, "fixturenames", ()) or path.name in SHARE_ENGINE:
            _SESSION_LANES.add(name)


class _EveryItem:
    """Hooks for every item, the notebooks' cells included. pytest calls a conftest's item hooks only for
    items under the conftest's folder (``tests/``); a plugin registered from here is called for all."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        """Under xdist, as root: a worker runs a live-lane item at nice 0 and any other at nice 10 (engines,
        browsers and kernels it starts inherit that, and the worker's lanes.Sweeper carries it into the
        autogroup of each session they start). A notebook in SHARE_ENGINE gets the session engine's
        URL before nbval starts its kernel (the kernel inherits the variables)."""
        path = Path(str(item.path))
        if "PYTEST_XDIST_WORKER" in os.environ:
            its_lane = lane(path)
            rest = its_lane == "rest"
            if os.geteuid() == 0:
                try:
                    os.setpriority(os.PRIO_PROCESS, 0, NICE_REST if rest else 0)
                except OSError:
                    pass
            # vLLM's CPU engine binds its model's threads to the cores it does not reserve for its scheduler
            # (vllm/utils/ompmultiprocessing.py, OMPProcessManager, VLLM_CPU_OMP_THREADS_BIND=auto: one core
            # per worker, the last; on 2 cores its log says "core ids=[0] ... reserved_cpus=[1]"): the rest
            # lane's engines compute on that last core, so they never take the timed engine's compute core
            if rest:
                os.environ[OMP_BIND] = str(max(os.sched_getaffinity(0)))
            else:
                os.environ.pop(OMP_BIND, None)
            _set_startup_wait(rest)
            if its_lane in _SESSION_LANES:
                _prestart_session_engine()
        if path.name in SHARE_ENGINE:
            os.environ[ENV_URL] = session_engine().base_url
            os.environ[ENV_MISMATCH] = "start"

    def pytest_runtest_teardown(self, item):
        os.environ.pop(ENV_URL, None)
        os.environ.pop(ENV_MISMATCH, None)


def _set_startup_wait(rest: bool) -> None:
    """The rest lane's engines (and the kernels' engines: they inherit it) wait REST_STARTUP_TIMEOUT_S for
    /health, or the caller's value where that is longer; the live lane's wait the caller's value or 300 s."""
    if rest:
        try:
            caller = float(_CALLER_STARTUP) if _CALLER_STARTUP else 0.0
        except ValueError:
            caller = 0.0
        os.environ[STARTUP_ENV] = str(max(REST_STARTUP_TIMEOUT_S, caller))
    elif _CALLER_STARTUP is None:
        os.environ.pop(STARTUP_ENV, None)
    else:
        os.environ[STARTUP_ENV] = _CALLER_STARTUP


_SWEEPER: list = []      # this worker's lanes.Sweeper (see _EveryItem and tests/lanes.py)


def pytest_configure(config):
    config.pluginmanager.register(_EveryItem(), "inferopt-every-item")
    # under xdist, as root (where the lanes renice): a lane's nice also binds the sessions it starts (engines,
    # kernels, browsers), which the kernel's autogroups would otherwise weigh as equals of the timed engine
    if "PYTEST_XDIST_WORKER" in os.environ and os.geteuid() == 0:
        from lanes import Sweeper

        _SWEEPER.append(Sweeper().start())


def _session_server():
    from inferopt.serving.engine import VLLMServer

    return VLLMServer(max_model_len=2048, kv_cache_gib=1.0, quiet=True)


def _prestart_session_engine() -> None:
    """Under xdist, at a lane's first item (its nice and environment set): start the lane's session engine in a
    thread, so its ~25 s of imports run beside the lane's first modules instead of before the first test that
    needs it. The thread lives until the session ends: the engine's processes get PR_SET_PDEATHSIG from the
    thread that forks them (serving/managed_process.py), so that thread must outlive the engine."""
    if _SESSION_ENGINE or _PRESTART:
        return
    box: dict = {"ready": threading.Event(), "end": threading.Event()}

    def run():
        try:
            box["srv"] = _session_server().start()
        except BaseException as exc:      # raised where the engine is first needed (session_engine)
            box["exc"] = exc
        box["ready"].set()
        box["end"].wait()

    _PRESTART.append(box)
    threading.Thread(target=run, name="session-engine-start", daemon=True).start()


def _prestarted():
    box = _PRESTART[0]
    box["ready"].wait()
    if "exc" in box:
        raise box["exc"]
    return box["srv"]


def session_engine():
    """This worker's default-shape engine, started on first use (or at its lane's first item, under xdist) and
    stopped when the session ends."""
    if not _SESSION_ENGINE:
        _SESSION_ENGINE.append(_prestarted() if _PRESTART else _session_server().start())
    srv = _SESSION_ENGINE[0]
    srv.ensure_alive()
    return srv


def pytest_sessionfinish(session):
    while _SWEEPER:
        _SWEEPER.pop().stop()
    while _SESSION_ENGINE:
        _SESSION_ENGINE.pop().stop()
    while _PRESTART:                       # its engine (stopped above, or never asked for), then its thread
        box = _PRESTART.pop()
        box["ready"].wait()
        if "srv" in box:
            box["srv"].stop()
        box["end"].set()


# the suite's time by phase (issue #33: measured by lane and by file on each machine it runs on, printed at the end)
_PHASES: dict = {}


def pytest_runtest_logreport(report):
    """On the controller (or a plain run): each item's setup/call/teardown time, by lane and by file."""
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    head, _, group = report.nodeid.rpartition("@")
    lane_name, nodeid = (group, head) if head and group in ("live", "rest") else ("plain", report.nodeid)
    ph = _PHASES.setdefault(lane_name, {"files": {}, "first": report.start, "last": report.stop, "items": set(),
                                        "item_s": {}})
    file = nodeid.split("::", 1)[0]
    ph["files"][file] = ph["files"].get(file, 0.0) + report.duration
    ph["first"], ph["last"] = min(ph["first"], report.start), max(ph["last"], report.stop)
    ph["items"].add(nodeid)
    ph["item_s"][f"{nodeid} ({report.when})"] = round(report.start, 1), round(report.duration, 2)


def pytest_terminal_summary(terminalreporter):
    if not _PHASES:
        return
    tr = terminalreporter
    tr.write_sep("=", "the suite's time by lane (busy = sum of item times; span = first start to last end)")
    for name, ph in sorted(_PHASES.items()):
        busy = sum(ph["files"].values())
        tr.write_line(f"{name}: {len(ph['items'])} items, busy {busy / 60:.1f} min, "
                      f"span {(ph['last'] - ph['first']) / 60:.1f} min, {len(ph['files'])} files")
        for file, sec in sorted(ph["files"].items(), key=lambda kv: -kv[1])[:12]:
            tr.write_line(f"    {sec / 60:5.1f} min  {file}")
    # every item phase: (its start, epoch seconds; its seconds), to find where a lane's time goes
    out = Path(tr.config.rootpath) / ".cache" / "suite-times.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({name: ph["item_s"] for name, ph in _PHASES.items()}, indent=0))
    tr.write_line(f"every item's time: {out}")


@pytest.fixture(scope="session")
def tok():
    """The served model's tokenizer (prompts of exact token counts)."""
    from inferopt.bench.workload import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def live_server():
    return session_engine()
