"""The one banner every GPU-only notebook cell shows, so learners on a CPU know what they see instead."""
from __future__ import annotations

from inferopt.planning.platform_defaults import CPU
from inferopt.serving.gpu import engine_kind

GPU_BANNER = ("**GPU cell.** This cell needs a CUDA GPU with `vllm==0.32.0` (see README, GPU set-up). "
              f"On a CPU-only machine it runs the same steps on the CPU engine (SmolLM2-135M, {CPU.dtype}) at "
              "a smaller scale. What carries over: the mechanisms and the engine's own accounting (KV blocks, "
              "admission, preemption, prefix-cache hits, the token budget's chunking). What does not: speeds "
              "and ratios, which depend on where the bottleneck is. On two cores, engines share CPU time and "
              "memory bandwidth, so some effects shrink or turn over (chapter 06b measured its router over two "
              "engines at below one engine's throughput); on a GPU each engine has its own compute. Read every "
              "measured number as this machine's, not the GPU's.")


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
