"""Where an engine start's seconds go, from the log's own timestamps (serving/startup_phases.py).
The lines are vLLM 0.32's own (CPU engine, taken from a real start-up log of this course's engine)."""
from __future__ import annotations

from datetime import datetime

from inferopt.serving.startup_phases import startup_phases

LOG = """\
Triton is installed, but doesn't include CPU backend. Disabling Triton.
(APIServer pid=11030) INFO 11-30 20:16:45 [api_utils.py:286] non-default args: {'host': '127.0.0.1'}
(EngineCore pid=11286) INFO 11-30 20:17:16 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: model='m'
(Worker pid=11794) INFO 11-30 20:18:39 [cpu_model_runner.py:68] Starting to load model /m...
(Worker pid=11794) INFO 11-30 20:18:55 [default_loader.py:501] Loading weights took 14.96 seconds
(EngineCore pid=11286) INFO 11-30 20:19:19 [core.py:402] init engine (profile, create kv cache, warmup model) took 6.43 s
(APIServer pid=11030) INFO 11-30 20:19:28 [launcher.py:186] Available routes are:
"""


def test_phases_follow_the_log_marks_in_order():
    got = startup_phases(LOG, spawned_at=datetime(2026, 11, 30, 20, 16, 10))
    assert got == {"api_server": 35.0, "engine_core": 31.0, "worker": 83.0, "model_load": 16.0,
                   "kv_and_warmup": 24.0, "serving": 9.0}
    assert sum(got.values()) == (datetime(2000, 11, 30, 20, 19, 28) - datetime(2000, 11, 30, 20, 16, 10)).seconds


def test_missing_marks_are_left_out_and_no_timestamps_give_nothing():
    cut = "\n".join(line for line in LOG.splitlines() if "Loading weights" not in line)
    got = startup_phases(cut)
    assert "model_load" not in got and "api_server" not in got
    assert got["kv_and_warmup"] == 16.0 + 24.0          # the next mark takes the missing phase's seconds
    assert startup_phases("no vLLM here\n") == {}
