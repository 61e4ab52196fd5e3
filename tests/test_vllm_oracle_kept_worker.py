"""The oracle's kept worker (INFEROPT_ORACLE_WORKER=keep, set for the suite): one worker per platform kind
answers every batch of the process that started it (vLLM imported once, not once per call), its answers are
the one-shot worker's, and it ends when that process ends. Run in a child process, so that the kept worker
here is the child's, not this test session's."""
import json
import subprocess
import sys
import time

import psutil

from inferopt.paths import REPO_ROOT

CHILD = r"""
import json, os, sys
os.environ["INFEROPT_ORACLE_WORKER"] = sys.argv[1]
from inferopt.vllm_oracle import client
job = {"op": "check", "cmd": "vllm serve meta-llama/Llama-3.1-8B --quantization fp8", "gpu": "V100", "count": 1}
ok = {"op": "check", "cmd": "vllm serve meta-llama/Llama-3.1-8B", "gpu": "H100", "count": 1}
first = client.run_jobs([job], "cuda", use_cache=False)
pid1 = client._KEPT["cuda"].pid if "cuda" in client._KEPT else None
second = client.run_jobs([ok, job], "cuda", use_cache=False)
pid2 = client._KEPT["cuda"].pid if "cuda" in client._KEPT else None
once = client._ask_once("cuda", [ok, job], 600)
strip = lambda a: {k: v for k, v in a.items() if k != "seconds"}
print(json.dumps({"pids": [pid1, pid2], "first": strip(first[0]), "second": [strip(a) for a in second],
                  "once": [strip(a) for a in once]}))
"""


def _child(mode: str) -> dict:
    p = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=600,
                       cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_one_kept_worker_answers_every_batch_as_a_one_shot_worker_would_and_ends_with_its_caller():
    got = _child("keep")
    pid1, pid2 = got["pids"]
    assert pid1 is not None and pid1 == pid2               # the second batch went to the same worker
    assert got["second"] == got["once"]                    # and it answered what a one-shot worker answers
    assert got["first"] == got["second"][1]
    assert got["first"]["ok"] is False and got["second"][0]["ok"] is True
    deadline = time.monotonic() + 30                       # the caller has ended: its worker follows
    while psutil.pid_exists(pid1) and psutil.Process(pid1).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"the kept worker {pid1} outlived its caller"
        time.sleep(0.2)

