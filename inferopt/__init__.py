"""inferopt: the shared package behind the course notebooks.

Modules hold one thing each, in layers (CONTRIBUTING.md, "The package, layer by layer"):
``errors``, ``paths`` and ``assets`` (the one loader for ``assets/``) at the base; the engines in
``planning/`` and ``diagnosis/``; the live parts in ``serving/`` (vLLM engine, GPU probe),
``bench/`` and ``monitoring/``; the views in ``widgets/``; the commands (``python -m inferopt``).
Importing the package sets plotly's default renderer to the mime-type renderer so that a
notebook saved from JupyterLab stores figure JSON (no HTML with random ids) and nbval can
compare it.
"""
from __future__ import annotations

__version__ = "0.1.0"


def _set_plotly_renderer() -> None:
    try:
        import plotly.io as pio
    except ImportError:  # plotly is optional for the CLI
        return
    pio.renderers.default = "plotly_mimetype"


_set_plotly_renderer()
