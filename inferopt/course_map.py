"""The course map: every chapter and lab notebook on disk with its title (first '# ' heading).

``course_map()`` answers a list of {'kind': 'chapter'|'lab', 'path', 'title'} in reading order,
so the start page never lists a notebook that does not exist or misses one that does."""
from __future__ import annotations

import json

from inferopt.paths import CHAPTERS, LABS, REPO_ROOT


def _title(path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            src = "".join(cell.get("source", []))
            for line in src.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return path.stem


def course_map() -> list[dict]:
    rows = [{"kind": "chapter", "path": str(p.relative_to(REPO_ROOT)), "title": _title(p)}
            for p in sorted(CHAPTERS.glob("*.ipynb"))]
    rows += [{"kind": "lab", "path": str(p.relative_to(REPO_ROOT)), "title": _title(p)}
             for p in sorted(LABS.glob("*.ipynb"))]
    return rows
