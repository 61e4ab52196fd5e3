"""Every number in the course's prose has a known origin (the strict number test, issue 29).

``tests/test_prose_matches_outputs.py`` checks the sentences that *say* they report a run. This
test checks every number in every markdown cell of ``chapters/`` and ``solutions/``, with or
without a trigger word, and the numbers typed into f-strings of code cells. A number passes when
it is one of:

1. **generated**: it repeats, at the precision written, a figure of the notebook's stored outputs
   (or of the notebook the sentence names: "chapter 2b", "06b", "lab 4"). A number written with a
   unit of measurement (5 GiB, 48 ms, ×1.37, 90 %) must be printed with that unit, unless it is
   distinctive (three significant digits or a decimal part: 65.78, 437, 1.58), which may match a
   bare figure of a table. A sentence printed by ``display(Markdown(...))`` is an output itself.
2. **a stated constant**: listed in ``assets/stated_constants.yaml`` (value, unit, what, source,
   and the notebooks it is stated in, by id: 05, 06b, lab2): the original chapter's figures, datasheet values, formula
   constants, the course's own settings. Each entry names its source; an entry no notebook uses
   fails (the list stays the list of what the prose states).
3. **an input of the code it explains**: a number of a fenced or inline code block of that markdown
   cell, or of the code cell just before or after it, comments removed (the answer "TTFT P95 250 ms"
   restates ``--ttft-p95-ms 250``; "a 70B model (130 GiB)" restates ``"model_weights_gib": 130.4``).
4. **inside a marked quotation of the original**: an erratum box's text from "The original says:"
   to "What is true", or a block quote that starts ``> **The original`` (the original's wrong figures
   are quoted on purpose).

Not numbers of the prose: inline code, links, URLs, math, HTML, headings' section numbers, section /
chapter / lab / step / pitfall / issue references, version strings, names with digits (H100, GPT-4,
SmolLM2-135M: a digit glued to letters or a hyphen), and counts or ordinals from 0 to 10 written
without a unit of measurement ("8 GPUs", "two runs", "step 3"). Exercise answers inside
``<details>`` are prose and are checked.

The f-string rule: a typed number with a unit inside the literal part of an f-string of a code cell
("the buffer is 5 GiB") prints as if it were measured, so it must be a stated constant too.

The test prints notebook, cell index and the number for each failure; the self-tests at the bottom
feed it chapter 05's stale sentences quoted in issue 29 against chapter 05's real stored outputs.
"""
from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

import pytest

from inferopt import assets
from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS

NOTEBOOKS = sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))

# units of measurement: a number followed by one of these is a measurement, not a count
UNITS = {
    "ms": "ms", "s": "s", "sec": "s", "seconds": "s", "second": "s", "min": "min", "minutes": "min",
    "minute": "min", "h": "h", "hours": "h", "hour": "h", "µs": "us", "us": "us",
    "%": "%", "×": "×", "x": "×",
    "GiB": "GiB", "GB": "GB", "MiB": "MiB", "MB": "MB", "KiB": "KiB", "kB": "KB", "KB": "KB", "TB": "TB",
    "TiB": "TiB", "B": "B", "bytes": "B", "byte": "B",
    "GB/s": "GB/s", "TB/s": "TB/s", "GiB/s": "GiB/s", "tok/s": "tok/s", "req/s": "req/s",
    "TFLOPS": "TFLOPS", "TFLOP/s": "TFLOPS", "PFLOPS": "PFLOPS", "FLOP/s": "FLOP/s", "FLOPs": "FLOP",
    "W": "W", "kW": "kW", "GHz": "GHz", "Gbit/s": "Gbit/s", "Gb/s": "Gbit/s",
    "USD": "USD", "$": "USD", "bit": "bit", "bits": "bit",
}
_UNIT_ALT = "|".join(sorted((re.escape(u) for u in UNITS if u not in "×x$"), key=len, reverse=True))
# a number: optional ×/x/~ before it, digits with thousands separators or a decimal part, an optional unit
NUMBER = re.compile(
    r"(?<![\w.§/#=:^-])(?P<x>[×x](?=\d))?(?P<v>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w.]*\d)"
    r"(?:(?P<glued>[×x%])(?!\w)|\s?(?P<u>" + _UNIT_ALT + r")(?![\w/]))?")
DROP = re.compile(
    r"```.*?```|`[^`]+`|\]\([^)]*\)|https?://\S+|\$\$.*?\$\$|\$[^$\n]+\$|<[^>]+>|"
    r"^#{1,6}\s+(?:\w+\s+)?[\d.]+[a-z]?\b|"
    r"(?:§|¶|pitfalls?\s|sections?\s|chapters?\s|Ch\.\s?|lab\s?|labs\s|steps?\s|branch(?:es)?\s|issues?\s|"
    r"#|PR\s|exercise\s|table\s|figure\s|part\s|round\s|vLLM\s|vllm[-\s]|version\s|v|Python\s|torch\s|"
    r"CUDA\s|sm_?|cc\s|capability\s|compute capability\s|et al\.,?\s|arXiv:?\s?|RFC\s)"
    r"\d+[a-z]?(?:[.\-–]\d+[a-z]?)*(?:\s?(?:and|to|or|,|–|-)\s?\d+[a-z]?(?:\.\d+)?)*|"
    r"\bx86(?:[-_]64)?\b|\b\d+(?:\.\d+)?[BMKT]\b|(?<=\()(?:19|20)\d\d\b|\b(?:19|20)\d\d(?=\))", re.S | re.I | re.M)
ORIGINAL_QUOTE = re.compile(r"The original says:.*?(?=What is true|\Z)|^>\s*\*\*The original.*?(?=\n(?!>)|\Z)",
                            re.S | re.I | re.M)
REFERENCE = re.compile(r"\bchapter\s+(\d{1,2}b?)\b|\b(0\d[b]?|[1-8]b)\b|\blab\s*(\d)\b", re.I)


@cache
def constants() -> tuple[dict, ...]:
    return tuple(assets.load("stated_constants.yaml")["constants"])


def _src(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _outputs_text(nb: dict) -> str:
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if "text" in out:
                parts.append("".join(out["text"]) if isinstance(out["text"], list) else out["text"])
            for key in ("text/markdown", "text/plain", "text/html"):
                val = out.get("data", {}).get(key)
                if val is not None:
                    parts.append("".join(val) if isinstance(val, list) else val)
    return "\n".join(parts)


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _unit(m: re.Match) -> str:
    if m.group("x"):
        return "×"
    u = m.group("glued") or m.group("u")
    return UNITS.get(u, "") if u else ""


def tokens(text: str) -> list[tuple[str, str, int]]:
    """(number as written, unit, position) for every number of ``text`` after dropping non-prose."""
    return [(m.group("v"), _unit(m), m.start()) for m in NUMBER.finditer(text)]


def printed(text: str) -> list[tuple[float, str, int]]:
    """(value, unit, decimals) of every number printed in stored outputs (no dropping: all of it counts)."""
    out = []
    for m in NUMBER.finditer(text):
        v = m.group("v")
        out.append((_value(v), _unit(m), len(v.split(".")[1]) if "." in v else 0))
    return out


def _is_count(written: str, unit: str) -> bool:
    return unit == "" and "." not in written and "," not in written and _value(written) <= 10


def _distinctive(written: str) -> bool:
    digits = written.replace(",", "").replace(".", "").lstrip("0")
    return len(digits) >= 3 or ("." in written and len(digits) >= 2)


_SCALE = {("s", "ms"): 1000.0, ("ms", "s"): 0.001, ("%", ""): 0.01, ("GB", "GiB"): 1.0737418, ("×", ""): 1.0}


def _same(written: str, unit: str, values: list[tuple[float, str, int]]) -> bool:
    q = _value(written)
    decimals = len(written.split(".")[1]) if "." in written else 0
    # a short number (5, 48, 0.9) is only a quote of the same printed figure: 5 GiB does not "round" 5.102 GiB
    tol = 0.5 * 10 ** -decimals + 1e-9 if _distinctive(written) else 1e-9
    for v, u, _ in values:
        if u == unit or ((u == "" or unit == "") and _distinctive(written)) or (unit == "×" and u == ""):
            if abs(v - q) <= tol:
                return True
        scale = _SCALE.get((unit, u))
        if scale is not None and unit != "×" and abs(v / scale - q) <= tol:
            return True
    return False


def _stated(written: str, unit: str, stem: str) -> dict | None:
    q = _value(written)
    for c in constants():
        if abs(float(c["value"]) - q) < 1e-9 and (c["unit"] or "") == unit and \
                (stem.split("-")[0] in c["in"] or "*" in c["in"]):
            return c
    return None


def _referenced(text: str) -> list[Path]:
    found = []
    for m in REFERENCE.finditer(text):
        if m.group(1) or m.group(2):
            key = (m.group(1) or m.group(2)).lower()
            key = key if key.startswith("0") else "0" + key
            found += sorted(CHAPTERS.glob(f"{key}-*.ipynb"))
        else:
            found += sorted(SOLUTIONS.glob(f"lab{m.group(3)}-*.ipynb"))
    return found


@cache
def _printed_of(path: Path) -> tuple:
    return tuple(printed(_outputs_text(json.loads(path.read_text()))))


def prose(markdown: str) -> str:
    """The markdown with everything that is not a number of the prose blanked (same length kept)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))   # noqa: E731
    return DROP.sub(blank, ORIGINAL_QUOTE.sub(blank, markdown))


CODE_IN_PROSE = re.compile(r"```[^\n]*\n(?P<block>.*?)```|`(?P<inline>[^`]+)`", re.S)


def code_numbers(code: str) -> list[float]:
    """The numbers written in code (comments removed: a result typed into a comment is not an input)."""
    code = re.sub(r"#.*$", "", code, flags=re.M)
    return [_value(n) for n in re.findall(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?", code)]


def command_inputs(markdown: str) -> list[float]:
    """The numbers of the commands and code a markdown cell shows."""
    return [n for m in CODE_IN_PROSE.finditer(markdown) for n in code_numbers(m.group("block") or m.group("inline"))]


def _restates(written: str, inputs: list[float]) -> bool:
    decimals = len(written.split(".")[1]) if "." in written else 0
    return any(abs(v - _value(written)) <= 0.5 * 10 ** -decimals + 1e-9 for v in inputs)


def fstring_literals(code: str) -> list[str]:
    """The literal parts of the f-strings in a code cell (what prints as typed)."""
    try:
        tree = ast.parse(re.sub(r"^\s*[%!].*$", "", code, flags=re.M))
    except SyntaxError:
        return []
    specs = {id(n.format_spec) for n in ast.walk(tree) if isinstance(n, ast.FormattedValue) and n.format_spec}
    return [part.value for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) and id(node) not in specs
            for part in node.values if isinstance(part, ast.Constant) and isinstance(part.value, str)]


def unbacked(stem: str, nb: dict, printed_of=_printed_of, used: set | None = None) -> list[str]:
    """'cell N: <number> in: <context>' for each number of the prose with no known origin."""
    own = printed(_outputs_text(nb))
    bad = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            text = _src(cell)
            clean = prose(text)
            refs = [v for p in _referenced(text) for v in printed_of(p)]
            inputs = command_inputs(text) + [n for j in (i - 1, i + 1) if 0 <= j < len(nb["cells"])
                                             and nb["cells"][j]["cell_type"] == "code"
                                             for n in code_numbers(_src(nb["cells"][j]))]
            for written, unit, pos in tokens(clean):
                if _is_count(written, unit):
                    continue
                c = _stated(written, unit, stem)
                if c is not None:
                    if used is not None:
                        used.add(id(c))
                    continue
                if _same(written, unit, own) or _same(written, unit, refs) or _restates(written, inputs):
                    continue
                ctx = re.sub(r"\s+", " ", text[max(0, pos - 60):pos + 40])
                bad.append(f"{stem} cell {i}: {written} {unit}".rstrip() + f" in: ...{ctx}...")
        elif cell["cell_type"] == "code":
            code = _src(cell)
            inputs = code_numbers(code)
            backed = lambda w, u, inputs=inputs: _restates(w, inputs) or _same(w, u, own)   # noqa: E731
            bad += [f"{stem} cell {i}: {w} {u} typed in an f-string: {lit.strip()[:80]!r}"
                    for lit in fstring_literals(code) for w, u in _typed(lit, stem, used)]
            bad += [f"{stem} cell {i}: {w} {u} typed in a code comment: {comment.strip()[:80]!r}"
                    for comment in code_comments(code) for w, u in _typed(comment, stem, used, also=backed)]
    return bad


def _typed(text: str, stem: str, used: set | None, also=lambda written, unit: False) -> list[tuple[str, str]]:
    """(number, unit) of each number with a unit in ``text`` (typed in code) that is neither a count, a stated
    constant (recorded in ``used``) nor backed by ``also``."""
    out = []
    for written, unit, _pos in tokens(prose(text)):
        if not unit or _is_count(written, unit) or also(written, unit):
            continue
        c = _stated(written, unit, stem)
        if c is None:
            out.append((written, unit))
        elif used is not None:
            used.add(id(c))
    return out


def code_comments(code: str) -> list[str]:
    """The comments of a code cell (review finding 27: a measured figure typed into a comment goes stale unseen);
    nbval markers and ``noqa`` are not comments a learner reads."""
    out = []
    for line in code.splitlines():
        m = re.search(r"(?:^|\s)#\s?(.*)$", line)
        if m and not re.match(r"(NBVAL_|noqa|type:)", m.group(1)):
            out.append(m.group(1))
    return out


def _id(p: Path) -> str:
    return str(p.relative_to(REPO_ROOT))


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_every_number_in_the_prose_has_a_known_origin(path):
    bad = unbacked(path.stem, _load(path))
    assert bad == [], f"{len(bad)} numbers with no origin (generate them, correct them to the stored output, " \
                      f"or list them in assets/stated_constants.yaml with a source):\n" + "\n".join(bad)


def test_every_stated_constant_is_stated_somewhere_and_names_its_source():
    used: set = set()
    for path in NOTEBOOKS:
        unbacked(path.stem, _load(path), used=used)
    unused = [f"{c['value']} {c['unit']} ({c['what']})" for c in constants() if id(c) not in used]
    assert unused == [], "assets/stated_constants.yaml lists constants no notebook states:\n" + "\n".join(unused)
    assert all(c["source"].strip() and c["what"].strip() for c in constants())


def test_a_constant_whose_source_is_a_notebooks_code_is_in_that_code():
    """Entries whose source starts with 'code:' name a setting of the notebooks that state them: check it is there."""
    bad = []
    for c in constants():
        if not c["source"].startswith("code:"):
            continue
        want = float(c["value"]) / (100 if c["unit"] == "%" else 1)
        for path in NOTEBOOKS:
            if path.stem.split("-")[0] in c["in"]:
                code = [n for cell in _load(path)["cells"] if cell["cell_type"] == "code" for n in code_numbers(_src(cell))]
                if not any(abs(n - want) < 1e-9 for n in code):
                    bad.append(f"{c['value']} {c['unit']}: {path.stem}'s code has no {want:g}")
    assert bad == [], "\n".join(bad)


def allow_list_sizes() -> dict[str, int]:
    """Stated constants used per notebook (the number the closing note reports)."""
    sizes = {}
    for path in NOTEBOOKS:
        used: set = set()
        unbacked(path.stem, _load(path), used=used)
        sizes[path.stem] = len(used)
    return sizes


# ---------------------------------------------------------------- the checker rejects wrong prose
def _nb(markdown: str, output: str = "", code: str = "") -> dict:
    return {"cells": [{"cell_type": "markdown", "source": markdown},
                      {"cell_type": "code", "source": code, "outputs": [{"output_type": "stream", "text": output}]}]}


CH05 = CHAPTERS / "05-end-to-end-deployment.ipynb"

# issue 29: chapter 05's prose and answers said these while its outputs said 1.58 GiB, 65.78 GB, 784, 200,734
STALE_05 = [
    "vLLM reserves a 5 GiB runtime buffer on each GPU.",
    "The original's figure is too low: ours is 62.5 GB.",
    "That leaves ~58 GiB per GPU for the KV cache.",
    "So about ~745 requests of 4K fit at once.",
    "The engine reports 190,782 blocks.",
]


@pytest.mark.parametrize("sentence", STALE_05)
def test_chapter_05s_stale_sentences_are_rejected_against_its_real_outputs(sentence):
    real = _load(CH05)
    fed = {"cells": real["cells"] + [{"cell_type": "markdown", "source": "A heading"},
                                     {"cell_type": "markdown", "source": sentence}]}
    bad = unbacked("05-end-to-end-deployment", fed)
    assert any(f"cell {len(real['cells']) + 1}:" in b for b in bad), bad


def test_a_typed_unit_in_an_f_string_is_rejected():
    code = 'buf = 5\nprint(f"the buffer is 5 GiB = {buf * 1.07:.2f} GB")'
    bad = unbacked("05-end-to-end-deployment", _nb("", "the buffer is 5 GiB = 5.37 GB", code))
    assert len(bad) == 1 and "5 GiB typed in an f-string" in bad[0]
    ok = 'print(f"the buffer is {buf} GiB = {buf * 1.07:.2f} GB")'
    assert unbacked("05-end-to-end-deployment", _nb("", "", ok)) == []


def test_what_passes_and_what_fails():
    out = "KV cache: 65.78 GB per GPU, 200,734 blocks; TPOT x1.37; step 4.8 ms"
    assert unbacked("x", _nb("Each GPU keeps 65.78 GB and 200,734 blocks; TPOT grew ×1.37.", out)) == []
    assert unbacked("x", _nb("A step takes 4.8 ms.", out)) == []
    assert len(unbacked("x", _nb("A step takes 4.9 ms.", out))) == 1
    assert len(unbacked("x", _nb("TPOT grew ×1.4 and ×2.", out))) == 1          # ×1.4 rounds ×1.37; ×2 is nowhere
    # a small number with a unit must be printed with that unit: a bare 4 elsewhere does not back "4 ms"
    assert len(unbacked("x", _nb("A step takes 4 ms.", "4 streams"))) == 1
    # counts, sections, code, names and the original's quoted figures are not numbers of the prose
    assert unbacked("x", _nb("Run 8 GPUs of an H100 node (§5.2, chapter 3, lab 4, `--max-num-seqs 256`).")) == []
    assert unbacked("x", _nb("**A1. The original says:** 62.5 GB per GPU. **What is true:** 65.78 GB.", out)) == []
    assert len(unbacked("x", _nb("**A1. The original says:** 62.5 GB. **What is true:** 62.5 GB.", out))) == 1
    # an exercise answer is prose too
    assert len(unbacked("x", _nb("<details><summary>Answer</summary>About 745 requests.</details>", out))) == 1


def test_a_measured_figure_typed_into_a_code_comment_is_rejected():
    """Review finding 27: chapter 06's comment said "hits were 1.38x, 1.50x and 1.50x the floor", a figure no cell
    printed. A comment's number with a unit must be printed by the notebook, written in the cell's code, or stated."""
    stale = _nb("", "hit rate 0.9", "floor = 2  # hits were 1.38x, 1.50x and 1.50x the floor")
    assert any("typed in a code comment" in b and "1.38" in b for b in unbacked("06-x", stale))
    printed_too = _nb("", "hits: 1.38x, 1.50x the floor", "floor = 2  # hits were 1.38x, 1.50x the floor")
    assert unbacked("06-x", printed_too) == []
    the_code = _nb("", "", "watch = Sampler(read, interval_s=0.5)  # read every 0.5 s")
    assert unbacked("06-x", the_code) == []
    marker = _nb("", "", "# NBVAL_IGNORE_OUTPUT\nx = 1")
    assert unbacked("06-x", marker) == []
