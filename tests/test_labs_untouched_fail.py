"""An untouched lab fails every one of its checks, and says so in one friendly line.

Each generated lab (labs/) runs top to bottom in a fresh kernel as the grader runs it (errors stay
in their cell, the next cell runs; cells tagged `live` are skipped, so no engine starts). Every
check cell must then show exactly what a learner sees in Jupyter for an unattempted task: one
line, "... is not done yet: ...", raised by the check (NotDone), with no traceback chain and no
NameError. Proof that the checks reject *wrong* work, not only missing work, is in
tests/test_lab_checks.py."""
from __future__ import annotations

import json

import pytest

from inferopt.labcheck import grade
from inferopt.paths import LABS

LAB_FILES = sorted(LABS.glob("*.ipynb"))


@pytest.mark.parametrize("lab", LAB_FILES, ids=[p.stem for p in LAB_FILES])
def test_untouched_lab_fails_every_check_in_one_line(lab, tmp_path):
    labs = grade.release_checks()
    nb = json.loads(lab.read_text(encoding="utf-8"))
    name = lab.name.split("-")[0]
    nb, found = grade.prepare(nb, name, labs, live=False)
    assert set(found) == set(labs[name]["checks"]), "labs/ lost a check cell: run make labs"
    ran, problem = grade._run(nb, tmp_path, cell_timeout=120, notebook_timeout=300)
    assert problem is None, problem
    for gid, index in found.items():
        outputs = ran["cells"][index]["outputs"]
        errors = [o for o in outputs if o["output_type"] == "error"]
        assert len(errors) == 1, f"{gid}: an untouched task must fail its check; outputs: {outputs}"
        err = errors[0]
        assert err["ename"] == "NotDone", f"{gid}: {err['ename']}: {err['evalue']}"
        assert "not done yet" in err["evalue"], err["evalue"]
        # what Jupyter renders: one line, not a traceback through the check's code
        assert len(err["traceback"]) == 1 and "NotDone" in err["traceback"][0], err["traceback"]
        printed = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
        assert "Traceback" not in printed and "NameError" not in printed, printed
