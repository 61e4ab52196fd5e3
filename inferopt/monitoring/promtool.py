"""Run Prometheus' own checker: ``promtool check rules FILE`` and ``promtool test rules FILE``.

promtool comes with Debian's ``prometheus`` package (2.42 here). It is looked up in ``INFEROPT_PROMTOOL``,
then on PATH, then in ``~/.local/bin`` (where a learner without sudo puts it: ``make preflight`` says how);
when it is missing a :class:`CourseError` names the install commands.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from inferopt.errors import CourseError

INSTALL_HINT = ("make tools   (sudo apt-get install -y --no-install-recommends prometheus, which gives "
                "/usr/bin/prometheus and /usr/bin/promtool and starts no daemon); without sudo, unpack Debian's "
                "package into ~/.local: `make preflight` prints the commands")


def find_tool(name: str, env_var: str) -> str:
    """Absolute path of ``name`` (``env_var`` overrides the PATH lookup); CourseError if absent."""
    override = os.environ.get(env_var)
    if override:
        if not (Path(override).is_file() and os.access(override, os.X_OK)):
            raise CourseError(f"{env_var}={override!r} is not an executable file. Unset it or fix the path.")
        return override
    exe = shutil.which(name) or shutil.which(name, path=str(Path.home() / ".local" / "bin"))
    if not exe:
        raise CourseError(f"`{name}` is not installed (not found on PATH). Install it with: {INSTALL_HINT}")
    return exe


def promtool() -> str:
    """Path of promtool."""
    return find_tool("promtool", "INFEROPT_PROMTOOL")


@dataclass(frozen=True)
class PromtoolResult:
    """What promtool said: ``ok`` (exit code 0), ``returncode`` and its combined ``output``."""

    command: str
    ok: bool
    returncode: int
    output: str


def _run(args: list, timeout: float = 120) -> PromtoolResult:
    exe = promtool()
    try:
        proc = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CourseError(f"promtool {' '.join(map(str, args))} did not finish in {timeout:.0f} s.") from None
    return PromtoolResult(command="promtool " + " ".join(str(a) for a in args), ok=proc.returncode == 0,
                          returncode=proc.returncode, output=(proc.stdout + proc.stderr))


def check_rules(path) -> PromtoolResult:
    """``promtool check rules PATH``: is the rule file valid (syntax, PromQL, durations)?"""
    path = Path(path)
    if not path.is_file():
        raise CourseError(f"no rule file at {path}; write it first (alerts.write_rules_and_tests).")
    return _run(["check", "rules", path])


def test_rules(path) -> PromtoolResult:
    """``promtool test rules PATH``: do the rules fire exactly as the unit-test file expects?"""
    path = Path(path)
    if not path.is_file():
        raise CourseError(f"no promtool test file at {path}; write it first (alerts.write_rules_and_tests).")
    return _run(["test", "rules", path])


def version() -> str:
    """First line of ``promtool --version``."""
    return _run(["--version"]).output.splitlines()[0]
