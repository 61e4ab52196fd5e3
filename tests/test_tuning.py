"""The live tuning loop (inferopt.diagnosis.tuning): configuration arithmetic without an engine, and
the whole loop from two bad starting points on the CPU engine (run under the engine lock).

The engine test starts 5 engines (calibration, then start + one change for each starting point;
more if a change is reverted): measured 259 s on 2 cores (4 min 19 s)."""
import json

import pytest

from inferopt.diagnosis import tuning as T
from inferopt.diagnosis.decision import diagnose
from inferopt.errors import CourseError


def test_apply_change_sets_removes_and_moves_the_kv_budget():
    assert T.apply_change(("--no-enable-prefix-caching",), 100, ["--enable-prefix-caching"],
                          ["--no-enable-prefix-caching"]) == (("--enable-prefix-caching",), 100)
    assert T.apply_change((), 100, ["--kv-cache-memory-bytes", "555"], []) == ((), 555)
    assert T.apply_change(("--max-num-batched-tokens", "2048"), 1, ["--max-num-batched-tokens", "256"], []) == \
        (("--max-num-batched-tokens", "256"), 1)
    cfg = json.dumps({"method": "ngram", "num_speculative_tokens": 4})
    assert T.apply_change(("--speculative-config", cfg), 1, [], ["--speculative-config"]) == ((), 1)
    with pytest.raises(CourseError):
        T.apply_change(("oops",), 1, [], [])


def test_techniques_on_follow_the_flags():
    assert "prefix_cache" not in T.techniques_on(("--no-enable-prefix-caching",))
    assert "prefix_cache" in T.techniques_on(())
    assert "speculative_decoding" in T.techniques_on(("--speculative-config", "{}"))


def test_each_starting_point_gets_a_first_change_from_the_decision_engine():
    """What the loop will do, given the symptoms each start produces (no engine: the symptoms written out)."""
    st = T.starts()
    slos = {"ttft_p95_ms": 1000, "tpot_p95_ms": 200}
    kv = st["kv_small"]
    d = diagnose({"ttft_p95_ms": 5000, "tpot_p95_ms": 150, "preemptions": 3, "queue_len": 2, "kv_cache_usage": 1.0},
                 slos, kv.workload, T.techniques_on(kv.extra_args), T._deployment(kv, kv.extra_args, kv.kv_cache_bytes))
    first = T._candidates(d)[0]
    # 3 requests x 2 blocks x 1.25 = 7.5 -> 8, + 1 null block = 9 blocks
    assert d.branch == "C" and first[0] == "more_kv_memory"
    assert first[1] == ["--kv-cache-memory-bytes", str(9 * T._cpu_block_bytes())]
    px = st["prefix_off"]
    d = diagnose({"ttft_p95_ms": 5000, "tpot_p95_ms": 150, "preemptions": 0, "queue_len": 1, "kv_cache_usage": 0.2,
                  "prefix_cache_hit_rate": 0.0}, slos, px.workload, T.techniques_on(px.extra_args),
                 T._deployment(px, px.extra_args, px.kv_cache_bytes))
    assert d.branch == "A" and T._candidates(d)[0] == ("prefix_cache", ["--enable-prefix-caching"],
                                                       ["--no-enable-prefix-caching"])


def test_starts_are_sized_in_blocks_of_the_engine_that_runs():
    """CPU: the same budgets as before (3 and 256 blocks of 128 float32 tokens); GPU: the same meaning in
    16-token bf16 blocks (one 256-token request + the null block = 17, not 3 x the CPU block = 48)."""
    from inferopt.planning import memory as M
    from inferopt.planning import platform_defaults as P
    from inferopt.planning.memory import cpu_engine_prediction

    cpu_block = cpu_engine_prediction(kv_cache_gib=1.0, max_model_len=128).bytes_per_block   # 128 x 46,080 B
    cpu, gpu = T.starts("cpu"), T.starts("gpu")
    assert cpu["kv_small"].kv_cache_bytes == 3 * cpu_block and cpu["prefix_off"].kv_cache_bytes == 256 * cpu_block
    gpu_block = M.block_bytes("gpu")
    assert gpu_block == 16 * 2 * 30 * 3 * 64 * 2                    # 16 tokens x K,V x layers x KV heads x head_dim x bf16
    assert gpu["kv_small"].kv_cache_bytes == 17 * gpu_block
    assert gpu["prefix_off"].kv_cache_bytes == 2048 * gpu_block      # the same 32,768 tokens
    for kind, st in (("cpu", cpu), ("gpu", gpu)):
        d = P.defaults(kind)
        usable = st["kv_small"].kv_cache_bytes // M.block_bytes(kind) - 1        # the null block
        assert usable * d.block_size >= 256 > (usable - 1) * d.block_size        # one request fits, barely
        assert 3 * (100 + 48) > usable * d.block_size                            # 3 in flight cannot: preemption
    assert cpu["kv_small"].title == "KV budget of 3 blocks for 3 concurrent requests"


def test_bad_starting_point_and_bad_output_path_are_one_line(capsys):
    from inferopt.__main__ import main

    assert main(["tune", "--start", "nowhere"]) == 2
    assert "unknown starting point" in capsys.readouterr().err
    assert main(["tune", "--max-steps", "0"]) == 2
    assert main(["tune", "--json", "/nonexistent/dir/trace.json"]) == 2
    assert "does not exist" in capsys.readouterr().err


# The whole loop on the CPU engine from both starting points is run, and asserted (SLOs met, first
# change kept and improving, branches C and A, prefix caching back on), by chapters/02b under strict
# nbval in the suite: one live run of the loop instead of two (each costs ~4 minutes on 2 cores).
