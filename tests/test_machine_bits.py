"""No stored output encodes the machine that computed it (issue #33).

Two nets. The first reads the stored notebooks: a figure's float data must be at the course's precision
(``inferopt.figure_precision``: plain lists, 6 significant digits; plotly's own template excepted) and
no text output may print a float's full repr. It rejects chapter 01's roofline figure as it was stored
before the rounding (``tests/data/ch01_roofline_output_before_rounding.json``, float64 ``bdata`` whose
last bits differed between an AVX-512 and an AVX2-only CPU). The second re-executes every notebook
without live cells under conditions that change float bits (numpy's SIMD paths switched off down to
its baseline, one BLAS/OpenMP thread) and compares strictly with the stored outputs (nbval, the same
sanitizers); a scratch notebook that stores raw float32 ``exp`` bits proves that comparison fails.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import _is_live

import inferopt  # noqa: F401  (installs the course's figure renderer)
from inferopt.figure_precision import SIGNIFICANT_DIGITS, round_figure, rounded
from inferopt.paths import CHAPTERS, REPO_ROOT, SOLUTIONS
from inferopt.stored_outputs import machine_bits, output_machine_bits

STORED = sorted(CHAPTERS.glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))
PURE = [p for p in STORED if not _is_live(p)]
EDITIONS = sorted(REPO_ROOT.glob("zh/*/*.ipynb"))           # the Chinese edition carries the English run's outputs
OLD_ROOFLINE = Path(__file__).parent / "data" / "ch01_roofline_output_before_rounding.json"
MIME = "application/vnd.plotly.v1+json"


def float_path_env() -> dict:
    """This process's environment with numpy's dispatched SIMD features off (down to the baseline this
    build was compiled for) and one BLAS/OpenMP thread: other float bits wherever they can change."""
    from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__

    off = [f for f in __cpu_dispatch__ if __cpu_features__.get(f) and f not in __cpu_baseline__]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}   # the child is a run of its own
    env.update(NPY_DISABLE_CPU_FEATURES=" ".join(off), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1")
    return env


def _shown(fig) -> dict:
    return fig._repr_mimebundle_()[MIME]


@pytest.mark.parametrize("path", STORED + EDITIONS, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_compared_output_carries_machine_bits(path):
    assert machine_bits(path) == [], f"{path.relative_to(REPO_ROOT)}: re-execute it (make run-notebooks NB=...)"


def test_rejects_chapter_01s_old_roofline_output():
    old = json.loads(OLD_ROOFLINE.read_text())["outputs"]
    found = [line for out in old for line in output_machine_bits(out)]
    assert sum("f8 bdata" in line for line in found) == 6              # x and y of the three GPU roofs
    assert any("3.3477031378747633" in line for line in found)         # a point's unrounded repr
    rounded_fig = round_figure(old[0]["data"][MIME])                    # the same figure through the rounding
    assert output_machine_bits({"data": {MIME: rounded_fig}}) == []


def test_rejects_long_float_reprs_in_text_and_accepts_rounded_ones():
    bad = {"output_type": "stream", "name": "stdout", "text": ["TPOT 0.30000000000000004 s\n"]}
    assert output_machine_bits(bad) == ["output stdout: 0.30000000000000004 (an unrounded float's repr; "
                                        "print it with a format)"]
    ok = {"output_type": "execute_result", "data": {"text/plain": "TPOT 12.34 ms on 127.0.0.1, vllm 0.32.0, 3.14159"}}
    assert output_machine_bits(ok) == []


def test_a_figure_float_beyond_the_precision_is_found_outside_plotlys_template():
    fig = {"data": [{"x": [1.5, 2.0], "y": [0.1234567]}],
           "layout": {"xaxis": {"range": [0.0, 0.30102999566398]}, "template": {"data": {"c": [0.1111111111111111]}}}}
    found = output_machine_bits({"data": {MIME: fig}})
    assert [line.split(":")[0] for line in found] == [f"output {MIME}.data[0].y[0]", f"output {MIME}.layout.xaxis.range[1]"]


def test_shown_figures_are_lists_at_the_precision_and_the_same_for_neighbouring_floats():
    import plotly.graph_objects as go

    xs = np.logspace(-1, 3.5, 200)
    a = _shown(go.Figure(go.Scatter(x=xs, y=xs * 3.0)))
    b = _shown(go.Figure(go.Scatter(x=np.nextafter(xs, np.inf), y=np.nextafter(xs * 3.0, -np.inf))))
    assert a == b                                                       # one unit in the last place apart
    assert isinstance(a["data"][0]["x"], list) and a["data"][0]["x"][:2] == [0.1, 0.105345]
    assert output_machine_bits({"data": {MIME: a}}) == []
    heat = _shown(go.Figure(go.Heatmap(z=np.arange(6, dtype=np.int64).reshape(2, 3), x=np.array([0.5, 1.5, 2.5]))))
    assert heat["data"][0]["z"] == [[0, 1, 2], [3, 4, 5]] and heat["data"][0]["x"] == [0.5, 1.5, 2.5]


def test_rounding_is_decimal_and_keeps_non_finite_values():
    assert rounded(2 / 3) == 0.666667 and rounded(123456789.0) == 123457000.0 and rounded(-1e-9 / 3) == -3.33333e-10
    assert np.isnan(rounded(float("nan"))) and rounded(float("inf")) == float("inf")
    assert SIGNIFICANT_DIGITS == len(repr(rounded(1 / 7)).removeprefix("0."))


@pytest.mark.parametrize("order", ["plotly first", "inferopt first"])
def test_the_renderer_is_installed_whatever_is_imported_first(order):
    imports = ["import plotly.io as pio", "import inferopt"]
    code = "; ".join((imports if order == "plotly first" else imports[::-1]) + [
        "import plotly.io as pio, plotly.graph_objects as go, numpy as np",
        "print(type(pio.renderers[pio.renderers.default]).__name__)",
        "print(go.Figure(go.Scatter(x=np.linspace(0, 1, 4)))._repr_mimebundle_()"
        "['application/vnd.plotly.v1+json']['data'][0]['x'])"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                         env={k: v for k, v in os.environ.items() if k != "PLOTLY_RENDERER"}, timeout=120)
    assert out.stdout.split("\n")[:2] == ["CourseRenderer", "[0.0, 0.333333, 0.666667, 1.0]"], out.stderr[-800:]


_PROBE = ("import hashlib, numpy as np; x = np.linspace(0.01, 20, 4001, dtype=np.float32); "
          "print(hashlib.sha1(np.exp(x).tobytes() + np.sin(x).tobytes() + np.tanh(x.astype(np.float64)).tobytes())"
          ".hexdigest())")


def _nbval(paths, env, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-sanitize-with", str(REPO_ROOT / "tests" / "nbval_sanitize.cfg"),
                           "--nbval-current-env", "-o", "addopts=", "--rootdir", str(tmp_path), *map(str, paths)],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=900)


def test_the_float_path_condition_changes_float_bits_on_this_machine():
    """Else the re-execution below would prove nothing: float32 exp/sin and float64 tanh take numpy's
    SIMD paths (AVX2/FMA3 or AVX-512), and the scalar baseline rounds some values differently."""
    run = [subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, check=True).stdout
           for env in (dict(os.environ), float_path_env())]
    assert run[0] != run[1], f"NPY_DISABLE_CPU_FEATURES={float_path_env()['NPY_DISABLE_CPU_FEATURES']!r} changed no bits"


def test_strict_comparison_under_the_condition_rejects_raw_float_bits(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(_PROBE.replace("; ", "\n"))]
    NotebookClient(nb, kernel_name="python3").execute()                 # stored here, as a notebook is
    path = tmp_path / "raw_bits.ipynb"
    nbformat.write(nb, path)
    digest = hashlib.sha1(path.read_bytes()).hexdigest()
    res = _nbval([path], float_path_env(), tmp_path)
    assert res.returncode == 1 and "1 failed" in res.stdout, res.stdout[-1500:]
    assert hashlib.sha1(path.read_bytes()).hexdigest() == digest


def test_notebooks_without_live_cells_store_the_same_outputs_under_other_float_paths(tmp_path):
    assert len(PURE) >= 8 and "00-start-here.ipynb" not in {p.name for p in PURE}     # live cells: not here
    res = _nbval(PURE, float_path_env(), tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]
