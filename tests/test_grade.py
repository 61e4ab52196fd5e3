"""`python -m inferopt grade DIR` grades a folder of submissions correctly: a worked solution, an
untouched lab, three wrong ones (one with a check cell edited into a fake pass), a file that is not
a notebook, and two tampered untouched labs that must score 0: lab 5 plus a cell that silences every
error (`get_ipython().set_custom_exc`), lab 2 plus a cell that replaces `inferopt.labcheck.lab2.task*`.
Each task is graded by a fresh checker (inferopt/labcheck/isolated.py) that runs only the task's
definitions from the submission, in a process of their own without the checks or solutions/
(sandbox.py). A second folder: a lab that copies from solutions/ and one that asks the check and the
decision engine for its answers score 0, with the reason in the CSV. Labs 1, 2 and 5 only: no engine starts."""
from __future__ import annotations

import ast
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


def _add_cell(src_path, dst_path, code):
    """Copy a notebook and append one code cell (what a learner who wants the points adds)."""
    nb = json.loads(src_path.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                        "source": code})
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
    # the two tampered untouched labs of issue 21: each scored full marks with the in-kernel grader
    _add_cell(LABS / "lab5-monitoring-alerts.ipynb", sub / "gus-lab5.ipynb",
              "get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)")
    _add_cell(LABS / "lab2-memory-calculator.ipynb", sub / "hana-lab2.ipynb",
              "import inferopt.labcheck.lab2 as _l2\nfrom inferopt import labcheck\n"
              "for _n in ('task1', 'task2', 'task3'):\n"
              "    setattr(_l2, _n, lambda ns, **kw: print(f'{_n} passes'))\n"
              "labcheck.lab2.task1 = lambda ns, **kw: print('Task 1 passes')")

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
        ("gus-lab5.ipynb", "lab5-task1"): 0, ("gus-lab5.ipynb", "lab5-task2"): 0, ("gus-lab5.ipynb", "lab5-task3"): 0,
        ("gus-lab5.ipynb", "lab5-task4"): 0,
        ("hana-lab2.ipynb", "lab2-task1"): 0, ("hana-lab2.ipynb", "lab2-task2"): 0, ("hana-lab2.ipynb", "lab2-task3"): 0,
    }
    assert got == want, proc.stdout
    msg = {(r["file"], r["task"]): r["message"] for r in rows}
    assert all("not done yet" in msg[("ben-lab2.ipynb", t)] for t in ("lab2-task1", "lab2-task2", "lab2-task3"))
    assert "10^9" in msg[("dara-lab2.ipynb", "lab2-task1")], msg[("dara-lab2.ipynb", "lab2-task1")]
    assert "ceil" in msg[("eli-lab5.ipynb", "lab5-task3")], msg[("eli-lab5.ipynb", "lab5-task3")]
    assert "cannot read the notebook" in msg[("finn-lab1.ipynb", "lab1-part1")]
    for f, tasks in (("gus-lab5.ipynb", 4), ("hana-lab2.ipynb", 3)):
        for t in range(1, tasks + 1):
            key = (f, f"{f.split('-')[1].split('.')[0]}-task{t}")
            assert "not done yet" in msg[key], msg[key]
    for r in rows:
        assert "\n" not in r["message"] and "Traceback" not in r["message"], r
        if float(r["points"]) < float(r["max_points"]):
            assert not any(re.search(p, r["message"]) for p in ANSWERS), r
    summary = (tmp_path / "grades-summary.txt").read_text(encoding="utf-8")
    assert "8 submission(s) graded" in summary and "ana-lab1.ipynb" in summary and "7/7" in summary, summary


def test_only_the_tasks_definitions_are_taken():
    """The grader's selection by name: an added cell that binds no task name never runs; a helper
    the task's function uses comes along; a release name (INCIDENTS) keeps the release's value."""
    from inferopt.labcheck.cells import select

    cells = ["get_ipython().set_custom_exc((Exception,), lambda *a, **k: None)",
             "import inferopt.labcheck.lab1 as L\nL.part2 = lambda ns: None",
             "import math\ndef _helper(x):\n    return math.floor(x)",
             "INCIDENTS = {}\nanswers = {}\nanswers['a'] = ('A', _helper(1.5))",
             "print(answers)"]
    got = select({"answers"}, {"INCIDENTS", "SLO"}, cells)
    text = [ast.unparse(s) for s in got]
    assert text == ["import math", "def _helper(x):\n    return math.floor(x)", "answers = {}",
                    "answers['a'] = ('A', _helper(1.5))"], text


def test_isolated_task_ignores_tampering_and_catches_run_time_shortcuts():
    """One task graded in a fresh interpreter: the worked solution passes; the same solution with the
    package captured as a default argument (a shortcut no name test sees) fails as a Shortcut; a
    function that patches the check's module while the check runs earns nothing."""
    from inferopt.labcheck import grade

    labs = grade.release_checks()
    task = next(t for t in grade.release_tasks("lab2", labs) if t["grade_id"] == "lab2-task1")
    cells = grade.submission_cells(json.loads((SOLUTIONS / "lab2-memory-calculator.ipynb").read_text()))
    ok, msg = grade.grade_task(task, cells, timeout=120, seed=1)
    assert ok, msg
    alias = cells + ["from inferopt.planning import memory as _m\n"
                     "def kv_bytes_per_token(cfg, kv_bytes, _f=_m.kv_bytes_per_token):\n"
                     "    return 2 * cfg['num_hidden_layers'] * cfg['num_key_value_heads'] * "
                     "(cfg['hidden_size'] // cfg['num_attention_heads']) * kv_bytes + 0 * len(str(_f))"]
    ok, _ = grade.grade_task(task, alias, timeout=120, seed=1)
    assert ok  # holding a reference is not calling it
    alias[-1] = alias[-1].replace("+ 0 * len(str(_f))", "+ 0 * _f('llama-3-70b', 1)")
    ok, msg = grade.grade_task(task, alias, timeout=120, seed=1)
    assert not ok and msg.startswith("Shortcut") and "kv_bytes_per_token" in msg, msg
    patch = cells + ["def kv_gb_per_request(cfg, kv_bytes, tokens):\n"
                     "    import inferopt.labcheck.lab2 as L\n    L.CheckFailed = Exception\n"
                     "    return kv_bytes_per_token(cfg, kv_bytes) * tokens / 2**30"]
    ok, msg = grade.grade_task(task, patch, timeout=120, seed=1)
    assert not ok, msg


def test_copying_and_probing_submissions_score_nothing_and_the_csv_says_why(tmp_path):
    """Issue 34: a lab 5 that takes its functions from the worked solution (read from solutions/ while
    graded) and a lab 1 that finds its answers by asking the check and the decision engine get no
    points, and the CSV's reason column says why; the worked lab 5 next to them keeps its points."""
    sub = tmp_path / "submissions"
    sub.mkdir()
    shutil.copy(SOLUTIONS / "lab5-monitoring-alerts.ipynb", sub / "ivy-lab5.ipynb")
    reader = ("def _solution(name):\n    import re\n"
              f"    text = open({str(SOLUTIONS / 'lab5-monitoring-alerts.md')!r}).read()\n    g = {{}}\n"
              "    for block in re.findall(r'```\\{code-cell\\}\\n(.*?)```', text, re.S):\n"
              "        try:\n            exec(block, g)\n        except Exception:\n            pass\n"
              "    return g[name]\n")
    names = ["my_rule", "my_test", "in_flight", "impossible_rows", "trusted", "best_qps_within_slo",
             "instances_needed", "per_instance_qps", "sizing", "step_decision"]
    _add_cell(LABS / "lab5-monitoring-alerts.ipynb", sub / "jo-lab5.ipynb",
              reader + "".join(f"{n} = _solution({n!r})\n" for n in names))
    probe = ("from inferopt import labcheck as _lc\nfrom inferopt.diagnosis.decision import diagnose as _dg\n"
             "for _p in [p['id'] for p in knowledge.load('pitfalls')['pitfalls']]:\n"
             "    try:\n        _lc.lab1.part3({'pitfall': _p})\n        pitfall = _p\n        break\n"
             "    except Exception:\n        pass\n"
             "answers = {n: (_dg(i['metrics'], i.get('slos', SLO), i['workload'], i['techniques_on']).branch, 'x')"
             " for n, i in INCIDENTS.items()}\n"
             "def worst_metric(metrics, slos):\n    return _dg(metrics, slos).worst_metric\n"
             "def branch_for(metrics, slos):\n    return _dg(metrics, slos).branch\n")
    _add_cell(LABS / "lab1-decision-tree.ipynb", sub / "kai-lab1.ipynb", probe)
    out = tmp_path / "grades.csv"
    proc = subprocess.run([sys.executable, "-m", "inferopt", "grade", str(sub), "--out", str(out)], check=False,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {(r["file"], r["task"]): r for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert {k: float(r["points"]) for k, r in rows.items() if k[0] == "ivy-lab5.ipynb"} == {
        ("ivy-lab5.ipynb", "lab5-task1"): 2, ("ivy-lab5.ipynb", "lab5-task2"): 2, ("ivy-lab5.ipynb", "lab5-task3"): 2,
        ("ivy-lab5.ipynb", "lab5-task4"): 1}
    assert all(r["reason"] == "passed" for k, r in rows.items() if k[0] == "ivy-lab5.ipynb")
    for t in ("lab5-task1", "lab5-task2", "lab5-task3", "lab5-task4"):
        r = rows[("jo-lab5.ipynb", t)]
        assert float(r["points"]) == 0 and r["reason"] == "read the worked solutions or the checks' files", r
        assert r["message"].startswith("Copied:"), r
    want = {"lab1-part1": "called the package instead of computing it",
            "lab1-part2": "called the package instead of computing it", "lab1-part3": "called the lab's check"}
    for t, reason in want.items():
        r = rows[("kai-lab1.ipynb", t)]
        assert float(r["points"]) == 0 and r["reason"] == reason, r
    for r in rows.values():
        assert "\n" not in r["message"] and not any(re.search(p, r["message"]) for p in ANSWERS if r["points"] == "0"), r


def test_a_submission_that_switches_off_the_sandbox_hooks():
    """Code that finds the submission process's own audit-hook switch and turns it off, then reads the
    worked solution. Where user namespaces are allowed (``unshare -r -m``) the grader also hides
    solutions/, .git, tests/ and the checks in a mount namespace, so the file is not there; where they
    are not, this gets through, as INSTRUCTORS.md says."""
    from inferopt.labcheck import grade, remote

    evade = ("import sys as _sys\ndef _solution(name):\n    import re\n    f = _sys._getframe()\n"
             "    while f is not None:\n        if '_GUARD' in f.f_globals:\n            f.f_globals['_GUARD']['on'] = 0\n"
             "        f = f.f_back\n"
             f"    text = open({str(SOLUTIONS / 'lab2-memory-calculator.md')!r}).read()\n    g = {{}}\n"
             "    for block in re.findall(r'```\\{code-cell\\}\\n(.*?)```', text, re.S):\n"
             "        try:\n            exec(block, g)\n        except Exception:\n            pass\n"
             "    return g[name]\n"
             "kv_bytes_per_token, kv_gb_per_request = _solution('kv_bytes_per_token'), _solution('kv_gb_per_request')\n")
    labs = grade.release_checks()
    task = next(t for t in grade.release_tasks("lab2", labs) if t["grade_id"] == "lab2-task1")
    cells = grade.submission_cells(json.loads((LABS / "lab2-memory-calculator.ipynb").read_text())) + [evade]
    ok, msg = grade.grade_task(task, cells, timeout=120, seed=1)
    if remote.hidden_prefix():
        assert not ok and "FileNotFoundError" in msg and "solutions" in msg, msg
    else:
        assert ok, msg
