"""How big a room one server holds: ``python -m inferopt room measure`` (INSTRUCTORS.md, "The room server").

Three measurements, then the arithmetic, all printed and written to ``results/room-capacity.json``:

1. **A learner session** as the room serves it: a real room (inferopt/room/hub.py: JupyterHub, the learner's
   JupyterLab started by the hub with its core and limits) and one kernel; resident memory (RSS, the
   server and its kernel together) and CPU idle, then while the kernel runs chapter 00's code cells against
   the room engine (the same cells a learner runs first), then idle again.
2. **Learners per room engine**: clients sending at once to one engine (closed loop, each client one request
   after another: the moment the instructor says "run the cell now"), at 1, 2, 4, ... clients, with a
   course workload (``--workload``: chapter 00's first question, about 32 prompt tokens and 24 answer tokens,
   or lab 4's sweep, 100 and 16), until the TTFT P50 passes ``--ttft-p50-ms``. Learners per engine: the
   most clients whose TTFT P50 stayed within it.
3. **The engine's own memory** (RSS of its processes) when this command started it.

Then learners per server (``--server-cores``, ``--server-gib``, less ``--reserve-gib`` for the system): the
most learners n for which ceil(n / per-engine) engines and n sessions fit the memory, and the engines' cores
plus the learners' busy cores (everyone running a cell at once) fit the cores.
"""
from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT, results_dir

GiB = 1 << 30
WORKLOADS = {"ch00": {"input_tokens": 32, "output_tokens": 24}, "lab4": {"input_tokens": 100, "output_tokens": 16}}
CH00 = "chapters/00-start-here.ipynb"


def add_arguments(p) -> None:
    p.add_argument("--engine-url", default=None, help="measure against this running engine (default: start one, "
                   "the course's default shape, pinned to --engine-cores cores)")
    p.add_argument("--engine-cores", type=int, default=2)
    p.add_argument("--workload", choices=sorted(WORKLOADS), default="ch00")
    p.add_argument("--clients", default="1,2,4,8,16,32", help="client counts to try, in order")
    p.add_argument("--ttft-p50-ms", type=float, default=1000.0,
                   help="the room's bound on the TTFT P50 a learner waits for (default 1000 ms)")
    p.add_argument("--requests-per-client", type=int, default=3)
    p.add_argument("--idle-s", type=float, default=10.0, help="seconds each idle sample spans")
    p.add_argument("--server-cores", type=int, default=32)
    p.add_argument("--server-gib", type=float, default=128.0)
    p.add_argument("--reserve-gib", type=float, default=8.0, help="memory kept for the system (default 8 GiB)")
    p.add_argument("--skip-session", action="store_true", help="only the engine part (and the arithmetic from "
                   "the session figures of the last results/room-capacity.json)")
    p.add_argument("--out", default=None, help="JSON results (default results/room-capacity.json)")


def _tree(pid: int) -> list:
    import psutil

    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def tree_usage(pid: int) -> tuple[float, float]:
    """(RSS bytes, CPU seconds user+system) of a process and its descendants now."""
    import psutil

    rss = cpu = 0.0
    for p in _tree(pid):
        try:
            rss += p.memory_info().rss
            t = p.cpu_times()
            cpu += t.user + t.system
        except psutil.Error:
            pass
    return rss, cpu


def learner_server_pid(name: str) -> int:
    """The pid of learner ``name``'s single-user server (JUPYTERHUB_USER in its environment)."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        try:
            if any("jupyterhub-singleuser" in a for a in (p.info["cmdline"] or [])) and \
                    p.environ().get("JUPYTERHUB_USER") == name:
                return p.pid
        except psutil.Error:
            continue
    raise CourseError(f"no single-user server of {name!r} is running")


class HubAdmin:
    """The room's REST API as its admin service (``Room(admin_token=...)``)."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token

    def api(self, method: str, path: str, token: str | None = None, **kw):
        import requests

        r = requests.request(method, f"{self.url}/hub/api{path}", timeout=30,
                             headers={"Authorization": f"token {token or self.token}"}, **kw)
        return r

    def user_token(self, name: str) -> str:
        r = self.api("POST", f"/users/{name}/tokens", json={"note": "room measure", "expires_in": 3600})
        r.raise_for_status()
        return r.json()["token"]

    def start_server(self, name: str, timeout_s: float = 180) -> None:
        self.api("POST", "/users", json={"usernames": [name]})
        r = self.api("POST", f"/users/{name}/server")
        if r.status_code not in (201, 202, 400):       # 400: already running
            raise CourseError(f"the hub did not start {name}'s server: {r.status_code} {r.text[:200]}")
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = self.api("GET", f"/users/{name}").json()
            if (info.get("servers") or {}).get("", {}).get("ready"):
                return
            time.sleep(0.5)
        raise CourseError(f"{name}'s server was not ready in {timeout_s:.0f} s")


def run_session(room, admin: HubAdmin, name: str, idle_s: float) -> dict:
    """A learner's session: idle, chapter 00's code cells through a kernel of the learner's server, idle."""
    import nbformat
    import requests
    from jupyter_client import BlockingKernelClient

    admin.start_server(name)
    token = admin.user_token(name)
    base = f"{room.url}/user/{name}"
    r = requests.post(f"{base}/api/kernels", headers={"Authorization": f"token {token}"}, json={"name": "python3"},
                      timeout=60)
    r.raise_for_status()
    kid = r.json()["id"]
    conn = Path(room.room_dir) / "learners" / name / ".local" / "share" / "jupyter" / "runtime" / f"kernel-{kid}.json"
    deadline = time.monotonic() + 60
    while not conn.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    kc = BlockingKernelClient(connection_file=str(conn))
    kc.load_connection_file()
    kc.start_channels()
    kc.wait_for_ready(timeout=120)
    pid = learner_server_pid(name)

    def idle_sample() -> dict:
        rss0, cpu0 = tree_usage(pid)
        time.sleep(idle_s)
        rss1, cpu1 = tree_usage(pid)
        return {"rss_gib": max(rss0, rss1) / GiB, "cpu_cores": (cpu1 - cpu0) / idle_s}

    before = idle_sample()
    nb = nbformat.read(Path(room.room_dir) / "learners" / name / CH00, as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code"]
    peak = [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_usage(pid)[0])
            time.sleep(0.2)

    t = threading.Thread(target=sample, daemon=True)
    _, cpu0 = tree_usage(pid)
    t0 = time.monotonic()
    t.start()
    errors = []
    try:
        kc.execute_interactive(f"import os; os.chdir({str(Path(room.room_dir) / 'learners' / name / 'chapters')!r})",
                               timeout=60, output_hook=lambda m: None)
        for src in cells:
            reply = kc.execute_interactive(src, timeout=300, output_hook=lambda m: None)
            if reply["content"]["status"] != "ok":
                errors.append(f"{reply['content'].get('ename')}: {reply['content'].get('evalue')}")
    finally:
        wall = time.monotonic() - t0
        done.set()
        t.join()
    _, cpu1 = tree_usage(pid)
    after = idle_sample()
    kc.stop_channels()
    if errors:
        raise CourseError(f"chapter 00's cells failed in the room: {errors[0]}")
    return {"cells": len(cells), "idle_before": before, "idle_after": after,
            "running": {"peak_rss_gib": peak[0] / GiB, "cpu_s": cpu1 - cpu0, "wall_s": wall,
                        "cpu_cores": (cpu1 - cpu0) / wall}}


def clients_per_engine(srv, workload: str, levels: list[int], bound_ms: float, per_client: int) -> dict:
    """TTFT P50 (and P95) at each client count; the most clients within ``bound_ms``."""
    from inferopt.bench import loadgen
    from inferopt.bench.workload import Workload, build_requests, load_tokenizer

    tok = load_tokenizer()
    shape = WORKLOADS[workload]
    rows, best = [], 0
    for i, n in enumerate(levels):
        reqs = build_requests(Workload(num_requests=n * per_client, seed=100 + i, **shape), tok)
        run = loadgen.run(loadgen.Endpoint.from_server(srv), reqs, concurrency=n, warmup=1, progress=False)
        s = run.summary()
        row = {"clients": n, "completed": s["completed"], "ttft_p50_ms": s["ttft_p50_ms"],
               "ttft_p95_ms": s["ttft_p95_ms"], "tpot_p50_ms": s.get("tpot_p50_ms")}
        rows.append(row)
        print(f"  {n:3d} clients: TTFT P50 {row['ttft_p50_ms']:7.0f} ms, P95 {row['ttft_p95_ms']:7.0f} ms "
              f"({row['completed']} requests)", flush=True)
        if s["completed"] < len(reqs) or row["ttft_p50_ms"] > bound_ms:
            break
        best = n
    return {"workload": workload, "shape": shape, "bound_ttft_p50_ms": bound_ms, "levels": rows,
            "learners_per_engine": best, "capped": best == levels[-1]}


def server_capacity(*, session_gib: float, busy_cores: float, engine_gib: float, engine_cores: int,
                    per_engine: int, server_cores: int, server_gib: float, reserve_gib: float) -> dict:
    """The most learners n with ceil(n/per_engine)·engine_gib + n·session_gib <= server_gib - reserve_gib and
    ceil(n/per_engine)·engine_cores + n·busy_cores <= server_cores; the lines of the arithmetic."""
    if per_engine < 1:
        raise CourseError("no client count met the TTFT bound: one engine serves no learner at this bound")
    usable = server_gib - reserve_gib

    def fits(n):
        e = math.ceil(n / per_engine)
        return e * engine_gib + n * session_gib <= usable, e * engine_cores + n * busy_cores <= server_cores

    n_mem = n_cpu = 0
    for n in range(1, 10_000):
        mem, cpu = fits(n)
        n_mem = n if mem and n_mem == n - 1 else n_mem
        n_cpu = n if cpu and n_cpu == n - 1 else n_cpu
        if not mem and not cpu:
            break
    n = min(n_mem, n_cpu)
    e = math.ceil(n / per_engine) if n else 0
    lines = [
        f"memory: {server_gib:g} GiB - {reserve_gib:g} GiB for the system = {usable:g} GiB; "
        f"n learners need ceil(n / {per_engine}) engines x {engine_gib:.2f} GiB + n x {session_gib:.2f} GiB "
        f"-> at most {n_mem} learners",
        f"cores: {server_cores}; n learners need ceil(n / {per_engine}) engines x {engine_cores} cores + "
        f"n x {busy_cores:.2f} busy cores (all running a cell at once) -> at most {n_cpu} learners",
        f"learners per server: min({n_mem}, {n_cpu}) = {n}, with {e} room engine(s): "
        f"{e} x {engine_gib:.2f} + {n} x {session_gib:.2f} = {e * engine_gib + n * session_gib:.1f} GiB, "
        f"{e} x {engine_cores} + {n} x {busy_cores:.2f} = {e * engine_cores + n * busy_cores:.1f} cores",
    ]
    return {"learners_by_memory": n_mem, "learners_by_cores": n_cpu, "learners": n, "engines": e, "lines": lines}


def measure(a) -> dict:
    from inferopt.room.hub import Room
    from inferopt.serving.attach import AttachedEngine
    from inferopt.serving.engine import VLLMServer

    out_path = Path(a.out) if a.out else results_dir() / "room-capacity.json"
    try:
        levels = [int(x) for x in a.clients.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or any(n < 1 for n in levels):
        raise CourseError(f"--clients {a.clients!r}: give client counts such as 1,2,4,8")
    cores = sorted(os.sched_getaffinity(0))
    srv = None
    result = {"machine": {"cores": len(cores), "cpu": _cpu_name()}, "command": "python -m inferopt room measure"}
    try:
        if a.engine_url:
            srv = AttachedEngine(a.engine_url).start()
            engine_gib = None
        else:
            srv = VLLMServer(cpu_cores=cores[:a.engine_cores], own=True).start()
            engine_gib = srv.memory_mib() / 1024
        result["engine"] = {"url": srv.base_url, "rss_gib": engine_gib, "cores": a.engine_cores,
                            "facts": srv.facts.summary()}
        if not a.skip_session:
            with tempfile.TemporaryDirectory(prefix="room-measure-") as tmp:
                pack = Path(tmp) / "pack.tar.gz"
                subprocess.run(["make", "-s", "learner-pack", f"PACK={pack}"], cwd=REPO_ROOT, check=True,
                               capture_output=True)
                token = secrets.token_hex(16)
                with Room(Path(tmp) / "room", engine_urls=[srv.base_url], pack=pack, admin_token=token,
                          port=None) as room:
                    print("a learner session (JupyterHub's JupyterLab + a kernel running chapter 00's cells):",
                          flush=True)
                    result["session"] = run_session(room, HubAdmin(room.url, token), "learner-1", a.idle_s)
        else:
            result["session"] = json.loads(out_path.read_text())["session"]
        s = result["session"]
        print(f"  idle: {s['idle_before']['rss_gib']:.2f} GiB RSS, {s['idle_before']['cpu_cores']:.3f} cores; "
              f"running chapter 00's {s['cells']} code cells: peak {s['running']['peak_rss_gib']:.2f} GiB RSS, "
              f"{s['running']['cpu_s']:.1f} CPU s in {s['running']['wall_s']:.1f} s "
              f"({s['running']['cpu_cores']:.2f} cores); idle after: {s['idle_after']['rss_gib']:.2f} GiB")
        print(f"clients at once against one engine ({a.workload} workload), bound TTFT P50 <= {a.ttft_p50_ms:g} ms:",
              flush=True)
        result["engine_clients"] = clients_per_engine(srv, a.workload, levels, a.ttft_p50_ms, a.requests_per_client)
        per_engine = result["engine_clients"]["learners_per_engine"]
        print(f"  learners per engine: {per_engine}"
              + (" (the largest count tried: pass more --clients to find the limit)"
                 if result["engine_clients"]["capped"] else ""))
        if engine_gib is None:
            raise CourseError("the engine's memory is only visible where it was started: run without --engine-url")
        result["server"] = server_capacity(
            session_gib=max(s["running"]["peak_rss_gib"], s["idle_after"]["rss_gib"]),
            busy_cores=s["running"]["cpu_cores"], engine_gib=engine_gib, engine_cores=a.engine_cores,
            per_engine=per_engine, server_cores=a.server_cores, server_gib=a.server_gib, reserve_gib=a.reserve_gib)
        print(f"the engine: {engine_gib:.2f} GiB RSS on {a.engine_cores} cores")
        print("\n".join(result["server"]["lines"]))
    finally:
        if srv is not None:
            srv.stop()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out_path}")
    return result


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def cli(a) -> int:
    measure(a)
    return 0
