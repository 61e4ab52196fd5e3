"""``make learner-pack`` ships no worked answer: no three consecutive lines of a solution cell's answer
(``### BEGIN SOLUTION`` blocks in solutions/) and none of the checks' reference formulas
(``inferopt/labcheck/_references.py``) appear anywhere in it. The pack the old exclude list made (solutions/
only) fails the same test: it leaked the references and tests that embed lab answers. From the unpacked tree a
lab's check cell still imports and answers: a missing definition is "not done yet"; an attempt is told to hand
the lab in (the check needs the references); with the hub's store (INFEROPT_REFERENCES) it checks as before."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from inferopt.paths import REPO_ROOT, SOLUTIONS

REFERENCES = REPO_ROOT / "inferopt/labcheck/_references.py"
OLD_EXCLUDE = ["solutions", "locale/zh_CN/LC_MESSAGES/solutions"]   # the pack before issue 51


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def _windows(lines: list[str], n: int = 3, min_chars: int = 60) -> set[str]:
    n = min(n, len(lines))   # a two-line formula is one fingerprint
    return {"\n".join(lines[i:i + n]) for i in range(len(lines) - n + 1) if sum(map(len, lines[i:i + n])) >= min_chars}


def fingerprints() -> dict[str, str]:
    """{three consecutive lines (a shorter block: whole): where they come from}, from each solution block
    and each reference's body."""
    out = {}
    for nb_path in sorted(SOLUTIONS.glob("lab*.ipynb")):
        for c in json.loads(nb_path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for m in re.finditer(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", src, re.S):
                out.update(dict.fromkeys(_windows(_lines(m.group(1))), nb_path.name))
    text = REFERENCES.read_text(encoding="utf-8")
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("ref_"):
            body = ast.get_source_segment(text, node).split("\n", 1)[1]
            body = re.sub(r'"""[\s\S]*?"""', "", body, count=1)   # the docstring is prose, not the formula
            out.update(dict.fromkeys(_windows(_lines(body)), f"_references.{node.name}"))
    return out


def leaks(root: Path, prints: dict[str, str]) -> dict[str, set[str]]:
    """{file in the tree: the sources of the fingerprints it holds}."""
    found = {}
    for p in root.rglob("*"):
        if not p.is_file() or p.suffix in {".png", ".gz", ".woff2", ".ico", ".svg"}:
            continue
        try:
            norm = "\n".join(_lines(p.read_text(encoding="utf-8")))
        except (UnicodeDecodeError, OSError):
            continue
        hits = {src for fp, src in prints.items() if fp in norm}
        if hits:
            found[str(p.relative_to(root))] = hits
    return found


def unpack(tarball: Path, dest: Path) -> Path:
    with tarfile.open(tarball) as t:
        t.extractall(dest, filter="data")
    return dest / "inference-course"


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pack")
    res = subprocess.run(["make", "--no-print-directory", "learner-pack", f"PACK={tmp / 'pack.tar.gz'}"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return unpack(tmp / "pack.tar.gz", tmp / "new")


def test_the_fingerprints_are_there_to_find():
    """The fingerprints are real: each lab's solutions and the references give some, and they are found in the
    files they come from (so an empty search below means absent, not unsearched)."""
    prints = fingerprints()
    sources = set(prints.values())
    assert {"lab2-memory-calculator.ipynb", "lab5-monitoring-alerts.ipynb", "_references.ref_bytes_per_token"} <= sources
    assert leaks(REFERENCES.parent, prints).get("_references.py"), "the references hold no fingerprint of themselves"
    assert leaks(SOLUTIONS, prints), "solutions/ holds no fingerprint"


def test_the_pack_holds_no_worked_answer(pack):
    assert not (pack / "solutions").exists() and not (pack / "tests").exists()
    assert not (pack / "inferopt/labcheck/_references.py").exists()
    assert (pack / "labs/lab2-memory-calculator.ipynb").exists() and (pack / "inferopt/labcheck/lab2.py").exists()
    assert leaks(pack, fingerprints()) == {}


def test_the_old_pack_leaked_answers(tmp_path):
    """The exclude list before this change (solutions/ only) shipped the references and tests holding lab answers."""
    tarball = tmp_path / "old.tar.gz"
    subprocess.run(["git", "archive", "--format=tar.gz", "--prefix=inference-course/", "-o", str(tarball), "HEAD",
                    "--", ".", *[f":(exclude){p}" for p in OLD_EXCLUDE]], cwd=REPO_ROOT, check=True, timeout=300)
    found = leaks(unpack(tarball, tmp_path), fingerprints())
    assert "inferopt/labcheck/_references.py" in found, sorted(found)
    assert any(f.startswith("tests/") for f in found), sorted(found)


CHECK = """
import sys
from inferopt import labcheck
import inferopt
assert inferopt.__file__.startswith(sys.argv[1]), inferopt.__file__
for lab in ("lab1", "lab2", "lab3", "lab4", "lab5"):
    getattr(labcheck, lab)
def run(ns):
    try:
        labcheck.lab2.task1(ns, seed=1)
        return "passed"
    except labcheck.NotDone as exc:
        return type(exc).__name__ + ": " + str(exc)
print(run({}))
def kv_bytes_per_token(cfg, kv_bytes):
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    return 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * kv_bytes
def kv_gb_per_request(cfg, kv_bytes, tokens):
    return kv_bytes_per_token(cfg, kv_bytes) * tokens / 1e9
print(run({"kv_bytes_per_token": kv_bytes_per_token, "kv_gb_per_request": kv_gb_per_request}))
"""


def _check_cell(root: Path, **env) -> list[str]:
    full = dict(os.environ, PYTHONPATH=str(root), **env)
    full.pop("INFEROPT_EDITION", None)
    res = subprocess.run([sys.executable, "-c", CHECK, str(root)], cwd=root, capture_output=True, text=True,
                         env=full, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout.strip().splitlines()[-2:]


def test_a_labs_check_cell_works_from_the_unpacked_pack(pack):
    """Import only (no engine): the check cell's module loads; without references it still says what is missing,
    and sends an attempt to the grader; with the hub's store it checks the attempt as the full course does."""
    missing, attempt = _check_cell(pack)
    assert missing.startswith("NotDone: Task 1 is not done yet: define `kv_bytes_per_token`"), missing
    assert attempt.startswith("ChecksElsewhere: ") and "python -m inferopt handin" in attempt, attempt
    missing, attempt = _check_cell(pack, INFEROPT_REFERENCES=str(REFERENCES.parent))
    assert attempt == "passed", attempt
    _, attempt = _check_cell(pack, INFEROPT_REFERENCES=str(pack / "nowhere"))
    assert attempt.startswith("ChecksElsewhere: INFEROPT_REFERENCES=") and "holds no _references.py" in attempt
