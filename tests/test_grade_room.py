"""The grader at room scale: ``--jobs 2`` gives the same rows, in the same order, as ``--jobs 1``; a broken
notebook and a file that is JSON but no notebook count as zero with a hint, never a crash; the per-learner
table reads the hand-in layout (one folder per learner) and flat names (``ana-lab2.ipynb``); the per-task view
counts full / zero and names the most common hint. Labs 2 and 5 only: no engine starts."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from inferopt.errors import CourseError
from inferopt.labcheck import grade
from inferopt.paths import LABS, SOLUTIONS
from inferopt.room.handin import handin

LAB2, LAB5 = "lab2-memory-calculator.ipynb", "lab5-monitoring-alerts.ipynb"


def _wrong_lab2(dst: Path):
    """Lab 2 with GiB for GB: tasks 1 and 2 (which builds on it) wrong, task 3 worked."""
    nb = json.loads((SOLUTIONS / LAB2).read_text(encoding="utf-8"))
    for c in nb["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        c["source"] = src.replace("* tokens / 1e9", "* tokens / 2**30")
    dst.write_text(json.dumps(nb), encoding="utf-8")


@pytest.fixture(scope="module")
def room(tmp_path_factory) -> Path:
    """A drop folder as hand-ins fill it (ana: worked lab 2; ben: untouched labs 2 and 5), plus flat files:
    chen's lab 2 with GiB for GB (tasks 1 and 2 wrong), a broken lab 5 and a JSON file that is no notebook."""
    tmp = tmp_path_factory.mktemp("room")
    drop, ana, ben = tmp / "drop", tmp / "ana", tmp / "ben"
    for d in (drop, ana, ben):
        d.mkdir()
    shutil.copy(SOLUTIONS / LAB2, ana / LAB2)
    shutil.copy(LABS / LAB2, ben / LAB2)
    shutil.copy(LABS / LAB5, ben / LAB5)
    handin(str(drop), "ana", labs=ana)
    handin(str(drop), "ben", labs=ben)
    _wrong_lab2(drop / "chen-lab2.ipynb")
    (drop / "dara-lab5.ipynb").write_text('{"cells": [', encoding="utf-8")
    (drop / "eli-lab2.ipynb").write_text("[1, 2, 3]", encoding="utf-8")
    return drop


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(path.open(encoding="utf-8")))


@pytest.fixture(scope="module")
def graded(room, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    lines = {1: [], 2: []}
    for jobs in (1, 2):
        grade.grade_folder(room, out / f"j{jobs}.csv", jobs=jobs, progress=lines[jobs].append)
    return out, lines


def test_two_jobs_give_the_rows_one_job_gives(graded):
    out, lines = graded
    key = ("file", "lab", "task", "points", "max_points", "reason")
    one, two = ([tuple(r[k] for k in key) for r in _rows(out / f"j{j}.csv")] for j in (1, 2))
    assert one == two and len(one) == 3 + 3 + 4 + 3 + 4 + 3, one
    # progress: one line per submission, in file order, whichever task finished first
    assert [ln.split("]")[0] for ln in lines[2]] == [f"[{k}/6" for k in range(1, 7)], lines[2]
    assert [ln.split(":")[0] for ln in lines[1]] == [ln.split(":")[0] for ln in lines[2]]


def test_broken_notebooks_count_zero_with_a_hint(graded):
    out, _ = graded
    rows = _rows(out / "j2.csv")
    for f, n in (("dara-lab5.ipynb", 4), ("eli-lab2.ipynb", 3)):
        mine = [r for r in rows if r["file"] == f]
        assert len(mine) == n and all(float(r["points"]) == 0 for r in mine), mine
        assert all(r["reason"] == "unreadable notebook" and "submit the .ipynb saved by Jupyter" in r["message"]
                   for r in mine), mine
    chen = {r["task"]: float(r["points"]) for r in rows if r["file"] == "chen-lab2.ipynb"}
    assert chen == {"lab2-task1": 0, "lab2-task2": 0, "lab2-task3": 2}, chen   # as dara in test_grade.py


def test_the_per_learner_and_per_task_views(graded):
    out, _ = graded
    views = grade.class_view_paths(out / "j2.csv")
    learners = {r["learner"]: r for r in _rows(views["learners"])}
    assert set(learners) == {"ana", "ben", "chen", "dara", "eli"}, learners
    assert (learners["ana"]["lab2"], learners["ana"]["lab5"], learners["ana"]["total"]) == ("5", "", "5")
    assert (learners["ben"]["lab2"], learners["ben"]["lab5"], learners["ben"]["total"]) == ("0", "0", "0")
    assert learners["chen"]["total"] == "2" and {r["max_total"] for r in learners.values()} == {"12"}
    tasks = {r["task"]: r for r in _rows(views["tasks"])}
    t1 = tasks["lab2-task1"]
    assert (t1["submitted"], t1["full"], t1["partial"], t1["zero"]) == ("4", "1", "0", "3"), t1
    assert tasks["lab5-task1"]["most_common_hint"].startswith("NotDone") or \
        tasks["lab5-task1"]["most_common_hint"].startswith("cannot read"), tasks["lab5-task1"]
    assert (tasks["lab2-task3"]["full"], tasks["lab2-task3"]["zero"]) == ("2", "2")
    md = views["markdown"].read_text(encoding="utf-8")
    assert "# Per learner" in md and "| ana | 5 |  | 5 | 12 |" in md and "# Per task" in md


def test_the_most_common_hint_groups_messages_that_differ_in_numbers():
    subs = [grade.Submission("a.ipynb", "lab2", [grade.Row("a.ipynb", "lab2", "lab2-task1", 0, 2, m)])
            for m in ("CheckFailed: off by 1.07 at 4096 tokens", "CheckFailed: off by 1.07 at 512 tokens",
                      "NotDone: define `x`")]
    (row,) = grade.task_table(subs)[1]
    assert row["hint_count"] == 2 and row["most_common_hint"].startswith("CheckFailed: off by"), row


def test_learner_names_and_a_bad_jobs_count(tmp_path):
    assert grade.learner_of("ana/lab2-memory-calculator.ipynb") == "ana"
    assert grade.learner_of("ana-lab2.ipynb") == "ana" and grade.learner_of("Ben_Lab 5.ipynb") == "Ben"
    assert grade.learner_of("lab2.ipynb") == "lab2"
    (tmp_path / "x.ipynb").write_text("{}")
    with pytest.raises(CourseError, match="--jobs 0"):
        grade.grade_folder(tmp_path, jobs=0)
