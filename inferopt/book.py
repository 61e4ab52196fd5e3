"""The static HTML edition of the course: ``make book`` (``python -m inferopt.book``).

Built with Sphinx + myst-nb + sphinx-book-theme from the notebooks' **stored** outputs (nothing is
re-executed: CI's strict nbval is what keeps those outputs honest). Steps:

1. stage: copy the chapters and labs in course order (``inferopt.course_map``) into the build
   folder, and give every plotly output an HTML ``<div>`` drawn by a local ``plotly.min.js`` (from
   the installed plotly package), so figures stay interactive; the stored PNG stays as fallback;
2. ``sphinx-build -b html`` with ``book/conf.py``; no theme or script is downloaded;
3. verify: every page exists and every stored figure is on its page (``check_book``).

Output: ``build/book/html/index.html``, and the Chinese edition (中文版, the notebooks of ``zh/`` that
``python -m inferopt.i18n build`` writes) in ``build/book/html/zh/index.html``, built the same way with
Sphinx's ``language = "zh_CN"`` (its own translations, offline); each index links to the other.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from inferopt.course_map import course_map
from inferopt.errors import CourseError
from inferopt.nbtools import PLOTLY_MIME
from inferopt.paths import REPO_ROOT

BOOK_SRC = REPO_ROOT / "book"
DEFAULT_OUT = REPO_ROOT / "build" / "book"
FIG_CLASS = "inferopt-figure"


def _fig_html(fig_json: dict, div_id: str) -> str:
    import plotly.io as pio

    fig = pio.from_json(json.dumps(fig_json), skip_invalid=True)
    html = pio.to_html(fig, include_plotlyjs=False, full_html=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})
    return f'<div class="{FIG_CLASS}" data-figure="{div_id}">{html}</div>'


def stage_notebook(src: Path, dst: Path) -> int:
    """Copy one notebook, adding an interactive HTML version of each plotly output; returns the figure count."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    n = 0
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            data = out.get("data", {})
            if PLOTLY_MIME in data:
                n += 1
                data["text/html"] = _fig_html(data[PLOTLY_MIME], f"{src.stem}-cell{i}-fig{n}")
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(nb), encoding="utf-8")
    return n


EDITIONS = {
    "en": {"intro": ("The static edition of the course: every page shows the outputs stored in the notebooks, "
                     "as CI re-ran and checked them. To run the cells yourself, open the notebooks in JupyterLab "
                     "(`make lab`)."),
           "chapters": "Chapters", "labs": "Labs (to do in JupyterLab)",
           "other": '<a href="zh/index.html">中文版 (Chinese edition)</a>'},
    "zh": {"intro": ("课程的静态版本：每一页显示笔记中保存的输出（来自英文版的运行，CI 重新运行并检验过，所以打印的文字是英文）。"
                     "想自己运行这些单元，请在 JupyterLab 中打开笔记（`make lab EDITION=zh`）。"),
           "chapters": "各章", "labs": "练习（在 JupyterLab 中完成）",
           "other": '<a href="../index.html">English edition</a>'},
}


def _source_of(row: dict, edition: str) -> Path:
    """The notebook a course-map row is built from in an edition (``zh/chapters/...`` for the Chinese one)."""
    return Path(row["path"]) if edition == "en" else Path("zh") / row["path"]


def stage(out: Path = DEFAULT_OUT, edition: str = "en") -> dict:
    """Prepare ``out/src``: conf.py, static files, an index in course order, the notebooks."""
    import plotly

    from inferopt.course_map import _title

    words = EDITIONS[edition]

    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    (src / "_static").mkdir(parents=True)
    shutil.copy(BOOK_SRC / "conf.py", src / "conf.py")
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", src / "_static" / "plotly.min.js")
    pages = []
    for row in course_map():
        rel = Path(row["path"])
        path = REPO_ROOT / _source_of(row, edition)
        if not path.exists():
            raise CourseError(f"{_source_of(row, edition)} is missing: run python -m inferopt.i18n build (make zh)")
        figures = stage_notebook(path, src / rel)
        pages.append({"kind": row["kind"], "title": row["title"] if edition == "en" else _title(path),
                      "source": row["path"], "page": str(rel.with_suffix(".html")), "figures": figures})
    chapters = [p for p in pages if p["kind"] == "chapter"]
    labs = [p for p in pages if p["kind"] == "lab"]
    readme = (REPO_ROOT / ("README.md" if edition == "en" else "README.zh.md")).read_text(encoding="utf-8").splitlines()
    title = next((ln[2:] for ln in readme if ln.startswith("# ")), "The course")
    index = [f"# {title}", "", words["intro"], "", words["other"], "",
             "```{toctree}", f":caption: {words['chapters']}", ":maxdepth: 1", "",
             *[str(Path(p["source"]).with_suffix("")) for p in chapters], "```", ""]
    if labs:
        index += ["```{toctree}", f":caption: {words['labs']}", ":maxdepth: 1", "",
                  *[str(Path(p["source"]).with_suffix("")) for p in labs], "```", ""]
    (src / "index.md").write_text("\n".join(index), encoding="utf-8")
    manifest = {"pages": pages, "edition": edition, "other_edition": words["other"].split('"')[1]}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def build(out: Path = DEFAULT_OUT, quiet: bool = True, edition: str = "en") -> dict:
    """Stage and build one edition; returns the manifest with ``seconds`` and ``html`` (the output folder)."""
    t0 = time.perf_counter()
    manifest = stage(out, edition)
    html = out / "html"
    language = ["-D", "language=zh_CN"] if edition == "zh" else []
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-j", "1", *(["-q"] if quiet else []), *language,
           str(out / "src"), str(html)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CourseError(f"sphinx-build failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    manifest.update(seconds=time.perf_counter() - t0, html=str(html), warnings=proc.stderr.strip())
    return manifest


def check_book(manifest: dict) -> list[str]:
    """Problems: a page missing, a figure missing from its page, the TOC out of course order."""
    html = Path(manifest["html"])
    problems = []
    index = (html / "index.html").read_text(encoding="utf-8") if (html / "index.html").exists() else ""
    if not index:
        problems.append("index.html missing")
    last = -1
    for p in manifest["pages"]:
        page = html / p["page"]
        if not page.exists():
            problems.append(f"{p['page']}: page missing")
            continue
        text = page.read_text(encoding="utf-8")
        shown = text.count(f'class="{FIG_CLASS}"')
        if shown != p["figures"]:
            problems.append(f"{p['page']}: {p['figures']} figures stored, {shown} on the page")
        if p["figures"] and "Plotly.newPlot" not in text:
            problems.append(f"{p['page']}: figures are not drawn (no Plotly.newPlot)")
        pos = index.find(f'href="{p["page"]}"')
        if pos < 0:
            problems.append(f"{p['page']}: not in the table of contents")
        elif pos < last:
            problems.append(f"{p['page']}: table of contents out of course order")
        else:
            last = pos
    if not (html / "_static" / "plotly.min.js").exists():
        problems.append("_static/plotly.min.js missing: figures cannot draw")
    if manifest.get("other_edition") and f'href="{manifest["other_edition"]}"' not in index:
        problems.append(f"index.html does not link to the other edition ({manifest['other_edition']})")
    return problems


def build_both(out: Path = DEFAULT_OUT, quiet: bool = True) -> list[dict]:
    """The English edition in ``out/html`` and the Chinese one in ``out/html/zh`` (built in ``out/zh``)."""
    en = build(out, quiet)
    zh = build(out / "zh", quiet, edition="zh")
    target = Path(en["html"]) / "zh"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(zh["html"], target)
    zh["html"] = str(target)
    return [en, zh]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.book", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--edition", choices=["both", "en", "zh"], default="both")
    a = ap.parse_args(argv)
    if a.edition == "both":
        manifests = build_both(a.out, quiet=not a.verbose)
    else:
        manifests = [build(a.out if a.edition == "en" else a.out / "zh", quiet=not a.verbose, edition=a.edition)]
    problems = []
    for manifest in manifests:
        problems += [f"{manifest['edition']}: {p}" for p in check_book(manifest)]
        figs = sum(p["figures"] for p in manifest["pages"])
        print(f"{manifest['edition']}: {len(manifest['pages'])} pages, {figs} figures, built in "
              f"{manifest['seconds']:.0f} s: {Path(manifest['html']) / 'index.html'}")
    for p in problems:
        print("-", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
