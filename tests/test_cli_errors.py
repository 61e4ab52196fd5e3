"""Every ``python -m inferopt`` command ends bad input in one line on stderr that starts with
"error:", says what to do, exits with code 2, and shows no traceback.

Each command runs as a real subprocess, with a missing input file where it reads one and an
unwritable output path where it writes one (``/proc`` refuses new files even to root). No
engine starts: every case fails before a server would be spawned.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from inferopt.__main__ import build_parser
from inferopt.paths import REPO_ROOT

MISSING = "/nonexistent/inferopt-test/missing"
UNWRITABLE = "/proc/inferopt-forbidden"
URL = ["--url", "http://127.0.0.1:9", "--model", "served-name"]   # never contacted: each case fails first

# (id, argv, extra environment): id starts with the command it runs
CASES = [
    ("env: INFEROPT_ENGINE not understood", ["env"], {"INFEROPT_ENGINE": "tpu"}),
    ("prepare-model: cache folder unwritable", ["prepare-model"], {"INFEROPT_CACHE": UNWRITABLE}),
    ("serve: model folder missing", ["serve", "--model", MISSING], {}),
    ("serve: cache folder unwritable", ["serve"], {"INFEROPT_CACHE": UNWRITABLE}),
    ("engine-footprint: cache folder unwritable", ["engine-footprint"], {"INFEROPT_CACHE": UNWRITABLE}),
    ("engine-footprint: negative KV budget", ["engine-footprint", "--kv-cache-gib", "-1"], {}),
    ("isa-cost: fewer than three requests", ["isa-cost", "--requests", "2"], {}),
    ("isa-cost: prompt and output past the engines' 512 tokens", ["isa-cost", "--input-tokens", "500"], {}),
    ("gpu-check: output folder unwritable", ["gpu-check", "--dry-run", "--part", "1", "--out", UNWRITABLE], {}),
    ("gpu-check: part 1 without vLLM's GPU build", ["gpu-check", "--part", "1"], {}),
    ("memory: config.json missing", ["memory", "--model", MISSING + "/config.json"], {}),
    ("memory: argument not a number", ["memory", "--tp", "eight"], {}),
    ("plan: scenario file missing", ["plan", MISSING + ".yaml"], {}),
    ("capacity: negative target", ["capacity", "--target-qps", "-5", "--per-instance-qps", "50"], {}),
    ("predict: request rate not finite", ["predict", "--model", "llama-3.1-8b", "--gpu", "H100", "--input-tokens", "100",
                                           "--output-tokens", "10", "--request-rate", "nan"], {}),
    ("predict: TP does not split the heads", ["predict", "--model", "llama-3.1-8b", "--gpu", "H100", "--tp", "3",
                                              "--input-tokens", "100", "--output-tokens", "10", "--concurrency", "4"], {}),
    ("hardware-table: cache folder unwritable", ["hardware-table", "--check"], {"INFEROPT_CACHE": UNWRITABLE}),
    ("alerts: output folder unwritable", ["alerts", "--out", UNWRITABLE], {}),
    ("alerts: output folder is a file", ["alerts", "--out", "/etc/hostname/alerts"], {}),
    ("dashboard: stored file unwritable", ["dashboard", "--write"], {"_STORED_PATH": UNWRITABLE + "/d.json"}),
    ("diagnose: --input missing", ["diagnose", "--input", MISSING + ".yaml"], {}),
    ("diagnose: --baseline missing", ["diagnose", "--baseline", MISSING + ".json"], {}),
    ("bench sweep: tokenizer folder missing", ["bench", "sweep", *URL, "--tokenizer", MISSING], {}),
    ("bench sweep: results folder unwritable", ["bench", "sweep", *URL], {"INFEROPT_RESULTS": UNWRITABLE}),
    ("bench import: file missing", ["bench", "import", MISSING + ".json"], {}),
    ("diagnose: --metrics-file missing", ["diagnose", "--metrics-file", MISSING + ".txt"], {}),
    ("diagnose: TTFT SLO above the whole-request SLO", ["diagnose", "--slo-ttft-p95-ms", "800",
                                                        "--slo-e2e-p95-ms", "30"], {}),
    ("diagnose: prompt longer than the model's context", ["diagnose", "--model", "llama-3.1-8b", "--gpu", "H100",
                                                           "--prompt-tokens", "200000", "--ttft-p95-ms", "900",
                                                           "--slo-ttft-p95-ms", "500"], {}),
    ("alerts: TTFT threshold given in ms", ["alerts", "--ttft-p95-s", "500"], {}),
    ("tune: unknown starting point", ["tune", "--start", "nowhere"], {}),
    ("tune: trace file unwritable", ["tune", "--json", UNWRITABLE + "/trace.json"], {}),
    ("grade: submissions folder missing", ["grade", MISSING], {}),
    ("grade: --jobs 0", ["grade", "/etc", "--jobs", "0"], {}),
    ("preflight: room address not a URL", ["preflight", "--room", "room-7"], {}),
    ("room serve: learner pack missing", ["room", "serve", "--pack", MISSING, "--engine-url", "http://127.0.0.1:9"], {}),
    ("room measure: client counts not numbers", ["room", "measure", "--clients", "one,two"], {}),
    ("handin: drop folder missing", ["handin", "--to", MISSING, "--name", "ana"], {}),
    ("handin: drop folder unwritable", ["handin", "--to", "/proc", "--name", "ana"], {}),
    ("handin: no learner name", ["handin", "--to", "/tmp"], {"JUPYTERHUB_USER": ""}),
    ("presenter: output folder unwritable", ["presenter", "build", "--out", UNWRITABLE], {}),
    ("presenter: nothing built in the folder", ["presenter", "check", "--out", MISSING], {}),
    ("plan: --k8s folder unwritable", ["plan", "llama3-70b-chat", "--k8s", UNWRITABLE], {}),
    ("(no command)", [], {}),
    ("(unknown command)", ["fly"], {}),
]

# `dashboard --write` writes into assets/: the case points it elsewhere through the same main()
_RUN_WITH_STORED_PATH = ("import sys; from pathlib import Path; import inferopt.monitoring.dashboard as d; "
                         "d.STORED_PATH = Path(sys.argv[1]); from inferopt.__main__ import main; "
                         "sys.exit(main(sys.argv[2:]))")


def run_cli(argv, extra_env=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), INFEROPT_ENGINE="cpu", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")
    extra = dict(extra_env or {})
    stored = extra.pop("_STORED_PATH", None)
    env.update(extra)
    cmd = [sys.executable, "-c", _RUN_WITH_STORED_PATH, stored] if stored else [sys.executable, "-m", "inferopt"]
    return subprocess.run(cmd + list(argv), capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=180)


def assert_one_error_line(res: subprocess.CompletedProcess) -> str:
    err = res.stderr
    assert res.returncode == 2, f"exit code {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{err}"
    assert "Traceback" not in err + res.stdout, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"stderr is not one 'error:' line:\n{err}"
    assert len(lines[0]) > len("error: ") + 20, lines[0]
    return lines[0]


def commands() -> set[str]:
    """Every command and sub-command `python -m inferopt` offers (e.g. 'memory', 'bench sweep')."""
    import argparse

    def walk(parser, prefix):
        out = set()
        for act in parser._actions:
            if isinstance(act, argparse._SubParsersAction):
                for name, sub in act.choices.items():
                    inner = walk(sub, f"{prefix}{name} ")
                    out |= inner or {f"{prefix}{name}"}
        return out

    return walk(build_parser(), "")


def test_every_command_has_a_bad_input_case():
    covered = {cid.split(":")[0] for cid, _, _ in CASES}
    missing = commands() - covered
    assert not missing, f"add a bad-input case to CASES for: {sorted(missing)}"


@pytest.fixture(scope="module")
def ran():
    """Every case's subprocess, run three at a time (each is mostly a Python start-up waiting on
    imports and disk, so the suite waits for a third of them); {case id: CompletedProcess}."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {cid: pool.submit(run_cli, argv, env) for cid, argv, env in CASES}
        return {cid: f.result() for cid, f in futures.items()}


@pytest.mark.parametrize("cid,argv,extra_env", CASES, ids=[c[0] for c in CASES])
def test_bad_input_ends_in_one_error_line(ran, cid, argv, extra_env):
    line = assert_one_error_line(ran[cid])
    for path in (MISSING, UNWRITABLE):
        if any(path in a for a in argv) or any(path in str(v) for v in extra_env.values()):
            assert path in line, f"the message should name the path: {line}"


def test_the_checker_rejects_a_traceback_and_a_usage_block():
    """The assertion itself fails on what the commands printed before this was fixed."""
    tb = subprocess.CompletedProcess([], 1, "", 'Traceback (most recent call last):\n  File "x"\nOSError: no\n')
    usage = subprocess.CompletedProcess([], 2, "", "usage: python -m inferopt memory [-h]\n"
                                                   "python -m inferopt memory: error: argument --tp: invalid int\n")
    for res in (tb, usage):
        with pytest.raises(AssertionError):
            assert_one_error_line(res)


def _help_failures(parser) -> list[str]:
    """Sub-commands whose --help text argparse cannot format (e.g. a bare % in a help string)."""
    sub = next(a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    bad = []
    for name, p in sub.choices.items():
        try:
            p.format_help()
        except (TypeError, ValueError, KeyError) as exc:
            bad.append(f"{name}: {exc}")
    return bad


def test_every_command_prints_its_help():
    """`python -m inferopt CMD --help` is a learner's first step: argparse %-formats every help text, so a prose
    "90 % confidence" crashed `diagnose --help` with a traceback. Every command's help must format."""
    assert _help_failures(build_parser()) == []
    wrong = build_parser()
    sub = next(a for a in wrong._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    sub.choices["plan"].add_argument("--confidence", help="at 90 % confidence")           # the bug, re-introduced
    assert [x.split(":")[0] for x in _help_failures(wrong)] == ["plan"]
