"""The performance model's calibration: re-fitted here from the stored records, its stored factors and
errors must be what the fit gives, the errors on runs not used for fitting stay within stated bounds,
and a wrong record shows up as a large error (the check can fail)."""
import copy

import pytest

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.performance import calibration as C
from inferopt.performance import profiles as P


@pytest.fixture(scope="module")
def cpu():
    return C.fit_cpu()


@pytest.fixture(scope="module")
def gpu():
    return C.fit_gpu()


def _predicted(cal):
    return [r for r in cal.runs if not r.fit]


def test_cpu_fit_predicts_at_least_six_runs_it_was_not_fitted_on(cpu):
    pred = _predicted(cpu)
    assert len(pred) >= 6
    sessions = assets.load("results/perf_cpu_runs.yaml")["sessions"]
    fitted_sessions = {s["id"] for s in sessions if any(r["fit"] for r in s["runs"])}
    assert len(fitted_sessions) == 1            # the predictions come from other notebook sessions
    assert cpu.error["tpot"]["median"] < 0.15 and cpu.error["throughput"]["median"] < 0.15
    assert cpu.error["ttft"]["median"] < 0.30
    assert cpu.error["tpot"]["worst"] < 0.6


def test_gpu_runs_are_cited_and_the_error_on_the_unfitted_ones_is_stated(gpu):
    runs = assets.load("results/perf_gpu_runs.yaml")["runs"]
    assert len(runs) >= 15 and sum(not r["fit"] for r in runs) >= 9
    assert all(len(r["commit"]) == 40 and r["path"].startswith("results/") for r in runs)
    assert gpu.error["tpot"]["median"] < 0.12 and gpu.error["throughput"]["median"] < 0.15
    assert gpu.error["tpot"]["n"] == sum(not r["fit"] for r in runs)


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_stored_profile_is_what_a_refit_gives(kind, cpu, gpu):
    cal = {"cpu": cpu, "gpu": gpu}[kind]
    stored = P.profile(kind)
    for name in ("per_seq_step_us", "frontend_per_request_ms", "step_overhead_ms", "allreduce_latency_us"):
        assert getattr(stored, name) == pytest.approx(getattr(cal.profile, name)), name
    assert stored.efficiency == pytest.approx(cal.profile.efficiency)
    for metric, e in cal.error.items():
        assert stored.error[metric]["median"] == pytest.approx(e["median"], abs=0.002), metric
        assert stored.error[metric]["worst"] == pytest.approx(e["worst"], abs=0.002), metric


def test_a_wrong_record_shows_up_as_a_large_error():
    data = copy.deepcopy(assets.load("results/perf_gpu_runs.yaml"))
    victim = next(r for r in data["runs"] if not r["fit"])
    victim["measured"]["tpot_p50"] *= 3                 # a TPOT three times what was measured
    runs = C._gpu_runs(P.profile("gpu"), data)
    bad = next(r for r in runs if r.run == victim["id"])
    assert bad.rel_error["tpot_p50"] > 0.5
    sessions = copy.deepcopy(assets.load("results/perf_cpu_runs.yaml"))
    rec = next(r for s in sessions["sessions"] for r in s["runs"] if not r["fit"] and "throughput" in r)
    rec["throughput"] /= 3
    errs = {r.run: r for r in C._cpu_runs(P.profile("cpu"), sessions["sessions"])}
    assert errs[rec["id"]].rel_error["throughput"] > 1.0


def test_a_session_whose_idle_figures_leave_no_positive_roof_is_refused():
    with pytest.raises(CourseError, match="no positive"):
        C.session_roof(P.profile("cpu"), {"input_tokens": 100, "output_tokens": 16, "ttft_p50": 1.0, "tpot_p50": 1.0})


def test_a_gpu_run_without_its_citation_is_refused_by_the_schema():
    data = copy.deepcopy(assets.load("results/perf_gpu_runs.yaml"))
    del data["runs"][0]["commit"]
    with pytest.raises(CourseError, match="commit"):
        assets.validate(data, assets.schema("results/perf_gpu_runs.yaml"), "perf_gpu_runs")
