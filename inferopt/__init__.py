"""inferopt: the shared package behind the course notebooks.

Modules hold one thing each, in layers (CONTRIBUTING.md, "The package, layer by layer"):
``errors``, ``paths`` and ``assets`` (the one loader for ``assets/``) at the base; the engines in
``planning/`` and ``diagnosis/``; the live parts in ``serving/`` (vLLM engine, GPU probe),
``bench/`` and ``monitoring/``; the views in ``widgets/``; the commands (``python -m inferopt``).
Importing the package sets plotly's default renderer to the mime-type renderer so that a
notebook saved from JupyterLab stores figure JSON (no HTML with random ids) and nbval can
compare it. It does so without importing plotly where plotly is not loaded yet (plotly reads
``PLOTLY_RENDERER`` when it loads): ``plotly.io`` pulls in nbformat and jsonschema, about 0.9 s of
imports that every command-line call and every kernel that draws nothing would pay. That renderer
writes figures at the course's precision (``figure_precision``: float data rounded, no binary arrays), so
no stored figure depends on the CPU, BLAS or thread count that drew it.
"""
from __future__ import annotations

import os
import sys

__version__ = "0.1.0"
RENDERER = "plotly_mimetype"


def _set_plotly_renderer() -> None:
    # stored figures at a stated precision, the same on every CPU (figure_precision: rounded, no float bits)
    from inferopt import figure_precision

    figure_precision.hook()
    if "plotly.io" in sys.modules:
        sys.modules["plotly.io"].renderers.default = RENDERER
    else:
        os.environ["PLOTLY_RENDERER"] = RENDERER


_set_plotly_renderer()

# the edition's lookup (English or 中文) renders the course's one-line errors and check hints
from inferopt import errors as _errors  # noqa: E402
from inferopt import i18n as _i18n  # noqa: E402


def _chinese_kernel() -> None:
    # a kernel of the Chinese edition: what cells print, display and draw goes through the catalog's templates
    try:
        if _i18n.edition() == "zh":
            from inferopt.i18n.outputs import install_kernel_hooks

            install_kernel_hooks()
    except _errors.CourseError:   # a bad INFEROPT_EDITION: reported where the edition is read, not at import
        pass


_chinese_kernel()
