"""INSTRUCTORS.md's half-day and full-day plans add up to the notebooks' own time estimates."""
import pytest

from inferopt import pacing
from inferopt.errors import CourseError


def plans():
    return pacing.parse_plans(pacing.INSTRUCTORS.read_text())


def test_both_plans_exist_and_add_up():
    got = plans()
    assert set(got) >= {"half-day", "full-day"}
    for name, plan in got.items():
        assert pacing.check_plan(plan) == [], (name, pacing.check_plan(plan))


def test_full_day_includes_05b_and_every_live_block_names_a_fallback():
    full = plans()["full-day"]
    named = [x for row in full["rows"] for x in row[2]]
    assert "05b" in named and "lab 4" in named            # 05b is lab 4's prerequisite
    for _start, _min, items, what, fallback in full["rows"]:
        if set(items) & {"00", "02b", "05b", "06b"}:
            assert "stored outputs" in fallback and "make book" in fallback, what


def test_estimate_reads_the_front_matter():
    e = pacing.estimate("02b")
    assert e.reading == 25 and e.run >= 10           # "plus the run": About 10–12 minutes -> 12
    assert pacing.estimate("lab 1").working == 45
    with pytest.raises(CourseError):
        pacing.estimate("09")


TEXT = """<!-- plan: demo, total 1:00 -->
| start | minutes | notebooks | what | without enough cores |
|---|---|---|---|---|
| 0:00 | {a} | 01 | technique map | - |
| {s2} | 10 | break | break | - |
| {s3} | {c} | 04 | order | - |
"""


def _demo(a, s2, s3, c):
    return pacing.parse_plans(TEXT.format(a=a, s2=s2, s3=s3, c=c))["demo"]


def test_the_check_rejects_a_plan_that_does_not_add_up():
    one, four = pacing.estimate("01").total, pacing.estimate("04").total
    right = dict(a=one, s2=pacing.hm(one), s3=pacing.hm(one + 10), c=four)
    plan = _demo(**right)
    plan["total"] = one + 10 + four
    assert pacing.check_plan(plan) == []
    # a block shorter than its notebooks' estimates (the old 6.5 h full day's defect)
    short = _demo(**{**right, "a": one - 5})
    short["total"] = plan["total"]
    assert any("front matter adds up to" in p for p in pacing.check_plan(short))
    # a start that does not follow the previous block
    gap = _demo(**{**right, "s3": pacing.hm(one + 20)})
    gap["total"] = plan["total"]
    assert any("starts at" in p for p in pacing.check_plan(gap))
    # a stated total that is not the sum (the default 1:00 here)
    assert any("states a total" in p for p in pacing.check_plan(_demo(**right)))


def test_rewrite_repairs_a_plan():
    broken = TEXT.format(a=1, s2="0:07", s3="3:00", c=99)
    fixed = pacing.parse_plans(pacing.rewrite(broken))["demo"]
    assert pacing.check_plan(fixed) == []
