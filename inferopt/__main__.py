"""Command line: ``python -m inferopt <command> ...``.

Each command lives in the module that holds its engine; that module defines
``add_subcommand(subparsers)``, which registers the parser and sets ``func`` (args -> int).
Add a module name to COMMAND_MODULES to add a command.

Bad input never ends in a traceback: a :class:`~inferopt.errors.CourseError`, a file that cannot
be read or written (``OSError``) and an argument argparse rejects all print one line,
``error: <what was wrong>; <what to do>``, on stderr and exit with code 2.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from inferopt.errors import CourseError

COMMAND_MODULES = [
    "inferopt.serving.envcheck",      # env
    "inferopt.serving.model_prep",    # prepare-model
    "inferopt.serving.engine",        # serve
    "inferopt.serving.footprint",     # engine-footprint
    "inferopt.serving.gpucheck",      # gpu-check
    "inferopt.serving.isa_cost",      # isa-cost (native against INFEROPT_CPU_ISA=avx2, measured here)
    "inferopt.planning.memory",       # memory
    "inferopt.performance.plan_check",  # plan (the planner's, then the performance model's SLO check)
    "inferopt.planning.capacity",     # capacity
    "inferopt.performance.predict",   # predict
    "inferopt.monitoring.alerts",     # alerts
    "inferopt.monitoring.dashboard",  # dashboard
    "inferopt.diagnosis.cli",         # diagnose
    "inferopt.diagnosis.tuning",      # tune
    "inferopt.bench.cli",             # bench sweep | bench import
    "inferopt.labcheck.grade",        # grade (a folder of submitted lab notebooks)
    "inferopt.room.preflight",        # preflight (will this machine run the course? stdlib only)
    "inferopt.room.handin",           # handin (copy my lab notebooks to the room's drop folder)
    "inferopt.room.presenter",        # presenter build | check (slides, talking points, answer keys)
    "inferopt.room.cli",              # room serve | room measure (JupyterHub for a workshop room; its capacity)
    "inferopt.vllm_oracle.hardware_table",  # hardware-table (regenerate assets/hardware_rules.yaml from vLLM)
]
BAD_INPUT = 2


class _Parser(argparse.ArgumentParser):
    """argparse, but a rejected argument is one line naming the --help to read (no usage block)."""

    def error(self, message):
        self.exit(BAD_INPUT, f"error: {message}; see `{self.prog} --help`\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m inferopt", description="Course tools for inference optimization.")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_subcommand(sub)
    return ap


def os_error_message(exc: OSError) -> str:
    """What went wrong with a file, and what to do about it."""
    what = exc.strerror or exc.__class__.__name__
    path = exc.filename if exc.filename is not None else ""
    if isinstance(exc, (FileNotFoundError, NotADirectoryError)):
        todo = "check the path (a missing input file, or a folder that does not exist)"
    elif isinstance(exc, PermissionError) or exc.errno in (1, 13, 30):
        todo = "choose a path you may read and write"
    else:
        todo = "check the path and the disk"
    return f"{path}: {what}; {todo}" if path else f"{what}; {todo}"


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CourseError as exc:
        from inferopt.i18n import localize
        msg = localize(str(exc))   # the edition's words (English: unchanged)
    except OSError as exc:
        msg = os_error_message(exc)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    # the first line says what to do; a longer message (an engine's log tail) follows it as is
    print(f"error: {msg.strip()}", file=sys.stderr)
    return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
