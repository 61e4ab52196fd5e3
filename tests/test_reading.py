"""What a learner reads (inferopt.reading): each chapter fits one sitting, no learner-visible code cell is a wall,
and no concept is used before the notebook that teaches it. The table of every notebook prints on each run."""
from __future__ import annotations

import pytest

from inferopt import reading


def test_the_table_of_every_notebook_prints_and_each_fits_one_sitting(capsys):
    rows = [reading.stats(p) for p in reading.course_order()]
    with capsys.disabled():
        print(f"\n{'notebook':9s} {'main words':>10s} {'code cells':>10s} {'words/cell':>10s} {'longest cell':>12s}")
        for s in rows:
            print(f"{s.notebook:9s} {s.words:10d} {s.code_cells:10d} {s.words_per_cell:10.1f} {s.longest:12d}")
    too_long = [f"{s.notebook}: {s.words} words outside <details> blocks (at most {reading.MAX_MAIN_WORDS}: move "
                "evidence into a 'Why we trust this' block)" for s in rows if s.words > reading.MAX_MAIN_WORDS]
    choppy = [f"{s.notebook}: {s.words_per_cell} words of text per code cell (at most {reading.MAX_WORDS_PER_CELL}: "
              "cut what repeats, move evidence into <details>, or give an idea its own short cell)"
              for s in rows if s.words_per_cell > reading.MAX_WORDS_PER_CELL]
    walls = [f"{s.notebook}: code cell {s.longest_cell} has {s.longest} lines (at most {reading.MAX_CELL_LINES}: "
             "move the logic into a named package function the cell calls)"
             for s in rows if s.longest > reading.MAX_CELL_LINES]
    assert not too_long + choppy + walls, "\n".join(too_long + choppy + walls)
    assert {s.notebook for s in rows} >= {"00", "00a", "05", "06b", "lab1", "lab5"}


def test_every_notebook_has_the_spine():
    problems = [line for p in reading.course_order() for line in reading.spine_problems(p)]
    assert problems == [], "\n".join(problems)


def _nb(tmp_path, name, *markdown):
    import json

    nb = {"cells": [{"cell_type": "markdown", "source": m, "metadata": {}} for m in markdown],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / name
    path.write_text(json.dumps(nb))
    return path


_TOP = "**What you will be able to do**\n\n- one\n\n**Prerequisites**: chapter 0."
_PREDICT = "**Predict first.** How many tokens fit?"
_REMEMBER = "## What to remember\n\n- a\n- b\n- c\n- d"


def test_the_spine_check_accepts_a_whole_chapter_and_rejects_each_missing_part(tmp_path):
    whole = (_TOP, _PREDICT, "## Exercises\n\n1. Predict, then measure.", _REMEMBER, "## Where next\n\nChapter 2.")
    assert reading.spine_problems(_nb(tmp_path, "01-whole.ipynb", *whole)) == []
    cases = {
        "outcomes": (whole[0].split("\n\n")[-1],) + whole[1:],
        "Predict": (_TOP, "Predict before the cell runs.") + whole[2:],
        "Exercises": (_TOP, _PREDICT, _REMEMBER),
        "closing": (_TOP, _PREDICT, whole[2]),
        "not the last": (_TOP, _PREDICT, _REMEMBER, whole[2]),
        "bullet lines": (_TOP, _PREDICT, whole[2], "## What to remember\n\n- only one"),
    }
    for expect, cells in cases.items():
        problems = reading.spine_problems(_nb(tmp_path, f"01-{expect.split()[0]}.ipynb", *cells))
        assert any(expect in p for p in problems), (expect, problems)
    # a prediction hidden in an answer block does not count; a lab needs no Exercises section
    hidden = (_TOP, f"<details><summary>Answer</summary>\n\n{_PREDICT}\n\n</details>", whole[2], _REMEMBER)
    assert any("Predict" in p for p in reading.spine_problems(_nb(tmp_path, "01-hidden.ipynb", *hidden)))
    assert reading.spine_problems(_nb(tmp_path, "lab9-x.ipynb", _TOP, _PREDICT, _REMEMBER)) == []


def test_the_rhythm_ceiling_rejects_a_wall_of_text(tmp_path):
    import json

    md = " ".join(["word"] * (reading.MAX_WORDS_PER_CELL * 2 + 2))
    nb = {"cells": [{"cell_type": "markdown", "source": md, "metadata": {}}]
          + [{"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [], "execution_count": None}] * 2,
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99-wall.ipynb"
    path.write_text(json.dumps(nb))
    assert reading.stats(path).words_per_cell > reading.MAX_WORDS_PER_CELL


def test_main_text_leaves_out_details_code_and_link_targets():
    md = ("Visible words here. `inline code` and [a link](https://example.org/very/long/path).\n\n"
          "<details><summary>Why we trust this</summary>\n\nhidden evidence words\n\n</details>\n\n"
          "```python\nprint('code words')\n```\n<!-- a comment -->")
    text = reading.main_text(md)
    assert "Visible" in text and "a link" in text
    for gone in ("inline", "example.org", "hidden", "evidence", "code words", "comment", "summary"):
        assert gone not in text, gone
    assert reading.words(text) == 6          # Visible words here. and a link


def test_the_ceilings_reject_a_long_chapter_and_a_long_cell(tmp_path):
    import json

    long_md = " ".join(["word"] * (reading.MAX_MAIN_WORDS + 1))
    nb = {"cells": [{"cell_type": "markdown", "source": long_md, "metadata": {}},
                    {"cell_type": "code", "source": "\n".join(f"x{i} = {i}" for i in range(reading.MAX_CELL_LINES + 1)),
                     "metadata": {}, "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "99-too-long.ipynb"
    path.write_text(json.dumps(nb))
    s = reading.stats(path)
    assert s.words > reading.MAX_MAIN_WORDS and s.longest > reading.MAX_CELL_LINES and s.notebook == "99"


def test_concepts_come_after_the_notebook_that_teaches_them():
    problems = reading.concept_order_problems(reading.course_markdown())
    assert problems == [], "\n".join(problems)


def _moved(course, from_nb, to_nb, needle):
    """The course with the first markdown cell of ``from_nb`` that contains ``needle`` copied to the top of ``to_nb``."""
    cells = dict(course)
    moved = next(t for t in cells[from_nb] if needle in reading.main_text(t))
    return [(nb, ([moved] + texts) if nb == to_nb else texts) for nb, texts in course]


def test_concept_order_rejects_a_moved_paragraph():
    course = reading.course_markdown()
    # chapter 02's paragraph on P95 moved into chapter 00, before the primer that teaches percentiles
    problems = reading.concept_order_problems(_moved(course, "02", "00", "P95"))
    assert any("percentile" in p and "used in 00" in p and "before 00a" in p for p in problems), problems
    # the same paragraph inside a <details> block on the main path is evidence, not a use
    cells = dict(course)
    moved = next(t for t in cells["02"] if "P95" in reading.main_text(t))
    hidden = [(nb, (["<details><summary>Why</summary>\n\n" + moved + "\n\n</details>"] + t) if nb == "00" else t)
              for nb, t in course]
    assert not [p for p in reading.concept_order_problems(hidden) if "used in 00" in p and "percentile" in p]


@pytest.mark.parametrize("entry, expect", [
    ({"term": "PromQL", "defined_in": "01", "patterns": [r"\bPromQL\b"]}, "never uses it"),
    ({"term": "PromQL", "defined_in": "09", "patterns": [r"\bPromQL\b"]}, "is not a notebook of the course"),
])
def test_the_index_rejects_a_definition_in_the_wrong_place(entry, expect):
    problems = reading.concept_order_problems(reading.course_markdown(), [entry])
    assert any(expect in p for p in problems), problems
