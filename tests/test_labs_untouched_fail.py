"""An untouched lab must not pass: executed top to bottom, it stops with an error at a
learner's stub (NotImplementedError) or at a failing check, never runs clean."""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from inferopt.paths import LABS

LAB_FILES = sorted(LABS.glob("*.ipynb"))


@pytest.mark.parametrize("lab", LAB_FILES, ids=[p.stem for p in LAB_FILES])
def test_untouched_lab_fails_its_checks(lab):
    nb = nbformat.read(lab, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(lab.parent)}})
    with pytest.raises(CellExecutionError) as err:
        client.execute()
    msg = str(err.value)
    assert "NotImplementedError" in msg or "AssertionError" in msg, msg[-2000:]
