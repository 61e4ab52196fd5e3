"""Workshop pacing: each notebook's time estimate read from its own front matter, and the plans
in INSTRUCTORS.md checked (or rewritten) against those estimates.

A chapter states its time in its front matter, e.g. ``**Time**: about 25 minutes of reading,
15 minutes of working.`` and, for a live notebook, how long its run takes in ``**What it runs**``
(``About 10–12 minutes on a 2-core laptop``; a range counts at its upper end). A notebook's
estimate = reading + working + run.

A plan in INSTRUCTORS.md is a table under an HTML comment ``<!-- plan: NAME, total 3:27, teaching at most
3:30 -->``: one row per block, ``| start | minutes | notebooks | who runs it | what | without enough cores |``.
``notebooks`` names chapters by number (``02b``) and labs as ``lab 1``; a row whose notebooks cell is ``break``
(a pause) or ``slack`` (time kept free for triage: a learner's failed set-up, a slow engine) keeps the minutes
it states. ``who runs it`` is one of ``learners`` (each on their own machine), ``room engine`` (learners, their
live cells attached to the room's one engine), ``instructor demo`` (run once, on the projector), or ``—`` for a
break or slack. ``check_plan`` fails when a row's minutes differ from the sum of its notebooks' estimates, when a
start is not the previous start plus the previous minutes, when the plan's stated total is not the sum, when
the teaching time (every row but the breaks) exceeds the stated budget, when a row names no valid ``who runs
it``, or when two notebooks of the core path (``assets/course_path.yaml``) come out of its order, so a lab never
comes before a chapter it needs.

    python -m inferopt.pacing            # print every notebook's estimate and each plan's check
    python -m inferopt.pacing --write    # rewrite the plan tables of INSTRUCTORS.md from the estimates
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import CHAPTERS, LABS, REPO_ROOT, SOLUTIONS

INSTRUCTORS = REPO_ROOT / "INSTRUCTORS.md"
_NUM = r"(\d+)(?:\s*[–-]\s*(\d+))?"
_READ = re.compile(_NUM + r"\s+minutes\s+(?:of\s+reading|to\s+read)")
_WORK = re.compile(_NUM + r"\s+minutes\s+of\s+working")
_RUN = re.compile(r"(?:[Aa]bout|runs in about)\s+" + _NUM + r"\s+minutes(?:\s+of\s+engine\s+time)?\s+on\s+(?:a\s+)?2")
_PLAN = re.compile(r"<!--\s*plan:\s*([\w-]+)\s*,\s*total\s+(\d+):(\d\d)"
                   r"(?:\s*,\s*teaching\s+at\s+most\s+(\d+):(\d\d))?\s*-->")
WHO = ("learners", "room engine", "instructor demo")
FIXED = ("break", "slack")      # rows that keep the minutes they state


@dataclass(frozen=True)
class Estimate:
    notebook: str           # "02b", "lab 1"
    path: str
    reading: int
    working: int
    run: int                # minutes the notebook's own run takes (0: no engine)

    @property
    def total(self) -> int:
        return self.reading + self.working + self.run


def _hi(m) -> int:
    return int(m.group(2) or m.group(1))


def notebook_path(name: str) -> Path:
    """The MyST twin of a chapter ('02b') or a lab ('lab 1')."""
    key = name.strip().lower()
    m = re.fullmatch(r"lab\s*(\d)", key)
    found = sorted(_lab_sources(f"lab{m.group(1)}-*")) if m else sorted(CHAPTERS.glob(f"{key}-*.md"))
    if len(found) != 1:
        raise CourseError(f"plan names {name!r}: no single notebook matches; use a chapter number "
                          "('02b') or a lab ('lab 1')")
    return found[0]


def notebook_names() -> list[str]:
    """Every chapter and lab as the plans name them ('00', '02b', 'lab 1'), in file order."""
    return ([p.name.split("-")[0] for p in sorted(CHAPTERS.glob("*.md"))]
            + [f"lab {p.name[3]}" for p in sorted(_lab_sources("lab*"))])


def _lab_sources(pattern: str) -> list[Path]:
    """The labs' MyST twins in solutions/, or, in the learner pack (no solutions/), the generated labs/ notebooks:
    their front matter is the same (labs/ is generated from solutions/)."""
    return list(SOLUTIONS.glob(f"{pattern}.md")) if SOLUTIONS.is_dir() else list(LABS.glob(f"{pattern}.ipynb"))


def _front_matter(path: Path) -> str:
    """The text before the notebook's first '## ' heading (a notebook: its markdown cells)."""
    if path.suffix == ".ipynb":
        import json

        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    return text.split("\n## ", 1)[0]


def estimate(name: str) -> Estimate:
    """Reading, working and run minutes as the notebook's front matter states them."""
    path = notebook_path(name)
    head = _front_matter(path)
    time_line = next((ln for ln in head.splitlines() if "**Time**" in ln), None)
    if time_line is None:
        raise CourseError(f"{path.relative_to(REPO_ROOT)}: no **Time** line in its front matter")
    read = _READ.search(time_line)
    if read is None:
        raise CourseError(f"{path.relative_to(REPO_ROOT)}: the **Time** line states no 'N minutes of reading'")
    work = _WORK.search(time_line)
    runs_line = next((ln for ln in head.splitlines() if "**What it runs**" in ln), "")
    run = _RUN.search(time_line) or _RUN.search(runs_line)
    if "plus the run" in time_line and run is None:
        raise CourseError(f"{path.relative_to(REPO_ROOT)}: 'plus the run' but **What it runs** states no minutes")
    return Estimate(notebook=name, path=str(path.relative_to(REPO_ROOT)), reading=_hi(read),
                    working=_hi(work) if work else 0, run=_hi(run) if run else 0)


def hm(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def _items(cell: str) -> list[str]:
    return [x.strip() for x in cell.split(",") if x.strip()]


def parse_plans(text: str) -> dict[str, dict]:
    """{name: {"total": minutes, "teaching_max": minutes or None, "rows": [(start, minutes, [notebooks], what,
    fallback, who)]}} from INSTRUCTORS.md."""
    plans = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _PLAN.search(line)
        if not m:
            continue
        rows = []
        for row in lines[i + 1:]:
            if not row.startswith("|"):
                if rows or row.strip():
                    break
                continue
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            if cells[0] in ("start", "开始", "") or set(cells[0]) <= set("-: "):
                continue
            if len(cells) != 6 or not re.fullmatch(r"\d+:\d\d", cells[0]) or not cells[1].isdigit():
                raise CourseError(f"INSTRUCTORS.md plan {m.group(1)}: row {row!r} is not "
                                  "| h:mm | minutes | notebooks | who runs it | what | without enough cores |")
            h, mm = cells[0].split(":")
            rows.append((int(h) * 60 + int(mm), int(cells[1]), _items(cells[2]), cells[4], cells[5], cells[3]))
        budget = int(m.group(4)) * 60 + int(m.group(5)) if m.group(4) else None
        plans[m.group(1)] = {"total": int(m.group(2)) * 60 + int(m.group(3)), "teaching_max": budget, "rows": rows}
    return plans


def check_plan(plan: dict) -> list[str]:
    """Every way the plan does not add up (empty: it does)."""
    from inferopt import assets

    problems, t, teaching = [], 0, 0
    core = assets.load("course_path.yaml")["core"]
    seen_core: list[str] = []
    for start, minutes, items, what, _fallback, *rest in plan["rows"]:
        who = rest[0] if rest else ""
        if start != t:
            problems.append(f"'{what}' starts at {hm(start)}, but the rows before it end at {hm(t)}")
        if items != ["break"]:
            teaching += minutes
        if items in (["break"], ["slack"]):
            if who not in ("—", "-", ""):
                problems.append(f"'{what}' is a {items[0]}: its 'who runs it' is '—', not {who!r}")
        elif who not in WHO:
            problems.append(f"'{what}': who runs it is {who!r}; say one of {', '.join(WHO)}")
        for x in items:
            if x in core:
                if seen_core and core.index(x) < core.index(seen_core[-1]):
                    problems.append(f"'{what}': {x} comes after {seen_core[-1]}, but the core path puts it before "
                                    "(assets/course_path.yaml): a notebook would come before one it needs")
                seen_core.append(x)
        if items not in (["break"], ["slack"]):
            est = [estimate(x) for x in items]
            want = sum(e.total for e in est)
            if minutes != want:
                parts = " + ".join(f"{e.notebook} {e.total}" for e in est)
                problems.append(f"'{what}' gives {minutes} min, but the notebooks' front matter adds up to "
                                f"{want} ({parts})")
        t = start + minutes
    if plan["total"] != t:
        problems.append(f"the plan states a total of {hm(plan['total'])}, but its rows add up to {hm(t)}")
    if plan.get("teaching_max") is not None and teaching > plan["teaching_max"]:
        problems.append(f"{hm(teaching)} of teaching (every row but the breaks) against a budget of "
                        f"{hm(plan['teaching_max'])}: move a block to homework")
    return problems


def teaching_minutes(plan: dict) -> int:
    """Every row's minutes but the breaks' (slack counts: it is teaching time kept free)."""
    return sum(minutes for _s, minutes, items, *_ in plan["rows"] if items != ["break"])


def rewrite(text: str) -> str:
    """``text`` with each plan's minutes, starts and total recomputed from the front matter."""
    out, lines, i = [], text.splitlines(), 0
    plans = parse_plans(text)
    while i < len(lines):
        m = _PLAN.search(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        plan = plans[m.group(1)]
        t, body = 0, []
        for _start, minutes, items, what, fallback, who in plan["rows"]:
            mins = minutes if items in (["break"], ["slack"]) else sum(estimate(x).total for x in items)
            body.append(f"| {hm(t)} | {mins} | {', '.join(items)} | {who} | {what} | {fallback} |")
            t += mins
        budget = f", teaching at most {hm(plan['teaching_max'])}" if plan["teaching_max"] is not None else ""
        out.append(f"<!-- plan: {m.group(1)}, total {hm(t)}{budget} -->")
        i += 1
        while i < len(lines) and not lines[i].startswith("|"):
            out.append(lines[i])
            i += 1
        header = []
        while i < len(lines) and lines[i].startswith("|"):
            cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
            if cells[0] in ("start", "开始") or set(cells[0]) <= set("-: "):
                header.append(lines[i])
            i += 1
        out += header + body
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.pacing", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the plan tables of INSTRUCTORS.md")
    args = ap.parse_args(argv)
    text = INSTRUCTORS.read_text()
    if args.write:
        INSTRUCTORS.write_text(rewrite(text))
        text = INSTRUCTORS.read_text()
    names = notebook_names()
    for n in names:
        e = estimate(n)
        print(f"{n:7s} {e.total:4d} min  (reading {e.reading}, working {e.working}, run {e.run})  {e.path}")
    print(f"all notebooks: {hm(sum(estimate(n).total for n in names))}")
    bad = 0
    for name, plan in parse_plans(text).items():
        problems = check_plan(plan)
        bad += bool(problems)
        print(f"plan {name}: {'adds up' if not problems else 'does NOT add up'} ({hm(plan['total'])}, "
              f"{hm(teaching_minutes(plan))} of teaching)")
        for p in problems:
            print("  -", p)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
