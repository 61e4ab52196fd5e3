"""Which notebooks quote another notebook's stored outputs, and whether each quote is from that run.

Chapters 01, 02 and 04 quote chapter 2b's live measurements through :mod:`inferopt.stored_outputs`.
When 2b is re-executed its stored outputs change, and a reader executed before that still shows the
old figures: strict nbval catches it, but only when the reader's turn comes in the suite (fresh-clone
CI, stop 36: 54 minutes in). This module makes the dependency explicit:

- :func:`quoted_sources` reads a notebook's code for the calls that read another notebook
  (``stored_figure("02b-...", ...)``, ``output_texts(...)``, ``markdown_outputs(...)``);
- :func:`record` (called by ``python -m inferopt.nbtools run`` when it executes a reader) stores, in
  the reader's notebook metadata, a fingerprint of each source's stored outputs as they were read;
- :func:`stale` compares those fingerprints with the sources' outputs now, in milliseconds, so
  ``make check`` and ``tests/test_stored_quotes.py`` name a stale reader and the command to fix it;
- :func:`readers` lets ``nbtools run`` re-execute a notebook's readers right after it.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS
from inferopt.stored_outputs import _path, output_texts

META_KEY = "inferopt"          # notebook metadata: {"quotes": {"chapters/02b-....ipynb": fingerprint}}
_READ_CALL = re.compile(r"\b(?:stored_figure|output_texts|markdown_outputs)\(\s*[\"']([^\"']+)[\"']")


def _rel(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def notebooks() -> list[Path]:
    """The stored English notebooks a quote can live in (the Chinese copies share their code)."""
    return sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))


def quoted_sources(notebook: Path | dict) -> list[Path]:
    """The notebooks whose stored outputs ``notebook``'s code cells read, in order of first use."""
    nb = notebook if isinstance(notebook, dict) else _load(Path(notebook))
    found: list[Path] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for m in _READ_CALL.finditer("".join(cell.get("source", ""))):
            src = _path(m.group(1))
            if src not in found:
                found.append(src)
    return found


def fingerprint(notebook: Path) -> str:
    """A hash of every stored text output of ``notebook``: what a quote reads (figures and prose alike)."""
    return hashlib.sha256(json.dumps(output_texts(notebook)).encode()).hexdigest()[:16]


def record(nb: dict, sources: list[Path]) -> dict:
    """``nb`` with the fingerprints of ``sources``' outputs (as read now) in its metadata; no sources: none."""
    meta = {k: v for k, v in nb.get("metadata", {}).items() if k != META_KEY}
    if sources:
        meta[META_KEY] = {"quotes": {_rel(s): fingerprint(s) for s in sources}}
    return {**nb, "metadata": meta}


def stale(paths=None) -> list[str]:
    """One line per reader whose stored quotes are not from its sources' current outputs."""
    problems, now = [], {}          # now: each source's fingerprint, computed once however many notebooks quote it
    for path in paths or notebooks():
        nb = _load(path)
        recorded = nb.get("metadata", {}).get(META_KEY, {}).get("quotes", {})
        for src in quoted_sources(nb):
            fix = f"re-execute it: make run-notebooks NB={_rel(path)}"
            if _rel(src) not in recorded:
                problems.append(f"{_rel(path)} quotes {_rel(src)}'s stored outputs but holds no record of which "
                                f"run it read; {fix}")
            elif recorded[_rel(src)] != now.setdefault(src, fingerprint(src)):
                problems.append(f"{_rel(path)} quotes an older run of {_rel(src)} (its outputs changed since); {fix}")
    return problems


def readers(source: Path, among=None) -> list[Path]:
    """The notebooks that quote ``source``'s stored outputs."""
    source = source.resolve()
    return [p for p in (among or notebooks()) if source in quoted_sources(p)]


def with_readers(paths: list[Path]) -> list[Path]:
    """``paths`` followed by every notebook that quotes one of them (transitively), each after what it reads."""
    quotes = {p.resolve(): quoted_sources(p) for p in notebooks()}     # every notebook read once
    order = [p.resolve() for p in paths]
    i, moves = 0, 0
    while i < len(order):
        for r in (p for p, srcs in quotes.items() if order[i] in srcs):
            if r not in order:
                order.append(r)
            elif order.index(r) < i and moves < len(order) ** 2:   # it would run before this source: move it
                order.remove(r)
                order.append(r)
                i, moves = i - 1, moves + 1
        i += 1
    return order


if __name__ == "__main__":   # the notebooks to execute for the ones named: `python -m inferopt.stored_quotes NB...`
    import sys

    print(" ".join(_rel(p) for p in with_readers([Path(a) for a in sys.argv[1:]])))
