"""The start page end to end in the browser, with its live engine: the one browser test that starts an
engine, so the suite runs it in its live part (tests/conftest.py). The JupyterLab, Chromium and page
fixtures and the page checks are tests/test_browser.py's."""
from __future__ import annotations

import re

import pytest
import test_browser
from browser_lab import NotebookPage

# test_browser's fixtures, found by pytest under these names
lab, browser, page = test_browser.lab, test_browser.browser, test_browser.page
_assert_clean = test_browser._assert_clean


@pytest.mark.engine
def test_start_page_first_live_request(lab, page):
    """The start page end to end in the browser: the engine starts and the streamed answer shows."""
    path = "chapters/00-start-here.ipynb"
    nbp = NotebookPage(page, lab, path).open()
    try:
        nbp.run(timeout_s=300)
        ask = nbp.code_cell_with("stream_chat(")
        out = nbp.text_of(ask, ".jp-OutputArea-output")
        assert "Paris" in out and re.search(r"TTFT \d+ ms", out), (out, nbp.problems())
        _assert_clean(nbp, "00-start-here")
        nbp.screenshot("00-start-here-answer", ask)
        assert "port free again: True" in nbp.text_of(nbp.code_cell_with("srv.stop()"))
    finally:
        nbp.close()
