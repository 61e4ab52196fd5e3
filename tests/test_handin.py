"""``python -m inferopt handin``: the learner's lab notebooks land in the room's drop folder as
``<name>/<lab>.ipynb`` with a manifest of times and hashes; a missing or unwritable folder, an empty or
path-like name and an unsaved (broken) notebook are refused in one line, with nothing written."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from inferopt.errors import CourseError
from inferopt.paths import LABS, REPO_ROOT
from inferopt.room.handin import MANIFEST, handin

LAB1, LAB2 = "lab1-decision-tree.ipynb", "lab2-memory-calculator.ipynb"


@pytest.fixture
def course(tmp_path):
    labs = tmp_path / "labs"
    labs.mkdir()
    for name in (LAB1, LAB2):
        shutil.copy(LABS / name, labs / name)
    drop = tmp_path / "drop"
    drop.mkdir()
    return labs, drop


def test_handin_copies_the_labs_with_a_manifest_and_a_second_handin_replaces_them(course):
    labs, drop = course
    t1 = dt.datetime(2026, 12, 6, 9, 0, tzinfo=dt.timezone.utc)
    mine, written = handin(str(drop), "ana", labs=labs, now=t1)
    assert mine == drop / "ana" and sorted(p.name for p in written) == [LAB1, LAB2]
    assert (drop / "ana" / LAB2).read_bytes() == (labs / LAB2).read_bytes()
    man = json.loads((drop / "ana" / MANIFEST).read_text())
    assert man["name"] == "ana" and man["handins"][0]["at"] == "2026-12-06T09:00:00+00:00"
    assert man["handins"][0]["files"][LAB2]["sha256"] == hashlib.sha256((labs / LAB2).read_bytes()).hexdigest()
    # the learner works on lab 2 and hands in again, lab 2 only
    nb = json.loads((labs / LAB2).read_text())
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "done"})
    (labs / LAB2).write_text(json.dumps(nb))
    handin(str(drop), "ana", labs=labs, only=["lab2"], now=t1 + dt.timedelta(hours=1))
    assert (drop / "ana" / LAB2).read_bytes() == (labs / LAB2).read_bytes()
    man = json.loads((drop / "ana" / MANIFEST).read_text())
    assert [h["at"][11:16] for h in man["handins"]] == ["09:00", "10:00"] and list(man["handins"][1]["files"]) == [LAB2]
    assert not [p for p in (drop / "ana").iterdir() if p.name.startswith(".handin-")]


@pytest.mark.parametrize("to,name,words", [
    (None, "ana", "no drop folder"),
    ("/nonexistent/drop", "ana", "does not exist"),
    ("/proc", "ana", "cannot write into the drop folder /proc"),
    ("DROP", "", "no learner name"),
    ("DROP", "  ", "no learner name"),
    ("DROP", "../ben", "not a plain name"),
    ("DROP", "ana garcia", "not a plain name"),
])
def test_wrong_folder_or_name_is_refused_and_nothing_is_written(course, to, name, words):
    labs, drop = course
    with pytest.raises(CourseError, match=words):
        handin(str(drop) if to == "DROP" else to, name, labs=labs)
    assert list(drop.iterdir()) == []


def test_an_unsaved_notebook_or_no_labs_is_refused(course, tmp_path):
    labs, drop = course
    (labs / LAB1).write_text("{ half a notebook", encoding="utf-8")
    with pytest.raises(CourseError, match="not a readable notebook"):
        handin(str(drop), "ana", labs=labs)
    assert list(drop.iterdir()) == []
    with pytest.raises(CourseError, match="no lab notebooks"):
        handin(str(drop), "ana", labs=tmp_path / "empty")
    with pytest.raises(CourseError, match="no lab notebooks matching lab9"):
        handin(str(drop), "ana", labs=labs, only=["lab9"])


def test_the_command_reads_the_room_folder_from_the_environment(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), INFEROPT_HANDIN_DIR=str(tmp_path), JUPYTERHUB_USER="chen")
    env.pop("INFEROPT_EDITION", None)
    res = subprocess.run([sys.executable, "-m", "inferopt", "handin", "--lab", "lab2"], capture_output=True, text=True,
                         env=env, cwd=REPO_ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "chen" / LAB2).read_bytes() == (LABS / LAB2).read_bytes()
    env.pop("JUPYTERHUB_USER")
    res = subprocess.run([sys.executable, "-m", "inferopt", "handin"], capture_output=True, text=True, env=env,
                         cwd=REPO_ROOT, timeout=120)
    assert res.returncode == 2 and res.stderr.startswith("error: no learner name"), res.stderr
