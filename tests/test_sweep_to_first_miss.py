"""The load-test sweep's stopping rule (chapter 5b, ``experiments.doubling_levels``), without an engine: levels
double from 1, the sweep stops at the first level that misses its SLO or at the engine's slots; bad limits are one
clear line. The live sweep (``sweep_to_first_miss``) runs in chapter 5b, whose cell asserts the same rule."""
import pytest

from inferopt.bench.experiments import doubling_levels
from inferopt.errors import CourseError


def _measure(first_miss):
    seen = []

    def measure(level):
        seen.append(level)
        return {"concurrency": level, "meets_slo": first_miss is None or level < first_miss}
    return measure, seen


def test_it_stops_at_the_first_level_that_misses():
    measure, seen = _measure(first_miss=8)
    rows = doubling_levels(measure, max_level=16)
    assert seen == [1, 2, 4, 8]                                   # nothing measured after the miss
    assert [r["meets_slo"] for r in rows] == [True, True, True, False]


def test_it_stops_when_the_slots_are_full():
    measure, seen = _measure(first_miss=None)
    assert [r["concurrency"] for r in doubling_levels(measure, max_level=16)] == [1, 2, 4, 8, 16]
    measure, seen = _measure(first_miss=None)
    doubling_levels(measure, max_level=12)                        # not a power of two: the level past it is the last
    assert seen == [1, 2, 4, 8, 16]


def test_a_miss_at_the_first_level_is_one_row():
    measure, seen = _measure(first_miss=1)
    assert [r["meets_slo"] for r in doubling_levels(measure, max_level=16)] == [False] and seen == [1]


@pytest.mark.parametrize("bad", [0, -4, 2.5, "16"])
def test_a_bad_limit_is_one_clear_line(bad):
    measure, seen = _measure(first_miss=None)
    with pytest.raises(CourseError, match="whole number of 1 or more"):
        doubling_levels(measure, max_level=bad)
    assert seen == []
