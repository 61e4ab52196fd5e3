"""Lab generation and notebook hygiene: the generator on small notebooks, then the repository's
own state (labs fresh, stored notebooks clean), failing with the command that fixes it."""
from __future__ import annotations

import nbformat
import pytest

from inferopt import nbtools
from inferopt.paths import LABS, SOLUTIONS


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nbformat.from_dict(nbformat.reads(nbformat.writes(nb), as_version=4))


def test_solution_region_becomes_stub_and_outputs_are_cleared():
    code = nbformat.v4.new_code_cell("x = 1\ndef f():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION\n"
                                     "print(f())")
    code.outputs = [nbformat.v4.new_output("stream", text="42\n")]
    code.execution_count = 1
    md = nbformat.v4.new_markdown_cell("Why?\n\nBEGIN SOLUTION\nBecause.\nEND SOLUTION")
    lab = nbtools.make_lab(_nb(code, md))
    src = lab["cells"][0]["source"]
    assert "return 42" not in src
    assert "    # YOUR CODE HERE\n    raise NotImplementedError()" in src
    assert lab["cells"][0]["outputs"] == [] and lab["cells"][0]["execution_count"] is None
    assert "Because" not in lab["cells"][1]["source"] and "YOUR ANSWER HERE" in lab["cells"][1]["source"]


def test_unclosed_region_is_an_error_naming_the_cell():
    cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1")
    with pytest.raises(ValueError, match="cell 0"):
        nbtools.make_lab(_nb(cell))


def test_clean_drops_stray_metadata_and_is_idempotent():
    cell = nbformat.v4.new_code_cell("1")
    cell.metadata = {"tags": ["t"], "execution": {"iopub.status.busy": "x"}, "scrolled": True}
    nb = _nb(cell)
    nb.metadata["widgets"] = {"state": {}}
    once = nbtools.clean(nb)
    assert once["cells"][0]["metadata"] == {"tags": ["t"]}
    assert "widgets" not in once["metadata"]
    assert nbtools.clean(once) == once


def test_every_solution_has_a_lab_and_checks():
    sols = sorted(SOLUTIONS.glob("*.ipynb"))
    assert sols, "solutions/ holds no lab"
    for sol in sols:
        nb = nbformat.read(sol, as_version=4)
        cells = [c for c in nb.cells if c.cell_type == "code"]
        codes = [c.source for c in cells]
        first_stub = next((i for i, s in enumerate(codes) if "### BEGIN SOLUTION" in s), None)
        assert first_stub is not None, f"{sol.name} has no ### BEGIN SOLUTION region"
        graded = [c for c in cells[first_stub:] if c.metadata.get("nbgrader", {}).get("grade")]
        assert graded, f"{sol.name}: no graded check cell (nbgrader metadata) after the first solution region"
        assert all("labcheck." in c.source and "BEGIN SOLUTION" not in c.source for c in graded), sol.name
        assert (LABS / sol.name).exists()
        lab = nbformat.read(LABS / sol.name, as_version=4)
        kept = [c.metadata.get("nbgrader") for c in lab.cells if c.metadata.get("nbgrader")]
        assert kept == [c.metadata["nbgrader"] for c in graded], f"labs/{sol.name} lost the graded cells' metadata"


def test_hidden_tests_are_removed_from_labs():
    src = "x = 1\n### BEGIN HIDDEN TESTS\nassert secret()\n### END HIDDEN TESTS\nprint('visible')"
    cell = nbformat.v4.new_code_cell(src)
    cell.metadata = {"nbgrader": {"grade": True, "grade_id": "t", "points": 1}}
    lab = nbtools.make_lab(_nb(cell))
    assert lab["cells"][0]["source"] == "x = 1\nprint('visible')"
    assert lab["cells"][0]["metadata"]["nbgrader"]["grade_id"] == "t"


def test_labs_are_generated_from_solutions():
    problems = nbtools.stale_labs()
    assert not problems, "\n".join(problems) + f"\nfix: {nbtools.FIX_LABS}"


def test_stored_notebooks_are_clean_and_were_run_in_order():
    problems = nbtools.unclean_notebooks()
    assert not problems, "\n".join(problems) + (f"\nfix: {nbtools.FIX_CLEAN}; re-run a notebook with "
                                                "make run-notebooks NB=path")
