"""Command line: ``python -m inferopt <command> ...``.

Each command lives in the module that holds its engine; that module defines
``add_subcommand(subparsers)``, which registers the parser and sets ``func`` (args -> int).
Add a module name to COMMAND_MODULES to add a command.
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
    "inferopt.serving.footprint",  # engine-footprint
    "inferopt.planning.memory",        # memory
    "inferopt.planning.planner",       # plan
    "inferopt.planning.capacity",      # capacity
    "inferopt.monitoring.alerts",     # alerts
    "inferopt.monitoring.dashboard",  # dashboard
    "inferopt.diagnosis.decision",      # diagnose
    "inferopt.bench.cli",     # bench sweep | bench import
    "inferopt.labcheck.grade",  # grade (a folder of submitted lab notebooks)
]


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m inferopt",
                                 description="Course tools for inference optimization.")
    sub = ap.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).add_subcommand(sub)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
