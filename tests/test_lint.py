"""ruff (config in pyproject.toml) finds nothing in the package, the tests or the notebooks' code.

The failure message is ruff's own report (file, cell, line, rule), and most findings are fixed by
``.venv/bin/ruff check --fix`` (then ``make sync NB=...`` for a notebook, so its MyST twin follows).
"""
from __future__ import annotations

import subprocess
import sys

from inferopt.paths import REPO_ROOT


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args, "--no-cache"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)


def test_ruff_covers_the_package_tests_and_notebooks_but_not_labs():
    res = ruff("check", "--show-files")
    assert res.returncode == 0, res.stderr
    files = {p.replace(str(REPO_ROOT) + "/", "") for p in res.stdout.split()}
    want = {str(p.relative_to(REPO_ROOT)) for pattern in ("inferopt/**/*.py", "tests/*.py", "chapters/*.ipynb",
                                                          "solutions/*.ipynb") for p in REPO_ROOT.glob(pattern)}
    assert want <= files, f"ruff does not check: {sorted(want - files)}"
    assert not [f for f in files if f.startswith(("labs/", ".venv/", ".cache/", "results/"))]


def test_package_and_tests_are_clean():
    res = ruff("check", "--output-format", "concise", "inferopt", "tests")
    assert res.returncode == 0, f"ruff findings (fix them; many with `.venv/bin/ruff check --fix`):\n{res.stdout}"


def test_whole_tree_is_clean():
    res = ruff("check", "--output-format", "concise")
    assert res.returncode == 0, f"ruff findings (fix them; many with `.venv/bin/ruff check --fix`):\n{res.stdout}"


def test_ruff_reports_a_finding():
    """The check can fail: ruff flags an unused import and an unsorted import block."""
    res = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--stdin-filename", "inferopt/x.py",
                          "-"], input="import sys\nimport os\n", cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1 and "F401" in res.stdout and "I001" in res.stdout, res.stdout
