"""The one banner every GPU-only notebook cell shows, so learners on a CPU know what they see instead."""
from __future__ import annotations

from inferopt.serving.gpu import engine_kind

GPU_BANNER = ("**GPU cell.** This cell needs a CUDA GPU with `vllm==0.32.0` (see README, GPU set-up). "
              "On a CPU-only machine it runs the same steps on the CPU engine (SmolLM2-135M, float32) at "
              "a smaller scale, so the numbers are smaller but the direction of every effect is the same.")


def gpu_banner(display: bool = True) -> str:
    """Show (in Jupyter) and return the GPU banner as Markdown, with which engine this machine uses."""
    kind = engine_kind()
    text = GPU_BANNER + f"\n\nThis machine uses the **{kind.upper()}** engine."
    if display:
        try:
            from IPython.display import Markdown
            from IPython.display import display as show

            show(Markdown(text))
        except ImportError:
            print(text)
    return text
