"""The course as a learner sees it: the course's JupyterLab (``make lab``'s command and settings) in
headless Debian Chromium, driven through JupyterLab's own menus (helpers in tests/browser_lab.py).

Each notebook with widgets or figures is opened with the file browser open at 1280 x 800, its
outputs cleared, and its cells run with Run > Run All Cells; notebooks with live cells (engine,
Prometheus) run only the cells that need neither (the live ones stay with nbval), except the
start page, whose first live request a learner runs first: it runs here once (marked ``engine``), in a
workshop room's JupyterLab (``INFEROPT_ENGINE_URL`` set before ``make lab``), attached to the worker's
session engine; nbval runs it with an engine of its own.
Then the page is checked (no error output, no widget failed or still loading, every plotly trace
drawn with its markers and labels, the decision tree's nodes and labels, nothing clipped) and the
widgets are used. A screenshot per notebook lands in results/screenshots/.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from inferopt.paths import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests"))
from browser_lab import (
    SCREENSHOTS,
    CourseLab,
    NotebookPage,
    close_notebook,
    launch_browser,
    live_code_cells,
)
from playwright.sync_api import sync_playwright


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with CourseLab(tmp_path_factory.mktemp("lab")) as lab:
        yield lab
    assert lab.proc is None


@pytest.fixture(scope="module")
def lab_zh(tmp_path_factory):
    """``make lab EDITION=zh``: the Chinese edition's JupyterLab (menus from the official language pack)."""
    with CourseLab(tmp_path_factory.mktemp("lab-zh"), edition="zh") as lab:
        yield lab
    assert lab.proc is None


@pytest.fixture(scope="module")
def room_lab(tmp_path_factory, live_server):
    """A workshop room's JupyterLab: the instructor's engine (this worker's session engine, started beside the
    first browser tests) in ``INFEROPT_ENGINE_URL`` when ``make lab`` starts, so a default ``VLLMServer`` attaches
    to it (the room's policy, ``refuse``, for anything else). nbval runs the start page with an engine of its
    own (tests/conftest.py: SHARE_ENGINE), so both of a learner's paths are run, each once."""
    with CourseLab(tmp_path_factory.mktemp("lab-room"), env={"INFEROPT_ENGINE_URL": live_server.base_url}) as lab:
        yield lab
    assert lab.proc is None
    live_server.ensure_alive()              # letting go of the room's engine left it running


@pytest.fixture(scope="module")
def browser(lab, tmp_path_factory):
    with sync_playwright() as pw:
        ctx = launch_browser(pw, tmp_path_factory.mktemp("chromium"))
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def page(browser):
    """A fresh tab per test; closed without its unload prompt (nothing is saved)."""
    pg = browser.new_page()
    yield pg
    if not pg.is_closed():
        pg.close()


def _assert_clean(nbp: NotebookPage, name: str):
    problems = nbp.problems()
    shot = nbp.screenshot(name)
    for k in nbp.rich_outputs():  # one more per widget or figure, scrolled to it
        nbp.screenshot(f"{name}-cell{k + 1}", k)
    assert not problems, f"{nbp.path} in the browser ({shot}):\n  " + "\n  ".join(problems)


# --- interactions -------------------------------------------------------------------------------

def _field(cell, label: str, kind: str = "input"):
    """The input of the ipywidget whose description is ``label``."""
    return cell.locator(f".widget-inline-hbox:has(> label:text-is('{label}')) {kind}").first


def use_decision_widget(nbp: NotebookPage):
    pos = nbp.code_cell_with("DecisionWidget()")
    cell = nbp.cell(pos)
    nbp.screenshot("02-decision-tree-widget", pos)
    before_hot = nbp.hot_nodes(pos)
    next_before = cell.locator("p:has(b:text-is('Next:'))").inner_text()
    assert "A" in before_hot and "baseline" in before_hot, before_hot
    # TTFT fine, TPOT 4x its SLO: the path moves from branch A to branch B
    for label, value in (("TTFT P95 ms", "100"), ("TPOT P95 ms", "200")):
        box = _field(cell, label)
        box.fill(value)
        box.press("Enter")
    nbp.page.wait_for_function(
        "([pos]) => [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null)"
        ".querySelectorAll('.jp-CodeCell')[pos]"
        ".innerText.includes('Path: baseline → B')", arg=[pos], timeout=10_000)
    nbp.page.wait_for_timeout(500)
    after_hot = nbp.hot_nodes(pos)
    assert "B" in after_hot and "A" not in after_hot, (before_hot, after_hot)
    next_after = cell.locator("p:has(b:text-is('Next:'))").inner_text()
    assert next_after != next_before, next_after
    problems = nbp.problems()
    nbp.screenshot("02-decision-tree-widget-branch-B", pos)
    assert not problems, problems
    # a bad input: its message inside the widget, the figure keeps its nodes
    box = _field(cell, "GPU util 0-1")
    box.fill("5")
    box.press("Enter")
    msg = cell.locator("div:has(> b:text-is('Input problem:'))")
    msg.wait_for(timeout=10_000)
    assert "gpu_util" in msg.inner_text() and "fraction" in msg.inner_text(), msg.inner_text()
    nbp.screenshot("02-decision-tree-widget-bad-input", pos)


def use_memory_widget(nbp: NotebookPage):
    pos = nbp.code_cell_with("MemoryWidget()")
    cell = nbp.cell(pos)
    bars = cell.locator("span", has_text=re.compile(r"^GPU \d+$"))
    readout = cell.locator("div.widget-html-content", has_text="maximum concurrency")
    assert bars.count() == 8, bars.count()
    before = readout.inner_text()
    nbp.screenshot("05-memory-widget", pos)
    _field(cell, "TP (GPUs)", "select").select_option("4")
    nbp.page.wait_for_function(
        "([pos]) => [...[...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null)"
        ".querySelectorAll('.jp-CodeCell')[pos]"
        ".querySelectorAll('span')].filter(s => /^GPU \\d+$/.test(s.textContent)).length === 4",
        arg=[pos], timeout=10_000)
    # the readout is its own widget: its update may land a moment after the bars'
    readout_js = ("([pos, before]) => { const c = [...document.querySelectorAll('.jp-NotebookPanel')]"
                  ".find(p => p.offsetParent !== null).querySelectorAll('.jp-CodeCell')[pos];"
                  " const r = [...c.querySelectorAll('div.widget-html-content')]"
                  ".find(d => d.innerText.includes('maximum concurrency'));"
                  " return r && r.innerText !== before; }")
    nbp.page.wait_for_function(readout_js, arg=[pos, before], timeout=10_000)
    after = readout.inner_text()
    assert after != before and re.search(r"maximum concurrency at [\d,]+ tokens: [\d.]+x", after), (before, after)
    nbp.screenshot("05-memory-widget-tp4", pos)
    assert not nbp.problems()
    # TP 3 does not divide Llama-3-70B's 8 KV heads: the message shows inside the widget
    _field(cell, "TP (GPUs)", "select").select_option("3")
    msg = cell.locator("div:has(> b:text-is('Input problem:'))")
    msg.wait_for(timeout=10_000)
    assert "tp" in msg.inner_text().lower(), msg.inner_text()
    assert bars.count() == 0
    nbp.screenshot("05-memory-widget-bad-input", pos)


def use_selfcheck(nbp: NotebookPage):
    pos = nbp.code_cell_with("SelfCheck()")
    cell = nbp.cell(pos)
    nbp.screenshot("08-self-check", pos)
    # the pitfalls item: tick one option, press its Check: a grade with a score appears
    section = cell.locator(".widget-vbox:has(> .widget-vbox > .widget-checkbox)").first
    section.locator(".widget-checkbox input").first.check()
    section.locator("button", has_text="Check").click()
    grade = section.locator("div", has_text=re.compile(r"^(Right|Not yet) \(\d+/\d+"))
    grade.first.wait_for(timeout=10_000)
    nbp.screenshot("08-self-check-graded", pos)
    # a wrong order (the first two steps swapped) is graded "Not yet" with the reason per step
    from inferopt.diagnosis import knowledge
    from inferopt.widgets.selfcheck import answer_key

    names = knowledge.load("techniques")["symptom_names"]
    right = answer_key("order")
    wrong = [right[1], right[0], *right[2:]]
    order = cell.locator(".widget-vbox:has(> .widget-vbox > .widget-dropdown:has(label:text-is('1.')))").first
    for i, symptom in enumerate(wrong, start=1):
        _field(order, f"{i}.", "select").select_option(label=names[symptom])
    order.locator("button", has_text="Check").click()
    order.locator("div", has_text=re.compile(r"^Not yet \(\d/4 in place\)")).first.wait_for(timeout=10_000)
    assert not nbp.problems()


NOTEBOOKS = [
    ("chapters/01-technique-map.ipynb", None),
    ("chapters/02-decision-tree.ipynb", use_decision_widget),
    ("chapters/03-combination-pitfalls.ipynb", None),
    ("chapters/05-end-to-end-deployment.ipynb", use_memory_widget),
    ("chapters/06-monitoring-and-capacity.ipynb", None),
    ("chapters/07-knowledge-map-and-tradeoffs.ipynb", None),
    ("chapters/08-learning-path-and-self-check.ipynb", use_selfcheck),
    ("solutions/lab1-decision-tree.ipynb", None),
    ("solutions/lab2-memory-calculator.ipynb", None),
    ("solutions/lab4-benchmark-plotting.ipynb", None),
]


# --- the tests ----------------------------------------------------------------------------------

def test_lab_extensions_installed():
    """The widgets' and plotly's lab extensions (and anywidget, plotly 6's FigureWidget) are there."""
    out = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "jupyter"), "labextension", "list"],
                         capture_output=True, text=True, check=True)
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    for ext in ("@jupyter-widgets/jupyterlab-manager", "jupyterlab-plotly", "anywidget"):
        line = next((ln for ln in text.splitlines() if ln.strip().startswith(ext + " ")), None)
        assert line and "enabled" in line and "OK" in line, f"{ext} missing or broken:\n{text}"


def test_first_visit_opens_the_start_page_without_popups(lab, page):
    """A first-time learner: `/` lands on the start page, its kernel starts, no news pop-up."""
    page.goto(f"{lab.base_url}/?token={lab.token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    assert page.url.split("?")[0].endswith("/lab/tree/chapters/00-start-here.ipynb"), page.url
    assert page.locator(".lm-TabBar-tab.lm-mod-current", has_text="00-start-here.ipynb").count() >= 1
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)
    page.wait_for_timeout(3000)  # the news question comes a moment after start-up when not configured
    shot = SCREENSHOTS / "00-first-visit.png"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shot))
    body = page.locator("body").inner_text()
    assert "Jupyter news" not in body, f"news pop-up shown ({shot})"
    assert page.locator(".jp-Dialog").count() == 0, f"a dialog covers the notebook ({shot})"
    assert page.locator("#filebrowser").is_visible()
    close_notebook(page, lab)


BROKEN = {
    "cells": [
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "# a decision-tree FigureWidget that lost its node trace\n",
            "import plotly.graph_objects as go\n",
            "from inferopt.widgets.decision_widget import tree_figure\n",
            "fig = tree_figure()\n",
            "go.FigureWidget(data=[t for t in fig.data if 'markers' not in (t.mode or '')], layout=fig.layout)\n"]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "# a widget view of a model that does not exist\n",
            "from IPython.display import display\n",
            ("display({'application/vnd.jupyter.widget-view+json': {'model_id': 'no-such-model', "
            "'version_major': 2, 'version_minor': 0}, 'text/plain': 'broken'}, raw=True)\n")]},
        {"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [], "source": [
            "import ipywidgets as W\n",
            "W.HBox([W.FloatText(description='far right', layout=W.Layout(width='400px', margin='0 0 0 900px'))])\n"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
for _i, _c in enumerate(BROKEN["cells"]):
    _c["id"] = f"broken-{_i}"


def test_the_check_catches_a_broken_widget(lab, page):
    """Prove the checks fail on what they are for: a tree without nodes, an unknown widget model,
    an input pushed out of the notebook (a scratch notebook under results/)."""
    scratch = lab.root / "broken-widgets.ipynb"
    scratch.write_text(json.dumps(BROKEN))
    nbp = NotebookPage(page, lab, scratch.name).open()
    try:
        nbp.run(by_cell=True)  # (Run All sometimes stopped after the first cell of this scratch notebook)
        problems = nbp.problems()
        nbp.screenshot("broken-widgets")
    finally:
        nbp.close()
        scratch.unlink()
    text = "\n".join(problems)
    assert "node labels not drawn" in text and "node markers for" in text, text
    # the unknown model: "Error displaying widget" once the manager gives up, "Loading" until then
    assert "Error displaying widget" in text or 'widget still "Loading widget..."' in text, text
    assert "outside the notebook" in text, text


@pytest.mark.parametrize("path,use", NOTEBOOKS, ids=[p.split("/")[-1].split(".")[0] for p, _ in NOTEBOOKS])
def test_notebook_as_a_learner_sees_it(lab, page, path, use):
    skip = live_code_cells(lab.root / path)
    nbp = NotebookPage(page, lab, path).open()
    try:
        ran = nbp.run(skip_code_cells=skip)
        assert ran, f"{path}: no cell ran"
        _assert_clean(nbp, path.split("/")[-1].removesuffix(".ipynb"))
        if use:
            use(nbp)
    except Exception:
        nbp.screenshot(f"{path.split('/')[-1].removesuffix('.ipynb')}-FAILED")   # what the page showed
        raise
    finally:
        nbp.close()


@pytest.mark.engine
def test_start_page_first_live_request(room_lab, page):
    """The start page end to end in the browser, as a learner in a workshop room runs it: the engine cell attaches
    to the room's engine, the streamed answer shows, and stopping lets go of the engine without stopping it."""
    path = "chapters/00-start-here.ipynb"
    nbp = NotebookPage(page, room_lab, path).open()
    try:
        nbp.run(timeout_s=300)
        ask = nbp.code_cell_with("stream_chat(")
        out = nbp.text_of(ask, ".jp-OutputArea-output")
        assert "Paris" in out and re.search(r"TTFT \d+ ms", out), (out, nbp.problems())
        _assert_clean(nbp, "00-start-here")
        nbp.screenshot("00-start-here-answer", ask)
        assert "it keeps running for everyone else" in nbp.text_of(nbp.code_cell_with("srv.stop()"))
    finally:
        nbp.close()


def test_the_chinese_edition_as_a_learner_sees_it(lab, lab_zh, browser):
    """中文版 as ``make lab EDITION=zh`` serves it: JupyterLab's own menus in Chinese (and not in English), the
    decision widget and the memory calculator of the Chinese chapters with Chinese labels (and not the English
    ones), and a wrong answer in a Chinese lab with a Chinese hint. The kernels also know the edition from their
    folder (zh/chapters, zh/labs), without INFEROPT_EDITION: the lab's hint is checked in the English JupyterLab."""
    en_lab, lab = lab, lab_zh
    pg = browser.new_page()
    nbp = NotebookPage(pg, lab, "zh/chapters/02-decision-tree.ipynb").open()
    try:
        bar = pg.locator(".lm-MenuBar-itemLabel")
        names = [t.strip() for t in bar.all_text_contents()]
        assert "编辑" in names and "运行" in names and "Edit" not in names and "Run" not in names, names
        nbp.run(skip_code_cells=live_code_cells(lab.root / nbp.path))
        _assert_clean(nbp, "zh-02-decision-tree")
        pos = nbp.code_cell_with("DecisionWidget()")
        cell = nbp.cell(pos)
        assert _field(cell, "TTFT P95（毫秒）").count() == 1 and _field(cell, "TTFT P95 ms").count() == 0
        text = nbp.text_of(pos)
        assert "基线" in text and "下一步：" in text and "Baseline" not in text, text[:400]
        nbp.screenshot("zh-02-decision-widget", pos)
    finally:
        nbp.close()
    pg = browser.new_page()
    nbp = NotebookPage(pg, lab, "zh/chapters/05-end-to-end-deployment.ipynb").open()
    try:
        nbp.run(skip_code_cells=live_code_cells(lab.root / nbp.path))
        pos = nbp.code_cell_with("MemoryWidget()")
        cell = nbp.cell(pos)
        assert _field(cell, "TP（GPU 数）", "select").count() == 1 and _field(cell, "TP (GPUs)", "select").count() == 0
        assert "最大并发" in nbp.text_of(pos)
        nbp.screenshot("zh-05-memory-widget", pos)
    finally:
        nbp.close()
    # lab 1, part 3 answered with a real pitfall id that is not the plan's: the check's hint in Chinese, in the
    # English JupyterLab (no INFEROPT_EDITION: the kernel reads the edition from the zh/labs folder)
    lab = en_lab
    src = json.loads((lab.root / "zh/labs/lab1-decision-tree.ipynb").read_text(encoding="utf-8"))
    code = [c for c in src["cells"] if c["cell_type"] == "code"]
    answer = next(k for k, c in enumerate(code) if "part3(" in "".join(c["source"])) - 1
    code[answer]["source"] = 'pitfall = "spec_continuous_batching"\n'
    scratch = lab.root / "zh/labs/lab1-wrong-answer.ipynb"
    scratch.write_text(json.dumps(src), encoding="utf-8")
    pg = browser.new_page()
    nbp = NotebookPage(pg, lab, "zh/labs/lab1-wrong-answer.ipynb").open()
    try:
        nbp.run(skip_code_cells=set(range(len(code))) - {0, answer, answer + 1}, by_cell=True)
        hint = nbp.text_of(answer + 1, ".jp-OutputArea-output")
        assert "第 3 部分：引擎中 'spec_continuous_batching' 的规则对这个方案不触发" in hint, hint
        nbp.screenshot("zh-lab1-wrong-answer", answer + 1)
    finally:
        nbp.close()
        scratch.unlink()
