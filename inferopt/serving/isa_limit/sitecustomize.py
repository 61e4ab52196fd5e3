"""Imported by every Python process of a CPU engine started with ``INFEROPT_CPU_ISA=avx2``
(``inferopt/serving/cpu_isa.py`` puts this folder on its ``PYTHONPATH``): torch answers vLLM as an AVX2-only
x86 machine would, so vLLM's CPU platform loads its AVX2 kernels (``vllm._C_AVX2``) and takes none of the paths
that need more. Every ``torch.cpu._is_*_supported`` probe but AVX2's answers False (AVX-512, its BF16 and VNNI,
and AMX: vLLM sends small bf16 GEMMs to an AMX kernel, ``convert_weight_packed``, that only its AVX-512 library
has, so an AMX answer left true crashed the limited bf16 engine on an AMX Xeon), and ``get_capabilities()``
reports the AVX-512, AVX10, AVX-VNNI and AMX features absent."""
import os

if os.environ.get("INFEROPT_CPU_ISA", "").strip().lower() == "avx2":
    import torch

    for _name in dir(torch.cpu):
        if _name.startswith("_is_") and _name.endswith("_supported") and _name != "_is_avx2_supported":
            setattr(torch.cpu, _name, lambda: False)
    _capabilities = torch.cpu.get_capabilities
    _ABOVE_AVX2 = ("avx512", "avx10", "avx_vnni", "avx_ne", "amx")

    def _avx2_capabilities():
        return {k: (False if k.startswith(_ABOVE_AVX2) else v) for k, v in _capabilities().items()}

    torch.cpu.get_capabilities = _avx2_capabilities
