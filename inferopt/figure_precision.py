"""The precision a stored figure carries: its float data rounded to ``SIGNIFICANT_DIGITS`` when shown.

Why: a float computed on one machine need not have the same last bits on another. numpy's SIMD paths
round differently (``np.logspace`` on an AVX-512 CPU, which dispatches to SVML's ``pow``, and on an
AVX2-only one differ in the last bit of some values), and BLAS sums in another order with another thread
count. plotly 6 stores a numpy array as its raw float64 bytes (``{"dtype": "f8", "bdata": base64}``), so
a stored figure encoded the machine that drew it and strict nbval failed on every other one (chapter
01's roofline did, issue #33). Six significant digits is what ``%g`` prints and more than a plotted point
or a hover label shows. Two machines' values a few units in the last place apart (about 1e-16 relative;
BLAS re-ordering about 1e-13) give the same 6-digit decimal unless one lies that close to a rounding
boundary, about one value in 10^7. The rounding is Python's decimal formatting, which is correctly
rounded and the same on every CPU (no ``log10``, whose bits vary too).

How: ``install()`` replaces plotly's mime-type renderers (``plotly_mimetype``, the course's default,
and its aliases) by ``CourseRenderer``, which writes every numeric array as a plain JSON list and rounds
every float, except ``layout.template``: those are plotly's own constants from its package data (the
same bytes on every machine; the locked plotly version fixes them). ``inferopt/__init__`` calls it as
soon as ``plotly.io`` loads its renderers (an import hook, so importing ``inferopt`` still imports no
plotly), so every ``fig.show()`` and every figure a cell returns goes through it, whoever built it.
``inferopt.stored_outputs.machine_bits`` finds outputs stored without it.
"""
from __future__ import annotations

import base64
import importlib.abc
import importlib.machinery
import math
import sys

SIGNIFICANT_DIGITS = 6
PLOTLY_MIME = "application/vnd.plotly.v1+json"
_RENDERERS_MODULE = "plotly.io._renderers"
# plotly's typed-array codes (_plotly_utils.utils.plotlyjsShortTypes) -> numpy dtypes
_DTYPES = {"i1": "int8", "u1": "uint8", "i2": "int16", "u2": "uint16", "i4": "int32", "u4": "uint32",
           "f4": "float32", "f8": "float64"}


def rounded(x: float) -> float:
    """``x`` to ``SIGNIFICANT_DIGITS`` significant digits (NaN and infinities as they are)."""
    if not math.isfinite(x):
        return x
    return float(f"{x:.{SIGNIFICANT_DIGITS}g}")


def typed_array_values(spec: dict) -> list:
    """The numbers of a plotly typed array ``{"dtype", "bdata"[, "shape"]}`` as (nested) Python lists."""
    import numpy as np

    arr = np.frombuffer(base64.b64decode(spec["bdata"]), dtype=_DTYPES[spec["dtype"]])
    if spec.get("shape"):
        arr = arr.reshape(tuple(int(n) for n in str(spec["shape"]).split(",")))
    return arr.tolist()


def _is_typed_array(obj) -> bool:
    return isinstance(obj, dict) and "bdata" in obj and obj.get("dtype") in _DTYPES


def round_json(obj):
    """A copy of JSON-compatible ``obj`` with typed arrays as lists and every float rounded."""
    if _is_typed_array(obj):
        obj = typed_array_values(obj)
    if isinstance(obj, float):
        return rounded(obj)
    if isinstance(obj, dict):
        return {k: round_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [round_json(v) for v in obj]
    return obj


def round_figure(fig: dict) -> dict:
    """A stored figure's JSON at the course's precision (``layout.template`` kept as plotly ships it)."""
    def layout(lay: dict) -> dict:
        return {k: (v if k == "template" else round_json(v)) for k, v in lay.items()}

    return {k: (layout(v) if k == "layout" and isinstance(v, dict) else round_json(v)) for k, v in fig.items()}


def _course_renderer_class():
    from plotly.io._base_renderers import PlotlyRenderer

    class CourseRenderer(PlotlyRenderer):
        """plotly's mime-type renderer, writing the figure at the course's precision (module docstring)."""

        def to_mimebundle(self, fig_dict):
            bundle = super().to_mimebundle(fig_dict)
            bundle[PLOTLY_MIME] = round_figure(bundle[PLOTLY_MIME])
            from inferopt.i18n.outputs import translate_figure  # the Chinese edition: titles, axes, names

            bundle[PLOTLY_MIME] = translate_figure(bundle[PLOTLY_MIME])
            return bundle

    return CourseRenderer


def install(renderers_module=None) -> None:
    """Make every registered plain plotly mime-type renderer a ``CourseRenderer`` (idempotent)."""
    mod = renderers_module or sys.modules[_RENDERERS_MODULE]
    from plotly.io._base_renderers import PlotlyRenderer

    course = _course_renderer_class()
    reg = mod.renderers
    for name in list(reg):
        r = reg[name]
        if type(r) is PlotlyRenderer:        # plotly_mimetype, jupyterlab, nteract, vscode
            reg[name] = course(config=r.config)
    if reg.default:
        reg.default = reg.default            # the default's renderer objects are kept when it is set: renew them


class _AfterPlotlyRenderers(importlib.abc.MetaPathFinder):
    """Runs ``install`` right after ``plotly.io._renderers`` is first imported (then does nothing)."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _RENDERERS_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            install(module)

        spec.loader.exec_module = exec_then_install
        return spec


def hook() -> None:
    """Install now if plotly's renderers are loaded, else as soon as they load."""
    if _RENDERERS_MODULE in sys.modules:
        install()
    elif not any(isinstance(f, _AfterPlotlyRenderers) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterPlotlyRenderers())
