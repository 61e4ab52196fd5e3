"""`python -m inferopt grade DIR` grades a folder of five submissions correctly: a worked
solution, an untouched lab, and three wrong ones (one of them with a check cell edited into a
fake pass, which the grader overwrites as nbgrader does), plus a file that is not a notebook.
Labs 1, 2 and 5 only: no engine starts (live cells are skipped by default)."""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys

from inferopt.paths import LABS, REPO_ROOT, SOLUTIONS

ANSWERS = [r"\bprefix_cache\b", r"\bspeculative_decoding\b", r"\btensor_parallel\b", r"\braise_concurrency\b",
           r"\bspec_quant\b", r"(?<![\d,.])774\b", r"163,?840", r"11,?648", r"\(4, 6, 48\)", r"\b48 GPUs\b"]


def _edit(src_path, dst_path, edits):
    """Copy a notebook, replacing text in the code cells (old -> new, each must match once)."""
    nb = json.loads(src_path.read_text(encoding="utf-8"))
    for old, new in edits:
        hits = 0
        for c in nb["cells"]:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            if old in src:
                c["source"] = src.replace(old, new)
                hits += 1
        assert hits == 1, (src_path.name, old)
    dst_path.write_text(json.dumps(nb), encoding="utf-8")


def test_grade_a_folder_of_five_submissions(tmp_path):
    sub = tmp_path / "submissions"
    sub.mkdir()
    shutil.copy(SOLUTIONS / "lab1-decision-tree.ipynb", sub / "ana-lab1.ipynb")
    shutil.copy(LABS / "lab2-memory-calculator.ipynb", sub / "ben-lab2.ipynb")
    # lab 1, Part 2: the first example's answer typed for every incident
    _edit(SOLUTIONS / "lab1-decision-tree.ipynb", sub / "chen-lab1.ipynb",
          [('answers = {\n    "support-bot"', 'answers = {name: ("A", "prefix_cache") for name in INCIDENTS}\n_x = {\n    "support-bot"')])
    # lab 2: GiB for GB; and check 1 edited into a fake pass (the grader restores the check)
    _edit(SOLUTIONS / "lab2-memory-calculator.ipynb", sub / "dara-lab2.ipynb",
          [("* tokens / 1e9", "* tokens / 2**30"),
           ("labcheck.lab2.task1(globals())", 'print("Task 1 passes")')])
    # lab 5, Task 3: the fleet typed in, sized by floor + 1
    _edit(SOLUTIONS / "lab5-monitoring-alerts.ipynb", sub / "eli-lab5.ipynb",
          [("    base = max(1, math.ceil(round(target_qps / per_instance_qps, 9)))",
            "    base = int(target_qps // per_instance_qps) + 1")])
    (sub / "finn-lab1.ipynb").write_text("{ this is not a notebook", encoding="utf-8")

    out = tmp_path / "grades.csv"
    proc = subprocess.run([sys.executable, "-m", "inferopt", "grade", str(sub), "--out", str(out),
                           "--notebook-timeout", "300"], check=False, cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    got = {(r["file"], r["task"]): float(r["points"]) for r in rows}
    want = {
        ("ana-lab1.ipynb", "lab1-part1"): 3, ("ana-lab1.ipynb", "lab1-part2"): 3, ("ana-lab1.ipynb", "lab1-part3"): 1,
        ("ben-lab2.ipynb", "lab2-task1"): 0, ("ben-lab2.ipynb", "lab2-task2"): 0, ("ben-lab2.ipynb", "lab2-task3"): 0,
        ("chen-lab1.ipynb", "lab1-part1"): 3, ("chen-lab1.ipynb", "lab1-part2"): 0, ("chen-lab1.ipynb", "lab1-part3"): 1,
        ("dara-lab2.ipynb", "lab2-task1"): 0, ("dara-lab2.ipynb", "lab2-task2"): 0, ("dara-lab2.ipynb", "lab2-task3"): 2,
        ("eli-lab5.ipynb", "lab5-task1"): 2, ("eli-lab5.ipynb", "lab5-task2"): 2, ("eli-lab5.ipynb", "lab5-task3"): 0,
        ("eli-lab5.ipynb", "lab5-task4"): 1,
        ("finn-lab1.ipynb", "lab1-part1"): 0, ("finn-lab1.ipynb", "lab1-part2"): 0, ("finn-lab1.ipynb", "lab1-part3"): 0,
    }
    assert got == want, proc.stdout
    msg = {(r["file"], r["task"]): r["message"] for r in rows}
    assert all("not done yet" in msg[("ben-lab2.ipynb", t)] for t in ("lab2-task1", "lab2-task2", "lab2-task3"))
    assert "10^9" in msg[("dara-lab2.ipynb", "lab2-task1")], msg[("dara-lab2.ipynb", "lab2-task1")]
    assert "ceil" in msg[("eli-lab5.ipynb", "lab5-task3")], msg[("eli-lab5.ipynb", "lab5-task3")]
    assert "cannot read the notebook" in msg[("finn-lab1.ipynb", "lab1-part1")]
    for r in rows:
        assert "\n" not in r["message"] and "Traceback" not in r["message"], r
        if float(r["points"]) < float(r["max_points"]):
            assert not any(re.search(p, r["message"]) for p in ANSWERS), r
    summary = (tmp_path / "grades-summary.txt").read_text(encoding="utf-8")
    assert "6 submission(s) graded" in summary and "ana-lab1.ipynb" in summary and "7/7" in summary, summary
