"""Lesson SLOs: multiples of an idle calibration run measured on this machine."""
import pytest

from inferopt import assets
from inferopt.bench import lesson
from inferopt.errors import CourseError


def test_lesson_slo_is_the_asset_factors_times_idle_latency():
    f = lesson.settings()["slo"]
    cal = lesson.Calibration(ttft_ms=400.0, tpot_ms=50.0, n=4, input_tokens=200, output_tokens=32)
    slo = lesson.lesson_slo(cal)
    assert slo.ttft_ms == pytest.approx(f["ttft_factor"] * 400.0)
    assert slo.tpot_ms == pytest.approx(f["tpot_factor"] * 50.0)
    assert slo.percentile == f["percentile"]
    # a machine twice as fast gets an SLO twice as tight: the lesson means the same everywhere
    fast = lesson.lesson_slo(lesson.Calibration(200.0, 25.0, 4, 200, 32))
    assert fast.ttft_ms == pytest.approx(slo.ttft_ms / 2) and fast.tpot_ms == pytest.approx(slo.tpot_ms / 2)


def test_a_broken_asset_is_one_clear_error(tmp_path, monkeypatch):
    src = assets.path(lesson.ASSET).read_text(encoding="utf-8")
    for broken, field in ((src.replace("ttft_factor: 3.0", "ttft_factor: 0.5"), "ttft_factor"),
                          (src.replace("num_requests: 4", "num_requests: many"), "num_requests")):
        bad = tmp_path / "lesson_slos.yaml"
        bad.write_text(broken, encoding="utf-8")
        with pytest.raises(CourseError, match=field):
            assets.load_file(bad, schema=assets.load("schemas/lesson_slos.schema.json"))


@pytest.mark.engine
def test_calibration_measures_idle_latency_on_the_live_engine(live_server):
    cal = lesson.calibrate(live_server, input_tokens=64, output_tokens=8, num_requests=2)
    assert cal.n == 2 and cal.input_tokens == 64 and cal.output_tokens == 8
    assert cal.ttft_ms > 0 and cal.tpot_ms > 0
    assert "TTFT P50" in cal.describe()
