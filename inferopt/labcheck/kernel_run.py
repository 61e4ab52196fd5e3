"""Run a lab notebook top to bottom in a fresh kernel as a learner would (the release's check cells,
live cells blanked): what tests/test_labs_untouched_fail.py shows a learner sees. Grading itself
never runs notebooks (``grade.grade_notebook``)."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from inferopt.paths import REPO_ROOT


def prepare(nb: dict, lab: str, labs: dict, live: bool) -> tuple[dict, dict]:
    """Prepare a notebook to run top to bottom in a kernel as a learner would (the check cells of the
    release, live cells blanked): what tests/test_labs_untouched_fail.py shows a learner sees. Grading
    does not run notebooks (see ``grade_notebook``).

    Returns the notebook to run and {grade_id: cell index} of the checks found in it."""
    checks = labs[lab]["checks"]
    found = {}
    for i, c in enumerate(nb.get("cells", [])):
        if c.get("cell_type") != "code":
            continue
        meta = c.get("metadata", {}).get("nbgrader", {})
        gid = meta.get("grade_id")
        if meta.get("grade") and gid in checks:
            c["source"] = checks[gid][1]
            found[gid] = i
        elif not live and "live" in c.get("metadata", {}).get("tags", []):
            c["source"] = "# live cell skipped (it starts an engine)"
        c["outputs"] = []
        c["execution_count"] = None
    return nb, found


def _run(nb: dict, workdir: Path, cell_timeout: int, notebook_timeout: int) -> tuple[dict, str | None]:
    """Execute every code cell in a fresh kernel; errors stay in the cells. Returns (nb, problem)."""
    import nbformat
    from nbclient import NotebookClient

    node = nbformat.reads(json.dumps(nb), as_version=4)  # joins list sources as Jupyter does
    client = NotebookClient(node, timeout=cell_timeout, kernel_name="python3", allow_errors=True,
                            interrupt_on_timeout=True, resources={"metadata": {"path": str(workdir)}})
    deadline = time.monotonic() + notebook_timeout
    problem = None
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env_before) if p)
    try:
        with client.setup_kernel():
            for index, cell in enumerate(node.cells):
                if cell.cell_type != "code":
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    problem = f"stopped: the notebook ran past its time limit ({notebook_timeout} s)"
                    break
                client.timeout = int(max(1, min(cell_timeout, left)))
                client.execute_cell(cell, index)
    except Exception as exc:
        problem = f"stopped: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    return json.loads(nbformat.writes(node)), problem
