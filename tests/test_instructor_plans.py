"""INSTRUCTORS.md's half-day and full-day plans add up to the notebooks' own time estimates, stay within their
teaching budget, say who runs each block, and keep the core path's order."""
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


def test_the_days_fit_their_budgets_and_every_live_block_names_a_fallback(capsys):
    got = plans()
    with capsys.disabled():
        for name, plan in got.items():
            print(f"\n{name}: {pacing.hm(plan['total'])} in all, {pacing.hm(pacing.teaching_minutes(plan))} of "
                  f"teaching (budget {pacing.hm(plan['teaching_max'])})")
    assert pacing.teaching_minutes(got["full-day"]) <= 6 * 60 + 30 and got["full-day"]["teaching_max"] == 390
    assert pacing.teaching_minutes(got["half-day"]) <= 3 * 60 + 30
    full = got["full-day"]
    named = [x for row in full["rows"] for x in row[2]]
    assert {"00", "00a", "lab 1", "05"} <= set(named) and "slack" in named
    assert named.index("03") < named.index("lab 1") and named.index("04") < named.index("lab 1")
    for _start, _min, items, what, fallback, who in full["rows"]:
        if set(items) & {"00", "02b", "05b", "06b"}:
            assert "stored outputs" in fallback and "make book" in fallback, what
        if set(items) & {"02b", "05b", "06b"}:                # they start engines of their own
            assert who == "instructor demo", what


def test_estimate_reads_the_front_matter():
    e = pacing.estimate("02b")
    assert e.reading == 25 and e.run >= 10           # "plus the run": About 10–12 minutes -> 12
    assert pacing.estimate("lab 1").working == 45
    with pytest.raises(CourseError):
        pacing.estimate("09")


TEXT = """<!-- plan: demo, total 1:00 -->
| start | minutes | notebooks | who runs it | what | without enough cores |
|---|---|---|---|---|---|
| 0:00 | {a} | 01 | learners | technique map | - |
| {s2} | 10 | break | — | break | - |
| {s3} | {c} | 04 | {who} | order | - |
"""


def _demo(a, s2, s3, c, who="learners"):
    return pacing.parse_plans(TEXT.format(a=a, s2=s2, s3=s3, c=c, who=who))["demo"]


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
    broken = TEXT.format(a=1, s2="0:07", s3="3:00", c=99, who="learners")
    fixed = pacing.parse_plans(pacing.rewrite(broken))["demo"]
    assert pacing.check_plan(fixed) == []


def test_the_check_rejects_a_day_over_budget_a_block_without_a_runner_and_a_lab_before_its_chapter():
    one, four = pacing.estimate("01").total, pacing.estimate("04").total
    right = dict(a=one, s2=pacing.hm(one), s3=pacing.hm(one + 10), c=four)
    plan = _demo(**right)
    plan["total"] = one + 10 + four
    over = dict(plan, teaching_max=one + four - 1)
    assert any("of teaching" in p for p in pacing.check_plan(over))
    assert pacing.check_plan(dict(plan, teaching_max=one + four)) == []
    nobody = _demo(**right, who="everyone")
    nobody["total"] = plan["total"]
    assert any("who runs it" in p for p in pacing.check_plan(nobody))
    # lab 1 before chapter 03, which it needs (the old full day's order)
    lab1, three = pacing.estimate("lab 1").total, pacing.estimate("03").total
    text = ("<!-- plan: order, total {t} -->\n| start | minutes | notebooks | who runs it | what | x |\n|---|---|---|---|---|---|\n"
            "| 0:00 | {a} | lab 1 | learners | lab 1 | - |\n| {s} | {b} | 03 | learners | pitfalls | - |\n")
    wrong = pacing.parse_plans(text.format(t=pacing.hm(lab1 + three), a=lab1, s=pacing.hm(lab1), b=three))["order"]
    assert any("core path puts it before" in p for p in pacing.check_plan(wrong))


def test_the_chinese_plans_are_the_english_plans_row_by_row():
    zh = pacing.parse_plans((pacing.INSTRUCTORS.parent / "INSTRUCTORS.zh.md").read_text(encoding="utf-8"))
    en = plans()
    assert set(zh) == set(en)
    for name in en:
        assert zh[name]["total"] == en[name]["total"] and zh[name]["teaching_max"] == en[name]["teaching_max"]
        assert [r[:3] for r in zh[name]["rows"]] == [r[:3] for r in en[name]["rows"]], name
