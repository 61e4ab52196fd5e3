"""The vLLM oracle's cold start (a worker that imports vLLM: 19-107 s on the course machine) is paid only when a
learner asks vLLM (a widget's "check with vLLM" button, the planner's checks), never at ``import inferopt...`` nor
at an interactive widget's first render or a control's change (issue 48, code hygiene).

Measured in a fresh interpreter: every way the oracle starts its worker (``subprocess.run`` for one batch,
``subprocess.Popen`` for the kept worker) is trapped, and so is any import of vLLM or torch in this process."""
from __future__ import annotations

import json
import subprocess
import sys

from inferopt.paths import REPO_ROOT

PROBE = r"""
import json, subprocess, sys, time

class Spawned(BaseException):
    pass

spawned = []
def trap(*a, **k):
    spawned.append(str(a[0] if a else k.get("args"))[:120])
    raise Spawned(spawned[-1])
subprocess.run = subprocess.Popen = trap

t0 = time.perf_counter()
import inferopt  # noqa: F401
from inferopt.widgets.decision_widget import DecisionWidget
from inferopt.widgets.memory_widget import MemoryWidget
t1 = time.perf_counter()
m, d = MemoryWidget(), DecisionWidget()
m.set(tp=4, max_model_len=4096)
d.refresh()
t2 = time.perf_counter()
out = {"import_s": t1 - t0, "render_s": t2 - t1, "spawned": list(spawned),
       "heavy": sorted(n for n in ("vllm", "torch") if n in sys.modules)}
# the trap does catch the oracle: both of its ways of starting a worker end in it
from inferopt.vllm_oracle import client
caught = []
for ask in (client._ask_once, client._ask_kept):
    try:
        ask("cpu", [], 1)
    except Spawned:
        caught.append(ask.__name__)
out["caught"] = caught
print(json.dumps(out))
"""


def _probe() -> dict:
    p = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_no_oracle_worker_and_no_vllm_at_import_or_first_render():
    got = _probe()
    assert got["caught"] == ["_ask_once", "_ask_kept"]      # the trap sees a worker start when one happens
    assert got["spawned"] == [], f"a worker started before anyone asked vLLM: {got['spawned']}"
    assert got["heavy"] == [], f"imported at import or first render: {got['heavy']}"
