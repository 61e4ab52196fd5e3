"""Notebook housekeeping: generate student labs from solutions, clean and (re)run notebooks.

``solutions/`` is the single source. A code cell's region between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` becomes ``# YOUR CODE HERE`` + ``raise NotImplementedError()`` in ``labs/``
(nbgrader's markers and output, done by this small tool so no nbgrader course folder is needed);
a markdown region between ``BEGIN SOLUTION`` and ``END SOLUTION`` becomes ``YOUR ANSWER HERE``;
a code region between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` is removed (nbgrader's
hidden tests: the grader runs the solutions' version of each graded cell). Lab outputs are cleared.
Cell metadata ``nbgrader`` (``grade``, ``grade_id``, ``points`` on check cells) is kept, so
``python -m inferopt grade`` and nbgrader itself find the graded cells.

Commands (``python -m inferopt.nbtools ...``):
  labs                 regenerate labs/ from solutions/
  check                fail if labs/ is stale, a stored notebook is not clean, or a notebook and
                       its MyST markdown twin (jupytext pairing, see jupytext.toml) disagree
  sync [NB ...]        reconcile each notebook with its .md twin (jupytext --sync; newer file wins)
  clean [NB ...]       normalise metadata of stored notebooks (all by default)
  run NB [NB ...]      execute notebooks in place (real outputs), clean them, add figure images,
                       regenerate labs; then the notebooks that quote their stored outputs
                       (inferopt.stored_quotes), so no quote is left from an older run
  images [NB ...]      give every stored plotly figure a static PNG rendered from its own JSON
                       (kaleido + a local Chromium), so GitHub, nbviewer and the book show it;
                       `check` fails on a figure without its image or with a stale one

Figure images: a plotly output stores ``application/vnd.plotly.v1+json`` (what JupyterLab draws
and strict nbval compares) plus ``image/png`` rendered from that JSON, with the JSON's hash in the
output's metadata (``inferopt.png_of``). nbval never compares ``image/png`` (it is in its
skip list unless --nbdime) nor output metadata, so the image cannot make a test flaky; `check`
instead proves each image belongs to the figure stored next to it.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
from pathlib import Path

from inferopt import stored_quotes
from inferopt.paths import CHAPTERS, LABS, REPO_ROOT, SOLUTIONS

FIX_LABS = "make labs   (or: .venv/bin/python -m inferopt.nbtools labs)"
FIX_CLEAN = "make clean-notebooks   (or: .venv/bin/python -m inferopt.nbtools clean)"
FIX_SYNC = "make sync NB={nb}   (or: .venv/bin/jupytext --sync {nb}; the file you edited last wins)"

_CODE_STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
_MD_STUB = "YOUR ANSWER HERE"
_BEGIN_CODE = re.compile(r"^([ \t]*)### BEGIN SOLUTION[ \t]*$")
_END_CODE = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
_BEGIN_HIDDEN = re.compile(r"^([ \t]*)### BEGIN HIDDEN TESTS[ \t]*$")
_END_HIDDEN = re.compile(r"^[ \t]*### END HIDDEN TESTS[ \t]*$")
_BEGIN_MD = re.compile(r"^\s*(<!--\s*)?BEGIN SOLUTION(\s*-->)?\s*$")
_END_MD = re.compile(r"^\s*(<!--\s*)?END SOLUTION(\s*-->)?\s*$")

KEEP_NB_META = {"kernelspec", "language_info", "jupytext", "inferopt"}   # inferopt: stored_quotes.record
KEEP_CELL_META = {"tags", "nbgrader"}


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _strip_region(text: str, begin: re.Pattern, end: re.Pattern, stub: str, where: str,
                  what: str = "SOLUTION") -> str:
    out, inside = [], False
    for line in text.split("\n"):
        m = begin.match(line)
        if m and not inside:
            inside = True
            indent = m.group(1) if m.groups() and m.group(1) and not m.group(1).startswith("<") else ""
            if stub:
                out.extend(indent + s for s in stub.split("\n"))
            continue
        if inside and end.match(line):
            inside = False
            continue
        if not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{where}: BEGIN {what} without END {what}")
    return "\n".join(out)


def make_lab(solution: dict, where: str = "notebook", md_stub: str = _MD_STUB) -> dict:
    """Return the student version of a solution notebook (solution regions stubbed, outputs cleared); ``md_stub``:
    what a prose answer's region becomes (the Chinese edition passes its translation of ``YOUR ANSWER HERE``)."""
    nb = copy.deepcopy(solution)
    for i, cell in enumerate(nb["cells"]):
        src = _source(cell)
        if cell["cell_type"] == "code":
            src = _strip_region(src, _BEGIN_CODE, _END_CODE, _CODE_STUB, f"{where} cell {i}")
            src = _strip_region(src, _BEGIN_HIDDEN, _END_HIDDEN, "", f"{where} cell {i}", what="HIDDEN TESTS")
            cell["outputs"] = []
            cell["execution_count"] = None
        elif cell["cell_type"] == "markdown":
            src = _strip_region(src, _BEGIN_MD, _END_MD, md_stub, f"{where} cell {i}")
        cell["source"] = src
    return clean(nb)


def clean(nb: dict) -> dict:
    """Drop stray metadata (widget state, timings, editor settings); keep kernelspec and tags."""
    nb = copy.deepcopy(nb)
    meta = {k: v for k, v in nb.get("metadata", {}).items() if k in KEEP_NB_META}
    if "language_info" in meta:
        meta["language_info"] = {"name": "python"}
    meta.setdefault("kernelspec", {"display_name": "Python 3", "language": "python", "name": "python3"})
    if "jupytext" in meta:  # pairing metadata stays; version noise goes
        jt = {k: v for k, v in meta["jupytext"].items() if k != "text_representation"}
        if jt:
            meta["jupytext"] = jt
        else:
            del meta["jupytext"]
    nb["metadata"] = meta
    for cell in nb["cells"]:
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in KEEP_CELL_META}
        cell["source"] = _source(cell)
        for out in cell.get("outputs", []):
            out.get("metadata", {}).pop("execution", None)
            if ("metadata" in out and not out["metadata"]
                    and out.get("output_type") in ("display_data", "execute_result")):
                out["metadata"] = {}
    return nb


def _dumps(nb: dict) -> str:
    import nbformat

    text = nbformat.writes(nbformat.from_dict(nb))
    return text if text.endswith("\n") else text + "\n"


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def stored_notebooks() -> list[Path]:
    return sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))


def lab_path(solution: Path) -> Path:
    return LABS / solution.name


def generate_labs() -> list[Path]:
    LABS.mkdir(exist_ok=True)
    written = []
    for sol in sorted(SOLUTIONS.glob("*.ipynb")):
        text = _dumps(make_lab(_load(sol), where=str(sol.relative_to(REPO_ROOT))))
        target = lab_path(sol)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            written.append(target)
    for extra in LABS.glob("*.ipynb"):
        if not (SOLUTIONS / extra.name).exists():
            extra.unlink()
            written.append(extra)
    return written


def stale_labs() -> list[str]:
    """Names of labs that differ from what generate_labs() would write (or lack a solution)."""
    problems = []
    for sol in sorted(SOLUTIONS.glob("*.ipynb")):
        want = _dumps(make_lab(_load(sol), where=sol.name))
        target = lab_path(sol)
        if not target.exists():
            problems.append(f"labs/{sol.name} is missing")
        elif target.read_text(encoding="utf-8") != want:
            problems.append(f"labs/{sol.name} is stale (solutions/{sol.name} changed)")
    for extra in sorted(LABS.glob("*.ipynb")):
        if not (SOLUTIONS / extra.name).exists():
            problems.append(f"labs/{extra.name} has no solutions/{extra.name}")
    return problems


def unclean_notebooks(paths=None) -> list[str]:
    """Problems with stored notebooks: stray metadata, never-run cells, counts out of order."""
    problems = []
    for path in paths or stored_notebooks():
        nb = _load(path)
        rel = path.relative_to(REPO_ROOT)
        if _dumps(clean(nb)) != path.read_text(encoding="utf-8"):
            problems.append(f"{rel}: stray metadata or formatting (not as `clean` writes it)")
        counts = [c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"]
        if any(c is None for c in counts):
            problems.append(f"{rel}: code cells never run (execution_count is null)")
        elif counts != list(range(1, len(counts) + 1)):
            problems.append(f"{rel}: execution counts {counts} are not 1..{len(counts)} in order")
    return problems


PLOTLY_MIME = "application/vnd.plotly.v1+json"
FIX_IMAGES = "make images   (or: .venv/bin/python -m inferopt.nbtools images)"


def figure_key(fig_json: dict) -> str:
    """A short hash of a stored plotly figure, recorded next to the image rendered from it."""
    import hashlib

    return hashlib.sha256(json.dumps(fig_json, sort_keys=True).encode()).hexdigest()[:16]


def _plotly_outputs(nb: dict):
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            if PLOTLY_MIME in out.get("data", {}):
                yield i, out


def render_png(fig_json: dict) -> str:
    """base64 PNG of a stored plotly figure (its own layout size, else 900 x 500 px)."""
    import base64
    import logging

    import plotly.io as pio

    for name in ("choreographer", "kaleido", "logistro"):   # their shutdown noise is not an error of ours
        logging.getLogger(name).setLevel(logging.CRITICAL)

    from inferopt.errors import CourseError

    layout = fig_json.get("layout", {})
    try:
        png = pio.to_image(fig_json, format="png", width=layout.get("width") or 900,
                           height=layout.get("height") or 500, scale=1)
    except Exception as exc:
        raise CourseError(f"cannot render a figure image ({type(exc).__name__}: {str(exc)[:200]}). kaleido needs a "
                          "local Chromium: `apt-get install chromium` (Debian) or `make tools`") from None
    return base64.b64encode(png).decode()


def add_images(nb: dict) -> int:
    """Add or refresh the PNG of every plotly output in ``nb`` (in place); returns how many were rendered."""
    n = 0
    for _i, out in _plotly_outputs(nb):
        key = figure_key(out["data"][PLOTLY_MIME])
        if out.get("metadata", {}).get("inferopt", {}).get("png_of") == key and "image/png" in out["data"]:
            continue
        out["data"]["image/png"] = render_png(out["data"][PLOTLY_MIME])
        out.setdefault("metadata", {})["inferopt"] = {"png_of": key}
        n += 1
    return n


def image_files(paths=None) -> list[tuple[Path, int]]:
    """Add images to stored notebooks (all by default); (path, images rendered) for each changed one."""
    done = []
    for path in paths or stored_notebooks():
        nb = _load(path)
        n = add_images(nb)
        if n:
            path.write_text(_dumps(clean(nb)), encoding="utf-8")
            done.append((path, n))
    return done


def missing_images(paths=None) -> list[str]:
    """Plotly outputs without their static image, or with an image of a different figure."""
    problems = []
    for path in paths or stored_notebooks():
        for i, out in _plotly_outputs(_load(path)):
            rel = path.relative_to(REPO_ROOT)
            if "image/png" not in out["data"]:
                problems.append(f"{rel} cell {i}: plotly figure without its static image")
            elif out.get("metadata", {}).get("inferopt", {}).get("png_of") != figure_key(out["data"][PLOTLY_MIME]):
                problems.append(f"{rel} cell {i}: the static image is not of the figure stored next to it")
    return problems


def twin(path: Path) -> Path:
    """The MyST markdown twin of a stored notebook (same folder, same name, .md)."""
    return path.with_suffix(".md")


def _cells_for_compare(nb) -> list[tuple[str, str, tuple]]:
    return [(c["cell_type"], _source(c).rstrip(), tuple(c.get("metadata", {}).get("tags", [])))
            for c in nb["cells"]]


def _rel(path: Path) -> Path:
    try:
        return path.relative_to(REPO_ROOT)
    except ValueError:
        return path


def unsynced_pairs(paths=None) -> list[str]:
    """Notebooks whose MyST twin is missing or whose cells (type, source, tags) differ from it."""
    import jupytext

    problems = []
    for path in paths or stored_notebooks():
        rel = _rel(path)
        md = twin(path)
        if not md.exists():
            problems.append(f"{rel}: its markdown twin {_rel(md)} is missing; "
                            f"fix: {FIX_SYNC.format(nb=rel)}")
            continue
        a = _cells_for_compare(jupytext.read(path))
        b = _cells_for_compare(jupytext.read(md, fmt="md:myst"))
        if a != b:
            n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            problems.append(f"{rel} and {md.name} differ (first at cell {n}; {len(a)} vs {len(b)} cells); "
                            f"fix: {FIX_SYNC.format(nb=rel)}")
    for md in [] if paths else sorted(list(CHAPTERS.glob("*.md")) + list(SOLUTIONS.glob("*.md"))):
        if not md.with_suffix(".ipynb").exists():
            problems.append(f"{md.relative_to(REPO_ROOT)} has no notebook; fix: "
                            f"{FIX_SYNC.format(nb=md.relative_to(REPO_ROOT))}")
    return problems


def sync_files(paths=None) -> None:
    """Run ``jupytext --sync`` on each notebook (or markdown twin); jupytext reads its config."""
    import subprocess

    targets = [Path(p) for p in (paths or stored_notebooks())]
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", *map(str, targets)], check=True,
                   cwd=REPO_ROOT)
    # Jupytext in JupyterLab refuses to open a pair whose .ipynb is newer than its .md (it would take
    # the inputs from a stale text file). The pair is in sync now: give the twin the notebook's time.
    for target in targets:
        ipynb, md = target.with_suffix(".ipynb"), target.with_suffix(".md")
        if ipynb.exists() and md.exists():
            stamp = max(ipynb.stat().st_mtime, md.stat().st_mtime)
            os.utime(md, (stamp, stamp))


def clean_files(paths=None) -> list[Path]:
    changed = []
    for path in paths or stored_notebooks():
        text = _dumps(clean(_load(path)))
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    return changed


def run_notebook(path: Path, timeout: int = 1800) -> None:
    """Execute a notebook top to bottom in its own folder with this Python, store outputs, clean it."""
    import nbformat
    from nbclient import NotebookClient

    path = path.with_suffix(".ipynb")
    sync_files([path])  # an edited .md twin brings its inputs over first (the newer file wins)
    nb = nbformat.read(path, as_version=4)
    sources = stored_quotes.quoted_sources(json.loads(nbformat.writes(nb)))   # read before it runs: what it quotes
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    executed = clean(stored_quotes.record(json.loads(nbformat.writes(nb)), sources))
    add_images(executed)
    path.write_text(_dumps(executed), encoding="utf-8")
    sync_files([path])  # outputs changed, inputs did not: the twin stays as it is


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.nbtools", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("labs")
    sub.add_parser("check")
    s = sub.add_parser("sync")
    s.add_argument("notebooks", nargs="*", type=Path)
    c = sub.add_parser("clean")
    c.add_argument("notebooks", nargs="*", type=Path)
    im = sub.add_parser("images")
    im.add_argument("notebooks", nargs="*", type=Path)
    r = sub.add_parser("run")
    r.add_argument("notebooks", nargs="+", type=Path)
    r.add_argument("--timeout", type=int, default=1800, help="seconds per cell")
    args = ap.parse_args(argv)
    if args.cmd == "labs":
        for p in generate_labs():
            print("wrote", p.relative_to(REPO_ROOT))
        return 0
    if args.cmd == "check":
        unsynced = unsynced_pairs()
        problems = stale_labs() + unclean_notebooks()
        no_image = missing_images()
        stale_quotes = stored_quotes.stale()   # each line names its own fix
        for p in problems + unsynced + no_image + stale_quotes:
            print("-", p)
        if problems:
            print(f"fix: {FIX_LABS}\n     {FIX_CLEAN}")
        if no_image:
            print(f"fix: {FIX_IMAGES}")
        if problems or unsynced or no_image or stale_quotes:
            return 1
        print("labs up to date; notebooks clean; every notebook in sync with its .md twin; every figure has its "
              "image; every quote of another notebook's outputs is from its current run")
        return 0
    if args.cmd == "sync":
        sync_files([x.resolve() for x in args.notebooks] or None)
        return 0
    if args.cmd == "images":
        for p, n in image_files([x.resolve() for x in args.notebooks] or None):
            print(f"{p.relative_to(REPO_ROOT)}: {n} figure image(s) rendered")
        return 0
    if args.cmd == "clean":
        for p in clean_files([x.resolve() for x in args.notebooks] or None):
            print("cleaned", p.relative_to(REPO_ROOT))
        return 0
    if args.cmd == "run":
        named = [x.resolve() for x in args.notebooks]
        for nb in stored_quotes.with_readers(named):
            quoted = [s.name for s in stored_quotes.quoted_sources(nb) if s in named]
            print(f"running {_rel(nb)} ..." + (f" (it quotes {', '.join(quoted)}'s stored outputs)"
                                              if nb not in named else ""), flush=True)
            run_notebook(nb, timeout=args.timeout)
        for p in generate_labs():
            print("wrote", p.relative_to(REPO_ROOT))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
