"""Presenter material from the course's own sources (inferopt/room/presenter.py): answer keys rebuilt from
solutions/ and refused when they drift, talking points for every block of the day plans and refused for a block
without them, slides that hold every marked cell and refused when one is missing, and none of it in the learner
pack. Each check is shown to reject a wrong case."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile

import nbformat
import pytest

from inferopt import pacing
from inferopt.errors import CourseError
from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS
from inferopt.room import presenter


def _solution_regions(path) -> list[str]:
    """Every worked region of a solution notebook (code and prose), as the labs' generator sees them."""
    out = []
    for c in json.loads(path.read_text())["cells"]:
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        if c["cell_type"] == "code":
            out += re.findall(r"^[ \t]*### BEGIN SOLUTION[ \t]*\n(.*?)^[ \t]*### END SOLUTION", src, re.S | re.M)
        else:
            out += re.findall(r"^\s*BEGIN SOLUTION\s*\n(.*?)^\s*END SOLUTION", src, re.S | re.M)
    return out


# ---------------------------------------------------------------- answer keys
@pytest.mark.parametrize("solution", sorted(SOLUTIONS.glob("lab*.ipynb")), ids=lambda p: p.name[:4])
def test_answer_key_holds_every_worked_region_and_no_hidden_test(solution, tmp_path):
    key = presenter.answer_key(solution)
    regions = _solution_regions(solution)
    assert regions and key.count("```python") + sum(1 for b in key.split("\n\n") if b.startswith("> ")) == len(regions)
    for region in regions:
        for line in (ln.strip() for ln in region.splitlines()):
            if line:
                assert line in key, (solution.name, line)
    assert "BEGIN HIDDEN TESTS" not in key and "### BEGIN SOLUTION" not in key
    nb = nbformat.read(solution, as_version=4)
    graded = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")}
    assert {g for g in graded if f"`{g}`" in key}, "the key names the checks that grade the answers"
    path = tmp_path / presenter.key_name(solution)
    path.write_text(key)
    assert presenter.check_answer_key(path) == []


def test_an_answer_key_edited_by_hand_is_rejected(tmp_path):
    sol = SOLUTIONS / "lab2-memory-calculator.ipynb"
    path = tmp_path / presenter.key_name(sol)
    key = presenter.answer_key(sol)
    path.write_text(key.replace("// cfg[\"num_attention_heads\"]", "// cfg[\"num_key_value_heads\"]", 1))
    assert path.read_text() != key
    [problem] = presenter.check_answer_key(path)
    assert "edited by hand" in problem and "make presenter" in problem
    path.write_text(key.split("\n", 1)[1])             # a key typed without the generator's first line
    assert "was not built by" in presenter.check_answer_key(path)[0]


def test_an_answer_key_older_than_its_solution_is_rejected(tmp_path, monkeypatch):
    """The solution changes after the key was built (a copy of the tree: solutions/ here is never touched)."""
    root = tmp_path / "course"
    (root / "solutions").mkdir(parents=True)
    sol = root / "solutions" / "lab2-memory-calculator.ipynb"
    shutil.copy(SOLUTIONS / sol.name, sol)
    monkeypatch.setattr(presenter, "REPO_ROOT", root)
    key = tmp_path / "answer-key-lab2.md"
    key.write_text(presenter.answer_key(sol))
    assert presenter.check_answer_key(key) == []
    nb = nbformat.read(sol, as_version=4)
    cell = next(c for c in nb.cells if "def requests_that_fit" in c.source)
    cell.source = cell.source.replace("math.floor(round(capacity_gb / gb_per_request, 9))",
                                      "int(capacity_gb // gb_per_request)")
    nbformat.write(nb, sol)
    [problem] = presenter.check_answer_key(key)
    assert "changed since the key was built" in problem


# ---------------------------------------------------------------- talking points
def _blocks(page: str, plans: dict, head):
    """(plan name, row, block text) of every teaching block of ``plans`` on a talking-points ``page``, each block
    found by its heading (``head(start, end, what, minutes)``, as the edition writes it); breaks and slack left out."""
    for name, plan in plans.items():
        for row in plan["rows"]:
            start, minutes, items, what = row[:4]
            heading = head(pacing.hm(start), pacing.hm(start + minutes), what, minutes)
            assert heading in page, heading
            if items not in (["break"], ["slack"]):
                yield name, row, page.split(heading, 1)[1].split("\n### ", 1)[0]


def test_every_block_of_every_plan_has_talking_points():
    text = pacing.INSTRUCTORS.read_text()
    points = presenter.talking_points(text)
    plans = pacing.parse_plans(text)
    assert plans
    assert all(f"## Plan: {name} " in points for name in plans)
    for name, (_s, _m, items, what, _fallback, who), block in _blocks(
            points, plans, lambda a, b, what, m: f"### {a}–{b} · {what} ({m} min"):
        assert f", {who})" in block.split("\n", 1)[0]
        for item in items:
            p = presenter.notebook_points(pacing.notebook_path(item))
            assert p.objectives and all(f"- {o}" in block for o in p.objectives), (name, what, item)


def test_a_block_without_talking_points_is_rejected(tmp_path, monkeypatch):
    """A plan's block names a notebook whose front matter states no objectives: the build refuses it."""
    bare = tmp_path / "04-bare.md"
    bare.write_text("# Chapter 4 · Without objectives\n\n**Time**: about 5 minutes of reading.\n\n## One section\n")
    real = pacing.notebook_path
    monkeypatch.setattr(pacing, "notebook_path", lambda name: bare if name == "04" else real(name))
    with pytest.raises(CourseError, match="a block without talking points: plan half-day, block 'chapter 04") as exc:
        presenter.talking_points(pacing.INSTRUCTORS.read_text())
    assert "\n" not in str(exc.value)
    with pytest.raises(CourseError, match="no day plan"):
        presenter.talking_points("# a file without plans\n")


def _english_points(page: str) -> list[str]:
    """The lines of a talking-points page that hold a run of English words (inline code, paths, flags and the
    terms both editions keep taken out: inferopt.i18n.leftover)."""
    from inferopt.i18n.leftover import english_runs

    return [ln for ln in page.splitlines() if english_runs(ln)]


def test_the_chinese_talking_points_hold_every_block_and_no_english_point():
    """talking-points.zh.md: the plans of INSTRUCTORS.zh.md, each notebook's objectives, prompts and sections as the
    zh notebooks show them (their catalogs), Chinese labels; no line of it is English."""
    zh_doc = (pacing.INSTRUCTORS.parent / "INSTRUCTORS.zh.md").read_text(encoding="utf-8")
    page = presenter.talking_points(edition="zh")
    assert page == presenter.talking_points(zh_doc, edition="zh")
    assert _english_points(page) == [], _english_points(page)
    english = presenter.talking_points()
    plans = pacing.parse_plans(zh_doc)
    for name, (_s, _m, items, _what, fallback, who), block in _blocks(
            page, plans, lambda a, b, what, m: f"### {a}–{b} · {what}（{m} 分钟"):
        assert f"，{who}）" in block.split("\n", 1)[0] and f"- 核数不够时：{fallback}" in block
        for item in items:
            p = presenter.notebook_points(pacing.notebook_path(item))
            zh, lacking = presenter._zh_points(pacing.notebook_path(item), p)
            assert lacking == [] and len(zh.objectives) == len(p.objectives) > 0
            assert all(f"- {o}" in block for o in zh.objectives), (name, item)
            assert all(f"- {o}" not in page for o in p.objectives), "an English objective in the zh page"
            assert all(s in block for s in zh.sections) and all(t in block for t in zh.try_its)
    # the wrong case for the page check: the English page is full of English points
    assert len(_english_points(english)) > 20


def test_a_talking_point_without_its_chinese_is_rejected(monkeypatch):
    """A notebook whose catalog lacks the objectives' unit (or a heading's): the zh build refuses, in one line,
    naming the notebook, instead of showing the English point to a Chinese instructor."""
    from inferopt.i18n import build as i18n_build

    real = i18n_build.translations
    dropped = "chapters/04-optimization-order.ipynb"

    def lacking(nb, language="zh_CN"):
        table = dict(real(nb, language))
        if str(nb).endswith(dropped):
            for k in [k for k in table if k.startswith("- ") or k.startswith("## ")]:
                del table[k]
        return table

    monkeypatch.setattr(i18n_build, "translations", lacking)
    with pytest.raises(CourseError, match="a talking point without its Chinese: chapters/04-optimization-order.md: "
                                          "the objectives' list") as exc:
        presenter.talking_points(edition="zh")
    assert "\n" not in str(exc.value) and "'## " in str(exc.value)
    assert presenter.talking_points().startswith("# Talking points")      # the English page needs no catalog


# ---------------------------------------------------------------- slides
def test_slides_hold_every_marked_cell_and_a_missing_one_is_rejected():
    nb = nbformat.read(CHAPTERS / "04-optimization-order.ipynb", as_version=4)
    nb.cells[1].metadata.setdefault("tags", []).append("skip")          # an author's mark wins over the rule
    html = presenter.slides_html(nb)
    assert presenter.check_slides(nb, html) == []
    kinds = [presenter.slide_type(c) for c in nb.cells]
    assert kinds[0] == "slide" and kinds[1] == "skip" and "notes" in kinds and "-" in kinds
    assert f'id="cell-id={nb.cells[1].id}"' not in html                  # skipped: not on a slide
    assert '<aside class="notes">' in html                              # prose goes to the speaker's notes
    for cell, kind in zip(nb.cells, kinds, strict=True):
        if kind != "skip":
            assert f'id="cell-id={cell.id}"' in html
    # the wrong case: a deck that lost one marked cell (a code cell with its outputs)
    victim = next(c for c, k in zip(nb.cells, kinds, strict=True) if k == "-" and c.cell_type == "code")
    start = html.index(f'id="cell-id={victim.id}"')
    cut = html[:start] + html[start:].replace(f'id="cell-id={victim.id}"', 'id="cell-id=gone"', 1)
    [problem] = presenter.check_slides(nb, cut)
    assert victim.id in problem and "not in the slides" in problem
    nb.cells[2].metadata["slideshow"] = {"slide_type": "sideways"}
    with pytest.raises(CourseError, match="slide_type 'sideways'"):
        presenter.slide_type(nb.cells[2])


# ---------------------------------------------------------------- build, check, CLI, learner pack
def test_build_then_check_and_a_stale_build_is_refused(tmp_path):
    out = tmp_path / "presenter"
    run = subprocess.run([sys.executable, "-m", "inferopt", "presenter", "build", "--out", str(out), "--only",
                          "04,lab2"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert run.returncode == 0, run.stderr
    decks = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html"))
    assert decks == ["slides/04-optimization-order.html", "slides/lab2-memory-calculator.html",
                     "slides/zh/04-optimization-order.html", "slides/zh/lab2-memory-calculator.html"]
    assert sorted(p.name for p in out.glob("*.md")) == ["answer-key-lab2.md", "talking-points.md",
                                                        "talking-points.zh.md"]
    assert "YOUR CODE HERE" in (out / "slides" / "lab2-memory-calculator.html").read_text()   # the learner's lab
    assert presenter.check(out) == []
    key = out / "answer-key-lab2.md"
    key.write_text(key.read_text() + "\nan extra hint typed here\n")
    (out / "talking-points.md").write_text("# old points\n")
    (out / "talking-points.zh.md").unlink()
    bad = subprocess.run([sys.executable, "-m", "inferopt", "presenter", "check", "--out", str(out)],
                         capture_output=True, text=True, cwd=REPO_ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: 3 problem(s)")
    assert "answer-key-lab2.md differs" in bad.stdout and "talking-points.md is missing or differs" in bad.stdout
    assert "talking-points.zh.md is missing or differs from INSTRUCTORS.zh.md" in bad.stdout


def test_the_learner_pack_ships_no_answer_key(tmp_path):
    """The keys are written under build/ (ignored by git, so never in `git archive`, which is what the pack is), and
    from the unpacked pack (no solutions/) the command says in one line that it needs the instructor's tree."""
    assert presenter.OUT.relative_to(REPO_ROOT).parts[0] == "build"
    ignored = subprocess.run(["git", "check-ignore", "-q", "build/presenter/answer-key-lab1.md"], cwd=REPO_ROOT)
    assert ignored.returncode == 0, "build/ must stay ignored: a committed answer key would ship in the pack"
    pack = tmp_path / "pack.tar.gz"
    made = subprocess.run(["make", "--no-print-directory", "learner-pack", f"PACK={pack}"], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    with tarfile.open(pack) as tar:
        names = tar.getnames()
        assert not [n for n in names if "answer-key" in n or "/build/" in n or "/solutions/" in n]
        assert "inference-course/inferopt/room/presenter.py" in names
        tar.extractall(tmp_path, filter="data")
    tree = tmp_path / "inference-course"
    run = subprocess.run([sys.executable, "-m", "inferopt", "presenter", "build", "--out", str(tmp_path / "out")],
                         capture_output=True, text=True, cwd=tree, env={"PYTHONPATH": str(tree), "PATH": "/usr/bin"})
    assert run.returncode == 2 and run.stderr.count("\n") == 1, run.stderr
    assert "instructor's tree" in run.stderr and not (tmp_path / "out").exists()
