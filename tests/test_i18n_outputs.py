"""The Chinese edition's stored outputs and figures hold no English sentence a learner has to read.

``python -m inferopt.i18n build`` passes the English run's outputs through the runtime catalog's templates
(``inferopt.i18n.outputs``): a printed line that matches an entry's English template becomes the Chinese template
with the same values. This test reads every zh notebook's stored outputs (stream text, markdown, HTML, plain text)
and figures (titles, axis titles, annotations, legend and trace names, hover templates, labels) and lists every
English sentence left (``leftover.english_runs``: 4+ English words in a row, 2+ in a figure's short labels, once
code, flags, identifiers, paths, URLs, numbers with units and the terms both editions write in English are taken
out) with its notebook, cell, output and line. The stated exception: lines vLLM or a library it loads prints itself (its logger's
``LEVEL MM-DD hh:mm:ss`` lines, a ``[transformers]`` warning, a Python traceback: ``outputs.is_library_line``).

Stated as code (printed as it is by both editions, like inline code in prose): HTML ``<code>``, PromQL (a table cell or
line holding a metric selector or a ``histogram_quantile(``/``sum by (``/``increase(`` call), a shell command line
(``$ ...``, ``vllm ...``, ``hf ...``; its ``# comment`` is read), a JSON member line, and a Python object's repr
stored for a widget (``TechniqueTable(symptom=...)``).

The detector is shown to reject an untranslated answer box, and the translation to carry a new run's values into
the Chinese template (what a learner re-running the cell in a Chinese kernel gets: the same lookup).
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from inferopt.i18n import build, outputs

ZH = build.zh_pages()          # the worked solutions in Chinese too: a self-study learner reads their outputs


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setenv("INFEROPT_EDITION", "zh")


def _nb(*outs) -> dict:
    return {"cells": [{"cell_type": "code", "source": "", "outputs": list(outs)}]}


def _md(text: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": text}}


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _english_in(path: Path) -> list[str]:
    name = str(path.relative_to(path.parents[2]))
    return [f"{name} {place}: {run!r}" for place, run in outputs.english_left(json.loads(path.read_text("utf-8")))]


@pytest.mark.parametrize("path", ZH, ids=lambda p: p.stem)
def test_no_english_sentence_in_stored_outputs(path):
    bad = _english_in(path)
    assert not bad, (f"{len(bad)} English sentence(s) in the Chinese edition's stored outputs; add a Chinese "
                     "template for the line to locale/zh_CN/LC_MESSAGES/inferopt.po, then python -m inferopt.i18n "
                     "build:\n" + "\n".join(bad))


def test_the_check_rejects_an_english_output_put_back_into_a_zh_notebook(tmp_path):
    """A stored zh notebook with one answer box put back to the English run's text fails, at that place."""
    english = json.loads((build.CHAPTERS / "06b-scale-out.ipynb").read_text("utf-8"))
    zh = json.loads(build.zh_target(build.CHAPTERS / "06b-scale-out.ipynb").read_text("utf-8"))
    i = next(i for i, c in enumerate(english["cells"]) if c["cell_type"] == "code"
             and "Answer: what the crash cost" in json.dumps(c.get("outputs", [])))
    zh["cells"][i]["outputs"] = english["cells"][i]["outputs"]
    target = tmp_path / "zh" / "chapters" / "06b-scale-out.ipynb"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(zh), encoding="utf-8")
    bad = _english_in(target)
    assert bad and all(f"cell {i} output" in b for b in bad), bad
    assert any("The router cannot retry a response it has started to forward" in b for b in bad), bad


def test_an_untranslated_answer_box_is_reported_with_its_place():
    nb = _nb(_stream("engine ready\n"),
             _md("<details><summary>Answer (written from this run)</summary>\n\n"
                 "The queue grew because every request waited for the slowest one.\n\n</details>"))
    left = outputs.english_left(nb)
    assert left == [("cell 0 output 1 text/markdown line 0", "Answer written from this run"),
                    ("cell 0 output 1 text/markdown line 2",
                     "The queue grew because every request waited for the slowest one")], left


def test_vllm_log_lines_are_the_stated_exception():
    log = ("INFO 12-06 06:00:01 [loader.py:42] Loading weights took 0.52 seconds and the model is ready now\n"
           "(EngineCore_DP0 pid=123) WARNING 12-06 06:00:02 [cpu.py:7] Pin memory is not supported on this CPU\n"
           "[transformers] Calling `crop` with a positive value is deprecated and will be removed soon\n")
    assert outputs.english_left(_nb(_stream(log))) == []
    said = "the engine says it is ready and every request will be answered\n"
    assert outputs.english_left(_nb(_stream(log + said)))[0][0] == "cell 0 output 0 stream line 3"


def test_a_new_runs_values_fill_the_chinese_template(zh):
    # values no stored run has: the template, not a copy of a stored line, makes the Chinese
    english = ("At 0.123 req/s (65% of λ = 0.456) the 40 requests **met** the lesson SLO: TTFT P95 used 12% of its "
               "limit and TPOT P95 34%, so TPOT was nearer its limit. Mean requests in flight were 1.11, against 3 "
               "in the closed loop: random arrivals sometimes bunch up (several in flight, the prefill of one "
               "delaying the others' decode) and sometimes leave the engine idle, and a P95 sees the bunches. The 35 "
               "% headroom absorbed them on this run. With twenty requests the P95 is decided by the slowest one or "
               "two, so the verdict can change from run to run near the limit; a real load test sends hundreds at "
               "each rate.")
    cell = {"cell_type": "code", "outputs": [_md("<details><summary>Answer: did 70 % of Little's rate hold under "
                                                 "random arrivals?</summary>\n\n" + english)]}
    text = outputs.translate_outputs(cell)["outputs"][0]["data"]["text/markdown"]
    assert "答案" in text and "0.123 req/s" in text and "λ = 0.456" in text and "1.11" in text, text
    assert outputs.english_left(_nb(cell["outputs"][0])) == []
    # and the English edition keeps the English
    os.environ["INFEROPT_EDITION"] = "en"
    assert outputs.translate_text(english) == english


def test_a_two_word_english_axis_title_is_reported():
    fig = {"data": [], "layout": {"xaxis": {"title": {"text": "send time (s)"}}, "yaxis": {"title": {"text": "GiB"}}}}
    out = {"output_type": "display_data", "metadata": {}, "data": {outputs.PLOTLY_MIME: fig}}
    assert outputs.english_left(_nb(out)) == [("cell 0 output 0 figure line 0", "send time s")]


def test_figure_titles_axes_and_hover_text_are_translated(zh):
    fig = {"data": [{"name": "TTFT P95", "hovertemplate": "concurrency=%{x}<br>TTFT P95 %{y:.0f} ms<extra></extra>",
                     "x": [1, 2], "y": [3.0, 4.0]}],
           "layout": {"title": {"text": "Service-layer metrics during a load run"},
                      "xaxis": {"title": {"text": "seconds since the load started"}},
                      "template": {"layout": {"title": {"text": "Service-layer metrics during a load run"}}}}}
    out = outputs.translate_figure(fig)
    assert out["layout"]["title"]["text"] == "压测期间的服务层指标"
    assert out["layout"]["xaxis"]["title"]["text"] == "加载负载后的秒数"
    assert "%{x}" in out["data"][0]["hovertemplate"] and out["data"][0]["x"] == [1, 2]
    assert out["layout"]["template"] == fig["layout"]["template"]       # plotly's theme is data, not text
    assert fig["layout"]["title"]["text"] == "Service-layer metrics during a load run"   # a copy


def test_a_chinese_kernel_prints_displays_and_draws_through_the_templates(zh):
    import io

    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import Markdown

    inner = io.StringIO()
    stream = outputs.LocalizingStream(inner)
    print("engine, hand arithmetic and calcul", end="", file=stream)   # a line arrives in pieces
    print("ator agree", file=stream)
    print("INFO 12-06 06:00:01 [loader.py:42] Loading weights took 0.52 seconds", file=stream)
    stream.write("partial line without its newline")
    assert inner.getvalue() == ("引擎、手算和计算器三者一致\n"
                                "INFO 12-06 06:00:01 [loader.py:42] Loading weights took 0.52 seconds\n")
    stream.flush()
    assert inner.getvalue().endswith("partial line without its newline")

    shell = InteractiveShell.instance()
    shell.display_formatter.active_types = shell.display_formatter.format_types   # as a kernel's shell has them
    import sys
    before = sys.stdout
    try:
        assert outputs.install_kernel_hooks(shell)
        assert not outputs.install_kernel_hooks(shell)                   # once
        bundle, _meta = shell.display_formatter.format(Markdown("This machine uses the **CPU** engine."))
        assert bundle["text/markdown"] == "本机使用 **CPU** 引擎。"
    finally:
        sys.stdout = before
        shell.events.unregister("post_execute", shell.events.callbacks["post_execute"][-1])
        InteractiveShell.clear_instance()


def test_outputs_todo_lists_the_lines_without_a_template_as_numbered_templates(monkeypatch):
    english = _nb(_stream("engine ready after 25 s at http://127.0.0.1:8000\n"
                          "the queue grew because 3 requests waited 1,250 ms for the slowest one\n"))
    chinese = copy.deepcopy(english)
    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    outputs.translate_outputs(chinese["cells"][0])
    assert outputs.missing_templates(english, chinese) == {
        "the queue grew because {v1} requests waited {v2} ms for the slowest one": "cell 0 output 0 stream line 1"}
