"""Hand in my lab notebooks: ``python -m inferopt handin [--to DIR] [--name NAME]``.

Copies the learner's lab notebooks (``labs/lab*.ipynb``; ``zh/labs`` in the Chinese edition) into the
room's drop folder as ``DIR/NAME/<lab>.ipynb`` with a manifest ``DIR/NAME/handin.json`` (when, which files,
their sha256; one entry per hand-in, the latest last). The drop folder is ``--to`` or ``$INFEROPT_HANDIN_DIR``
(the room's shared folder, e.g. on the hub); NAME is ``--name``, else ``$JUPYTERHUB_USER`` on a hub.
The instructor then grades the whole folder: ``make grade SUBMISSIONS=DIR`` (one learner per subfolder).

Run it from JupyterLab's terminal (or a cell: ``!python -m inferopt handin``) after saving the notebooks;
handing in again replaces the earlier copies.
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT

NAME_OK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MANIFEST = "handin.json"


def lab_folder() -> Path:
    return REPO_ROOT / ("zh/labs" if os.environ.get("INFEROPT_EDITION") == "zh" else "labs")


def _check_name(name: str | None) -> str:
    name = (name or "").strip()
    if not name:
        raise CourseError("no learner name: pass --name YOURNAME (letters, digits, . _ -), or set JUPYTERHUB_USER")
    if not NAME_OK.match(name):
        raise CourseError(f"--name {name!r} is not a plain name: use letters, digits, '.', '_' or '-' "
                          "(no spaces or slashes), e.g. --name ana-garcia")
    return name


def _check_drop(to: str | None) -> Path:
    if not to:
        raise CourseError("no drop folder: pass --to DIR or set INFEROPT_HANDIN_DIR (the room's shared folder "
                          "from the invitation)")
    drop = Path(to).expanduser()
    if not drop.is_dir():
        raise CourseError(f"the drop folder {drop} does not exist: check the path in the invitation (the "
                          "instructor creates it; handin does not)")
    try:   # os.access says yes to root on a read-only mount: try a real file
        with tempfile.NamedTemporaryFile(dir=drop, prefix=".handin-probe-"):
            pass
    except OSError as exc:
        raise CourseError(f"cannot write into the drop folder {drop} ({exc.strerror or exc}): ask the instructor "
                          "to make it writable for you, or hand in to another folder with --to") from None
    return drop


def handin(to: str | None, name: str | None, labs: Path | None = None, only: list[str] | None = None,
           now: dt.datetime | None = None) -> tuple[Path, list[Path]]:
    """Copy the lab notebooks into ``to/name/``; (that folder, the files written)."""
    name, drop = _check_name(name), _check_drop(to)
    labs = Path(labs) if labs else lab_folder()
    files = sorted(p for p in labs.glob("lab*.ipynb") if not only or p.name.split("-")[0] in only)
    if not files:
        what = f" matching {', '.join(only)}" if only else ""
        raise CourseError(f"no lab notebooks{what} in {labs}: run this from the course folder (where labs/ is)")
    for p in files:
        try:
            nb = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CourseError(f"{p} is not a readable notebook ({type(exc).__name__}): save it in JupyterLab "
                              "(File > Save) and hand in again") from None
        if not isinstance(nb, dict) or "cells" not in nb:
            raise CourseError(f"{p} is not a notebook (no cells): save it in JupyterLab and hand in again")
    mine = drop / name
    mine.mkdir(exist_ok=True)
    now = now or dt.datetime.now(dt.timezone.utc)
    written, entry = [], {"at": now.isoformat(timespec="seconds"), "files": {}}
    for p in files:
        fd, tmp = tempfile.mkstemp(dir=mine, prefix=".handin-", suffix=".part")
        os.close(fd)
        shutil.copyfile(p, tmp)
        os.replace(tmp, mine / p.name)   # a grader reading the folder sees the old copy or the new, never half
        data = (mine / p.name).read_bytes()
        entry["files"][p.name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
        written.append(mine / p.name)
    manifest = mine / MANIFEST
    try:
        history = json.loads(manifest.read_text(encoding="utf-8")).get("handins", [])
    except (OSError, ValueError, AttributeError):
        history = []
    manifest.write_text(json.dumps({"name": name, "handins": [*history, entry]}, indent=1) + "\n", encoding="utf-8")
    return mine, written


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("handin", help="copy my lab notebooks to the room's drop folder",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--to", default=os.environ.get("INFEROPT_HANDIN_DIR"),
                   help="the room's drop folder (default: $INFEROPT_HANDIN_DIR)")
    p.add_argument("--name", default=os.environ.get("JUPYTERHUB_USER"),
                   help="your name as the instructor knows it (default: $JUPYTERHUB_USER)")
    p.add_argument("--lab", action="append", default=None, metavar="labN",
                   help="hand in only this lab (repeatable; default: every lab notebook)")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    mine, written = handin(args.to, args.name, only=args.lab)
    print(f"handed in {len(written)} notebook(s) to {mine}: {', '.join(p.name for p in written)}")
    print(f"(the times are in {mine / MANIFEST}; hand in again to replace them)")
    return 0
