"""The start page's core path fits a weekend by the notebooks' own estimates, and lists every notebook once."""
from __future__ import annotations

import pytest

from inferopt import assets
from inferopt.course_map import MAX_CORE_MINUTES, course_path
from inferopt.errors import CourseError


def test_the_core_path_fits_a_weekend_and_every_notebook_is_on_the_path(capsys):
    path = course_path()
    with capsys.disabled():
        print(f"\ncore path: {path['core_minutes']} min ({path['core_minutes'] / 60:.1f} h); depth: "
              + ", ".join(f"{r['notebook']} {r['minutes']} min" for r in path["depth"]))
    assert 0 < path["core_minutes"] <= MAX_CORE_MINUTES
    names = [r["notebook"] for r in path["core"] + path["depth"]]
    assert {"00", "00a", "05", "lab 1"} <= set(names[:len(path["core"])]) and len(names) == len(set(names))
    assert all(r["adds"] for r in path["depth"]) and all(r["title"] for r in path["core"])


def test_a_lab_comes_after_the_chapters_it_builds_on():
    core = assets.load("course_path.yaml")["core"]
    for lab, chapter in (("lab 1", "04"), ("lab 2", "05"), ("lab 3", "05b"), ("lab 5", "06")):
        assert core.index(chapter) < core.index(lab), (lab, chapter)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["core"].remove("03"), "not on the path: 03"),
    (lambda d: d["core"].append("02"), "listed twice: 02"),
    (lambda d: d["depth"].append({"notebook": "09", "adds": "a chapter that does not exist"}), "no such notebook: 09"),
])
def test_a_wrong_path_is_refused_with_what_to_fix(change, message):
    data = {"core": list(assets.load("course_path.yaml")["core"]),
            "depth": [dict(d) for d in assets.load("course_path.yaml")["depth"]]}
    change(data)
    with pytest.raises(CourseError, match=message):
        course_path(data)


def test_an_overlong_core_is_seen():
    data = {"core": list(assets.load("course_path.yaml")["core"]), "depth": []}
    data["core"] += [d["notebook"] for d in assets.load("course_path.yaml")["depth"]]
    assert course_path(data)["core_minutes"] > course_path()["core_minutes"]
