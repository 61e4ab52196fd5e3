"""The performance model against 81 measured vLLM runs at load (assets/performance/measured_runs_h200.csv, cited
in measured_runs_h200.md beside it): the TTFT and TPOT error is recomputed here, on the rows the factors were
fitted on and on the rows they were not, and must stay within stated bounds; the mechanism the model had
before (every request of a closed loop in lockstep with the first burst) fails the TTFT bound."""
import pytest

from inferopt import assets
from inferopt.performance import measured as M
from inferopt.performance import predict as PR

# held-out rows (70B at TP 1 and 4, every 8B run). Before the fix (a closed loop in lockstep with its first burst,
# NVLink at the 900 GB/s of both directions, no per-call latency from the link): held-out TTFT median 165 %,
# mean 305 %, TPOT median 16.5 %; fitted rows TTFT median 123 %. After: `python -m inferopt.performance.measured`
HELD_OUT_TTFT_MEDIAN = 0.30
HELD_OUT_TPOT_MEDIAN = 0.30


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


def test_the_stored_run_length_is_what_the_fit_gives():
    assert M.fit() == PR.PROMPTS_PER_CONCURRENCY
