"""Grade a folder of submitted lab notebooks: ``python -m inferopt grade DIR`` (or ``make grade SUBMISSIONS=DIR``).

- The lab of a submission is read from its check cells' nbgrader ``grade_id`` (else its file name).
- The submission is never run as a notebook. Each task is graded in a fresh Python process
  (``inferopt.labcheck.isolated``) that takes from the submission only the definitions the task
  needs, by name (the names the worked solution's task cells bind, and what those use), runs the
  release's own set-up cells, and calls the pristine check from the installed package; the verdict
  comes back on a channel the learner's code does not write to. A cell that silences errors or
  replaces a check is never run; the submission's check cells are ignored.
- Shortcuts (a forbidden package function reached by any name, the checks' own references,
  ``solutions/``) are caught by what runs, in the task's functions and in the cells that define them.
- Cells tagged ``live`` never run (no graded task needs an engine); ``--live`` is accepted for old
  command lines and changes nothing.

One broken notebook (not JSON, an endless loop) costs only its own rows.
Output: a CSV with one row per (student file, lab, task): ``file, lab, task, points,
max_points, message``, and a short summary printed and written next to it.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.labcheck.kernel_run import _run, prepare  # noqa: F401  (tests/test_labs_untouched_fail.py)
from inferopt.paths import REPO_ROOT, SOLUTIONS

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
FIELDS = ["file", "lab", "task", "points", "max_points", "reason", "message"]
# the reason column: why a row has the points it has, from the verdict's kind (the message's prefix)
REASONS = {"Copied": "read the worked solutions or the checks' files", "Probed": "called the lab's check",
           "Escaped": "started another program",
           "Shortcut": "called the package instead of computing it", "NotDone": "not done",
           "CheckFailed": "wrong answer", "Tampered": "changed the course's modules"}


def reason_for(points: float, max_points: float, message: str) -> str:
    if max_points and points >= max_points:
        return "passed"
    kind = message.split(":", 1)[0]
    if kind in REASONS:
        return REASONS[kind]
    if message.startswith("cannot read"):
        return "unreadable notebook"
    return "stopped" if message.startswith("stopped") else "wrong answer"


@dataclass
class Row:
    file: str
    lab: str
    task: str
    points: float
    max_points: float
    message: str

    @property
    def reason(self) -> str:
        return reason_for(self.points, self.max_points, self.message)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in FIELDS}


@dataclass
class Submission:
    file: str
    lab: str
    rows: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def points(self) -> float:
        return sum(r.points for r in self.rows)

    @property
    def max_points(self) -> float:
        return sum(r.max_points for r in self.rows)


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def graded_cells(nb: dict) -> list[tuple[int, dict]]:
    return [(i, c) for i, c in enumerate(nb.get("cells", []))
            if c.get("cell_type") == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def release_checks(solutions: Path = SOLUTIONS) -> dict[str, dict]:
    """{lab: {"path", "checks": {grade_id: (points, source)}}} from the solution notebooks."""
    labs = {}
    for path in sorted(solutions.glob("lab*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        checks = {}
        for _, c in graded_cells(nb):
            meta = c["metadata"]["nbgrader"]
            checks[meta["grade_id"]] = (float(meta.get("points", 0)), _source(c))
        if checks:
            labs[path.name.split("-")[0]] = {"path": path, "checks": checks}
    if not labs:
        raise CourseError(f"no graded cells found in {solutions}: the grader needs the solution notebooks")
    return labs


def identify_lab(nb: dict | None, filename: str, labs: dict) -> str | None:
    """The lab a submission belongs to: by its check cells' grade_ids, else by its file name."""
    if nb is not None:
        for _, c in graded_cells(nb):
            gid = c["metadata"]["nbgrader"].get("grade_id", "")
            lab = gid.split("-")[0]
            if lab in labs:
                return lab
    m = re.search(r"lab\s*[-_]?\s*(\d)", filename, re.IGNORECASE)
    return f"lab{m.group(1)}" if m and f"lab{m.group(1)}" in labs else None


def _error_line(outputs) -> str | None:
    for out in outputs:
        if out.get("output_type") == "error":
            evalue = _ANSI.sub("", out.get("evalue", "")).strip()
            line = f"{out.get('ename', 'Error')}: {evalue}" if evalue else out.get("ename", "Error")
            return line if len(line) <= 400 else line[:397] + "..."
    return None


CHECK_CALL = re.compile(r"labcheck\.(lab\d)\.(\w+)\(globals\(\)\)")


def release_tasks(lab: str, labs: dict) -> list[dict]:
    """For each check of a lab's release notebook: the check to call and the release's code cells before it."""
    nb = json.loads(Path(labs[lab]["path"]).read_text(encoding="utf-8"))
    cells, tasks = [], []
    for c in nb.get("cells", []):
        if c.get("cell_type") != "code":
            continue
        src = _source(c)
        meta = c.get("metadata", {})
        if meta.get("nbgrader", {}).get("grade"):
            m = CHECK_CALL.search(src)
            if not m:
                raise CourseError(f"{labs[lab]['path'].name}: check {meta['nbgrader'].get('grade_id')} does not call "
                                  "labcheck.labN.<check>(globals()); fix the solution notebook")
            tasks.append({"grade_id": meta["nbgrader"]["grade_id"], "lab": m.group(1), "check": m.group(2),
                          "release_cells": list(cells)})
        elif "live" not in meta.get("tags", []):
            cells.append(_release_cell(src))
    return tasks


def _release_cell(src: str) -> dict:
    """A set-up cell travels whole; a solution cell only as the names it binds (its code never leaves here)."""
    if "### BEGIN SOLUTION" not in src:
        return {"source": src, "solution": False}
    from inferopt.labcheck.cells import bound, statements

    return {"names": sorted({n for s in statements(src) for n in bound(s)}), "solution": True}


def submission_cells(nb: dict) -> list[str]:
    """The submission's code cells the grader reads definitions from: not its check cells, not live ones."""
    return [_source(c) for c in nb.get("cells", []) if c.get("cell_type") == "code"
            and not c.get("metadata", {}).get("nbgrader", {}).get("grade")
            and "live" not in c.get("metadata", {}).get("tags", [])]


def grade_task(task: dict, cells: list[str], *, timeout: int = 300, seed=None) -> tuple[bool, str]:
    """Run one task's pristine check in a fresh interpreter on the submission's definitions (see
    ``inferopt.labcheck.isolated``). Returns (passed, one-line message)."""
    import secrets
    import subprocess
    import sys

    token = secrets.token_hex(16)
    job = {"token": token, "lab": task["lab"], "check": task["check"], "task": task["grade_id"],
           "release_cells": task["release_cells"], "submission_cells": cells, "seed": seed}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    env.pop("PYTHONSTARTUP", None)
    import signal

    with tempfile.TemporaryDirectory(prefix="inferopt-grade-") as tmp:
        # the checker and the submission's process share one process group: a timeout ends both
        proc = subprocess.Popen([sys.executable, "-B", "-m", "inferopt.labcheck.isolated"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp, env=env,
                                start_new_session=True)
        try:
            stdout, stderr = proc.communicate(json.dumps(job), timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return False, f"stopped: the task ran past its time limit ({timeout} s)"
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
    lines = [ln for ln in stdout.splitlines() if ln.startswith(token + " ")]
    if not lines:
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"stopped: the grading process ended without a verdict ({tail[:200]})"
    verdict = json.loads(lines[-1][len(token) + 1:])
    msg = _ANSI.sub("", verdict.get("message", "")).replace("\n", " ").strip()
    if verdict.get("error") and verdict["status"] != "passed":
        msg = f"{verdict['error']}: {msg}"
    msg = msg if len(msg) <= 400 else msg[:397] + "..."
    return verdict.get("status") == "passed", msg


def _unreadable(name: str, labs: dict, exc: Exception) -> Submission:
    lab = identify_lab(None, name, labs)
    sub = Submission(name, lab or "?")
    msg = f"cannot read the notebook ({type(exc).__name__}): submit the .ipynb saved by Jupyter"
    if lab:
        sub.rows = [Row(name, lab, gid, 0, pts, msg) for gid, (pts, _) in labs[lab]["checks"].items()]
    else:
        sub.rows = [Row(name, "?", "-", 0, 0, msg)]
    return sub


def plan_notebook(path: Path, labs: dict, name: str | None = None) -> tuple[Submission, list, list[str]]:
    """Read one submission: (its Submission, the tasks to grade, its code cells). An unreadable notebook or
    one that is no lab comes back with its rows already filled in and no tasks."""
    name = name or path.name
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(nb, dict) or "cells" not in nb:
            raise ValueError("no cells")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return _unreadable(name, labs, exc), [], []
    lab = identify_lab(nb, name, labs)
    if lab is None:
        return Submission(name, "?", [Row(name, "?", "-", 0, 0, "not a course lab: no check cells and no labN in "
                                                              "the name")]), [], []
    return Submission(name, lab), release_tasks(lab, labs), submission_cells(nb)


class _Budget:
    """One notebook's time limit, shared by its tasks whether they run one after another or side by side:
    a task gets what the notebook's earlier-finished tasks left of it (at most ``cell_timeout``)."""

    def __init__(self, notebook_timeout: int, cell_timeout: int):
        import threading

        self.left, self.cell, self.limit, self.lock = float(notebook_timeout), cell_timeout, notebook_timeout, \
            threading.Lock()

    def take(self) -> int | None:
        with self.lock:
            return None if self.left <= 1 else int(max(1, min(self.cell, self.left)))

    def spend(self, seconds: float) -> None:
        with self.lock:
            self.left -= seconds


def _run_task(sub: Submission, task: dict, cells: list[str], labs: dict, budget: _Budget) -> tuple[Row, float]:
    gid = task["grade_id"]
    pts = labs[sub.lab]["checks"][gid][0]
    timeout = budget.take()
    if timeout is None:
        return Row(sub.file, sub.lab, gid, 0, pts, f"stopped: the notebook ran past its time limit "
                                                  f"({budget.limit} s)"), 0.0
    start = time.monotonic()
    ok, msg = grade_task(task, cells, timeout=timeout)
    took = time.monotonic() - start
    budget.spend(took)
    return Row(sub.file, sub.lab, gid, pts if ok else 0, pts, "passed" if ok else msg), took


def default_jobs(tasks: int) -> int:
    """As many tasks at once as the CPUs this process may use (at most the number of tasks)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, tasks))


def grade_many(items: list[tuple[Path, str]], labs: dict, *, cell_timeout: int = 300, notebook_timeout: int = 900,
               jobs: int | None = None, progress=None) -> list[Submission]:
    """Grade submissions [(path, name)], every task in a fresh interpreter, ``jobs`` tasks at a time (threads that
    each wait on one task's process). The rows come back in file order, then task order, whatever finished first;
    ``progress`` gets one line per submission, in file order."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    plans = [plan_notebook(path, labs, name) for path, name in items]
    work = [(i, task) for i, (_, tasks, _) in enumerate(plans) for task in tasks]
    budgets = [_Budget(notebook_timeout, cell_timeout) for _ in plans]
    got: list[dict] = [{} for _ in plans]          # per submission: {task index: (Row, seconds)}
    shown = 0

    def show_ready():   # one line per submission, in file order, as soon as it and those before it are done
        nonlocal shown
        while shown < len(plans) and len(got[shown]) == len(plans[shown][1]):
            sub = plans[shown][0]
            if progress:
                progress(f"[{shown + 1}/{len(plans)}] {sub.file}: {sub.lab} {sub.points:g}/{sub.max_points:g} points "
                         f"({sub.seconds:.0f} s)")
            shown += 1

    with ThreadPoolExecutor(max_workers=jobs or default_jobs(len(work))) as pool:
        pending = {pool.submit(_run_task, plans[i][0], task, plans[i][2], labs, budgets[i]): (i, k)
                   for k, (i, task) in enumerate(work)}
        show_ready()
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    i, k = pending.pop(f)
                    got[i][k] = f.result()
                    if len(got[i]) == len(plans[i][1]):   # its last task: the rows in task order
                        sub = plans[i][0]
                        sub.rows = [got[i][j][0] for j in sorted(got[i])]
                        sub.seconds = sum(t for _, t in got[i].values())
                show_ready()
        except BaseException:   # Ctrl-C: start no more tasks (the running ones end within their time limit)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [sub for sub, _, _ in plans]


def grade_notebook(path: Path, labs: dict, *, cell_timeout: int = 300, notebook_timeout: int = 900,
                   live: bool = False, name: str | None = None, jobs: int = 1) -> Submission:
    """Grade one submission, task by task, each in a fresh interpreter (``grade_task``).

    ``live`` is accepted for old command lines; no graded task needs the engine, so live cells never run."""
    return grade_many([(path, name or path.name)], labs, cell_timeout=cell_timeout,
                      notebook_timeout=notebook_timeout, jobs=jobs)[0]


_LAB_IN_NAME = re.compile(r"[-_ .]*lab\s*[-_]?\s*\d.*$", re.IGNORECASE)


def learner_of(name: str) -> str:
    """Who handed a submission in: its first folder (``python -m inferopt handin`` writes ``<name>/<lab>.ipynb``),
    else its file name without the lab part (``ana-lab1.ipynb`` -> ``ana``)."""
    parts = Path(name).parts
    if len(parts) > 1:
        return parts[0]
    stem = Path(name).stem
    return _LAB_IN_NAME.sub("", stem) or stem


def grade_folder(folder: Path, out_csv: Path | None = None, *, cell_timeout: int = 300,
                 notebook_timeout: int = 900, live: bool = False, solutions: Path = SOLUTIONS,
                 progress=print, jobs: int | None = None) -> tuple[list[Submission], Path, str]:
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"{folder} is not a folder: give the folder that holds the submitted .ipynb files")
    if jobs is not None and jobs < 1:
        raise CourseError(f"--jobs {jobs}: give at least 1 (tasks graded at once; default: the CPU count)")
    files = sorted(p for p in folder.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    if not files:
        raise CourseError(f"no .ipynb files in {folder}")
    labs = release_checks(solutions)
    out_csv = Path(out_csv) if out_csv else folder / "grades.csv"
    subs = grade_many([(p, str(p.relative_to(folder))) for p in files], labs, cell_timeout=cell_timeout,
                      notebook_timeout=notebook_timeout, jobs=jobs, progress=progress)
    with out_csv.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for sub in subs:
            for row in sub.rows:
                w.writerow(row.as_dict())
    summary = summarize(subs)
    out_csv.with_name(out_csv.stem + "-summary.txt").write_text(summary + "\n", encoding="utf-8")
    write_class_views(subs, labs, out_csv)
    return subs, out_csv, summary


def learner_table(subs: list[Submission], labs: dict) -> tuple[list[str], list[dict]]:
    """One row per learner: points per lab (the best of that lab's submissions; empty when none was handed in),
    the total and the most that the labs handed in by the class give."""
    class_labs = sorted({s.lab for s in subs if s.lab in labs})
    lab_max = {lab: sum(p for p, _ in labs[lab]["checks"].values()) for lab in class_labs}
    best: dict = {}
    for s in subs:
        if s.lab in lab_max:
            mine = best.setdefault(learner_of(s.file), {})
            mine[s.lab] = max(mine.get(s.lab, 0.0), s.points)
        else:
            best.setdefault(learner_of(s.file), {})
    cols = ["learner", *class_labs, "total", "max_total"]
    rows = []
    for who in sorted(best):
        row = {"learner": who, **{lab: (f"{best[who][lab]:g}" if lab in best[who] else "") for lab in class_labs}}
        row["total"] = f"{sum(best[who].values()):g}"
        row["max_total"] = f"{sum(lab_max.values()):g}"
        rows.append(row)
    return cols, rows


_NUM = re.compile(r"-?\d+(?:[.,]\d+)*(?:e-?\d+)?")


def task_table(subs: list[Submission]) -> tuple[list[str], list[dict]]:
    """One row per task: how many got full, partial and zero points, and the most common hint among those
    without full points (messages that differ only in their numbers count as one)."""
    from collections import Counter

    by: dict = {}
    for s in subs:
        for r in s.rows:
            if r.task == "-":
                continue
            by.setdefault((r.lab, r.task), []).append(r)
    cols = ["lab", "task", "max_points", "submitted", "full", "partial", "zero", "most_common_hint", "hint_count"]
    rows = []
    for (lab, task), rs in sorted(by.items()):
        missed = [r for r in rs if r.points < r.max_points]
        hints = Counter(_NUM.sub("#", r.message) for r in missed)
        top, n = hints.most_common(1)[0] if hints else ("", 0)
        example = next((r.message for r in missed if _NUM.sub("#", r.message) == top), "")
        rows.append({"lab": lab, "task": task, "max_points": f"{rs[0].max_points:g}", "submitted": len(rs),
                     "full": sum(r.points >= r.max_points > 0 for r in rs),
                     "partial": sum(0 < r.points < r.max_points for r in rs),
                     "zero": sum(r.points == 0 for r in rs), "most_common_hint": example, "hint_count": n})
    return cols, rows


def _markdown(cols: list[str], rows: list[dict]) -> str:
    def cell(v):
        return str(v).replace("|", "\\|")

    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(cell(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def class_view_paths(out_csv: Path) -> dict:
    stem = out_csv.stem
    return {"learners": out_csv.with_name(stem + "-learners.csv"), "tasks": out_csv.with_name(stem + "-tasks.csv"),
            "markdown": out_csv.with_name(stem + "-class.md")}


def write_class_views(subs: list[Submission], labs: dict, out_csv: Path) -> dict:
    """Beside the CSV: ``-learners.csv`` (points per learner and lab), ``-tasks.csv`` (per task: full / partial /
    zero and the most common hint) and ``-class.md`` (both tables in markdown)."""
    paths = class_view_paths(out_csv)
    tables = {"learners": learner_table(subs, labs), "tasks": task_table(subs)}
    for key, (cols, rows) in tables.items():
        with paths[key].open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
    md = ["# Per learner", "", _markdown(*tables["learners"]), "", "# Per task", "", _markdown(*tables["tasks"]), ""]
    paths["markdown"].write_text("\n".join(md), encoding="utf-8")
    return paths


def summarize(subs: list[Submission]) -> str:
    lines = [f"{len(subs)} submission(s) graded"]
    width = max(len(s.file) for s in subs)
    for s in subs:
        failed = [r.task for r in s.rows if r.points < r.max_points]
        lines.append(f"  {s.file:<{width}}  {s.lab:<5} {s.points:>4g}/{s.max_points:<4g}"
                     + (f"  to redo: {', '.join(failed)}" if failed else "  all checks pass"))
    by_task: dict = {}
    for s in subs:
        for r in s.rows:
            t = by_task.setdefault((r.lab, r.task), [0, 0])
            t[0] += r.points >= r.max_points > 0
            t[1] += 1
    lines.append("per task (passed / submitted):")
    lines += [f"  {lab} {task}: {ok}/{n}" for (lab, task), (ok, n) in sorted(by_task.items())]
    return "\n".join(lines)


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("grade", help="grade a folder of submitted lab notebooks (CSV + summary)",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("folder", type=Path, help="folder with the submitted .ipynb files (searched recursively)")
    p.add_argument("--out", type=Path, default=None, help="CSV to write (default: FOLDER/grades.csv)")
    p.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell (default 300)")
    p.add_argument("--notebook-timeout", type=int, default=900, help="seconds per notebook (default 900)")
    p.add_argument("--jobs", "-j", type=int, default=None,
                   help="tasks graded at once, each in its own process (default: the CPU count)")
    p.add_argument("--live", action="store_true",
                   help="accepted for old command lines; no graded task needs the engine, live cells never run")
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    _subs, out, summary = grade_folder(args.folder, args.out, cell_timeout=args.cell_timeout,
                                      notebook_timeout=args.notebook_timeout, live=args.live, jobs=args.jobs)
    print(summary)
    views = class_view_paths(out)
    print(f"wrote {out}, {out.with_name(out.stem + '-summary.txt')}, {views['learners'].name} (per learner), "
          f"{views['tasks'].name} (per task) and {views['markdown'].name}")
    return 0
