"""The course map: every chapter and lab notebook on disk with its title (first '# ' heading).

``course_map()`` answers a list of {'kind': 'chapter'|'lab', 'path', 'title'} in reading order,
so the start page never lists a notebook that does not exist or misses one that does."""
from __future__ import annotations

import json

from inferopt.paths import CHAPTERS, LABS, REPO_ROOT, SOLUTIONS


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


MAX_CORE_MINUTES = 12 * 60      # the core path: a weekend (issue 47), by the notebooks' own time estimates


def course_path(data: dict | None = None) -> dict:
    """The core path and the depth (``assets/course_path.yaml``), each notebook with its title and its estimate
    in minutes (:func:`inferopt.pacing.estimate`): {'core': [...], 'depth': [...], 'core_minutes': N}.
    CourseError when a notebook on disk is missing from the path, listed twice, or listed but not on disk."""
    from inferopt import assets, pacing
    from inferopt.errors import CourseError

    data = data if data is not None else assets.load("course_path.yaml")
    listed = list(data["core"]) + [d["notebook"] for d in data["depth"]]
    on_disk = pacing.notebook_names()
    twice = sorted({n for n in listed if listed.count(n) > 1})
    missing, unknown = [n for n in on_disk if n not in listed], [n for n in listed if n not in on_disk]
    if twice or missing or unknown:
        raise CourseError("assets/course_path.yaml: " + "; ".join(
            part for part in (f"listed twice: {', '.join(twice)}" if twice else "",
                              f"not on the path: {', '.join(missing)}" if missing else "",
                              f"no such notebook: {', '.join(unknown)}" if unknown else "") if part)
            + "; list every chapter and lab once, as core or as depth")

    def row(name, adds=""):
        e = pacing.estimate(name)
        p = REPO_ROOT / e.path
        nb = p.with_suffix(".ipynb") if p.parent != SOLUTIONS else LABS / p.with_suffix(".ipynb").name
        return {"notebook": name, "path": str(nb.relative_to(REPO_ROOT)), "title": _title(nb), "minutes": e.total,
                "adds": adds}

    core = [row(n) for n in data["core"]]
    return {"core": core, "depth": [row(d["notebook"], d["adds"]) for d in data["depth"]],
            "core_minutes": sum(r["minutes"] for r in core)}
