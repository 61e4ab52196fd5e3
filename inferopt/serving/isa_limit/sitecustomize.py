"""Imported by every Python process of a CPU engine started with ``INFEROPT_CPU_ISA=avx2``
(``inferopt/serving/cpu_isa.py`` puts this folder on its ``PYTHONPATH``): vLLM's CPU platform then loads its
AVX2 kernels (``vllm._C_AVX2``), as on a machine without AVX-512."""
import os

if os.environ.get("INFEROPT_CPU_ISA", "").strip().lower() == "avx2":
    import torch

    torch.cpu._is_avx512_supported = lambda: False
    torch.cpu._is_avx512_bf16_supported = lambda: False
    torch.cpu._is_avx512_vnni_supported = lambda: False
