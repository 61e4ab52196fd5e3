"""What a learner reads, measured: each notebook's main text, its length, its rhythm, and the order of its concepts.

The *main text* of a notebook is its markdown outside ``<details>`` blocks (the "Why we trust this" evidence and the
exercise answers, one click away), without fenced code, inline code, link targets, HTML comments and tags. From it:

- :func:`stats`: main-text words, learner-visible code cells, words of text per code cell, the longest code cell;
- :func:`spine_problems`: the parts of the teaching spine (``../shared/CHAPTER.md``) a notebook lacks: its outcomes,
  prerequisites, a prediction before a cell, exercises (chapters) and a closing "What to remember";
- :func:`concept_order_problems`: every use of a concept of ``assets/concepts.yaml`` in the main text of a notebook
  that comes, in course order, before the notebook that defines it.

Course order (:func:`course_order`): the chapters by file name (00, 00a, 00b, 01, ...), then the labs. A lab's
learner-visible cells are those of ``labs/`` (what the learner gets); its text is the same as its solution's.

    python -m inferopt.reading            # the table of every notebook, and the concept-order problems
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from inferopt import assets
from inferopt.paths import CHAPTERS, LABS, SOLUTIONS

MAX_MAIN_WORDS = 2500          # one sitting (issue 47: "aim at most ~2,500 words outside those blocks")
MAX_CELL_LINES = 40            # no learner-visible code cell longer (most stay under ~25)
MAX_WORDS_PER_CELL = 100       # text and cells alternate (LLMs-from-scratch: 35-86 words of text per code cell)
REMEMBER_LINES = (4, 8)        # "What to remember": a few lines, the one command or formula to keep

_DETAILS = re.compile(r"<details\b.*?</details>", re.S | re.I)
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?^[ \t]*\1[ \t]*$", re.S | re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_INLINE = re.compile(r"`[^`\n]*`")
_LINK_TARGET = re.compile(r"\]\([^)\s]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>\n]*>")
_WORD = re.compile(r"[A-Za-z0-9\u4e00-\u9fff][\w'’\-]*")


def notebook_id(path) -> str:
    """'00' for chapters/00-start-here.ipynb, '00a' for 00a-primer, 'lab1' for solutions/lab1-decision-tree."""
    return Path(path).stem.split("-")[0]


def course_order() -> list[Path]:
    """The English notebooks a learner reads, in order: chapters, then labs (their single source, solutions/)."""
    return sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))


def main_text(markdown: str) -> str:
    """The markdown a learner reads on the main path: no <details> blocks, code, link targets, comments or tags."""
    text = _DETAILS.sub(" ", markdown)
    text = _FENCE.sub(" ", text)
    text = _COMMENT.sub(" ", text)
    text = _INLINE.sub(" ", text)
    text = _LINK_TARGET.sub("]", text)
    return _TAG.sub(" ", text)


def words(text: str) -> int:
    return len(_WORD.findall(text))


def _cells(path) -> list[dict]:
    return json.loads(Path(path).read_text(encoding="utf-8"))["cells"]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def learner_notebook(path) -> Path:
    """The notebook whose code cells a learner sees: labs/ for a solution, the chapter itself otherwise."""
    p = Path(path)
    return LABS / p.name if p.parent.resolve() == SOLUTIONS.resolve() and (LABS / p.name).exists() else p


@dataclass(frozen=True)
class Stats:
    notebook: str
    words: int                 # main-text words
    code_cells: int            # learner-visible code cells
    words_per_cell: float
    longest: int               # lines of the longest learner-visible code cell
    longest_cell: int          # its index in the notebook


def stats(path) -> Stats:
    md = "\n\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "markdown")
    n_words = words(main_text(md))
    code = [(i, len(_source(c).splitlines())) for i, c in enumerate(_cells(learner_notebook(path)))
            if c["cell_type"] == "code"]
    longest_cell, longest = max(code, key=lambda x: x[1]) if code else (-1, 0)
    return Stats(notebook_id(path), n_words, len(code), round(n_words / max(1, len(code)), 1), longest, longest_cell)


_REMEMBER = re.compile(r"^##[ \t]+What to remember[ \t]*$", re.M)
_ANY_H2 = re.compile(r"^##[ \t]+(?!(?:Where next|Next)\b)\S.*$", re.M)    # a "Where next" pointer may follow


def spine_problems(path) -> list[str]:
    """What a notebook lacks of the teaching spine, one line each (empty when it has it all).

    In the main text (outside <details>): ``**What you will be able to do**`` and ``**Prerequisites**``; at least
    one paragraph that starts with ``**Predict`` (the learner commits to an answer before a cell runs); a
    ``## Exercises`` section (chapters; a lab is the exercise); and, as its last section, ``## What to remember``
    with 4-8 bullet lines (a ``## Where next`` pointer may follow it)."""
    nb = notebook_id(path)
    md = "\n\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "markdown")
    body = _FENCE.sub(" ", _DETAILS.sub(" ", md))
    out = []
    for mark, what in (("**What you will be able to do**", "its outcomes"),
                       ("**Prerequisites**", "what it builds on")):
        if mark not in body:
            out.append(f"{nb}: no {mark} ({what}, near the top)")
    if not re.search(r"^\*\*Predict", body, re.M):
        out.append(f"{nb}: no paragraph starting **Predict (a question the learner answers before a cell runs)")
    if not nb.startswith("lab") and not re.search(r"^##[ \t]+Exercises\b", body, re.M):
        out.append(f"{nb}: no ## Exercises section (predict-then-measure, needing only what came before)")
    m = _REMEMBER.search(body)
    if not m:
        out.append(f"{nb}: no closing ## What to remember section ({REMEMBER_LINES[0]}-{REMEMBER_LINES[1]} bullets)")
    else:
        rest = body[m.end():]
        later = _ANY_H2.search(rest)
        section = re.split(r"^##[ \t]", rest, maxsplit=1, flags=re.M)[0]
        bullets = [ln for ln in section.splitlines() if ln.startswith("- ")]
        if later:
            out.append(f"{nb}: ## What to remember is not the last section ({later.group(0)!r} follows it)")
        if not REMEMBER_LINES[0] <= len(bullets) <= REMEMBER_LINES[1]:
            out.append(f"{nb}: ## What to remember has {len(bullets)} bullet lines "
                       f"(want {REMEMBER_LINES[0]}-{REMEMBER_LINES[1]})")
    return out


def concepts() -> list[dict]:
    return assets.load("concepts.yaml")["concepts"]


def _rx(concept: dict) -> re.Pattern:
    return re.compile("|".join(f"(?:{p})" for p in concept["patterns"]), 0 if concept.get("case") else re.I)


def concept_order_problems(notebooks: list[tuple[str, list[str]]], index: list[dict] | None = None) -> list[str]:
    """Uses of a concept before the notebook that defines it, in the order given.

    ``notebooks``: (id, [markdown cell texts]) in course order. Answers one line per problem: the term, the place
    (notebook id, cell index, the words around it) and the notebook that defines it; also a problem when a
    concept's defining notebook is not in the course or never uses the concept."""
    index = concepts() if index is None else index
    order = [nb for nb, _ in notebooks]
    out = []
    for c in index:
        rx, home = _rx(c), c["defined_in"]
        if home not in order:
            out.append(f"{c['term']}: defined_in {home!r} is not a notebook of the course ({', '.join(order)})")
            continue
        home_text = "\n".join(main_text(t) + "\n" + t for t in dict(notebooks)[home])
        if not rx.search(home_text):
            out.append(f"{c['term']}: its defining notebook {home} never uses it (patterns {c['patterns']})")
        for nb, cells in notebooks[:order.index(home)]:
            for i, text in enumerate(cells):
                m = rx.search(main_text(text))
                if m:
                    body = main_text(text)
                    around = " ".join(body[max(0, m.start() - 50):m.end() + 50].split())
                    out.append(f"{c['term']!r} used in {nb} (markdown cell {i}: ...{around}...) before "
                               f"{home}, which defines it: define it there, move the use, or put it in a "
                               "<details> block")
    return out


def course_markdown() -> list[tuple[str, list[str]]]:
    """(id, markdown cells) of every notebook in course order; a markdown cell's index counts markdown cells only."""
    return [(notebook_id(p), [_source(c) for c in _cells(p) if c["cell_type"] == "markdown"]) for p in course_order()]


def main() -> int:
    print(f"{'notebook':9s} {'words':>6s} {'cells':>5s} {'w/cell':>7s} {'longest':>7s}")
    for p in course_order():
        s = stats(p)
        print(f"{s.notebook:9s} {s.words:6d} {s.code_cells:5d} {s.words_per_cell:7.1f} {s.longest:7d}")
    spine = [line for p in course_order() for line in spine_problems(p)]
    print("\nspine:", "ok" if not spine else "", *spine, sep="\n  ")
    problems = concept_order_problems(course_markdown())
    print("\nconcept order:", "ok" if not problems else "", *problems, sep="\n  ")
    return 1 if problems or spine else 0


if __name__ == "__main__":
    raise SystemExit(main())
