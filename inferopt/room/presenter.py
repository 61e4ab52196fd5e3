"""Presenter material from the course's own sources, never typed twice: ``python -m inferopt presenter build``
(``make presenter``) writes ``build/presenter/``:

- ``slides/<notebook>.html`` (and ``slides/zh/`` for the Chinese edition): a reveal.js deck per chapter and per
  lab (the learner's ``labs/`` version: no answers), exported by nbconvert's ``SlidesExporter`` (``jupyter
  nbconvert --to slides``) from the notebook's stored outputs. Each cell's slide type is its ``slideshow``
  metadata or a tag naming one (``slide``, ``subslide``, ``fragment``, ``notes``, ``skip``; ``nbtools clean``
  keeps tags), else the rule: a ``#``/``##`` heading starts a slide, a ``###`` heading a sub-slide, other prose
  becomes the speaker's notes (reveal's ``s`` key) and a code cell is shown with its outputs on the slide of its
  heading. ``check_slides`` refuses a deck that lacks a marked cell (every cell but ``skip`` is in the deck,
  found by its cell id).
- ``talking-points.md``: for each block of each day plan in INSTRUCTORS.md (:mod:`inferopt.pacing`), its time,
  who runs it and the fall-back, then each notebook's objectives (its "What you will be able to do" list), its
  "Try it" prompts and its sections. A teaching block whose notebooks give no objective is refused.
- ``talking-points.zh.md``: the same for the Chinese edition: the plans of INSTRUCTORS.zh.md, each notebook's
  objectives, prompts and sections as its catalog translates them (``locale/zh_CN/.../<notebook>.po``: the
  units the zh notebooks show), Chinese labels. A point whose unit has no translation is refused, so no English
  talking point reaches a Chinese instructor.
- ``answer-key-labN.md``: one page per lab from ``solutions/``: each cell's worked region (``BEGIN SOLUTION`` ...
  ``END SOLUTION``, code and prose; hidden tests left out) under its section, with the check that grades it.
  ``check_answer_key`` rebuilds the key from ``solutions/`` and refuses one that differs (edited by hand, or
  solutions changed since).

The learner pack (``make learner-pack``) ships none of it: ``build/`` is not committed and ``solutions/`` is
excluded, so the command says in one line that it needs the instructor's tree.

    python -m inferopt presenter build [--out DIR] [--only 00,lab 2]
    python -m inferopt presenter check [--out DIR]
"""
from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.nbtools import _BEGIN_CODE, _BEGIN_MD, _END_CODE, _END_MD  # the markers `make labs` cuts at
from inferopt.paths import REPO_ROOT, SOLUTIONS

OUT = REPO_ROOT / "build" / "presenter"
SLIDE_TYPES = ("slide", "subslide", "fragment", "-", "notes", "skip")
_OBJECTIVES = "**What you will be able to do**"
_KEY_HEAD = re.compile(r"^<!-- generated from (\S+) sha256 ([0-9a-f]{16}) by `python -m inferopt presenter build`")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _read_nb(path: Path):
    import nbformat

    if not path.exists():
        raise CourseError(f"{path.relative_to(REPO_ROOT)} is missing: the presenter material is built from the "
                          "instructor's tree (solutions/ included), not from the learner pack")
    return nbformat.read(path, as_version=4)


# ---------------------------------------------------------------- slides
def slide_type(cell) -> str:
    """The cell's slide type: its slideshow metadata, else a tag naming one, else the rule (module docstring)."""
    meta = (cell.get("metadata") or {}).get("slideshow", {}).get("slide_type")
    if meta:
        if meta not in SLIDE_TYPES:
            raise CourseError(f"cell {cell.get('id')}: slide_type {meta!r}; use one of {', '.join(SLIDE_TYPES)}")
        return meta
    tags = [t for t in (cell.get("metadata") or {}).get("tags", []) if t in SLIDE_TYPES]
    if tags:
        return tags[0]
    if cell["cell_type"] == "markdown":
        first = _source(cell).lstrip()
        if re.match(r"#{1,2} ", first):
            return "slide"
        if first.startswith("### "):
            return "subslide"
        return "notes"
    return "-"


def mark(nb):
    """A copy of ``nb`` with every cell's slide type in its slideshow metadata (what nbconvert reads)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        cell.metadata["slideshow"] = {"slide_type": slide_type(cell)}
    return nb


def slides_html(nb) -> str:
    from nbconvert import SlidesExporter

    html, _ = SlidesExporter(reveal_scroll=True).from_notebook_node(mark(nb))
    return html


def check_slides(nb, html: str) -> list[str]:
    """What the deck lacks: each marked cell (all but 'skip') by its cell id, and a section per slide."""
    problems = []
    marked = mark(nb)
    for i, cell in enumerate(marked.cells):
        kind = cell.metadata["slideshow"]["slide_type"]
        if kind == "skip":
            continue
        if not cell.get("id"):
            problems.append(f"cell {i} has no id (nbformat 4.5): run `make clean-notebooks`")
        elif f'id="cell-id={cell.id}"' not in html:
            problems.append(f"cell {i} ({kind}, id {cell.id}) is not in the slides")
    starts = sum(c.metadata["slideshow"]["slide_type"] in ("slide", "subslide") for c in marked.cells)
    if html.count("<section") < starts:
        problems.append(f"{starts} slides and sub-slides are marked, the deck has {html.count('<section')} sections")
    return problems


def decks() -> list[tuple[Path, str]]:
    """(notebook, deck path under the output folder): every chapter and every lab in its learner version (no
    answers), English in ``slides/``, the Chinese edition (``zh/``, generated from them) in ``slides/zh/``."""
    out = []
    for root, prefix in ((REPO_ROOT, "slides"), (REPO_ROOT / "zh", "slides/zh")):
        for nb in sorted((root / "chapters").glob("*.ipynb")) + sorted((root / "labs").glob("lab*.ipynb")):
            out.append((nb, f"{prefix}/{nb.stem}.html"))
    return out


# ---------------------------------------------------------------- talking points
@dataclass
class Points:
    title: str
    objectives: list[str]
    try_its: list[str]
    sections: list[str]


def notebook_points(path: Path) -> Points:
    """A notebook's talking points, read from its MyST twin (solutions' for a lab: the same text as labs')."""
    text = path.read_text()
    title = next((ln[2:].strip() for ln in text.splitlines() if ln.startswith("# ")), path.stem)
    objectives: list[str] = []
    if _OBJECTIVES in text:
        for ln in text.split(_OBJECTIVES, 1)[1].lstrip("\n").splitlines():
            if not ln.startswith("- "):
                break
            objectives.append(ln[2:].strip().rstrip(";."))
    heads = [ln for ln in text.splitlines() if re.match(r"#{2,3} ", ln)]
    try_its = [h.lstrip("#").strip() for h in heads if re.match(r"#{2,3} Try it\b", h)]
    sections = [h[3:].strip() for h in heads if h.startswith("## ")]
    return Points(title, objectives, try_its, sections)


def _zh_points(path: Path, points: Points, table: dict[str, str] | None = None) -> tuple[Points, list[str]]:
    """The notebook's talking points as the Chinese edition shows them: each heading and the objectives' list
    are whole translation units of the notebook's catalog (:mod:`inferopt.i18n.units`), looked up there; with
    what could not be (a unit without its translation, a list translated with another number of items)."""
    from inferopt.i18n import build as i18n_build
    from inferopt.i18n.units import blocks

    if table is None:
        table = i18n_build.translations(path.with_suffix(".ipynb"))
    units = [b for b in blocks(path.read_text())[0::2]]
    rel = path.relative_to(REPO_ROOT).as_posix() if path.is_relative_to(REPO_ROOT) else path.name
    missing: list[str] = []

    def heading(level: str, english: str) -> str:
        unit = next((u for u in units if u.strip() == f"{level} {english}"), None)
        zh = table.get(unit) if unit is not None else None
        if not zh or not zh.lstrip().startswith(level + " "):
            missing.append(f"{rel}: '{level} {english}'")
            return english
        return zh.strip()[len(level) + 1:].strip()

    objectives: list[str] = []
    if points.objectives:
        first = points.objectives[0]
        unit = next((u for u in units if any(ln.startswith("- ") and ln[2:].strip().rstrip(";.") == first
                                             for ln in u.splitlines())), None)
        zh = table.get(unit, "") if unit is not None else ""
        objectives = [ln[2:].strip().rstrip(";；.。") for ln in zh.splitlines() if ln.startswith("- ")]
        if len(objectives) != len(points.objectives):
            missing.append(f"{rel}: the objectives' list ({len(points.objectives)} items, "
                           f"{len(objectives)} translated)")
            objectives = points.objectives
    try_its = [heading("##" if f"## {t}" in (u.strip() for u in units) else "###", t) for t in points.try_its]
    return Points(heading("#", points.title), objectives, try_its,
                  [heading("##", s) for s in points.sections]), missing


# the page's own words, per edition (the plan rows and the notebooks' points come from their sources)
_LABELS = {
    "en": {"head": "# Talking points, block by block",
           "intro": "Generated by `python -m inferopt presenter build` from the day plans in INSTRUCTORS.md and "
                    "the notebooks' own front matter and headings; edit those, not this file.",
           "plan": "## Plan: {name} ({total})", "min": " ({minutes} min", "who": ", {who})", "end": ")",
           "cores": "- without enough cores: {fallback}", "able": "Learners leave able to:",
           "predict": "Ask them to predict first:", "sections": "Sections: ", "sep": "; ", "names": {}, "lab": "lab {n}"},
    "zh": {"head": "# 讲解要点（按时段）",
           "intro": "由 `python -m inferopt presenter build` 根据 INSTRUCTORS.zh.md 的时间表和各 notebook 中文版的"
                    "开头与标题生成。要改就改这些来源，不要改本文件。",
           "plan": "## 时间表：{name}（{total}）", "min": "（{minutes} 分钟", "who": "，{who}）", "end": "）",
           "cores": "- 核数不够时：{fallback}", "able": "学员学完能够：", "predict": "先让学员预测：",
           "sections": "各节：", "sep": "；", "names": {"half-day": "半天", "full-day": "一整天"}, "lab": "实验 {n}"},
}


def talking_points(text: str | None = None, edition: str = "en") -> str:
    """talking-points.md for every plan in INSTRUCTORS.md (``edition="zh"``: talking-points.zh.md from
    INSTRUCTORS.zh.md and the catalogs); CourseError for a teaching block without points, and in the zh edition
    for a point with no Chinese."""
    from inferopt import pacing

    zh = edition == "zh"
    source = pacing.INSTRUCTORS.with_name("INSTRUCTORS.zh.md") if zh else pacing.INSTRUCTORS
    text = source.read_text(encoding="utf-8") if text is None else text
    plans = pacing.parse_plans(text)
    if not plans:
        raise CourseError(f"{source.name} has no day plan (<!-- plan: NAME, total H:MM -->): nothing to present")
    lab = _LABELS[edition]
    out = [lab["head"], "", lab["intro"], ""]
    missing, untranslated = [], []
    for name, plan in plans.items():
        out += [lab["plan"].format(name=lab["names"].get(name, name), total=pacing.hm(plan["total"])), ""]
        for start, minutes, items, what, fallback, who in plan["rows"]:
            head = f"### {pacing.hm(start)}–{pacing.hm(start + minutes)} · {what}" + lab["min"].format(minutes=minutes)
            if items in (["break"], ["slack"]):
                out += [head + lab["end"], ""]
                continue
            out += [head + lab["who"].format(who=who), "", lab["cores"].format(fallback=fallback)]
            for item in items:
                path = pacing.notebook_path(item)
                p = notebook_points(path)
                if not p.objectives:
                    missing.append(f"plan {name}, block '{what}': {item} ({p.title}) states no "
                                   f"'{_OBJECTIVES}' list")
                if zh:
                    p, lacking = _zh_points(path, p)
                    untranslated += [x for x in lacking if x not in untranslated]
                label = re.sub(r"^lab\s*(\d)$", lambda m: lab["lab"].format(n=m.group(1)), item)
                name_line = p.title if p.title.startswith(label + " ") else f"{label} · {p.title}"
                out += ["", f"**{name_line}**", "", lab["able"]]
                out += [f"- {o}" for o in p.objectives]
                if p.try_its:
                    out += ["", lab["predict"]] + [f"- {t}" for t in p.try_its]
                out += ["", lab["sections"] + lab["sep"].join(p.sections)]
            out.append("")
    if missing:
        raise CourseError("a block without talking points: " + " | ".join(missing)
                          + "; add the notebook's objectives to its front matter")
    if untranslated:
        raise CourseError("a talking point without its Chinese: " + " | ".join(untranslated)
                          + "; translate the unit in the notebook's catalog (python -m inferopt.i18n update <nb>)")
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------- answer keys
def _regions(text: str, begin: re.Pattern, end: re.Pattern) -> list[str]:
    """The worked regions of a cell's text; an indented region comes with the ``def`` line it belongs to."""
    out, cur, head = [], None, None
    for line in text.split("\n"):
        if cur is None and begin.match(line):
            indented = line[:1] in (" ", "\t")
            cur = [head] if indented and head else []
        elif cur is not None and end.match(line):
            out.append("\n".join(cur))
            cur = None
        elif cur is not None:
            cur.append(line)
        elif re.match(r"(async )?def ", line):
            head = line
    if cur is not None:
        raise CourseError("a BEGIN SOLUTION without its END SOLUTION: fix the solution notebook")
    return out


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text).strip("\n")


def answer_key(solution: Path) -> str:
    """The one-page answer key of a lab, from its solution notebook alone."""
    nb = _read_nb(solution)
    rel = solution.relative_to(REPO_ROOT).as_posix()
    digest = hashlib.sha256(solution.read_bytes()).hexdigest()[:16]
    title = next((_source(c).lstrip()[2:].split("\n")[0].strip() for c in nb.cells
                  if c.cell_type == "markdown" and _source(c).lstrip().startswith("# ")), solution.stem)
    out = [f"<!-- generated from {rel} sha256 {digest} by `python -m inferopt presenter build`: "
           "do not edit; edit the solution and rebuild -->", f"# Answer key · {title}", ""]
    section, shown, pending = None, None, []
    n = 0

    def flush_check(cell):
        grade = (cell.get("metadata") or {}).get("nbgrader", {})
        if pending and grade.get("grade_id"):
            pts = grade.get("points", 0)
            out.append(f"*Graded by `{grade['grade_id']}` ({pts} point{'' if pts == 1 else 's'}).*")
            out.append("")
            pending.clear()

    for cell in nb.cells:
        src = _source(cell)
        if cell.cell_type == "markdown":
            for ln in src.splitlines():
                if re.match(r"#{2,3} ", ln):
                    section = ln.lstrip("#").strip()
            parts = _regions(src, _BEGIN_MD, _END_MD)
        else:
            flush_check(cell)
            parts = _regions(src, _BEGIN_CODE, _END_CODE)
        if not parts:
            continue
        if section != shown:
            out += [f"## {section}", ""]
            shown = section
        for part in parts:
            n += 1
            if cell.cell_type == "markdown":
                out += [f"> {ln}" if ln else ">" for ln in _dedent(part).split("\n")] + [""]
            else:
                out += ["```python", _dedent(part), "```", ""]
        pending.append(True)
    if n == 0:
        raise CourseError(f"{rel} has no BEGIN SOLUTION region: nothing to put in an answer key")
    return "\n".join(out).rstrip("\n") + "\n"


def key_name(solution: Path) -> str:
    m = re.match(r"lab(\d+)-", solution.name)
    if not m:
        raise CourseError(f"{solution.name}: a lab's solution is named labN-<topic>.ipynb")
    return f"answer-key-lab{m.group(1)}.md"


def check_answer_key(path: Path) -> list[str]:
    """[] when the key at ``path`` is exactly what its solution notebook gives now; else what differs."""
    text = path.read_text()
    m = _KEY_HEAD.match(text)
    if not m:
        return [f"{path.name}: no 'generated from solutions/...' first line: it was not built by "
                "`python -m inferopt presenter build`"]
    solution = REPO_ROOT / m.group(1)
    want = answer_key(solution)
    if text == want:
        return []
    if _KEY_HEAD.match(want).group(2) != m.group(2):
        return [f"{path.name}: {m.group(1)} changed since the key was built: rebuild it (make presenter)"]
    return [f"{path.name} differs from what {m.group(1)} gives (edited by hand?): rebuild it (make presenter); "
            "the worked answers are edited in solutions/ only"]


# ---------------------------------------------------------------- build and check
def _wanted(only: str | None, path: Path) -> bool:
    if not only:
        return True
    names = {x.strip().lower().replace(" ", "") for x in only.split(",") if x.strip()}
    key = path.name.split("-")[0].lower()
    return key in names


def build(out: Path = OUT, only: str | None = None) -> list[Path]:
    """Write the presenter material under ``out``; return the files written. ``only``: '00,lab2' (decks and keys
    of those notebooks; talking points always)."""
    solutions = sorted(SOLUTIONS.glob("lab*.ipynb"))
    if not solutions:
        raise CourseError("solutions/ has no lab: the presenter material is built from the instructor's tree, "
                          "not from the learner pack")
    written = []
    out.mkdir(parents=True, exist_ok=True)
    for nb_path, rel in decks():
        if not _wanted(only, nb_path):
            continue
        nb = _read_nb(nb_path)
        html = slides_html(nb)
        problems = check_slides(nb, html)
        if problems:
            raise CourseError(f"slides of {nb_path.relative_to(REPO_ROOT)}: {'; '.join(problems)}")
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(html)
        written.append(target)
    for edition, name in (("en", "talking-points.md"), ("zh", "talking-points.zh.md")):
        tp = out / name
        tp.write_text(talking_points(edition=edition), encoding="utf-8")
        written.append(tp)
    for sol in solutions:
        if not _wanted(only, sol):
            continue
        target = out / key_name(sol)
        target.write_text(answer_key(sol))
        written.append(target)
    return written


def check(out: Path = OUT) -> list[str]:
    """Every problem of the built material under ``out``: keys that drift, decks that lack a cell, stale points."""
    problems = []
    keys = sorted(out.glob("answer-key-lab*.md"))
    if not keys:
        problems.append(f"no answer key in {out}: run `make presenter`")
    for key in keys:
        problems += check_answer_key(key)
    sources = {rel: nb for nb, rel in decks()}
    for deck in sorted((out / "slides").rglob("*.html")):
        rel = deck.relative_to(out).as_posix()
        if rel not in sources:
            problems.append(f"{rel}: no notebook of that name any more")
            continue
        problems += [f"{rel}: {p}" for p in check_slides(_read_nb(sources[rel]), deck.read_text())]
    for edition, name, doc in (("en", "talking-points.md", "INSTRUCTORS.md"),
                               ("zh", "talking-points.zh.md", "INSTRUCTORS.zh.md")):
        tp = out / name
        if not tp.exists() or tp.read_text(encoding="utf-8") != talking_points(edition=edition):
            problems.append(f"{name} is missing or differs from {doc}'s plans: run `make presenter`")
    return problems


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("presenter", help="slides, talking points and answer keys from the course's sources",
                              description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["build", "check"])
    p.add_argument("--out", default=str(OUT), help="folder to write (default build/presenter)")
    p.add_argument("--only", default=None, help="decks and keys of these notebooks only, e.g. '00,lab2'")
    p.set_defaults(func=_run)


def _run(args) -> int:
    out = Path(args.out)
    if args.action == "build":
        files = build(out, args.only)
        n_decks = sum(f.suffix == ".html" for f in files)
        keys = sum(f.name.startswith("answer-key") for f in files)
        print(f"wrote {out}: {n_decks} slide decks, talking-points.md and .zh.md, {keys} answer keys")
        return 0
    problems = check(out)
    for p in problems:
        print("-", p)
    if problems:
        raise CourseError(f"{len(problems)} problem(s) in {out}; rebuild with `make presenter`")
    print(f"{out}: every answer key matches solutions/, every deck has its marked cells, the talking points follow "
          "the plans")
    return 0
