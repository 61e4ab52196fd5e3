"""The oracle's worker process: ``python -m inferopt.vllm_oracle.worker cuda|cpu`` reads a JSON list of
jobs on stdin and prints a JSON list of answers (one per job) as its last line; with ``--serve`` it stays up
and answers one batch per stdin line (the client's kept worker, ``INFEROPT_ORACLE_WORKER=keep``).

A job is {"op": "check", "cmd": "vllm serve ...", "gpu": "H100", "count": 8} (engine_config.check) or
{"op": "hardware_table"} (hardware_table.generate) or {"op": "kv_specs", ...} (kv_specs.stage_summary) or
{"op": "kv_sizing", "config": PATH, "layout": {...}} (kv_specs.sizing: vLLM's own KV-cache groups and blocks). The
platform is installed first (target_platform.install), before any other vLLM import.
"""
from __future__ import annotations

import json
import os
import sys
import time

from inferopt.vllm_oracle import WORKER_MARK as MARK  # --serve: the line that carries a batch's answers


def run(kind: str, jobs: list) -> list:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")        # never fetch a config from the Hub
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    from inferopt.vllm_oracle import target_platform

    target_platform.install(kind)
    out = []
    for job in jobs:
        t0 = time.perf_counter()
        try:
            out.append(_one(job))
        except Exception as exc:  # a bug in the oracle itself, reported per job
            out.append({"ok": None, "error": f"{type(exc).__name__}: {exc}"[:400]})
        out[-1]["seconds"] = round(time.perf_counter() - t0, 4)
    return out


def _one(job: dict) -> dict:
    op = job.get("op", "check")
    if op == "check":
        from inferopt.vllm_oracle import engine_config

        return engine_config.check(job["cmd"], job.get("gpu"), job.get("count", 8), job.get("config_overrides"))
    if op == "hardware_table":
        from inferopt.vllm_oracle import hardware_table

        return {"ok": True, "table": hardware_table.generate()}
    if op == "kv_specs":
        from inferopt.vllm_oracle import kv_specs

        return {"ok": True, "specs": kv_specs.stage_summary(job["config"], **job.get("layout", {}))}
    if op == "kv_sizing":
        from inferopt.vllm_oracle import kv_specs

        return {"ok": True, "sizing": kv_specs.sizing(job["config"], **job.get("layout", {}))}
    raise ValueError(f"unknown op {op!r}")


def serve(kind: str) -> int:
    """``--serve``: one JSON list of jobs per stdin line, answered by one MARK line each, until stdin closes
    (the client's process ended): vLLM is imported once for every batch the client sends."""
    for line in sys.stdin:
        if line.strip():
            answers = run(kind, json.loads(line))
            sys.stdout.write("\n" + MARK + json.dumps({"answers": answers}) + "\n")
            sys.stdout.flush()
    return 0


def main() -> int:
    kind = sys.argv[1] if len(sys.argv) > 1 else "cuda"
    if "--serve" in sys.argv[2:]:
        return serve(kind)
    t0 = time.perf_counter()
    jobs = json.loads(sys.stdin.read() or "[]")
    answers = run(kind, jobs)
    sys.stdout.write("\n" + json.dumps({"answers": answers, "seconds": round(time.perf_counter() - t0, 2)}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
