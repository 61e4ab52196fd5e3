"""The static HTML edition of the course: ``make book`` (``python -m inferopt.book``).

Built with Sphinx + myst-nb + sphinx-book-theme from the notebooks' **stored** outputs (nothing is
re-executed: CI's strict nbval is what keeps those outputs honest). Steps:

1. stage: copy the chapters and labs in course order (``inferopt.course_map``) into the build
   folder, and give every plotly output an HTML ``<div>`` drawn by a local ``plotly.min.js`` (from
   the installed plotly package), so figures stay interactive; the stored PNG stays as fallback;
2. ``sphinx-build -b html`` with ``book/conf.py``; no theme or script is downloaded;
3. verify: every page exists and every stored figure is on its page (``check_book``).

Output: ``build/book/html/index.html``.
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


def stage(out: Path = DEFAULT_OUT) -> dict:
    """Prepare ``out/src``: conf.py, static files, an index in course order, the notebooks."""
    import plotly

    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    (src / "_static").mkdir(parents=True)
    shutil.copy(BOOK_SRC / "conf.py", src / "conf.py")
    shutil.copy(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", src / "_static" / "plotly.min.js")
    pages = []
    for row in course_map():
        path = REPO_ROOT / row["path"]
        rel = Path(row["path"])
        figures = stage_notebook(path, src / rel)
        pages.append({"kind": row["kind"], "title": row["title"], "source": row["path"],
                      "page": str(rel.with_suffix(".html")), "figures": figures})
    chapters = [p for p in pages if p["kind"] == "chapter"]
    labs = [p for p in pages if p["kind"] == "lab"]
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    title = next((ln[2:] for ln in readme if ln.startswith("# ")), "The course")
    intro = ("The static edition of the course: every page shows the outputs stored in the notebooks, as CI "
             "re-ran and checked them. To run the cells yourself, open the notebooks in JupyterLab (`make lab`).")
    index = [f"# {title}", "", intro, "",
             "```{toctree}", ":caption: Chapters", ":maxdepth: 1", "", *[str(Path(p["source"]).with_suffix(""))
                                                                         for p in chapters], "```", ""]
    if labs:
        index += ["```{toctree}", ":caption: Labs (to do in JupyterLab)", ":maxdepth: 1", "",
                  *[str(Path(p["source"]).with_suffix("")) for p in labs], "```", ""]
    (src / "index.md").write_text("\n".join(index), encoding="utf-8")
    manifest = {"pages": pages}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


def build(out: Path = DEFAULT_OUT, quiet: bool = True) -> dict:
    """Stage and build; returns the manifest with ``seconds`` and ``html`` (the output folder)."""
    t0 = time.perf_counter()
    manifest = stage(out)
    html = out / "html"
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-E", "-j", "1", *(["-q"] if quiet else []),
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
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.book", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    manifest = build(a.out, quiet=not a.verbose)
    problems = check_book(manifest)
    for p in problems:
        print("-", p)
    figs = sum(p["figures"] for p in manifest["pages"])
    print(f"{len(manifest['pages'])} pages, {figs} figures, built in {manifest['seconds']:.0f} s: "
          f"{Path(manifest['html']) / 'index.html'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
