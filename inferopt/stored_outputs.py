"""What a notebook's stored outputs say: their text, and a measured figure read out of them.

A chapter that quotes another chapter's measurement reads it from that chapter's stored outputs
(the ones strict nbval compares) instead of typing it, so the quote cannot drift from the run;
``tests/test_prose_matches_outputs.py`` uses the same text to check the numbers markdown quotes.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import CHAPTERS, REPO_ROOT

_TEXT_KEYS = ("text/markdown", "text/plain")


def _path(notebook: str | Path) -> Path:
    p = Path(notebook)
    if not p.suffix:
        p = p.with_suffix(".ipynb")
    # a bare name is the English chapter's: its run holds the numbers (a zh page's outputs are their translation,
    # and a notebook of zh/chapters names its sibling by the same bare name)
    first = (CHAPTERS / p.name,) if p.parent == Path(".") else ()
    for cand in (*first, p, REPO_ROOT / p, CHAPTERS / p.name):
        if cand.is_file():
            return cand.resolve()
    matches = sorted(CHAPTERS.glob(f"{p.stem}*.ipynb"))
    if len(matches) == 1:
        return matches[0]
    raise CourseError(f"notebook {str(notebook)!r} not found: name a file under chapters/ "
                      "(e.g. '02b-decision-tree-live' or 'chapters/05b-load-test.ipynb')")


def output_texts(notebook: str | Path) -> list[str]:
    """The text of every stored output of ``notebook``, cell by cell (streams, plain text, markdown)."""
    path = _path(notebook)
    try:
        nb = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise CourseError(f"{path}: not a notebook ({e}); restore it with git") from None
    texts = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        parts = []
        for out in cell.get("outputs", []):
            if "text" in out:
                parts.append("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
            for key in _TEXT_KEYS:
                val = out.get("data", {}).get(key)
                if val is not None:
                    parts.append("".join(val) if isinstance(val, list) else val)
                    break
        texts.append("\n".join(parts))
    return texts


def markdown_outputs(notebook: str | Path) -> list[str]:
    """The ``display(Markdown(...))`` outputs of ``notebook``: prose generated from a cell's result."""
    nb = json.loads(_path(notebook).read_text())
    found = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            val = out.get("data", {}).get("text/markdown")
            if val is not None:
                found.append("".join(val) if isinstance(val, list) else val)
    return found


def stored_figure(notebook: str | Path, pattern: str, what: str) -> tuple[float, ...]:
    """The numbers captured by ``pattern`` (a regex with groups) in ``notebook``'s stored outputs.

    The first match wins; a missing match is one clear line naming the notebook and the sentence.
    """
    rx = re.compile(pattern)
    for text in output_texts(notebook):
        m = rx.search(text)
        if m:
            try:
                return tuple(float(g.replace(",", "")) for g in m.groups())
            except ValueError:
                break
    raise CourseError(f"{_path(notebook).relative_to(REPO_ROOT)}: its stored outputs do not state {what} "
                      f"(looked for /{pattern}/); re-execute that notebook, or update the pattern if its wording changed")


# A number printed with this many significant digits is a float's repr, not a rounded value: a computed
# float64 prints 15-17 digits, and those last digits are the machine's (figure_precision's docstring).
LONG_FLOAT_DIGITS = 10
_NUMBER = re.compile(r"(?<![\w.])-?(\d+\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_IGNORED = ("NBVAL_IGNORE_OUTPUT", "NBVAL_SKIP")


def _significant(number: str) -> int:
    return len(number.replace(".", "").lstrip("0"))


def _figure_bits(obj, where: str, found: list[str]) -> None:
    from inferopt.figure_precision import SIGNIFICANT_DIGITS

    if isinstance(obj, dict):
        if "bdata" in obj:
            found.append(f"{where}: a binary array ({obj.get('dtype')} bdata; the course stores plain lists)")
            return
        for key, val in obj.items():
            if not (where.endswith("layout") and key == "template"):   # plotly's own constants
                _figure_bits(val, f"{where}.{key}", found)
    elif isinstance(obj, list):
        for i, val in enumerate(obj):
            _figure_bits(val, f"{where}[{i}]", found)
    elif isinstance(obj, float) and _significant(repr(obj).split("e")[0].lstrip("-")) > SIGNIFICANT_DIGITS:
        found.append(f"{where}: {obj!r} (more than {SIGNIFICANT_DIGITS} significant digits)")


def _text_bits(text: str, where: str, found: list[str]) -> None:
    for m in _NUMBER.finditer(text):
        if _significant(m.group(1)) >= LONG_FLOAT_DIGITS:
            found.append(f"{where}: {m.group(0)} (an unrounded float's repr; print it with a format)")


def output_machine_bits(output: dict, where: str = "output") -> list[str]:
    """What in one stored output encodes the machine that computed it: binary float arrays or floats
    beyond the course's precision in figure/JSON data, long float reprs in text. Empty when clean."""
    found: list[str] = []
    for mime, val in output.get("data", {}).items():
        if mime.startswith("image/"):
            continue
        if mime.endswith("json"):
            _figure_bits(val, f"{where} {mime}", found)
        else:
            _text_bits("".join(val) if isinstance(val, list) else str(val), f"{where} {mime}", found)
    if "text" in output:
        text = output["text"]
        _text_bits("".join(text) if isinstance(text, list) else text, f"{where} {output.get('name', 'stream')}", found)
    return found


def machine_bits(notebook: str | Path | dict, compared_only: bool = True) -> list[str]:
    """Every stored output of ``notebook`` (a path or its JSON) that encodes the machine, one line each.

    ``compared_only``: only the outputs strict nbval compares (cells without ``NBVAL_IGNORE_OUTPUT`` or
    ``NBVAL_SKIP``); the others hold measurements, which no machine repeats anyway."""
    nb = notebook if isinstance(notebook, dict) else json.loads(_path(notebook).read_text())
    found: list[str] = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        src = "".join(cell.get("source", ""))
        if compared_only and any(tag in src for tag in _IGNORED):
            continue
        for out in cell.get("outputs", []):
            found += output_machine_bits(out, f"cell {i}")
    return found
