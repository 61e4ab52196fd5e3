"""A class of synthetic hand-ins for timing the grader: ``python -m inferopt.room.synthetic DIR [--learners 25]``.

Learner k hands in one of labs 1, 2 and 5 (the labs no engine serves: k mod 3), worked (the notebook from
``solutions/``) when k is even, untouched (from ``labs/``) when k is odd, in the layout ``handin`` writes:
``DIR/learnerNN/<lab>.ipynb``. Then: ``python -m inferopt grade DIR --jobs 1`` against ``--jobs 2``.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from inferopt.paths import LABS, SOLUTIONS

LAB_FILES = ["lab1-decision-tree.ipynb", "lab2-memory-calculator.ipynb", "lab5-monitoring-alerts.ipynb"]


def make_class(folder: Path, learners: int = 25) -> list[Path]:
    folder = Path(folder)
    out = []
    for k in range(learners):
        name = LAB_FILES[k % len(LAB_FILES)]
        dst = folder / f"learner{k:02d}" / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile((SOLUTIONS if k % 2 == 0 else LABS) / name, dst)
        out.append(dst)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.room.synthetic", description=__doc__)
    ap.add_argument("folder", type=Path)
    ap.add_argument("--learners", type=int, default=25)
    args = ap.parse_args(argv)
    print(f"wrote {len(make_class(args.folder, args.learners))} submissions under {args.folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
