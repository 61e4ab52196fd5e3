"""Every lab check passes the worked solution and rejects wrong work (no engine, no kernel).

For each check cell of solutions/ (found by its nbgrader grade_id) the table WRONG lists wrong
submissions, each a small piece of code applied on top of the worked solution's namespace:

- ``untouched``: the generated lab as a learner gets it (labs/, stubs raising NotImplementedError);
- ``constant``: the answer of the example the lab shows, typed in;
- ``package``: a shortcut through the package function the task re-implements;
- ``unit`` / ``off_by_one``: GB vs GiB, ms vs s, n vs n - 1, < vs <=;
- ``formula``: a plausible but wrong formula.

Each must be rejected with a CheckFailed (one line in Jupyter), an untouched stub with NotDone,
a shortcut with Shortcut; and no message may contain an answer the lab asks for. A check with
no wrong submission, or one that lets a wrong one through, fails the suite.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import json
import re

import pytest

from inferopt import labcheck
from inferopt.labcheck import CheckFailed, NotDone, Shortcut
from inferopt.paths import LABS, SOLUTIONS

SEED = 20_261_130  # pinned: a failure here is reproducible
ENGINE = re.compile(r"VLLMServer\(|calibrate\(|concurrency_sweep\(")


def _cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _is_check(cell):
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


def _is_live(cell):
    return "live" in cell.get("metadata", {}).get("tags", [])


def _lab_file(folder, lab):
    return next(folder.glob(f"{lab}-*.ipynb"))


def namespace(lab: str, version: str = "solution") -> dict:
    """Run the lab's task cells (no check cells, no live cells) as the grader would: errors stay
    in their cell and the next cell runs."""
    path = _lab_file(SOLUTIONS if version == "solution" else LABS, lab)
    ns: dict = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in _cells(path):
            if _is_check(cell) or _is_live(cell):
                continue
            assert not ENGINE.search(_src(cell)), f"{path.name}: a cell that starts an engine is not tagged live"
            try:
                exec(compile(_src(cell), f"{path.name}", "exec"), ns)
            except Exception:  # an untouched lab: stubs raise, later cells miss names
                if version == "solution":
                    raise
    return ns


def check_functions() -> dict[str, tuple[str, str, float]]:
    """{grade_id: (lab, check function name, points)} from the solutions' graded cells."""
    out = {}
    for path in sorted(SOLUTIONS.glob("lab*.ipynb")):
        for cell in _cells(path):
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                m = re.search(r"labcheck\.(lab\d)\.(\w+)\(globals\(\)\)", _src(cell))
                assert m, f"{path.name}: graded cell {meta.get('grade_id')} does not call a labcheck check"
                out[meta["grade_id"]] = (m.group(1), m.group(2), meta["points"])
    return out


def run_check(lab: str, fn: str, ns: dict) -> str:
    """Run one check; return what it printed."""
    check = getattr(getattr(labcheck, lab), fn)
    kwargs = {"seed": SEED} if "seed" in inspect.signature(check).parameters else {}
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check(ns, **kwargs)
    return buf.getvalue()


# Answers a lab asks for: none may appear in a check's message or printout for wrong work.
ANSWERS = {
    "lab1": [r"\bprefix_cache\b", r"\bspeculative_decoding\b", r"\btensor_parallel\b", r"\bint4_awq_marlin\b",
             r"\bchunked_prefill\b", r"\braise_concurrency\b", r"\bfp8\b", r"\bspec_quant\b",
             r"\('?[ABCD]'?, '?\w+'?\)"],
    "lab2": [r"163,?840", r"0\.671", r"(?<![\d,.])774\b", r"3\.72", r"11,?648", r"7\.58\b"],
    "lab3": [r"\['--enable-prefix-caching', '--enable-chunked-prefill', '--max-num-batched-tokens', '2048'"],
    "lab4": [r"\b6\.9\d*\b"],
    "lab5": [r"\(4, 6, 48\)", r"\b48 GPUs\b", r"per_instance_qps\s*=\s*50", r"load_test_b\b", r"\btable B\b",
             r"> 0\.9\b.*severity", r"\b50(\.0)? QPS\b",
             # issue 29: the sizing on enough requests, and the bound itself at the course's level
             r"\(5, 7, 56\)", r"\b56 GPUs\b", r"per_instance_qps\s*=\s*45\.9", r"\b45\.9\b", r"(?<![\d.])45 requests",
             r"\bn = 45\b"],
}

UNTOUCHED = "untouched"


def _worked(lab: str, signature: str, swaps) -> str:
    """A worked solution's function (from ``def <signature>`` to its END SOLUTION marker) with text replaced:
    a wrong submission that differs from the solution in one place."""
    src = (SOLUTIONS / f"{lab}.md").read_text(encoding="utf-8")
    start = src.index(f"def {signature}")
    code = src[start:src.index("    ### END SOLUTION", start)].replace("    ### BEGIN SOLUTION\n", "")
    for old, new in swaps:
        assert old in code, old
        code = code.replace(old, new)
    return code


def _frontier(*swaps) -> str:
    """Lab 4's worked max_concurrency with text replaced."""
    return _worked("lab4-benchmark-plotting", "max_concurrency(by_level", swaps)


def _sizing(fn: str, *swaps) -> str:
    """Lab 5's worked min_requests or best_qps_within_slo with text replaced."""
    return _worked("lab5-monitoring-alerts", f"{fn}(", swaps)


def _verdict(*swaps) -> str:
    """Lab 3's worked slo_verdict with text replaced."""
    return _worked("lab3-live-vllm", "slo_verdict(records", swaps)

# {grade_id: {kind: code run on top of the solution's namespace}}; UNTOUCHED uses labs/.
WRONG = {
    "lab1-part1": {
        UNTOUCHED: None,
        # issue 21: shortcuts a name/text test misses, caught by what runs
        "package_copy": ("import importlib.util, inferopt.diagnosis.decision as _orig_mod\n"
                         "_spec = importlib.util.spec_from_file_location('my_decision', _orig_mod.__file__)\n"
                         "_copy = importlib.util.module_from_spec(_spec)\nimport sys as _sys\n_sys.modules['my_decision'] = _copy\n"
                         "_spec.loader.exec_module(_copy)\n"
                         "def worst_metric(m, s):\n    return _copy.diagnose(m, s).worst_metric\n"
                         "def branch_for(m, s):\n    return _copy.diagnose(m, s).branch\n"
                         "del _orig_mod"),
        "no_return": ("def branch_for(metrics, slos):\n    failing = set(failing_ratios(metrics, slos))\n"
                      "    b = next((BRANCH_OF[m] for m in ['oom'] if metrics.get('oom')), None)"),
        "constant": "def worst_metric(m, s):\n    return 'ttft_p95_ms'\ndef branch_for(m, s):\n    return 'A'",
        "package": ("from inferopt.diagnosis.decision import diagnose\n"
                    "def worst_metric(m, s):\n    return diagnose(m, s).worst_metric\n"
                    "def branch_for(m, s):\n    return diagnose(m, s).branch"),
        "off_by_one": ("_orig = failing_ratios\n"
                       "def failing_ratios(metrics, slos):\n"
                       "    out = {k: metrics[k] / slos[k] for k in LATENCY if metrics.get(k) is not None and slos.get(k)"
                       " and metrics[k] / slos[k] >= 1}\n"
                       "    out.update({k: v for k, v in _orig(metrics, slos).items() if k == 'throughput_tok_s'})\n"
                       "    return out"),
        "formula": ("def branch_for(metrics, slos):\n    w = worst_metric(metrics, slos)\n"
                    "    return None if w is None else BRANCH_OF[w]"),
        # the order of the steps changed (TTFT before OOM): the hint points at the order, not at the worst metric
        "order_swapped": 'ORDER = ["A", "C", "B", "D"]',
        "formula_throughput": ("_orig = failing_ratios\n"
                               "def failing_ratios(metrics, slos):\n    out = _orig(metrics, slos)\n"
                               "    if 'throughput_tok_s' in out:\n"
                               "        out['throughput_tok_s'] = metrics['throughput_tok_s'] / slos['throughput_tok_s']\n"
                               "    return out"),
    },
    "lab1-part2": {
        UNTOUCHED: None,
        "package_other_cell": ("from inferopt.diagnosis.decision import diagnose as _dg\n"
                               "def _first(inc):\n"
                               "    d = _dg(inc['metrics'], inc.get('slos', SLO), inc['workload'], inc['techniques_on'])\n"
                               "    fix = next(f for f in d.techniques + [a['id'] for a in d.actions]"
                               " if f not in inc['techniques_on'])\n"
                               "    return d.branch, fix\n"
                               "_mine = {n: _first(i) for n, i in INCIDENTS.items()}\n"
                               "answers = dict(_mine)\n"
                               "In = ['from inferopt.diagnosis.decision import diagnose as _dg\\n_mine = ...',"
                               " 'answers = dict(_mine)']"),
        "constant": "answers = {name: ('A', 'prefix_cache') for name in INCIDENTS}",
        "package": ("from inferopt.diagnosis.decision import diagnose\n"
                    "answers = {n: (diagnose(i['metrics'], i.get('slos', SLO), i['workload'], i['techniques_on']).branch,"
                    " 'x') for n, i in INCIDENTS.items()}\n"
                    "In = ['answers = {n: (diagnose(i[\"metrics\"], SLO).branch, ...) for n, i in INCIDENTS.items()}']"),
        "formula_already_on": "answers = dict(answers, **{'batch-api': ('B', 'continuous_batching')})",
        "formula_worst_first": "answers = dict(answers, **{'legal-search': ('B', 'speculative_decoding')})",
        # on the tree's list but not the first thing to try: INT4 before TP, a tuning action for a technique that is off
        "ranked_later": "answers = dict(answers, **{'rag-70b': ('C', 'int4_awq_marlin')})",
        "action_for_an_off_technique": "answers = dict(answers, **{'support-bot': ('A', 'radix_attention')})",
    },
    "lab1-part3": {
        UNTOUCHED: None,
        "formula": "pitfall = 'spec_continuous_batching'",
        "not_an_id": "pitfall = 'spec+quant'",
    },
    "lab2-task1": {
        UNTOUCHED: None,
        "package_default_arg": ("from inferopt.planning import memory as _mem, model_specs as _ms\n"
                                "def kv_bytes_per_token(cfg, kv_bytes, _f=_mem.kv_bytes_per_token):\n"
                                "    return _f(_ms.spec_from_config(dict(cfg, vocab_size=32000, model_type='llama')), kv_bytes)[0]\n"
                                "del _mem"),
        "reference_of_the_check": ("import inspect as _i\n_g = _i.unwrap(labcheck.lab2.task1).__globals__\n"
                                   "_ref_f = _g.get('ref_bytes_per_token') or _g['_ref'].ref_bytes_per_token\n"
                                   "def kv_bytes_per_token(cfg, kv_bytes):\n    return _ref_f(cfg, kv_bytes)"),
        "runs_solutions": ("from inferopt.paths import SOLUTIONS as _S\n"
                           "def kv_bytes_per_token(cfg, kv_bytes):\n"
                           "    src = (_S / 'lab2-memory-calculator.md').read_text()\n"
                           "    body = src.split('### BEGIN SOLUTION')[1].split('### END SOLUTION')[0]\n"
                           "    g = {}\n"
                           "    exec('def f(cfg, kv_bytes):\\n' + body.rstrip().rstrip('#').rstrip(), g)\n"
                           "    return g['f'](cfg, kv_bytes)"),
        "no_return": ("def kv_bytes_per_token(cfg, kv_bytes):\n"
                      "    head_dim = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                      "    b = 2 * cfg['num_hidden_layers'] * cfg['num_key_value_heads'] * head_dim * kv_bytes"),
        "constant": "def kv_bytes_per_token(cfg, kv_bytes):\n    return 163840",
        "package": ("from inferopt.planning import memory\n"
                    "def kv_bytes_per_token(cfg, kv_bytes):\n"
                    "    return memory.kv_bytes_per_request('llama-3-70b', 1, kv_dtype='fp8')"),
        "unit": "def kv_gb_per_request(cfg, kv_bytes, tokens):\n    return kv_bytes_per_token(cfg, kv_bytes) * tokens / 2**30",
        "formula_no_values": ("def kv_bytes_per_token(cfg, kv_bytes):\n"
                              "    hd = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                              "    return cfg['num_hidden_layers'] * cfg['num_key_value_heads'] * hd * kv_bytes"),
        "formula_all_heads": ("def kv_bytes_per_token(cfg, kv_bytes):\n"
                              "    return 2 * cfg['num_hidden_layers'] * cfg['hidden_size'] * kv_bytes"),
    },
    "lab2-task2": {
        UNTOUCHED: None,
        "constant": "def requests_that_fit(capacity_gb, gb_per_request):\n    return 774",
        "off_by_one": ("def requests_that_fit(capacity_gb, gb_per_request):\n"
                       "    return math.ceil(capacity_gb / gb_per_request)"),
        "rounding": "def requests_that_fit(capacity_gb, gb_per_request):\n    return round(capacity_gb / gb_per_request)",
        "typed_value": "seed_factor = 3.7",
    },
    "lab2-task3": {
        UNTOUCHED: None,
        "constant": "def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size=128):\n"
                    "    return 11648, 7.58",
        "package": ("from inferopt.planning import memory\n"
                    "def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size=128):\n"
                    "    r = memory.cpu_engine_prediction(kv_cache_gib=budget_bytes / 2**30, max_model_len=max_model_len)\n"
                    "    return r.kv_cache_tokens, r.max_concurrency"),
        "off_by_one": ("_orig = engine_prediction\n"
                       "def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size=128):\n"
                       "    hd = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                       "    blk = 2 * block_size * cfg['num_key_value_heads'] * hd * dtype_bytes * cfg['num_hidden_layers']\n"
                       "    blocks = budget_bytes // blk\n"
                       "    return blocks * block_size, blocks / math.ceil(max_model_len / block_size)"),
        "no_ceil": ("def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size=128):\n"
                    "    hd = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                    "    blk = 2 * block_size * cfg['num_key_value_heads'] * hd * dtype_bytes * cfg['num_hidden_layers']\n"
                    "    c = (budget_bytes // blk) / (max_model_len / block_size)\n"
                    "    return int(c * max_model_len), c"),
        "cpu_block_typed": ("def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size):\n"
                            "    hd = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                            "    blk = 2 * 128 * cfg['num_key_value_heads'] * hd * dtype_bytes * cfg['num_hidden_layers']\n"
                            "    c = (budget_bytes // blk) / math.ceil(max_model_len / 128)\n"
                            "    return int(c * max_model_len), c"),
        "unit": ("def engine_prediction(cfg, dtype_bytes, budget_bytes, max_model_len, block_size=128):\n"
                 "    hd = cfg['hidden_size'] // cfg['num_attention_heads']\n"
                 "    blk = 2 * block_size * cfg['num_key_value_heads'] * hd * 2 * cfg['num_hidden_layers']\n"
                 "    c = (budget_bytes // blk) / math.ceil(max_model_len / block_size)\n"
                 "    return int(c * max_model_len), c"),
    },
    "lab3-task1": {
        UNTOUCHED: None,
        "constant": ("def cpu_flags(flags):\n    return ['--enable-prefix-caching', '--enable-chunked-prefill', "
                     "'--max-num-batched-tokens', '2048', '--max-num-seqs', '16']"),
        "keeps_values": ("def cpu_flags(flags):\n"
                         "    return [SCALE.get(flags[i - 1], f) if i else f for i, f in enumerate(flags) if f not in DROP]"),
        "no_scaling": ("def cpu_flags(flags):\n    out, i = [], 0\n    while i < len(flags):\n"
                       "        v = i + 1 < len(flags) and not flags[i + 1].startswith('--')\n"
                       "        if flags[i] not in DROP:\n            out += flags[i:i + 2] if v else flags[i:i + 1]\n"
                       "        i += 2 if v else 1\n    return out"),
        "sorted": "_orig = cpu_flags\ndef cpu_flags(flags):\n    return sorted(_orig(flags))",
        "keeps_dtype": ("_orig = cpu_flags\ndef cpu_flags(flags):\n    d = flags.index('--dtype') if '--dtype' in flags "
                        "else None\n    return _orig(flags) if d is None else [*flags[d:d + 2], *_orig(flags)]"),
    },
    "lab3-task2": {
        UNTOUCHED: None,
        "constant": "def live_stats(t0, stamps, n_tokens):\n    return 250.0, 106.0",
        "unit": ("def live_stats(t0, stamps, n_tokens):\n"
                 "    return 1000 * (stamps[0] - t0), (stamps[-1] - stamps[0]) / (n_tokens - 1)"),
        "off_by_one": ("def live_stats(t0, stamps, n_tokens):\n"
                       "    return 1000 * (stamps[0] - t0), 1000 * (stamps[-1] - stamps[0]) / n_tokens"),
        "formula_chunks": ("def live_stats(t0, stamps, n_tokens):\n"
                           "    return 1000 * (stamps[0] - t0), 1000 * (stamps[-1] - stamps[0]) / (len(stamps) - 1)"),
        "no_stamp": "def on_token(piece):\n    print(piece, end='')",
    },
    "lab3-task3": {
        UNTOUCHED: None,
        "package_parse_metrics": ("from inferopt.bench.experiments import parse_metrics as _pm\n"
                                  "def metric_value(text, name):\n    return _pm(text).get(name, 0.0)"),
        "constant": "def metric_value(text, name):\n    return 0.0",
        "prefix": ("def metric_value(text, name):\n    return sum(float(l.rpartition(' ')[2]) for l in text.splitlines()"
                   " if l.startswith(name))"),
        "first_only": ("def metric_value(text, name):\n    for l in text.splitlines():\n"
                       "        if l and not l.startswith('#') and l.rpartition(' ')[0].split('{')[0] == name:\n"
                       "            return float(l.rpartition(' ')[2])\n    return 0.0"),
        "split_spaces": ("def metric_value(text, name):\n    t = 0.0\n    for l in text.splitlines():\n"
                         "        if l and not l.startswith('#') and l.split()[0].split('{')[0] == name:\n"
                         "            t += float(l.split()[1])\n    return t"),
    },
    "lab3-task4": {
        UNTOUCHED: None,
        "package_stats": _verdict(("        s = next(", "        _c = _st.slo_verdict(metric, values, limit, slo.percentile, level=level)\n"
                                                     "        s = next("),
                                  ("        if s is not None and v[s - 1] > limit:",
                                   "        if not _c.basis.startswith('max') and _c.passed is False:"),
                                  ("def slo_verdict(", "from inferopt.bench import stats as _st\ndef slo_verdict(")),
        "constant": ("def slo_verdict(records, slo, level=0.9):\n"
                     "    return {'ttft': (True, 'maximum', 400.0), 'tpot': (True, 'maximum', 60.0)}"),
        # the old task: the sample percentile of a few requests taken as the P95 itself
        "sample_percentile": _verdict(("        if s is not None and v[s - 1] > limit:",
                                       "        est = v[int((n - 1) * p)] + (v[min(n - 1, int((n - 1) * p) + 1)] - "
                                       "v[int((n - 1) * p)]) * ((n - 1) * p % 1)\n"
                                       "        out[metric] = (est <= limit, 'upper bound', est)\n        continue\n"
                                       "        if s is not None and v[s - 1] > limit:")),
        # issue 34's honest mistakes: a percentile (a bound) and a TPOT over all requests, failed ones included
        "with_failed": _verdict(('done = [d for d in records if d.get("error") is None]', "done = list(records)")),
        "tpot_of_failed": _verdict(('for d in done\n                       if d["output_tokens"] >= 2]',
                                    'for d in records\n                       if d["output_tokens"] >= 2]')),
        "always_max": _verdict(("if 1 - binom_cdf(k - 1, n, p) >= level), None)", "if False), None)"),
                               ("if binom_cdf(k - 1, n, p) >= level), None)", "if False), None)")),
        "no_lower_bound": _verdict(("if 1 - binom_cdf(k - 1, n, p) >= level), None)", "if False), None)")),
        "off_by_one": _verdict(('(True if v[r - 1] <= limit else None, "upper bound", v[r - 1])',
                                '(True if v[min(n - 1, r)] <= limit else None, "upper bound", v[min(n - 1, r)])')),
        "strict": _verdict(("v[r - 1] <= limit else None", "v[r - 1] < limit else None"), ("v[-1] <= limit", "v[-1] < limit")),
        "fixed_p95": _verdict(("p = slo.percentile / 100", "p = 0.95")),
        "fixed_level": _verdict(("def slo_verdict(records, slo, level=0.9):", "def slo_verdict(records, slo, level=0.9):\n"
                                 "    level = 0.9")),
        "undecided_fails": _verdict(("True if v[r - 1] <= limit else None", "v[r - 1] <= limit")),
        "unit": _verdict(('[1000 * d["ttft_s"] for d in done]', '[d["ttft_s"] for d in done]')),
    },
    "lab4-task1": {
        UNTOUCHED: None,
        "package_private_path": ("import numpy as _np\n_impl = _np.percentile._implementation\n"
                                 "def percentile(values, q):\n    return float(_impl(values, q))"),
        "no_return_percentile": ("def percentile(values, q):\n    v = sorted(values)\n    r = (len(v) - 1) * q / 100"),
        "constant": "def percentile(values, q):\n    return 6.9",
        "package": "import numpy as np\ndef percentile(values, q):\n    return float(np.percentile(values, q))",
        "package_import": "from numpy import percentile as _p\ndef percentile(values, q):\n    return float(_p(values, q))",
        "off_by_one": ("def percentile(values, q):\n    v = sorted(values)\n    r = min(len(v) - 1, len(v) * q / 100)\n"
                       "    lo, hi = math.floor(r), math.ceil(r)\n    return v[lo] + (v[hi] - v[lo]) * (r - lo)"),
        "nearest_rank": "def percentile(values, q):\n    v = sorted(values)\n    return v[round((len(v) - 1) * q / 100)]",
        "unit": ("def tpot_ms(record):\n    n = record['output_tokens']\n"
                 "    return None if n < 2 else (record['e2e_s'] - record['ttft_s']) / (n - 1)"),
        "divide_by_n": ("def tpot_ms(record):\n    n = record['output_tokens']\n"
                        "    return None if n < 2 else 1000 * (record['e2e_s'] - record['ttft_s']) / n"),
        # issue 34: a failed request's TPOT, and the package's own TPOT (a property of its record type)
        "tpot_of_failed": ("def tpot_ms(record):\n    n = record['output_tokens']\n"
                           "    return None if n < 2 else 1000 * (record['e2e_s'] - record['ttft_s']) / (n - 1)"),
        "package_property": ("from inferopt.bench.metrics import RequestRecord as _RR\n"
                             "def tpot_ms(record):\n    t = _RR.from_dict(dict(record, request_id=0)).tpot_s\n"
                             "    return None if t is None else 1000 * t"),
    },
    "lab4-task2": {
        UNTOUCHED: None,
        "tpot_strict": ("def goodput_rps(rows, slo, duration_s):\n    good = 0\n    for d in rows:\n"
                        "        t = tpot_ms(d)\n"
                        "        good += 1000 * d['ttft_s'] <= slo.ttft_ms and (t is None or t < slo.tpot_ms)\n"
                        "    return good / duration_s"),
        "constant": "def goodput_rps(rows, slo, duration_s):\n    return 0.5",
        "package": ("from inferopt.bench.metrics import RequestRecord\n"
                    "def goodput_rps(rows, slo, duration_s):\n"
                    "    return sum(slo.request_meets(RequestRecord.from_dict(dict(d, request_id=0, start_s=0.0, itl_s=[], error=None)))"
                    " for d in rows) / duration_s"),
        "ttft_only": ("def goodput_rps(rows, slo, duration_s):\n"
                      "    return sum(1000 * d['ttft_s'] <= slo.ttft_ms for d in rows) / duration_s"),
        "off_by_one": ("def goodput_rps(rows, slo, duration_s):\n    good = 0\n    for d in rows:\n        t = tpot_ms(d)\n"
                       "        good += 1000 * d['ttft_s'] < slo.ttft_ms and (t is None or t < slo.tpot_ms)\n"
                       "    return good / duration_s"),
        "throughput": "def goodput_rps(rows, slo, duration_s):\n    return len(rows) / duration_s",
        # issue 34: failed requests counted
        "p95_with_failed": "def ttft_p95_ms(rows):\n    return percentile([1000 * d['ttft_s'] for d in rows], 95)",
        "goodput_counts_failed": ("def goodput_rps(rows, slo, duration_s):\n    good = 0\n    for d in rows:\n"
                                  "        t = tpot_ms(dict(d, error=None))\n"
                                  "        good += 1000 * d['ttft_s'] <= slo.ttft_ms and (t is None or t <= slo.tpot_ms)\n"
                                  "    return good / duration_s"),
        "p95_in_seconds": ("def ttft_p95_ms(rows):\n"
                           "    return percentile([d['ttft_s'] for d in rows if d.get('error') is None], 95)"),
    },
    "lab4-task3": {
        UNTOUCHED: None,
        "constant": "def max_concurrency(by_level, slo, level=0.9):\n    return 2, 'maximum'",
        "package": ("from inferopt.bench.metrics import max_level_meeting, summarize, RequestRecord as _RR\n"
                    "def max_concurrency(by_level, slo, level=0.9):\n"
                    "    s = [summarize([_RR.from_dict(dict(d, request_id=0)) for d in rows], concurrency=c)"
                    " for c, rows in by_level.items()]\n    return max_level_meeting(s, slo), 'bound'"),
        # the old task: a level's sample P95 of a few requests taken as the truth
        "sample_p95": _frontier(("        verdicts = [stats.slo_verdict(",
                                 "        _p = lambda v, q: sorted(v)[int((len(v) - 1) * q / 100)] + (sorted(v)[min(len(v) - 1,"
                                 " int((len(v) - 1) * q / 100) + 1)] - sorted(v)[int((len(v) - 1) * q / 100)]) * "
                                 "((len(v) - 1) * q / 100 % 1)\n"
                                 "        verdicts = [type('V', (), {'passed': _p(x, slo.percentile) <= lim, 'basis': 'bound'})"
                                 " for x, lim in ((ttft, slo.ttft_ms), (tpot, slo.tpot_ms))]\n        _unused = ["
                                 "stats.slo_verdict(")),
        "no_stop": _frontier(("break", "continue")),
        "unsorted": _frontier(("for c in sorted(by_level):", "for c in by_level:")),
        "undecided_passes": _frontier(("v.passed is True for v", "v.passed is not False for v")),
        # issue 34's honest mistake: failed requests counted in the verdicts' values
        "with_failed": _frontier(("        if any(d.get(\"error\") is not None for d in rows):\n            break\n", ""),
                                 ("tpot_ms(d) for d in rows", "tpot_ms(dict(d, error=None)) for d in rows")),
        "failed_level_ok": _frontier(("        if any(d.get(\"error\") is not None for d in rows):\n            break\n", ""),
                                     ("for d in rows]\n        tpot", "for d in rows if d.get('error') is None]\n        tpot")),
    },
    "lab4-task4": {
        UNTOUCHED: None,
        "constant": ("def make_figures(summaries, slo, best):\n    fixed = SLO(ttft_ms=800, tpot_ms=120)\n"
                     "    return plots.latency_vs_concurrency(summaries, fixed, best=best), plots.pareto(summaries, slo_ms=120)"),
        "wrong_axis": ("def make_figures(summaries, slo, best):\n    return plots.latency_vs_concurrency(summaries, slo, best=best), "
                       "plots.pareto(summaries, latency='ttft_p95_ms', slo_ms=slo.ttft_ms)"),
        "no_slo": ("def make_figures(summaries, slo, best):\n"
                   "    return plots.latency_vs_concurrency(summaries, best=best), plots.pareto(summaries, slo_ms=slo.tpot_ms)"),
        # issue 29: the frontier the summaries' P95s of a few requests give, not task 3's verdict
        "p95_frontier": ("def make_figures(summaries, slo, best):\n"
                         "    return plots.latency_vs_concurrency(summaries, slo), plots.pareto(summaries, slo_ms=slo.tpot_ms)"),
        # issue 34: the right annotations with no data behind them, or another sweep's data
        "annotations_no_data": ("_mf = make_figures\ndef make_figures(summaries, slo, best):\n    a, b = _mf(summaries, slo, best)\n"
                                "    a.data, b.data = (), ()\n    return a, b"),
        "other_data": ("import plotly.graph_objects as _go\n_mf = make_figures\n"
                       "def make_figures(summaries, slo, best):\n    a, b = _mf(summaries, slo, best)\n"
                       "    c, d = _mf([dict(s, ttft_p95_ms=1.0, tpot_p95_ms=1.0, ttft_max_ms=1.0, tpot_max_ms=1.0)"
                       " for s in summaries], slo, best)\n"
                       "    return _go.Figure(data=c.data, layout=a.layout), _go.Figure(data=d.data, layout=b.layout)"),
        # issue 48: the old figure, a P95 line through every level, drawn from 2-8 requests a level
        "p95_from_few": ("import plotly.graph_objects as _go\n_mf = make_figures\n"
                         "def make_figures(summaries, slo, best):\n    a, b = _mf(summaries, slo, best)\n"
                         "    rows = sorted(summaries, key=lambda s: s['concurrency'])\n"
                         "    for m, col in (('ttft', 1), ('tpot', 2)):\n"
                         "        a.add_trace(_go.Scatter(x=[s['concurrency'] for s in rows], "
                         "y=[s[m + '_p95_ms'] for s in rows], name='P95'), row=1, col=col)\n"
                         "    return a, b"),
        # issue 48: the old Pareto curve, a P95 TPOT axis whatever the sample
        "pareto_p95_from_few": ("import plotly.graph_objects as _go\n_mf = make_figures\n"
                                "def make_figures(summaries, slo, best):\n    a, b = _mf(summaries, slo, best)\n"
                                "    rows = sorted(summaries, key=lambda s: s['concurrency'])\n"
                                "    b.data[0].x = [s['tpot_p95_ms'] for s in rows]\n"
                                "    b.layout.xaxis.title.text = 'tpot_p95_ms'\n    return a, b"),
    },
    "lab5-task1": {
        UNTOUCHED: None,
        "severity_critical": ("import copy, json\nmy_rule = dict(my_rule, labels={'severity': 'critical'})\n"
                              "my_test = json.loads(json.dumps(my_test).replace('\"warning\"', '\"critical\"'))"),
        "unit_percent": "my_rule = dict(my_rule, expr=my_rule['expr'].replace('> 0.9', '> 90'))",
        "formula_at_or_above": "my_rule = dict(my_rule, expr=my_rule['expr'].replace('> 0.9', '>= 0.9'))",
        "no_for": "my_rule = {k: v for k, v in my_rule.items() if k != 'for'}",
        # the task's selector left out: the rule would page for a full cache of any job (a staging engine)
        "no_job_selector": "my_rule = dict(my_rule, expr=my_rule['expr'].replace('{job=\"vllm\"}', ''))",
        "test_cannot_fail": ("import copy\nmy_test = copy.deepcopy(my_test)\n"
                             "my_test['tests'][0]['alert_rule_test'] = my_test['tests'][0]['alert_rule_test'][:1]"),
    },
    "lab5-task2": {
        UNTOUCHED: None,
        "fixed_tolerance": ("def impossible_rows(table, output_tokens, tolerance=0.2):\n"
                            "    return [r['concurrency'] for r in table if abs(in_flight(r['qps'], r['ttft_mean_ms'],"
                            " r['tpot_mean_ms'], output_tokens) / r['concurrency'] - 1) > 0.2]"),
        "at_tolerance": ("def impossible_rows(table, output_tokens, tolerance=0.2):\n"
                         "    return [r['concurrency'] for r in table if abs(in_flight(r['qps'], r['ttft_mean_ms'],"
                         " r['tpot_mean_ms'], output_tokens) / r['concurrency'] - 1) >= tolerance]"),
        "ratio_upside_down": ("def impossible_rows(table, output_tokens, tolerance=0.2):\n"
                              "    return [r['concurrency'] for r in table if abs(r['concurrency'] / in_flight(r['qps'],"
                              " r['ttft_mean_ms'], r['tpot_mean_ms'], output_tokens) - 1) > tolerance]"),
        "constant": "def in_flight(qps, ttft_ms, tpot_ms, output_tokens):\n    return 64",
        "unit": ("def in_flight(qps, ttft_ms, tpot_ms, output_tokens):\n"
                 "    return qps * (ttft_ms + (output_tokens - 1) * tpot_ms)"),
        "off_by_one": ("def in_flight(qps, ttft_ms, tpot_ms, output_tokens):\n"
                       "    return qps * (ttft_ms + output_tokens * tpot_ms) / 1000"),
        "formula_no_ttft": ("def in_flight(qps, ttft_ms, tpot_ms, output_tokens):\n"
                            "    return qps * (output_tokens - 1) * tpot_ms / 1000"),
        "trusts_a": "trusted = load_test_a",
        "package_littles_law": ("from inferopt.planning.planner import littles_law as _ll\n"
                                "def in_flight(qps, ttft_ms, tpot_ms, output_tokens):\n"
                                "    return _ll(qps, ttft_ms, tpot_ms, output_tokens, 10**9).in_flight"),
    },
    "lab5-task3": {
        UNTOUCHED: None,
        "constant": ("def best_qps_within_slo(table, ttft_slo_ms, tpot_slo_ms, level=0.9):\n    return 50\n"
                     "def instances_needed(target_qps, per_instance_qps, surge=1, spares=1, gpus_per_instance=8):\n"
                     "    return 4, 6, 48"),
        "package": ("from inferopt.planning.capacity import plan_instances\n"
                    "def instances_needed(target_qps, per_instance_qps, surge=1, spares=1, gpus_per_instance=8):\n"
                    "    p = plan_instances(target_qps, per_instance_qps, surge, 'N+1', gpus_per_instance)\n"
                    "    return p.base_instances, p.instances, p.gpus"),
        "package_stats": ("from inferopt.bench.stats import min_samples_for_upper_bound as _m\n"
                          "def min_requests(level, q=95):\n    return _m(q, level)"),
        "off_by_one": ("def instances_needed(target_qps, per_instance_qps, surge=1, spares=1, gpus_per_instance=8):\n"
                       "    base = int(target_qps // per_instance_qps) + 1\n"
                       "    return base, base + surge + spares, (base + surge + spares) * gpus_per_instance"),
        "raw_peak": ("def best_qps_within_slo(table, ttft_slo_ms, tpot_slo_ms, level=0.9):\n"
                     "    return max(r['qps'] for r in table)"),
        "at_or_below": _sizing("best_qps_within_slo", ('r["ttft_p95_ms"] < ttft_slo_ms', 'r["ttft_p95_ms"] <= ttft_slo_ms'),
                               ('r["tpot_p95_ms"] < tpot_slo_ms', 'r["tpot_p95_ms"] <= tpot_slo_ms')),
        # issue 29: a P95 trusted whatever the number of requests behind it, and the bound's usual mistakes
        "ignores_n": _sizing("best_qps_within_slo", ('r["requests"] >= enough and ', '')),
        "off_by_one_n": _sizing("best_qps_within_slo", ('r["requests"] >= enough', 'r["requests"] > enough')),
        "fixed_level": _sizing("best_qps_within_slo", ("enough = min_requests(level)", "enough = min_requests(0.9)")),
        "print_floor": _sizing("best_qps_within_slo", ("enough = min_requests(level)", "enough = 20")),
        "bound_floor": ("def min_requests(level, q=95):\n"
                        "    return math.floor(math.log(1 - level) / math.log(q / 100))"),
        "bound_plus_one": _sizing("min_requests", ("while 1 - p**n < level:", "while 1 - p**n <= level + 1e-9 or n < 2:"),
                                  ("    return n", "    return n if n < 2 else n + 1")),
        "bound_level_power": ("def min_requests(level, q=95):\n"
                              "    return math.ceil(math.log(1 - q / 100) / math.log(level))"),
        "bound_fixed_q": _sizing("min_requests", ("p, n = q / 100, 1", "p, n = 0.95, 1")),
        "bound_print_floor": "def min_requests(level, q=95):\n    return 20",
    },
    "lab5-task4": {
        UNTOUCHED: None,
        "round_whole": ("def step_decision(readings, last_step):\n"
                        "    for g in readings:\n"
                        "        v = g['value']\n"
                        "        if v is None or math.isnan(v):\n            return 'roll back'\n"
                        "        if not (v < g['threshold'] if g['pass_if'] == 'below' else round(v) == g['threshold']):\n"
                        "            return 'roll back'\n"
                        "    return 'done' if last_step else 'promote'"),
        "done_despite_failing": ("_right = step_decision\n"
                                 "def step_decision(readings, last_step):\n"
                                 "    return 'done' if last_step else _right(readings, last_step)"),
        "constant": "def step_decision(readings, last_step):\n    return 'promote'",
        "package": ("from inferopt.monitoring.alerts import gate_passes\n"
                    "def step_decision(readings, last_step):\n"
                    "    if all(gate_passes(g, g['value']) for g in readings):\n"
                    "        return 'done' if last_step else 'promote'\n"
                    "    return 'roll back'"),
        "at_or_below": ("def step_decision(readings, last_step):\n"
                        "    for g in readings:\n"
                        "        v = g['value']\n"
                        "        if v is None or math.isnan(v):\n            return 'roll back'\n"
                        "        ok = v <= g['threshold'] if g['pass_if'] == 'below' else round(v, 6) == g['threshold']\n"
                        "        if not ok:\n            return 'roll back'\n"
                        "    return 'done' if last_step else 'promote'"),
        "no_data_passes": ("def step_decision(readings, last_step):\n"
                           "    bad = [g for g in readings if g['value'] is not None and not math.isnan(g['value']) and not\n"
                           "           (g['value'] < g['threshold'] if g['pass_if'] == 'below'\n"
                           "            else round(g['value'], 6) == g['threshold'])]\n"
                           "    return 'roll back' if bad else ('done' if last_step else 'promote')"),
        "exact_equal": ("def step_decision(readings, last_step):\n"
                        "    for g in readings:\n"
                        "        v = g['value']\n"
                        "        if v is None or math.isnan(v):\n            return 'roll back'\n"
                        "        if not (v < g['threshold'] if g['pass_if'] == 'below' else v == g['threshold']):\n"
                        "            return 'roll back'\n"
                        "    return 'done' if last_step else 'promote'"),
        "never_done": ("_right = step_decision\n"
                       "def step_decision(readings, last_step):\n"
                       "    d = _right(readings, last_step)\n"
                       "    return 'promote' if d == 'done' else d"),
    },
}

# kinds whose point is the wording of the one line (issue 21): a fragment it must contain
MESSAGE = {
    ("lab1-part1", "no_return"): "forget `return`",
    ("lab2-task1", "no_return"): "forget `return`",
    ("lab4-task1", "no_return_percentile"): "forget `return`",
    ("lab5-task4", "done_despite_failing"): "failing gate rolls back at the last step",
    ("lab5-task1", "severity_critical"): "severity `warning`",
    ("lab4-task1", "tpot_of_failed"): "failed request",
    ("lab3-task4", "with_failed"): "failed request",
    ("lab4-task3", "with_failed"): "failed request",
    ("lab4-task3", "failed_level_ok"): "where one failed does not meet",
    ("lab4-task3", "sample_p95"): "no verdict",
    ("lab4-task3", "no_stop"): "noise",
    ("lab4-task3", "unsorted"): "increasing concurrency",
    ("lab4-task3", "undecided_passes"): "cannot decide",
    ("lab4-task4", "p95_frontier"): "the level it is given",
    ("lab3-task4", "tpot_of_failed"): "failed request",
    ("lab3-task4", "sample_percentile"): "is no bound",
    ("lab3-task4", "always_max"): "already bounds",
    ("lab3-task4", "no_lower_bound"): "lower bound first",
    ("lab3-task4", "off_by_one"): "off by one",
    ("lab3-task4", "fixed_p95"): "not a fixed 95",
    ("lab3-task4", "fixed_level"): "confidence you are given",
    ("lab3-task4", "undecided_fails"): "cannot decide",
    ("lab3-task4", "strict"): "exactly at the limit",
    ("lab3-task4", "unit"): "milliseconds",
    ("lab4-task2", "p95_with_failed"): "failed request",
    ("lab4-task2", "goodput_counts_failed"): "failed request is never good",
    ("lab4-task2", "p95_in_seconds"): "milliseconds",
    ("lab4-task4", "annotations_no_data"): "not the summaries' data",
    ("lab4-task4", "other_data"): "not the summaries' data",
    ("lab4-task4", "p95_from_few"): "needs 45",
    ("lab4-task4", "pareto_p95_from_few"): "cannot carry a P95",
    ("lab5-task3", "ignores_n"): "skip the rows with too few `requests`",
    ("lab5-task3", "off_by_one_n"): "off by one in the comparison",
    ("lab5-task3", "fixed_level"): "use the level you are given",
    ("lab5-task3", "print_floor"): "floor for printing a percentile",
    ("lab5-task3", "bound_floor"): "off by one in the bound",
    ("lab5-task3", "bound_plus_one"): "off by one in the bound",
    ("lab5-task3", "bound_level_power"): "smallest n with 1 - (q/100)^n >= level",
    ("lab5-task3", "bound_fixed_q"): "follow the percentile you are given",
    ("lab5-task3", "bound_print_floor"): "floor for printing a percentile",
    ("lab5-task3", "raw_peak"): "raw peak",
    ("lab5-task3", "at_or_below"): "strictly",
    ("lab5-task2", "at_tolerance"): "exactly at the tolerance",
    ("lab1-part1", "order_swapped"): "check the order of the steps",
    ("lab1-part2", "ranked_later"): "not the first thing to try",
    ("lab1-part2", "action_for_an_off_technique"): "not the first thing to try",
    ("lab1-part1", "formula"): "not the worst metric's branch",
}

CHECKS = check_functions()
CASES = [(gid, kind) for gid in sorted(WRONG) for kind in WRONG[gid]]


def test_engine_cells_are_tagged_live():
    """Cells that start an engine carry the tag `live` (the grader skips them; these tests never start one)
    and come after every check cell, so the engine starts only once the tasks pass."""
    for path in sorted(SOLUTIONS.glob("lab*.ipynb")):
        cells = _cells(path)
        live = [i for i, c in enumerate(cells) if ENGINE.search(_src(c))]
        assert all(_is_live(cells[i]) for i in live), path.name
        checks = [i for i, c in enumerate(cells) if _is_check(c)]
        assert not live or not checks or min(live) > max(checks), path.name


def test_every_check_has_wrong_submissions():
    """Each check cell of solutions/ is listed here with an untouched stub and at least two other
    wrong submissions (a check that rejects nothing would pass this table only if it had none)."""
    assert set(CHECKS) == set(WRONG), (sorted(CHECKS), sorted(WRONG))
    thin = {gid: sorted(kinds) for gid, kinds in WRONG.items() if UNTOUCHED not in kinds or len(kinds) < 3}
    assert not thin, thin


@pytest.mark.parametrize("gid", sorted(CHECKS))
def test_worked_solution_passes(gid):
    lab, fn, _ = CHECKS[gid]
    out = run_check(lab, fn, namespace(lab))
    assert "passes" in out, out


def _assert_no_answer(lab: str, text: str) -> None:
    for pattern in ANSWERS[lab]:
        assert not re.search(pattern, text), f"an answer ({pattern}) shows in: {text}"


@pytest.mark.parametrize("gid,kind", CASES, ids=[f"{g}:{k}" for g, k in CASES])
def test_wrong_submission_is_rejected(gid, kind):
    lab, fn, _ = CHECKS[gid]
    if kind == UNTOUCHED:
        ns = namespace(lab, "lab")
    else:
        ns = namespace(lab)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(WRONG[gid][kind], f"<wrong {gid}:{kind}>", "exec"), ns)
    buf = io.StringIO()
    with pytest.raises(CheckFailed) as err, contextlib.redirect_stdout(buf):
        run_check(lab, fn, ns)
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 1500, msg  # one line
    if kind == UNTOUCHED:
        assert isinstance(err.value, NotDone) and "not done yet" in msg, msg
    if kind.startswith(("package", "reference_of", "runs_solutions")):
        assert isinstance(err.value, Shortcut) and "write it yourself" in msg, msg
    if (gid, kind) in MESSAGE:
        assert MESSAGE[(gid, kind)] in msg, msg
    assert not re.search(r"(?<![\d.])1(\.0+)?x too", msg), msg
    _assert_no_answer(lab, msg + "\n" + buf.getvalue())


def test_forbid_restores_the_package():
    import numpy as np

    from inferopt.diagnosis import decision

    before = (np.percentile, decision.diagnose)
    ns = {"diagnose": decision.diagnose}
    with labcheck.forbid(ns, [("numpy", "percentile"), ("inferopt.diagnosis.decision", "diagnose")]):
        assert np.percentile is not before[0] and ns["diagnose"] is not before[1]
        with pytest.raises(Exception, match="write it yourself"):
            np.percentile([1, 2], 50)
    assert (np.percentile, decision.diagnose) == before and ns["diagnose"] is before[1]


def test_check_errors_render_as_one_line():
    """What Jupyter shows for a failed check: IPython uses _render_traceback_ instead of a traceback."""
    lines = NotDone("Task 2 is not done yet: define `predicted_tokens`")._render_traceback_()
    assert len(lines) == 1 and "Task 2 is not done yet: define `predicted_tokens`" in lines[0]


def test_references_agree_with_the_package():
    """The checks' own formulas (independent of the package) agree with inferopt.planning.memory,
    inferopt.bench.metrics and inferopt.monitoring's reference text parser."""
    import numpy as np

    from inferopt.bench.experiments import parse_metrics
    from inferopt.bench.metrics import SLO, RequestRecord, max_level_meeting, summarize
    from inferopt.labcheck import _references as _ref
    from inferopt.labcheck import lab2, lab3, lab4
    from inferopt.planning import memory
    from inferopt.planning.capacity import plan_instances

    smol = lab2.model_cfg("smollm2-135m-instruct")
    for gib, mml in ((0.5, 1536), (1.0, 2048), (0.25, 1000)):
        want = memory.cpu_engine_prediction(kv_cache_gib=gib, max_model_len=mml)
        tokens, conc = _ref.ref_prediction(smol, 4, int(gib * 2**30), mml, lab2.BLOCK_SIZES[0])  # CPU
        assert (tokens, conc) == (want.kv_cache_tokens, want.max_concurrency)
    assert _ref.ref_bytes_per_token(lab2.model_cfg("llama-3-70b"), 1) == memory.kv_bytes_per_request(
        "llama-3-70b", 1, kv_dtype="fp8")
    r = labcheck.rng(SEED)
    for _ in range(20):
        text, names = lab3.random_exposition(r)
        parsed = parse_metrics(text)
        for n in names:
            assert abs(_ref.ref_metric_value(text, n) - parsed.get(n, 0.0)) < 1e-6 * max(1, parsed.get(n, 0.0))
        slo = SLO(ttft_ms=r.choice([300, 800]), tpot_ms=r.choice([50, 120]))
        rows = [lab4.random_record(r) for _ in range(12)]
        recs = [RequestRecord.from_dict(dict(d, request_id=0, start_s=0.0, itl_s=[], error=None)) for d in rows]
        s = summarize(recs, duration_s=10.0, slo=slo)
        assert abs(_ref.ref_goodput(rows, slo, 10.0) - s["goodput_rps"]) < 1e-12
        assert abs(np.percentile([_ref.ref_tpot_ms(d) for d in rows if _ref.ref_tpot_ms(d) is not None], 95)
                   - s["tpot_p95_ms"]) < 1e-6
        sums = lab4.random_summaries(r, slo)
        assert _ref.ref_max_concurrency(sums, slo) == max_level_meeting(sums, slo)
    from inferopt.labcheck import lab5
    from inferopt.monitoring.alerts import gate_passes

    for _ in range(300):       # the canary check's reference decides as the package's gates do
        readings, last = lab5.random_readings(r), r.random() < 0.5
        ok = all(gate_passes(g, g["value"]) for g in readings)
        assert _ref.ref_step_decision(readings, last) == (("done" if last else "promote") if ok else "roll back")
    for target, per in ((200, 50), (200, 71.5), (7, 3)):
        p = plan_instances(target, per, 1, "N+1", 8)
        from inferopt.labcheck._references import ref_instances
        assert ref_instances(target, per, 1, 1, 8) == (p.base_instances, p.instances, p.gpus)


def test_lab3_verdict_reference_is_the_course_rule():
    """Lab 3's task 4 reference (exact, in integers) judges as inferopt.bench.stats.slo_verdict (the course's one
    rule, issue 29) and rests on the same order statistic, on the cases the check draws; those cases reach every
    outcome, and the first cases of every run have failed requests that flip the verdict when counted."""
    from inferopt.bench import stats
    from inferopt.labcheck import _references as _ref
    from inferopt.labcheck import lab3

    r, seen = labcheck.rng(SEED), set()
    for i in range(300):
        rows, slo, level = lab3.verdict_case(r, i)
        vals = _ref.ref_verdict_values(rows)
        for m, (ok, basis, value) in _ref.ref_slo_verdict(rows, slo, level).items():
            limit = getattr(slo, f"{m}_ms")
            course = stats.slo_verdict(m, vals[m], limit, slo.percentile, level=level)
            b = stats.percentile_bounds(vals[m], slo.percentile, level=level)
            assert course.passed == ok and course.basis.startswith("maximum") == (basis == "maximum"), (i, m)
            assert value == {"lower bound": b.lower, "upper bound": b.upper, "maximum": b.maximum}[basis], (i, m)
            seen.add((ok, basis))
    assert seen == {(False, "lower bound"), (True, "upper bound"), (None, "upper bound"), (True, "maximum"),
                    (False, "maximum")}, seen
    for q in lab3.QS:
        for level in lab3.LEVELS:
            assert lab3.need_for_bound(q, level) == stats.min_samples_for_upper_bound(q, level)
    for _ in range(3):  # any seed: counting the failed requests changes a verdict among the first cases
        r = labcheck.rng(None)
        cases = [lab3.verdict_case(r, i) for i in range(4)]
        assert any(_ref.ref_slo_verdict(*c, with_failed=True) != _ref.ref_slo_verdict(*c) for c in cases)


def test_lab5_sizing_bound_is_the_course_rule():
    """Lab 5's task 3 (issue 29): the check's bound is bench.stats' min_samples_for_upper_bound at every level and
    percentile it asks (none on a whole-number edge, where float and exact arithmetic could differ); every run holds
    a table whose best row has one request too few and one with exactly enough; on the diagnostic table each usual
    mistake picks its own row, so each gets its own hint."""
    import math

    from inferopt.bench import stats
    from inferopt.labcheck import _references as _ref
    from inferopt.labcheck import lab5

    for level in lab5.LEVELS:
        for q in lab5.QS:
            assert _ref.ref_min_requests(level, q) == stats.min_samples_for_upper_bound(q, level), (level, q)
            x = math.log(1 - level) / math.log(q / 100)
            assert abs(x - round(x)) > 1e-3, (level, q)
    assert _ref.ref_min_requests(0.9) == lab5.PRINT_FLOOR + 25 and lab5.PRINT_FLOOR == stats.MIN_PERCENTILE_SAMPLES
    for seed in (None, SEED):
        r = labcheck.rng(seed)
        for case, keeps_top in ((0, False), (1, True)):
            level = r.choice(lab5.LEVELS)
            table = lab5.sized_table(r, level, case)
            top = max(table, key=lambda row: row["qps"])
            need_n = _ref.ref_min_requests(level)
            assert top["requests"] == need_n - (0 if keeps_top else 1)
            assert (_ref.ref_best_qps(table, 1000, 80, level) == top["qps"]) == keeps_top
    t, lv = lab5.diagnostic_table(), lab5.DIAGNOSTIC_LEVEL
    picks = [_ref.ref_best_qps(t, 1000, 80, lv), _ref.ref_best_qps(t, 1000, 80, lv, enough=0),
             _ref.ref_best_qps(t, 1000, 80, lv, strict_n=True), _ref.ref_best_qps(t, 1000, 80, lab5.COURSE_LEVEL),
             _ref.ref_best_qps(t, 1000, 80, lv, enough=lab5.PRINT_FLOOR), max(row["qps"] for row in t)]
    assert len(set(picks)) == len(picks), picks


def test_references_are_not_importable_from_the_lab_modules():
    """`from inferopt.labcheck.labN import ref_...` finds nothing (the references live in a private
    module; a learner function that calls them anyway is a Shortcut: see `reference_of_the_check`)."""
    import importlib

    for lab in ("lab1", "lab2", "lab3", "lab4", "lab5"):
        mod = importlib.import_module(f"inferopt.labcheck.{lab}")
        assert not [n for n in vars(mod) if n.startswith("ref_")], lab
        with pytest.raises(ImportError):
            exec(f"from inferopt.labcheck.{lab} import ref_tpot_ms, ref_bytes_per_token, ref_instances", {})


# Right answers in other honest spellings: each was rejected before issue 21.
RIGHT_OTHER_TYPES = {
    "lab2-task2": ("import numpy as _np\n_fit = requests_that_fit\n"
                   "def requests_that_fit(capacity_gb, gb_per_request):\n    return _np.int64(_fit(capacity_gb, gb_per_request))\n"
                   "requests_in_520_gb = _np.int64(requests_in_520_gb)"),
    "lab2-task1": ("import numpy as _np\n_kv = kv_bytes_per_token\n"
                   "def kv_bytes_per_token(cfg, kv_bytes):\n    return _np.int64(_kv(cfg, kv_bytes))"),
    "lab2-task3": ("import numpy as _np\n_ep = engine_prediction\n"
                   "def engine_prediction(*a, **k):\n    t, c = _ep(*a, **k)\n    return _np.int64(t), _np.float64(c)\n"
                   "predicted_tokens = _np.int64(predicted_tokens)"),
    "lab5-task1": "my_rule = dict(my_rule, **{'for': '120s'})",
}


@pytest.mark.parametrize("gid", sorted(RIGHT_OTHER_TYPES))
def test_right_answer_in_another_type_passes(gid):
    lab, fn, _ = CHECKS[gid]
    ns = namespace(lab)
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(RIGHT_OTHER_TYPES[gid], f"<right {gid}>", "exec"), ns)
    assert "passes" in run_check(lab, fn, ns)


def test_ratio_hints_never_say_1x():
    from inferopt.labcheck import ratio_hint

    for got, want in ((100.0000001, 100), (99.99999, 100), (1000.4, 1000)):
        text = ratio_hint(got, want, "your value", {1: "multiply by the bytes of one number"})
        assert "1x" not in text and "1.0x" not in text and "bytes of one number" not in text, text
    assert "2x too large" in ratio_hint(200, 100, "your value")
    assert "forget `return`" in ratio_hint(None, 100, "your value")


def test_boundary_cases_are_in_every_run():
    """Whatever the seed, each generated set holds values on, just under and just over its thresholds."""
    from inferopt.labcheck import lab1, lab5

    cases = lab1.boundary_cases()
    assert any(m.get("ttft_p95_ms") == s["ttft_p95_ms"] for m, s in cases)
    assert any(m.get("throughput_tok_s", 0) < s.get("throughput_tok_s", 0) for m, s in cases)
    r = labcheck.rng(None)
    table = lab5.boundary_table(r, 150, 0.1)
    implied = sorted(_ref_implied(row, 150) for row in table)
    assert any(1.1 < x < 1.13 for x in implied) and any(1.07 < x < 1.1 for x in implied)
    assert any(v == 0.4 for spec, *_ in lab5.PROBES for *_, v in spec)


def _ref_implied(row, n):
    from inferopt.labcheck import _references as _ref

    return _ref.ref_in_flight(row["qps"], row["ttft_mean_ms"], row["tpot_mean_ms"], n) / row["concurrency"]


# ---- issue 34: a check run over and over on one notebook, and what only the grader can see -------------------


def test_every_check_counts_its_runs():
    """Each check cell's function counts its runs on a notebook (``labcheck.counted``)."""
    for lab, fn, _ in CHECKS.values():
        check = getattr(getattr(labcheck, lab), fn)
        assert getattr(check, "__wrapped__", None) is not None, f"{lab}.{fn} is not decorated with @counted"


# one quick check per lab: the counting is the same decorator on every check
@pytest.mark.parametrize("gid", ["lab1-part3", "lab2-task2", "lab3-task1", "lab4-task3", "lab5-task4"])
def test_a_check_run_over_and_over_stops_judging(gid, monkeypatch):
    """A loop that calls a check until it passes (a search for the accepted answer) is noticed: past
    PROBE_LIMIT runs on one notebook the check says so and judges no more (the limit is lowered here
    to keep the test short; the notebook's limit is labcheck.PROBE_LIMIT)."""
    lab, fn, _ = CHECKS[gid]
    from inferopt.labcheck import honesty

    monkeypatch.setattr(honesty, "PROBE_LIMIT", 2)
    ns = namespace(lab)
    for _ in range(2):
        assert "passes" in run_check(lab, fn, ns)
    with pytest.raises(labcheck.Probed) as err, contextlib.redirect_stdout(io.StringIO()):
        run_check(lab, fn, ns)
    assert "3 times in this kernel" in str(err.value) and "Restart the kernel" in str(err.value)
    assert "passes" in run_check(lab, fn, namespace(lab))  # another notebook (a fresh kernel) is judged


def _solution_reader(lab_file: str, path: str = "") -> str:
    """Code a submission could use to take a name from the worked solution (exec its code blocks)."""
    where = f"__import__('pathlib').Path({path!r})" if path else "__import__('inferopt.paths').paths.SOLUTIONS"
    return ("def _solution(name):\n    import re\n"
            f"    text = ({where} / {lab_file!r}).read_text()\n    g = {{}}\n"
            "    for block in re.findall(r'```\\{code-cell\\}\\n(.*?)```', text, re.S):\n"
            "        try:\n            exec(block, g)\n        except Exception:\n            pass\n"
            "    return g[name]\n")


def _file(lab: str) -> str:
    return _lab_file(SOLUTIONS, lab).with_suffix(".md").name


def _copy(lab, names, path=str(SOLUTIONS)):
    return _solution_reader(_file(lab), path) + "".join(f"{n} = _solution({n!r})\n" for n in names)


def _probe(lab, check, name, candidates, arg_names):
    """A function that asks the lab's check which candidate it accepts, then answers with that one."""
    return (f"from inferopt import labcheck as _lc\ndef {name}({', '.join(arg_names)}):\n"
            f"    for c in {candidates!r}:\n        try:\n"
            f"            _lc.{lab}.{check}(dict(globals(), {name}=lambda *a, c=c: c))\n            return c\n"
            "        except Exception:\n            pass\n")


def _lookup_cpu_flags() -> str:
    """lab 3, task 1 as a table: the answers for the lists the check drew under the tests' pinned seed."""
    right, seen = namespace("lab3")["cpu_flags"], {}
    run_check("lab3", "task1", {"cpu_flags": lambda flags: seen.setdefault(tuple(flags), right(list(flags)))})
    table = seen
    return f"_TABLE = {table!r}\ndef cpu_flags(flags):\n    return list(_TABLE.get(tuple(flags), flags))\n"


# {grade_id: {kind: (base, code)}}: base "lab" (the untouched lab) or "solution"; each is graded by the
# grader (a fresh checker and a submission process of its own), and must score 0 for the reason its kind names
GRADED = {
    "lab1-part1": {"copies_solutions": ("lab", lambda: _copy("lab1", ["worst_metric", "branch_for"]))},
    "lab1-part2": {"copies_solutions": ("lab", lambda: _copy("lab1", ["answers"])),
                   "probes_oracle": ("lab", lambda: (
                       "from inferopt.diagnosis.decision import diagnose as _dg\n"
                       "answers = {n: (_dg(i['metrics'], i.get('slos', SLO), i['workload'], i['techniques_on']).branch,"
                       " _dg(i['metrics'], i.get('slos', SLO), i['workload'], i['techniques_on']).techniques[0])"
                       " for n, i in INCIDENTS.items()}\n"))},
    "lab1-part3": {"probes_check": ("lab", lambda: (
        "from inferopt import labcheck as _lc\nfor _p in [p['id'] for p in knowledge.load('pitfalls')['pitfalls']]:\n"
        "    try:\n        _lc.lab1.part3({'pitfall': _p})\n        pitfall = _p\n        break\n"
        "    except Exception:\n        pass\n"))},
    "lab2-task1": {"copies_solutions": ("lab", lambda: _copy("lab2", ["kv_bytes_per_token", "kv_gb_per_request"])),
                   "copies_via_package_paths": ("lab", lambda: _copy("lab2", ["kv_bytes_per_token", "kv_gb_per_request"],
                                                                     path="")),
                   "copies_from_git": ("lab", lambda: (
                       "import subprocess as _sp\ndef _from_git(name):\n    src = _sp.run(['git', '-C', "
                       + repr(str(SOLUTIONS.parent)) + ", 'show', 'HEAD:solutions/lab2-memory-calculator.md'], "
                       "capture_output=True, text=True).stdout\n    g = {}\n"
                       "    exec(src.split('```{code-cell}')[2].split('```')[0], g)\n    return g[name]\n"
                       "kv_bytes_per_token, kv_gb_per_request = _from_git('kv_bytes_per_token'), "
                       "_from_git('kv_gb_per_request')\n")),
                   "probes_check": ("lab", lambda: _probe("lab2", "task1", "kv_bytes_per_token", [1, 2, 163840],
                                                          ["cfg", "kv_bytes"]))},
    "lab2-task2": {"typed_values": ("solution", lambda: "seed_factor = {seed_factor!r}\nrequests_in_520_gb = "
                                                        "{requests_in_520_gb!r}\n")},
    "lab2-task3": {"typed_values": ("solution", lambda: "predicted_tokens = {predicted_tokens!r}\n"
                                                        "predicted_concurrency = {predicted_concurrency!r}\n")},
    "lab3-task1": {"copies_solutions": ("lab", lambda: _copy("lab3", ["cpu_flags"])),
                   "lookup_table": ("lab", _lookup_cpu_flags)},
    "lab3-task4": {"probes_check": ("lab", lambda: (
        "from inferopt import labcheck as _lc\ndef slo_verdict(records, slo, level=0.9):\n"
        "    for ok in (True, False):\n        try:\n            _lc.lab3.task4({'slo_verdict': lambda s, l, c: {}})\n"
        "        except Exception:\n            pass\n    return {}\n"))},
    "lab4-task1": {"copies_solutions": ("lab", lambda: _copy("lab4", ["percentile", "tpot_ms"]))},
    "lab4-task3": {"probes_check": ("lab", lambda: _probe("lab4", "task3", "max_concurrency",
                                                          [(None, None), (1, "maximum"), (2, "maximum")],
                                                          ["by_level", "slo", "level=0.9"]))},
    "lab5-task2": {"typed_values": ("solution", lambda: "trusted = load_test_b\n")},
    "lab5-task3": {"typed_values": ("solution", lambda: "per_instance_qps = {per_instance_qps!r}\nsizing = {sizing!r}\n"),
                   "probes_oracle": ("solution", lambda: (
                       "from inferopt.planning.capacity import plan_instances as _pi\n"
                       "_p = _pi(TARGET_QPS, per_instance_qps, 1, 'N+1', 8)\nsizing = (_p.base_instances, _p.instances,"
                       " _p.gpus)\n"))},
    "lab5-task4": {"copies_solutions": ("lab", lambda: _copy("lab5", ["step_decision"]))},
}
GRADED_CASES = [(gid, kind) for gid in sorted(GRADED) for kind in GRADED[gid]]
REASON = {"copies_from_git": "Escaped", "copies": "Copied", "probes_check": "Probed", "probes_oracle": "Shortcut", "typed": "CheckFailed",
          "lookup": "CheckFailed"}


def _graded(gid, cells, seed=SEED):
    from inferopt.labcheck import grade

    labs = grade.release_checks()
    lab = gid.split("-")[0]
    task = next(t for t in grade.release_tasks(lab, labs) if t["grade_id"] == gid)
    return grade.grade_task(task, cells, timeout=240, seed=seed)


def test_every_kind_of_issue_34_is_graded_for_every_lab():
    """Copying from solutions/ and probing a check are graded in every lab; typed answers where a lab has
    values derived from the learner's functions (labs 2 and 5), a lookup table, the package as oracle."""
    kinds = {lab: {k.split("_")[0] for g, k in GRADED_CASES if g.startswith(lab)} for lab in ANSWERS}
    assert all({"copies", "probes"} <= kinds[lab] for lab in ANSWERS), kinds
    assert {"typed"} <= kinds["lab2"] & kinds["lab5"] and "lookup" in kinds["lab3"], kinds


@pytest.mark.parametrize("gid,kind", GRADED_CASES, ids=[f"{g}:{k}" for g, k in GRADED_CASES])
def test_graded_shortcut_scores_nothing(gid, kind):
    """What a notebook's own check cannot see, the grader refuses, with the reason and no answer."""
    from inferopt.labcheck import grade

    lab = gid.split("-")[0]
    base, make = GRADED[gid][kind]
    code = make()
    if kind.startswith("typed"):  # the right values, typed in: they pass the check in the notebook
        ns = namespace(lab)
        code = code.format(**ns)
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "<typed>", "exec"), ns)
        assert "passes" in run_check(lab, CHECKS[gid][1], ns)
    if kind.startswith("lookup"):  # the table passes in the notebook on the cases it was made from
        ns = namespace(lab, "lab")
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "<lookup>", "exec"), ns)
        assert "passes" in run_check(lab, CHECKS[gid][1], ns)
    nb = json.loads(_lab_file(SOLUTIONS if base == "solution" else LABS, lab).read_text(encoding="utf-8"))
    ok, msg = _graded(gid, grade.submission_cells(nb) + [code], seed=None if kind.startswith("lookup") else SEED)
    want = next(v for k, v in REASON.items() if kind.startswith(k))
    assert not ok and msg.startswith(want + ":"), msg
    assert "\n" not in msg and "Traceback" not in msg, msg
    _assert_no_answer(lab, msg)


@pytest.mark.parametrize("lab", ["lab3", "lab4"])
def test_worked_solutions_pass_when_graded(lab):
    """Labs 3 and 4 through the grader's two processes (labs 1, 2 and 5: tests/test_grade.py)."""
    from inferopt.labcheck import grade

    nb = json.loads(_lab_file(SOLUTIONS, lab).read_text(encoding="utf-8"))
    for gid in sorted(g for g in CHECKS if g.startswith(lab)):
        ok, msg = _graded(gid, grade.submission_cells(nb), seed=None)
        assert ok, (gid, msg)


@pytest.mark.parametrize("n", [64, 150, 256])
def test_rows_at_the_tolerance_are_exactly_at_it_in_any_order_of_computation(n):
    """Lab 5 task 2's rows on the tolerance: |L / c - 1| is the tolerance itself, in floating point, whichever way
    a learner computes L, so `>` keeps them and `>=` flags them; a tolerance no float ratio meets (0.2) gets none."""
    from inferopt.labcheck.lab5 import boundary_table, rows_at_tolerance

    rows = rows_at_tolerance(n, 0.25)
    assert [r["concurrency"] for r in rows] == [8, 1024] and all(r["ttft_mean_ms"] > 0 for r in rows)
    for r in rows:
        q, ttft, tpot, c = r["qps"], r["ttft_mean_ms"], r["tpot_mean_ms"], r["concurrency"]
        ways = [q * (ttft + (n - 1) * tpot) / 1000, q * (ttft / 1000 + (n - 1) * tpot / 1000),
                q * ttft / 1000 + q * (n - 1) * tpot / 1000, (ttft + tpot * (n - 1)) * q / 1000]
        for L in ways:
            assert abs(L / c - 1) == 0.25 and abs(L - c) / c == 0.25
    assert rows_at_tolerance(n, 0.2) == [] and rows_at_tolerance(n, 0.1) == []
    import random

    table = boundary_table(random.Random(0), n, 0.25)
    assert len({r["concurrency"] for r in table}) == len(table) == 8
