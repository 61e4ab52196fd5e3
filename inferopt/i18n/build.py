"""The Chinese edition's notebooks, regenerated from the English ones plus the translations.

Sources: every English notebook of ``chapters/`` and ``solutions/`` (their MyST twins hold the same
cells). Translations: one gettext file per notebook, ``locale/zh_CN/LC_MESSAGES/<folder>/<stem>.po``,
keyed by the English unit (``inferopt.i18n.units``). Output:

- ``zh/chapters/<stem>.ipynb``: the English notebook with its markdown translated; code cells and execution
  counts copied unchanged; the outputs are the English run's (which CI checks with strict nbval), translated
  through the runtime catalog's templates (``inferopt.i18n.outputs``: the English line's values carried into
  the Chinese template, the same lookup a learner's Chinese kernel applies when it re-runs the cell), figures'
  images re-rendered where a figure's text changed; relative links re-pointed from ``zh/``;
- ``zh/labs/<stem>.ipynb``: the translated solution turned into a lab exactly as ``make labs`` does;
- ``zh/solutions/<stem>.ipynb``: the translated worked solution itself, beside the lab, for a self-study learner
  to check against (instructor material: the learner pack leaves it out, like ``solutions/``).

``stale()`` lists every English unit whose translation is missing, fuzzy or empty (the drift check);
``update()`` merges a notebook's ``.po`` with its current English units (gettext's ``msgmerge``: a
changed unit keeps its old translation marked fuzzy, with the old English as ``#| msgid``).
"""
from __future__ import annotations

import copy
import difflib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from inferopt.i18n import ZH_ROOT, po_path
from inferopt.i18n.units import blocks, join, translatable
from inferopt.nbtools import _MD_STUB, _dumps, clean, make_lab
from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS

FIX_BUILD = "python -m inferopt.i18n build   (or: make zh)"
FIX_DIFF = "python -m inferopt.i18n diff {nb}"
FIX_UPDATE = "python -m inferopt.i18n update {nb}"
_LINK = re.compile(r"(\]\()([^)\s]+)(\))")
# the English file each generated page comes from, and where it lands in the Chinese edition
_RENAMED = {"README.md": "README.zh.md", "INSTRUCTORS.md": "INSTRUCTORS.zh.md"}


def sources() -> list[Path]:
    return sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))


def domain(nb: Path) -> str:
    """``chapters/01-technique-map`` for chapters/01-technique-map.ipynb (its .po's name)."""
    return str(Path(nb).resolve().relative_to(REPO_ROOT).with_suffix(""))


def source_of(name: str) -> Path:
    """The English notebook for a name the user gives (path, stem, .md twin or zh page)."""
    from inferopt.errors import CourseError

    p = Path(name)
    for cand in (p, REPO_ROOT / p):
        cand = cand.with_suffix(".ipynb")
        if cand.exists() and cand.resolve().parent in (CHAPTERS, SOLUTIONS):
            return cand.resolve()
    stem = p.stem
    for cand in sources():
        if cand.stem == stem:
            return cand
    starts = [c for c in sources() if c.stem.startswith(stem + "-")]   # "08", "lab1"
    if len(starts) == 1:
        return starts[0]
    raise CourseError(f"{name}: not an English notebook of chapters/ or solutions/; give one, e.g. "
                      "chapters/07-knowledge-map-and-tradeoffs.ipynb")


def english_home(nb: Path) -> str:
    """The folder a notebook is read in by learners: chapters, or labs for a solution."""
    return "labs" if Path(nb).resolve().parent == SOLUTIONS else "chapters"


def zh_target(nb: Path) -> Path:
    return ZH_ROOT / english_home(nb) / Path(nb).with_suffix(".ipynb").name


def zh_solution_target(nb: Path) -> Path | None:
    """``zh/solutions/<stem>.ipynb`` for a solution (the worked answers in Chinese); None for a chapter."""
    return ZH_ROOT / "solutions" / Path(nb).with_suffix(".ipynb").name if english_home(nb) == "labs" else None


def zh_pages() -> list[Path]:
    """Every built zh page a learner reads: each source's zh notebook, then the worked solutions in Chinese."""
    return [zh_target(nb) for nb in sources()] + [t for t in map(zh_solution_target, sources()) if t is not None]


def _load(nb: Path) -> dict:
    return json.loads(Path(nb).read_text(encoding="utf-8"))


def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


@dataclass
class Unit:
    nb: str          # chapters/01-technique-map.ipynb
    cell: int
    index: int       # n-th unit of the cell
    text: str


def notebook_units(nb: Path, data: dict | None = None) -> list[Unit]:
    data = data or _load(nb)
    rel = str(Path(nb).resolve().relative_to(REPO_ROOT))
    out = []
    for i, cell in enumerate(data["cells"]):
        if cell["cell_type"] == "markdown":
            units = [b for b in blocks(_src(cell))[0::2] if translatable(b)]
            out += [Unit(rel, i, k, t) for k, t in enumerate(units)]
    return out


# ------------------------------------------------------------------ the .po files
def po_file(nb: Path, language: str = "zh_CN"):
    import polib

    path = po_path(domain(nb), language)
    if path.exists():
        return polib.pofile(str(path), wrapwidth=0)
    po = polib.POFile(wrapwidth=0)
    po.metadata = {"Project-Id-Version": "inferopt course", "Language": language,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    return po


def translations(nb: Path, language: str = "zh_CN") -> dict[str, str]:
    """{English unit: translation} for the entries that are current (translated, not fuzzy, not obsolete)."""
    return {e.msgid: e.msgstr for e in po_file(nb, language)
            if e.msgstr.strip() and not e.obsolete and "fuzzy" not in e.flags}


def _closest(text: str, candidates: list[str]) -> str | None:
    best = difflib.get_close_matches(text, candidates, n=1, cutoff=0.5)
    return best[0] if best else None


def update(nb: Path, language: str = "zh_CN") -> dict:
    """Merge the notebook's .po with its current English units; returns counts (kept, fuzzy, new, obsolete)."""
    import polib

    po = po_file(nb, language)
    units = notebook_units(nb)
    by_id = {e.msgid: e for e in po if not e.obsolete}
    old = {e.msgid: e for e in po}
    wanted = list(dict.fromkeys(u.text for u in units))
    unused = [m for m in old if m not in wanted and old[m].msgstr.strip()]
    counts = {"kept": 0, "fuzzy": 0, "new": 0, "obsolete": 0}
    new = polib.POFile(wrapwidth=0)
    new.metadata = po.metadata
    for text in wanted:
        where = [f"{u.nb}:cell{u.cell}" for u in units if u.text == text]
        if text in by_id:
            e = by_id[text]
            counts["kept"] += 1
        else:
            prev = _closest(text, unused)
            if prev:
                e = polib.POEntry(msgid=text, msgstr=old[prev].msgstr, flags=["fuzzy"], previous_msgid=prev)
                counts["fuzzy"] += 1
            else:
                e = polib.POEntry(msgid=text, msgstr="")
                counts["new"] += 1
        e.occurrences = [(w, "") for w in dict.fromkeys(where)]
        e.obsolete = False
        new.append(e)
    for m in old:
        if m not in wanted and old[m].msgstr.strip():
            e = old[m]
            e.obsolete, e.occurrences = True, []
            new.append(e)
            counts["obsolete"] += 1
    path = po_path(domain(nb), language)
    path.parent.mkdir(parents=True, exist_ok=True)
    new.save(str(path))
    return counts


@dataclass
class Stale:
    unit: Unit
    why: str                 # new | changed | fuzzy | untranslated
    previous: str | None     # the English it was translated from, when known
    translation: str

    def line(self) -> str:
        first = self.unit.text.strip().split("\n")[0][:70]
        return (f"{self.unit.nb} cell {self.unit.cell} unit {self.unit.index} ({self.why}): {first!r}; "
                f"see: {FIX_DIFF.format(nb=self.unit.nb)}")


def stale(nb: Path, language: str = "zh_CN") -> list[Stale]:
    """Every English unit of ``nb`` without a current translation, with the English it was translated from."""
    po = po_file(nb, language)
    entries = {e.msgid: e for e in po if not e.obsolete}
    done = translations(nb, language)
    units = notebook_units(nb)
    current = {u.text for u in units}
    orphans = [e.msgid for e in po if e.msgstr.strip() and (e.obsolete or e.msgid not in current)]
    out = []
    for u in units:
        if u.text in done:
            continue
        e = entries.get(u.text)
        if e is not None and "fuzzy" in e.flags:
            out.append(Stale(u, "fuzzy", e.previous_msgid, e.msgstr))
        elif e is not None:
            out.append(Stale(u, "untranslated", None, ""))
        else:
            prev = _closest(u.text, orphans)
            trans = next((x.msgstr for x in po if x.msgid == prev), "") if prev else ""
            out.append(Stale(u, "changed" if prev else "new", prev, trans))
    return out


def diff_text(nb: Path, language: str = "zh_CN") -> str:
    """What changed in each stale unit: the English it was translated from against today's, and the translation."""
    lines = []
    for s in stale(nb, language):
        lines.append(f"== {s.unit.nb} cell {s.unit.cell} unit {s.unit.index}: {s.why}")
        if s.previous is not None:
            lines += difflib.unified_diff(s.previous.split("\n"), s.unit.text.split("\n"),
                                          "translated from", "English now", lineterm="")
        else:
            lines += ["+ " + ln for ln in s.unit.text.split("\n")]
        if s.translation:
            lines += ["-- the translation to update:", s.translation]
        lines.append("")
    if not lines:
        return f"{domain(nb)}: every unit has a current translation"
    lines.append(f"then update the .po ({po_path(domain(nb), language).relative_to(REPO_ROOT)}; "
                 f"{FIX_UPDATE.format(nb=domain(nb) + '.ipynb')} marks changed units fuzzy) and run {FIX_BUILD}")
    return "\n".join(lines)


# ------------------------------------------------------------------ building the Chinese notebooks
def _relink(text: str, home: str) -> str:
    """Relative link targets of an English page in ``home`` (chapters|labs), re-pointed from ``zh/<home>``."""
    def fix(m):
        target = m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^#|^/", target):
            return m.group(0)
        path, _, frag = target.partition("#")
        resolved = os.path.normpath(os.path.join(home, path))
        if resolved.startswith(("chapters/", "labs/")) and resolved.endswith(".ipynb"):
            new = path                                    # a page of the Chinese edition too
        else:
            new = os.path.relpath(_RENAMED.get(resolved, resolved), os.path.join("zh", home))
        return f"{m.group(1)}{new}{'#' + frag if frag else ''}{m.group(3)}"
    return _LINK.sub(fix, text)


def _note(nb: Path, is_lab: bool) -> str:
    rel = Path(nb).resolve().relative_to(REPO_ROOT)
    english = f"../../{'labs/' + rel.name if is_lab else rel}"
    if is_lab:
        return (f"> **中文版说明**：本实验由英文版 [`labs/{rel.name}`]({english}) 加翻译生成"
                f"（`python -m inferopt.i18n build`）。代码单元格与英文版逐字相同；自己运行时，打印的说明、"
                "交互控件和检查提示按中文模板显示（vLLM 自己的日志保持原样）。")
    return (f"> **中文版说明**：本页由英文版 [`{rel}`]({english}) 加翻译生成（`python -m inferopt.i18n build`）。"
            "代码单元格与英文版逐字相同；保存的输出来自英文版的同一次运行（CI 以严格的 nbval 复核），"
            "按同一套中文模板填入这次运行的数值。自己运行时，打印的说明、图表、交互控件和检查提示同样显示中文；"
            "vLLM 自己的日志保持原样。")


def _stored_images(target: Path) -> dict[str, dict]:
    """{figure key: its image output fields} of the Chinese notebook now on disk (images are kept, not redrawn)."""
    from inferopt.nbtools import PLOTLY_MIME, figure_key

    if not Path(target).exists():
        return {}
    out = {}
    for cell in _load(target)["cells"]:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if PLOTLY_MIME in data and "image/png" in data:
                out[figure_key(data[PLOTLY_MIME])] = {"png": data["image/png"], "meta": o.get("metadata", {})}
    return out


def _translated_outputs(cell: dict, old_png: dict[str, dict]) -> None:
    """A code cell's outputs in Chinese (``outputs.translate_outputs``); a figure whose text changed keeps the
    image drawn for it before if there is one, else loses its stale English image (``build`` draws it)."""
    from inferopt import i18n
    from inferopt.i18n import outputs
    from inferopt.nbtools import PLOTLY_MIME, figure_key

    before = os.environ.get(i18n.ENV)
    os.environ[i18n.ENV] = "zh"
    try:
        outputs.translate_outputs(cell)
    finally:
        if before is None:
            os.environ.pop(i18n.ENV, None)
        else:
            os.environ[i18n.ENV] = before
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        if PLOTLY_MIME not in data or "image/png" not in data:
            continue
        key = figure_key(data[PLOTLY_MIME])
        if o.get("metadata", {}).get("inferopt", {}).get("png_of") == key:
            continue
        if key in old_png:
            data["image/png"] = old_png[key]["png"]
            o["metadata"] = copy.deepcopy(old_png[key]["meta"])
        else:
            del data["image/png"]
            o.get("metadata", {}).pop("inferopt", None)


def translate_notebook(nb: Path, table: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    """The Chinese form of an English notebook (a dict) and the English units left untranslated."""
    data = _load(nb)
    table = translations(nb) if table is None else table
    home = english_home(nb)
    out = copy.deepcopy(data)
    out.get("metadata", {}).pop("jupytext", None)
    missing, first = [], True
    old_png = _stored_images(zh_target(nb))
    for cell in out["cells"]:
        if cell["cell_type"] == "code":
            _translated_outputs(cell, old_png)
            continue
        if cell["cell_type"] != "markdown":
            continue
        parts = blocks(_src(cell))
        for i in range(0, len(parts), 2):
            b = parts[i]
            if translatable(b):
                if b in table:
                    parts[i] = table[b]
                else:
                    missing.append(b)
            parts[i] = _relink(parts[i], home)
        text = join(parts)
        if first:
            head, sep, rest = text.partition("\n")
            text = f"{head}\n\n{_note(nb, home == 'labs')}" + (f"\n{rest}" if sep else "")
            first = False
        cell["source"] = text
    return clean(out), missing


def expected(nb: Path) -> tuple[str, list[str]]:
    """The text of the Chinese notebook ``build`` writes for ``nb``, and the units left in English."""
    data, missing = translate_notebook(nb)
    if english_home(nb) == "labs":
        from inferopt.i18n import catalog

        data = make_lab(data, where=domain(nb), md_stub=catalog("zh_CN").get(_MD_STUB, _MD_STUB))
    return _dumps(data), missing


def build(paths=None) -> tuple[list[Path], dict[str, int]]:
    """Write the Chinese notebooks; returns (written files, {notebook: units still in English})."""
    written, left = [], {}
    for nb in paths or sources():
        text, missing = expected(nb)
        pairs = [(zh_target(nb), text)]
        if zh_solution_target(nb) is not None:
            pairs.append((zh_solution_target(nb), _dumps(translate_notebook(nb)[0])))
        for target, body in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text(encoding="utf-8") != body:
                target.write_text(body, encoding="utf-8")
                written.append(target)
                if target == zh_target(nb):   # the worked solution keeps its figures as data (JupyterLab draws them)
                    _draw_images(target)
        if missing:
            left[domain(nb)] = len(missing)
    return written, left


def _draw_images(target: Path) -> None:
    """Draw the image of every figure whose Chinese text has none yet (its English one was stale)."""
    from inferopt.nbtools import PLOTLY_MIME, add_images

    data = _load(target)
    if any(PLOTLY_MIME in o.get("data", {}) and "image/png" not in o.get("data", {})
           for c in data["cells"] for o in c.get("outputs", [])):
        if add_images(data):
            target.write_text(_dumps(clean(data)), encoding="utf-8")


def out_of_date() -> list[str]:
    """Chinese notebooks that differ from what ``build`` writes now (or are missing / have no source)."""
    problems = []
    for nb in sources():
        target = zh_target(nb)
        if not target.exists():
            problems.append(f"{target.relative_to(REPO_ROOT)} is missing; fix: {FIX_BUILD}")
        elif target.read_text(encoding="utf-8") != expected(nb)[0]:
            problems.append(f"{target.relative_to(REPO_ROOT)} is not what the English notebook and its .po give; "
                            f"fix: {FIX_BUILD}")
    for nb in sources():
        target = zh_solution_target(nb)
        if target is not None and (not target.exists()
                                   or target.read_text(encoding="utf-8") != _dumps(translate_notebook(nb)[0])):
            problems.append(f"{target.relative_to(REPO_ROOT)} is not the translated worked solution; fix: {FIX_BUILD}")
    names = {zh_target(nb).name for nb in sources()}
    for folder in ("chapters", "labs", "solutions"):
        for extra in sorted((ZH_ROOT / folder).glob("*.ipynb")):
            if extra.name not in names:
                problems.append(f"{extra.relative_to(REPO_ROOT)} has no English source; delete it")
    return problems
