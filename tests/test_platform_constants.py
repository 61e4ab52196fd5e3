"""No CPU platform constant typed outside the one source of the engines' defaults
(inferopt/planning/platform_defaults.py): the number 128, the string 'float32' and '3 blocks' in the
package's code and the notebooks' code cells (docstrings and comments aside). What is still there is
listed below, file by file with who fixes it; a file whose count changes fails, so the list cannot go stale
and nothing new slips in."""
import ast
from collections import Counter
from pathlib import Path

from inferopt.serving.gpu_commands import notebook_code, notebook_sources

ROOT = Path(__file__).resolve().parents[1]
SOURCE = "inferopt/planning/platform_defaults.py"

ALLOWED = {   # file: (hits, why / who fixes it)
    # not platform constants: data, other models' shapes, sample values
    "inferopt/diagnosis/inputs.py": (1, "a flag's help text"),
    "inferopt/diagnosis/memory_view.py": (1, "the fp32 weight format's dtype name"),
    "inferopt/planning/roofline.py": (2, "an error message's example byte sizes; INT4 group size 128"),
    "inferopt/labcheck/lab3.py": (1, "random --max-num-seqs values for a lab check"),
    "inferopt/labcheck/lab5.py": (2, "random concurrency levels for a lab check"),
    "inferopt/serving/gpucheck.py": (1, "decode batch sizes for the roofline"),
    "inferopt/serving/engine_facts.py": (1, "the dtype-name-to-bytes table"),
    "inferopt/serving/model_prep.py": (1, "the GGUF is dequantized to float32 when the model is prepared"),
    "inferopt/labcheck/lab2.py": (3, "random model shapes (heads, head_dim 128) and the float32 named in a hint; "
                                     "block sizes come from planning/platform_defaults"),
    "inferopt/planning/memory.py": (11, "the calculator's dtype tables, INT4 group size 128, the dtype name of "
                                        "the fp32 weight format (block sizes come from planning/platform_defaults)"),
    "inferopt/bench/experiments.py": (2, "min_kv_gib/kv_for_concurrency default dtype='float32' (owner of bench/"
                                         "experiments: default to the running engine's dtype)"),
    "inferopt/figure_precision.py": (1, "plotly's typed-array code f4 -> numpy float32"),
    "inferopt/performance/predict.py": (3, "the fp32 weight format's dtype name (a float32 engine's weights)"),
    "inferopt/vllm_oracle/kv_specs.py": (2, "the dtype-name-to-torch-dtype table"),
    "chapters/03-combination-pitfalls.md": (1, "batch sizes of a plot"),
    "chapters/05-end-to-end-deployment.md": (1, "Llama-3-70B's head_dim in the seed's erratum"),
    "chapters/05b-load-test.md": (2, "GPU sweep concurrency 128 (data); line 157 prose 'keeps float32' (e2-live: "
                                     "say the engine's dtype from srv.facts)"),
    "solutions/lab5-monitoring-alerts.md": (2, "a benchmark table's concurrency column"),
    "solutions/lab2-memory-calculator.md": (1, "the live cell starts the engine in float32 on purpose, on a CPU and "
                                               "on a GPU: the prediction is made for 4-byte numbers"),
}


def _docstrings(tree) -> set:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def stray(code: str) -> list[tuple[int, str]]:
    """(line, constant) for each 128, 'float32' or '3 blocks' in Python code (docstrings, comments aside)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return [(0, "unparsable")]
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and id(node) not in docs:
            v = node.value
            if type(v) is int and v == 128:
                out.append((node.lineno, "128"))
            elif isinstance(v, str) and ("float32" in v or "3 blocks" in v):
                out.append((node.lineno, "float32" if "float32" in v else "3 blocks"))
    return out


def all_hits() -> dict[str, list]:
    found = {}
    for path in sorted((ROOT / "inferopt").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel != SOURCE:
            found[rel] = stray(path.read_text())
    for path in notebook_sources():
        found[str(path.relative_to(ROOT))] = stray(notebook_code(path))
    return {k: v for k, v in found.items() if v}


def test_the_scan_sees_a_typed_constant():
    assert stray("block = 128\nd = 'float32'\n") == [(1, "128"), (2, "float32")]
    assert stray('def f():\n    """float32 and 128 in a docstring"""\n    # 128 in a comment\n    return 1\n') == []
    assert stray("print(f'a budget of 3 blocks')") == [(1, "3 blocks")]


def test_no_stray_platform_constant_outside_the_one_source():
    hits = all_hits()
    counts = {f: len(v) for f, v in hits.items()}
    report = "\n".join(f"  {f}: {Counter(c for _, c in v)} at lines {[ln for ln, _ in v]}" for f, v in hits.items())
    unexpected = {f: n for f, n in counts.items() if ALLOWED.get(f, (0,))[0] != n}
    stale = {f for f in ALLOWED if f not in counts}
    assert not unexpected and not stale, f"update ALLOWED or move the constant:\n{report}\nstale: {stale}"
