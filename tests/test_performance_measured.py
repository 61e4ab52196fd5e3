"""The performance model against 81 measured vLLM runs at load (assets/performance/measured_runs_h200.csv, cited
in measured_runs_h200.md beside it): the TTFT and TPOT error is recomputed here, on the rows the factors were
fitted on and on the rows they were not, and must stay within stated bounds; the mechanism the model had
before (every request of a closed loop in lockstep with the first burst) fails the TTFT bound."""
import statistics

import pytest

from inferopt import assets
from inferopt.performance import measured as M
from inferopt.performance import predict as PR
from inferopt.performance import profiles as P

# held-out rows (70B at TP 1 and 4, every 8B run). Before the fix (a closed loop in lockstep with its first burst,
# NVLink at the 900 GB/s of both directions, no per-call latency from the link): held-out TTFT median 165 %,
# mean 305 %, TPOT median 16.5 %; fitted rows TTFT median 123 %. After: `python -m inferopt.performance.measured`
HELD_OUT_TTFT_MEDIAN = 0.30
HELD_OUT_TPOT_MEDIAN = 0.30
# the 70B rows held out in the steady regime (TP 1 and 4). Without the TP workers' lockstep per step (tp_sync = 0)
# their TPOT median was 9.4 % and the TP 4 rows' 15 % (predicted fast); with it 2.5 % and 2 %
HELD_OUT_STEADY_70B_TPOT_MEDIAN = 0.06


@pytest.fixture(scope="module")
def errs():
    e = M.errors()
    print("\n" + M.table(e))
    return e


def test_the_csv_is_the_cited_sample_and_the_split_holds_out_whole_groups():
    rows = M.runs()
    assert len(rows) == 81 and {r.model for r in rows} == set(M.MODELS)
    assert "ai-dynamo/aiconfigurator" in assets.path("performance/measured_runs_h200.md").read_text()
    fit = [r for r in rows if M.is_fit(r)]
    assert len(fit) == 30 and {r.tp for r in fit} == {2, 8}
    held = [r for r in rows if not M.is_fit(r)]
    assert {r.model for r in held} == set(M.MODELS)          # a whole model never seen by the fit
    assert {(r.model, r.tp) for r in held}.isdisjoint({(r.model, r.tp) for r in fit})


def test_held_out_error_within_the_stated_bounds(errs):
    s = M.summary(errs)
    print(s)
    assert s["held_out"]["n"] == 51 and s["fitted"]["n"] == 30
    assert s["held_out"]["ttft_median"] < HELD_OUT_TTFT_MEDIAN
    assert s["held_out"]["tpot_median"] < HELD_OUT_TPOT_MEDIAN


def test_the_old_lockstep_mechanism_fails_the_ttft_bound():
    held = [r for r in M.runs() if not M.is_fit(r)]
    s = M.summary(M.errors(rows=held, spread=False))
    print("lockstep:", s)
    assert s["held_out"]["ttft_median"] > 2 * HELD_OUT_TTFT_MEDIAN


def test_a_wrong_measurement_shows_up():
    run = M.runs()[0]
    good = M.errors(rows=[run])[0]
    bad = M.errors(rows=[M.Run(**{**run.__dict__, "ttft_ms": run.ttft_ms / 4})])[0]
    assert bad.ttft_err > good.ttft_err + 0.5


def test_the_stored_figures_are_what_the_fit_gives():
    best = M.fit()
    assert best["prompts_per_concurrency"] == PR.PROMPTS_PER_CONCURRENCY
    assert best["tp_sync_us_per_doubling"] == P.profile("gpu").tp_sync_us_per_doubling


def test_tp4_decode_no_longer_fast(errs):
    """TP 4 is held out of the lockstep fit; without the per-step cost of the TP workers it was predicted fast."""
    s = M.summary(errs)
    assert s["held_out_steady:Llama-3.1-70B"]["tpot_median"] < HELD_OUT_STEADY_70B_TPOT_MEDIAN
    tp4 = [r for r in M.runs() if r.tp == 4 and "70B" in r.model]
    old = M.errors(P.profile("gpu").with_(tp_sync_us_per_doubling=0.0), rows=tp4)
    new = [e for e in errs if e.run in tp4]
    assert statistics.median(e.tpot_ms / e.run.tpot_ms for e in old) < 0.9       # the old model: >10 % fast
    assert abs(statistics.median(e.tpot_ms / e.run.tpot_ms for e in new) - 1) < 0.06


def test_over_roof_rows_are_flagged_and_the_flag_rejects_an_impossible_row(errs):
    """A run that needs more than the roofs at 100 % did less work than stated; the 70B runs all fit under them."""
    assert all(e.floor < 1 for e in errs if "70B" in e.run.model)
    over = [e for e in errs if e.regime == "over_roof"]
    assert over and all("8B" in e.run.model for e in over)
    run = next(r for r in M.runs() if "70B" in r.model and r.tp == 2 and r.concurrency == 64)
    fast = M.Run(**{**run.__dict__, "tpot_ms": run.tpot_ms / 3, "ttft_ms": run.ttft_ms / 3})
    assert M.work_floor(run) < 1 < M.work_floor(fast)


def test_kv_full_rows_are_flagged(errs):
    kv = [e for e in errs if e.regime == "kv_full"]
    assert kv and all(e.binding_limit == "kv_cache" for e in kv)
    assert {(e.run.tp, e.run.concurrency) for e in kv} <= {(1, 32), (1, 64), (2, 64)}
    s = M.summary(errs)
    assert s["kv_full"]["n"] == len(kv) and s["all_steady"]["n"] == 81 - len(kv) - s["over_roof"]["n"]
    # vLLM admits no waiting request in a step that preempted one; before the simulator followed that rule the
    # KV-full rows thrashed (1,496 preemptions in one run) and their TPOT median error was 45 %, now 25 %
    assert s["kv_full"]["tpot_median"] < 0.35


def test_the_steady_held_out_rows_meet_blis_published_figures(errs):
    """BLIS (inference-sim) reports a median inter-token error of 7 % and a mean TTFT error of 18 % on held-out
    runs; on the held-out 70B rows the model reproduces (steady regime) the model is within both. The 8B rows are
    not: most of them did less work than stated (over_roof), see measured_runs_h200.md."""
    s = M.summary(errs)["held_out_steady:Llama-3.1-70B"]
    assert s["tpot_median"] < 0.07 and s["ttft_mean"] < 0.18


def _low_concurrency_70b(errs):
    """The steady 70B rows at 4-16 requests in flight with 1,024-token prompts: TTFT is mostly one prefill step."""
    return [e for e in errs if "70B" in e.run.model and e.regime == "steady" and e.run.concurrency <= 16
            and e.run.input_tokens == 1024]


def test_a_closed_loops_successor_waits_for_the_step_in_flight(errs):
    """vLLM's engine core takes new requests only between steps (vllm/v1/engine/core.py:
    EngineCoreProc.run_busy_loop); a closed loop's successor reaches it a pass through the API server after its
    predecessor's last step, during the others' next step, and waits for it. The model before admitted it at the
    step boundary: the low-concurrency rows' TTFT was low by a step (median error 21 %, TP >= 2 25 %; fitted rows'
    TTFT median 15.5 %, held-out steady 70B 13.8 %); now 12.9 %, 17.9 %, 10.5 %, 9.7 %."""
    rows = [e.run for e in _low_concurrency_70b(errs)]
    assert len(rows) == 24
    old = M.errors(rows=rows, successor_wait=False)
    new = [e for e in errs if e.run in rows]
    med = lambda es: statistics.median(e.ttft_err for e in es)      # noqa: E731
    assert med(new) < 0.15 < 0.19 < med(old)
    assert statistics.median(e.ttft_ms / e.run.ttft_ms for e in old) < statistics.median(
        e.ttft_ms / e.run.ttft_ms for e in new) < 1          # the wait moves TTFT up, and it is still not over
    s = M.summary(errs)
    assert s["fitted"]["ttft_median"] < 0.12 and s["held_out_steady:Llama-3.1-70B"]["ttft_median"] < 0.12
    assert s["held_out_steady:Llama-3.1-70B"]["tpot_median"] < HELD_OUT_STEADY_70B_TPOT_MEDIAN     # TPOT unmoved


def test_the_kv_full_error_is_the_capacity_not_the_queue(errs):
    """The KV-full rows' TTFT is 6x over at the BF16 cache's capacity; at twice the capacity (an FP8 KV cache,
    which the sample does not record) the same queue and preemption give a median 12 % error, so the queue
    mechanism is not what is wrong; the capacity the runs had is what the model does not know (left open)."""
    kv = [e for e in errs if e.regime == "kv_full"]
    twice = M.summary(M.errors(rows=[e.run for e in kv], kv_dtype="fp8"))["all"]
    assert M.summary(kv)["all"]["ttft_median"] > 4 and twice["ttft_median"] < 0.2


def test_the_8b_rows_provenance_is_stated_and_they_are_never_fitted():
    """The 8B rows come from another file of the sample than the 70B sweep; the md says so and describes each group
    as the CSV holds it (it once said TP 1 and 100 output tokens for the 8B rows: rejected below)."""
    rows = M.runs()
    by = {m: [r for r in rows if r.model == m] for m in M.MODELS}
    b8 = by["nvidia/Llama-3.1-8B-Instruct-FP8"]
    assert {r.source for r in b8} == {"AIConfigurator silicon sample, file nvidia_Llama-3.1-8B-Instruct-FP8.csv"}
    assert {r.vllm_version for r in b8} == {"0.12.0"}
    assert all("2026-04-06.csv" in r.source for r in by["meta-llama/Llama-3.1-70B"])
    assert not any(M.is_fit(r) for r in b8) and "over_roof" in M.NOT_FIT["nvidia/Llama-3.1-8B-Instruct-FP8"]
    md = " ".join(assets.path("performance/measured_runs_h200.md").read_text().split())
    assert "nvidia_Llama-3.1-8B-Instruct-FP8.csv" in md and "2026-04-06.csv" in md
    described = "21 runs of Llama-3.1-8B-Instruct-FP8 (tensor parallel 1, 2, 4, 8; prompts 1,000, 2,000, 4,000 and 8,000"
    assert described in md and "TP 1; prompts 1,000-8,000 tokens, 100 out" not in md
    assert sorted({r.tp for r in b8}) == [1, 2, 4, 8] and sorted({r.input_tokens for r in b8}) == [1000, 2000, 4000, 8000]
    assert sorted({r.output_tokens for r in b8}) == [100, 500, 1000, 2000]
    assert (min(r.concurrency for r in b8), max(r.concurrency for r in b8)) == (16, 128)
