"""How heavy is the live engine? Ready time (s) and peak memory (MiB = 2^20 B) of the server
process tree, sampled every 0.2 s from launch through a few chat requests.

Memory is reported two ways: summed RSS (counts pages shared between the API server and its
engine-core child twice: an upper bound) and summed PSS (shared pages split between sharers:
the honest total). Command: ``python -m inferopt engine-footprint [--requests 5]``."""
from __future__ import annotations

import threading
import time

from inferopt.serving.engine import VLLMServer


def _sample(pid: int) -> tuple[float, float]:
    import psutil

    rss = pss = 0
    try:
        root = psutil.Process(pid)
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        return 0.0, 0.0
    for p in procs:
        try:
            full = p.memory_full_info()
            rss += full.rss
            pss += getattr(full, "pss", full.rss)
        except psutil.Error:
            pass
    return rss / 2**20, pss / 2**20


def measure(requests: int = 5, **server_kw) -> dict:
    """Start an engine, send ``requests`` chat requests, stop it; return ready time and peaks."""
    peaks = {"rss_mib": 0.0, "pss_mib": 0.0}
    stop = threading.Event()
    srv = VLLMServer(quiet=True, **server_kw)

    def sampler():
        while not stop.is_set():
            if srv.proc is not None:
                rss, pss = _sample(srv.proc.pid)
                peaks["rss_mib"] = max(peaks["rss_mib"], rss)
                peaks["pss_mib"] = max(peaks["pss_mib"], pss)
            time.sleep(0.2)

    t = threading.Thread(target=sampler, daemon=True)
    t.start()
    try:
        with srv:
            for _ in range(requests):
                srv.chat("Explain what a KV cache is in two sentences.", max_tokens=64)
            ready = srv.startup_seconds
            kv = srv.kv_cache_tokens
    finally:
        stop.set()
        t.join()
    return {"ready_s": round(ready, 1), "peak_rss_mib": round(peaks["rss_mib"]),
            "peak_pss_mib": round(peaks["pss_mib"]), "kv_cache_tokens": kv, "requests": requests}


def add_subcommand(sub) -> None:
    p = sub.add_parser("engine-footprint", help="measure the live engine's ready time and peak memory")
    p.add_argument("--requests", type=int, default=5)
    p.add_argument("--kv-cache-gib", type=float, default=1.0)

    def run(a) -> int:
        import json

        print(json.dumps(measure(a.requests, kv_cache_gib=a.kv_cache_gib)))
        return 0

    p.set_defaults(func=run)
