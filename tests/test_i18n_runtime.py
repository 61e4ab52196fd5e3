"""The Chinese edition speaks Chinese at run time: what the code shows a learner in a zh kernel holds no
English sentence left untranslated.

With ``INFEROPT_EDITION=zh`` the test drives what a learner meets live and reads every line shown:

- every widget (decision, memory, technique table, self-check, deployment inputs) with each control moved
  through its options and ends (bad values included), each button pressed; the figures (tree, memory bars,
  knowledge map, trade-offs, cost ranking);
- every lab check with each wrong submission of tests/test_lab_checks.py (its one line, as Jupyter shows it,
  and what it printed);
- the ``diagnose``, ``memory`` and ``plan`` commands on a set of inputs (their text output and errors).

A shown string fails when ``inferopt.i18n.leftover.english_runs`` finds a run of 4+ English words in it
(inline code, flags, identifiers, units, model names and URLs are not words; a Python exception's own message,
``ValueError: could not convert ...``, is Python's, not the course's); the failure names the string and where it
came from. The detector is shown to reject an English hint and to pass its Chinese form.

``tests/i18n_leftovers.json`` lists, per test case, the English runs not yet translated when this test was
written (a debt that only shrinks): a run not listed fails, and so does a listed run that no longer shows (take
it out). ``INFEROPT_LEFTOVERS_WRITE=1 pytest tests/test_i18n_runtime.py`` rewrites the list from what shows.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest
from i18n_shown import figure_texts, printed, widget_texts

from inferopt.i18n.leftover import english_runs


@pytest.fixture
def zh(monkeypatch):
    monkeypatch.setenv("INFEROPT_EDITION", "zh")


DEBT = Path(__file__).with_name("i18n_leftovers.json")
# Python's own exception message inside a check's line ("raised ValueError: could not convert ...")
_PY_ERROR = re.compile(r"\b\w*(?:Error|Exception)\b[:：][^（(]*")


def _runs(text: str) -> list[str]:
    return english_runs(_PY_ERROR.sub(" ", text))


def _leftovers(items, known=frozenset()) -> list[str]:
    out, seen = [], set()
    for where, text in items:
        for run in _runs(text):
            if run in known or (run, text) in seen:
                continue
            seen.add((run, text))
            out.append(f"{where}: {run!r} in {text[:300]!r}")
    return out


def _debt() -> dict:
    return json.loads(DEBT.read_text(encoding="utf-8")) if DEBT.exists() else {}


def _assert_chinese(items, case: str) -> None:
    """No English sentence in what was shown, beyond the runs ``i18n_leftovers.json`` lists for ``case``."""
    items = list(items)
    found = sorted({run for _w, text in items for run in _runs(text)})
    if os.environ.get("INFEROPT_LEFTOVERS_WRITE"):
        debt = _debt()
        debt[case] = found
        DEBT.write_text(json.dumps({k: v for k, v in sorted(debt.items()) if v}, ensure_ascii=False, indent=1)
                        + "\n", encoding="utf-8")
    known = set(_debt().get(case, []))
    bad = _leftovers(items, known)
    assert not bad, f"{len(bad)} English string(s) shown in the Chinese edition:\n" + "\n".join(bad)
    gone = sorted(known - set(found))
    assert not gone, f"translated now, take out of {DEBT.name} [{case}]: {gone}"


# ---------------------------------------------------------------- the detector
def test_the_detector_rejects_an_english_hint_and_passes_its_chinese_form():
    hint = "Task 2 is not done yet: define `predicted_tokens` (run the task's cell first)"
    assert english_runs(hint)
    assert _leftovers([("lab2 task2", hint)]) and "lab2 task2" in _leftovers([("lab2 task2", hint)])[0]
    assert not english_runs("任务 2 还没有完成：定义 `predicted_tokens`（先运行这个任务的单元格）")
    # what a Chinese line keeps in English is not a sentence
    assert not english_runs("llama-3-70b 在 8x H100-SXM-80GB 上：KV cache 12.5 GiB，--max-model-len 8192，"
                            "见 https://docs.vllm.ai/en/latest/ 与 `gpu_memory_utilization`")
    assert english_runs("<b>权重</b>: the weights do not fit on one GPU")
    # a Python exception's message is Python's; the frame around it is the course's
    assert not _runs("任务 3：`metric_value` 抛出了 ValueError：could not convert string to float: 'a'（在你的代码第 5 行）")
    assert _runs("Task 3: `metric_value` raised ValueError: could not convert string to float (in your code, line 5)")


# ---------------------------------------------------------------- widgets
def _controls(w):
    import ipywidgets as W

    if isinstance(w, (W.Dropdown, W.RadioButtons, W.Select, W.SelectMultiple, W.Checkbox, W.FloatText,
                      W.IntText, W.FloatSlider, W.IntSlider, W.Text, W.Textarea, W.Button)):
        yield w
    for c in getattr(w, "children", ()) or ():
        yield from _controls(c)


def _moves(c):
    """Values a learner could give a control: each option, the ends of a range, a bad number."""
    import ipywidgets as W

    if isinstance(c, W.SelectMultiple):
        return [tuple(c.options[:k]) for k in (1, 2, 3) if len(c.options) >= k]
    if isinstance(c, (W.Dropdown, W.RadioButtons, W.Select)):
        return [v for _label, v in zip(c._options_labels, c._options_values, strict=True)][:14]
    if isinstance(c, W.Checkbox):
        return [not c.value]
    if isinstance(c, (W.FloatSlider, W.IntSlider)):
        return [c.min, c.max]
    if isinstance(c, W.FloatText):
        return [0.0, 85.0, -1.0, 1e6]
    if isinstance(c, W.IntText):
        return [0, -1, 1_000_000]
    if isinstance(c, W.Textarea):
        return ["month 1: profile", "month 1: turn on the prefix cache\nmonth 2: quantize the weights to fp8"]
    if isinstance(c, W.Text):
        return ["/nonexistent/results.jsonl"]
    return []


def _drive(widget, name, press=()):
    """Every control moved through its moves (then put back), every button pressed; what was shown."""
    import ipywidgets as W

    shown = widget_texts(widget, name)
    for i, c in enumerate(list(_controls(widget))):
        label = f"{name} control {i} ({type(c).__name__} {c.description!r})"
        if isinstance(c, W.Button):
            c.click()
            shown += widget_texts(widget, f"{label} clicked")
            continue
        before = c.value
        for v in _moves(c):
            with contextlib.suppress(Exception):
                c.value = v
            for b in press:
                b(widget)
            shown += widget_texts(widget, f"{label}={v!r}")
        with contextlib.suppress(Exception):
            c.value = before
    return shown


def _selfcheck_press(w):
    w.check_all()


WIDGETS = ["decision", "memory", "technique_table", "selfcheck", "deployment_inputs"]


@pytest.mark.parametrize("which", WIDGETS)
def test_every_widget_speaks_chinese_as_its_controls_move(which, zh):
    if which == "decision":
        from inferopt.widgets.decision_widget import DecisionWidget
        shown = _drive(DecisionWidget(), which)
    elif which == "memory":
        from inferopt.widgets.memory_widget import MemoryWidget
        w = MemoryWidget()
        shown = _drive(w, which)
        for kw in ({"model": "llama-3.1-8b", "gpu": "L4-24GB", "tp": 1, "weight_format": "bf16"},
                   {"tp": 3}, {"max_model_len": 131072, "gpu_memory_utilization": 0.5}):
            with contextlib.suppress(Exception):
                w.set(**kw)
            shown += widget_texts(w, f"{which} set({kw})")
    elif which == "technique_table":
        from inferopt.widgets.technique_table import TechniqueTable
        shown = _drive(TechniqueTable(), which)
    elif which == "selfcheck":
        from inferopt.widgets.selfcheck import SelfCheck
        w = SelfCheck()
        w.check_all()
        shown = _drive(w, which, press=[_selfcheck_press])
    else:
        from inferopt.widgets.deployment_inputs import DeploymentInputs
        shown = _drive(DeploymentInputs(on_change=lambda: None), which)
    _assert_chinese(shown, f"widget {which}")


def test_every_figure_speaks_chinese(zh):
    from inferopt.diagnosis.decision import diagnose
    from inferopt.planning.memory import start_verdict
    from inferopt.widgets.decision_widget import diagnosis_html, tree_figure
    from inferopt.widgets.knowledge_map import knowledge_map_figure
    from inferopt.widgets.memory_widget import memory_figure, runtime_html
    from inferopt.widgets.technique_table import technique_rows, technique_table_html
    from inferopt.widgets.tradeoff_plot import technique_cost_figure, tradeoff_figure

    slo = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
    cases = [({"ttft_p95_ms": 900, "tpot_p95_ms": 30}, {"shared_prefix_frac": 0.7, "lora_adapters": 4}),
             ({"ttft_p95_ms": 300, "tpot_p95_ms": 90}, {"concurrency": 2}),
             ({"oom": True}, {"model_weights_gib": 140, "num_gpus": 1}),
             ({"ttft_p95_ms": 100, "tpot_p95_ms": 10}, None)]
    shown = []
    for metrics, work in cases:
        d = diagnose(metrics, slo, work, [])
        shown += figure_texts(tree_figure(d), f"tree_figure({metrics})")
        shown.append((f"diagnosis_html({metrics})", diagnosis_html(d)))
    v = start_verdict("llama-3-70b", "H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8")
    alt = start_verdict("llama-3-70b", "H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8",
                        runtime="original-5gb")
    shown += figure_texts(memory_figure(v.result), "memory_figure")
    shown.append(("runtime_html", runtime_html(v.result, alt)))
    shown.append(("technique_table_html", technique_table_html(technique_rows())))
    for name, fig in (("knowledge_map_figure", knowledge_map_figure()), ("tradeoff_figure", tradeoff_figure()),
                      ("technique_cost_figure", technique_cost_figure())):
        shown += figure_texts(fig, name)
    _assert_chinese(shown, "figures")


# ---------------------------------------------------------------- lab checks
def _lab_cases():
    import test_lab_checks as t

    return [(gid, kind) for gid, kind in t.CASES]


@pytest.mark.parametrize("lab", ["lab1", "lab2", "lab3", "lab4", "lab5"])
def test_every_lab_check_hints_in_chinese_for_every_wrong_submission(lab, zh):
    import test_lab_checks as t

    from inferopt.labcheck import CheckFailed

    shown = []
    for gid, kind in _lab_cases():
        lab_, fn, _ = t.CHECKS[gid]
        if lab_ != lab:
            continue
        if kind == t.UNTOUCHED:
            ns = t.namespace(lab_, "lab")
        else:
            ns = t.namespace(lab_)
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(t.WRONG[gid][kind], f"<wrong {gid}:{kind}>", "exec"), ns)
        out, err = printed(t.run_check, lab_, fn, ns)
        where = f"{gid}:{kind} ({lab_}.{fn})"
        if out.strip():
            shown.append((f"{where} printed", out))
        if isinstance(err, CheckFailed):
            shown.append((f"{where} hint", err._render_traceback_()[0]))
    assert shown
    _assert_chinese(shown, f"lab checks {lab}")


# ---------------------------------------------------------------- command line
CLI = {
    "diagnose": [["--ttft-p95-ms", "900", "--tpot-p95-ms", "30", "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50",
                  "--prompt-tokens", "2500", "--shared-prefix-frac", "0.7", "--concurrency", "32"],
                 ["--ttft-p95-ms", "300", "--tpot-p95-ms", "90", "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50",
                  "--concurrency", "2", "--gpu-util", "0.3"],
                 ["--oom", "--model-weights-gib", "140", "--num-gpus", "1", "--gpu-memory-gib", "80"],
                 ["--ttft-p95-ms", "900", "--tpot-p95-ms", "30", "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50",
                  "--model", "llama-3-70b", "--gpu", "H100", "--tp", "8", "--weight-format", "fp8"],
                 ["--ttft-p95-ms", "900", "--tpot-p95-ms", "30", "--slo-ttft-p95-ms", "500", "--slo-tpot-p95-ms", "50",
                  "--model", "llama-3-70b", "--gpu", "L4", "--tp", "1"],
                 ["--gpu-util", "85"]],
    "memory": [["--model", "llama-3-70b", "--gpu", "H100", "--tp", "8", "--weights", "fp8", "--kv-dtype", "fp8"],
               ["--model", "llama-3.1-8b", "--gpu", "L4", "--tp", "1"],
               ["--model", "llama-3-70b", "--gpu", "L4", "--tp", "1"],
               ["--model", "llama-3.1-8b", "--gpu", "H100", "--runtime", "original-5gb", "--startup-logs"],
               ["--model", "llama-3.1-8b", "--gpu", "cpu"],
               ["--model", "llama-3-70b", "--gpu", "H100", "--tp", "3"]],
    "plan": [["llama3-70b-chat"], ["llama3-70b-chat", "--gpus-per-node", "4"], ["/nonexistent/scenario.yaml"]],
}
CLI_CASES = [(cmd, i) for cmd, argvs in CLI.items() for i in range(len(argvs))]


@pytest.mark.parametrize("cmd,i", CLI_CASES, ids=[f"{c}-{i}" for c, i in CLI_CASES])
def test_diagnose_memory_and_plan_print_chinese(cmd, i, zh):
    from inferopt.__main__ import main

    argv = [cmd, *CLI[cmd][i]]
    out, _rc = printed(main, argv)
    assert out.strip(), argv
    _assert_chinese([(f"python -m inferopt {' '.join(argv)}", line) for line in out.splitlines()], f"cli {cmd}-{i}")
