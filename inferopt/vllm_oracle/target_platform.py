"""vLLM's device questions answered with a catalog GPU (assets/gpus.yaml): the ONE place the oracle
pretends to be on a GPU.

vLLM asks its platform object (``vllm.platforms.current_platform``) what the device is: the platform
type (``is_cuda()``), the compute capability (``get_device_capability``), the name (the A100
exception of ``get_batch_defaults``), the total memory, the device count and whether the GPUs are
fully connected. Every vLLM module binds that object when it is imported, so the target is installed
once per process, before the first import of a vLLM module that reads it (:func:`install`), and
switched between catalog GPUs by changing what the one object answers (:func:`use`).

The CPU build lacks the CUDA extensions that ``vllm/platforms/cuda.py`` and a few quantization modules
import or query at import time. They are replaced here by stubs (:data:`STUBS`): a stub module that
holds no kernel, and kernel-support queries of the compiled CUDA code answered "no". A stub that is
CALLED means the oracle reached code that needs the GPU; the call raises :class:`NeedsDevice` and the
verdict says which check could not run.

What the oracle therefore cannot check on a CPU (:data:`NOT_RUN`, printed with each report):
"""
from __future__ import annotations

import contextlib
import importlib
import sys
import types

from inferopt.planning import gpu_catalog

GiB = 1 << 30


class NeedsDevice(RuntimeError):
    """vLLM reached code that needs the real GPU (a CUDA kernel or a device query we do not answer)."""


# The checks vLLM makes that need the device itself, with why the oracle cannot run them on a CPU.
NOT_RUN = {
    "free_memory_at_start": "the start-up check that gpu_memory_utilization x total memory is free "
                            "(vllm/v1/worker/utils.py request_memory, run by the GPU worker on the real device): "
                            "the course's memory calculator answers it instead",
    "kv_cache_fits": "the KV-cache size check after profiling a forward pass (vllm/v1/core/kv_cache_utils.py "
                     "check_enough_kv_cache_memory): needs the weights loaded on the device; the calculator and "
                     "kv_specs.py size it from vLLM's own page sizes",
    "cuda_kernel_queries": "the compiled CUDA code's own support queries (torch.ops._C.cutlass_scaled_mm_supports_fp8, "
                           "..._block_fp8, cutlass_group_gemm_supported): they pick a kernel at load time; answered "
                           "'no' here, so the oracle never claims a CUTLASS kernel",
    "attention_kernels": "importing the FlashAttention / FlashInfer extensions (vllm_flash_attn); their Python "
                         "class methods (supports_compute_capability, supported_kv_cache_dtypes) and constructor "
                         "checks run, the kernels do not",
    "flash_attn_extension": "the FlashAttention extension (vllm/vllm_flash_attn _vllm_fa2_C, _vllm_fa3_C; FA4's cute "
                            "sources): the CPU build ships its Python interface without them. An answer that turns on "
                            "them (flash_attention_extension asks it both ways) is 'not determinable on the CPU build'",
    "nccl_and_p2p": "NCCL, custom all-reduce and P2P probes between real GPUs (multi-GPU start-up)",
    "weights": "loading the checkpoint's weights (the model folder holds only config.json)",
}

_STUB_MODULES = ("vllm._C_stable_libtorch", "vllm._moe_C_stable_libtorch", "vllm.vllm_flash_attn")
# packages the GPU wheel installs beside vLLM and the CPU venv lacks: every module under them is a stub
_STUB_PACKAGES = ("flashinfer",)
# vllm/_custom_ops.py functions that call the compiled CUDA library to ask what it supports
_KERNEL_QUERIES = ("cutlass_scaled_mm_supports_fp8", "cutlass_scaled_mm_supports_block_fp8",
                   "cutlass_group_gemm_supported", "cutlass_scaled_mm_supports_fp4")
STUBS = {"modules": _STUB_MODULES, "packages": _STUB_PACKAGES, "kernel_queries_answered_no": _KERNEL_QUERIES,
         "torch_op_namespaces": ("_C", "_moe_C", "_C_cache_ops", "_C_custom_ar")}

_state = {"installed": None, "target": None}


def _needs_device(what: str):
    """A stand-in for a kernel: a class (so it also serves in type annotations) that raises when called."""
    def new(cls, *args, **kwargs):
        raise NeedsDevice(f"{what} needs the CUDA kernels, which this CPU build does not have")
    return type(what.rpartition(".")[2], (), {"__new__": new, "__doc__": f"stub of {what}"})


def _stub_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__doc__ = "inferopt.vllm_oracle stub: the CUDA extension is not in the CPU build"

    def attr(a: str):
        if a.startswith("__"):
            raise AttributeError(a)
        return _needs_device(f"{name}.{a}")

    mod.__getattr__ = attr
    mod.__path__ = []          # a package: its submodules are stubs too (_StubFinder)
    return mod


class _StubOp:
    """A CUDA op of ``torch.ops._C`` that the CPU build does not register (e.g. rotary_embedding, which the
    compilation fusion passes look up when they are imported): looking it up works, calling it raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _StubOp(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise NeedsDevice(f"torch.ops.{self._name} is a CUDA kernel, which this CPU build does not have")


_STUB_OP_NAMESPACES = ("_C", "_moe_C", "_C_cache_ops", "_C_custom_ar")


def _stub_missing_torch_ops() -> None:
    """torch.ops.<vLLM namespace>.<op> the CPU build lacks resolves to a _StubOp (after vLLM's own
    ``hasattr(torch.ops._C, ...)`` probes at import have run, so those still see the CPU build)."""
    import torch._ops

    cls = torch._ops._OpNamespace
    if getattr(cls, "_inferopt_stubbed", False):
        return
    original = cls.__getattr__

    def lookup(self, op_name):
        try:
            return original(self, op_name)
        except AttributeError:
            if getattr(self, "name", "") in _STUB_OP_NAMESPACES and not op_name.startswith("__"):
                return _StubOp(f"{self.name}.{op_name}")
            raise

    cls.__getattr__ = lookup
    cls._inferopt_stubbed = True


class _StubFinder:
    """Import hook: any module under _STUB_PACKAGES is a stub (when the real package is absent)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        import importlib.machinery

        if name.split(".")[0] not in _STUB_PACKAGES:
            return None
        return importlib.machinery.ModuleSpec(name, _StubFinder, is_package=True)

    @staticmethod
    def create_module(spec):
        return _stub_module(spec.name)

    @staticmethod
    def exec_module(module):
        return None


def _target_class():
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    class TargetGpuPlatform(CudaPlatformBase):
        """vLLM's CUDA platform, answering its device questions from the catalog GPU set by :func:`use`."""

        @classmethod
        def _gpu(cls) -> dict:
            if _state["target"] is None:
                raise NeedsDevice("no target GPU set: call target_platform.use(gpu) first")
            return _state["target"]

        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            major, minor = cls._gpu()["capability"]
            return DeviceCapability(major=major, minor=minor)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return cls._gpu()["name"]

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return cls._gpu()["total_memory"]

        @classmethod
        def device_count(cls) -> int:
            return cls._gpu()["count"]

        @classmethod
        def is_fully_connected(cls, device_ids) -> bool:
            return True

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-oracle-{device_id}"

    return TargetGpuPlatform


FA_PACKAGE = "vllm.vllm_flash_attn"
FA_EXTENSIONS = ("_vllm_fa2_C", "_vllm_fa3_C")   # what flash_attn_interface.py imports (FA4: its cute/ sources)


@contextlib.contextmanager
def flash_attn_extension(present: bool):
    """Within the block vLLM's FlashAttention package is as the CPU build has it (``present=False``: the
    stub, so ``from vllm.vllm_flash_attn.flash_attn_interface import ...`` fails as it does there), or the
    installed Python interface (vllm/vllm_flash_attn/flash_attn_interface.py) with its compiled extensions
    FA2/FA3 standing in as stubs (``present=True``: FA2_AVAILABLE/FA3_AVAILABLE hold; a kernel call raises
    NeedsDevice). Not an answer for a GPU: the oracle asks both ways to find whether vLLM's answer turns on
    the extension (hardware_table.generate), and where it does it says so instead of answering."""
    names = [FA_PACKAGE, FA_PACKAGE + ".flash_attn_interface"] + [f"{FA_PACKAGE}.{e}" for e in FA_EXTENSIONS]
    saved = {n: sys.modules.get(n) for n in names}
    try:
        if present:
            for n in names:
                sys.modules.pop(n, None)
            for e in FA_EXTENSIONS:
                sys.modules[f"{FA_PACKAGE}.{e}"] = _stub_module(f"{FA_PACKAGE}.{e}")
            importlib.import_module(FA_PACKAGE)
        yield present
    finally:
        for n in names:
            sys.modules.pop(n, None)
        for n, m in saved.items():
            if m is not None:
                sys.modules[n] = m


def install(kind: str = "cuda") -> str:
    """Set vLLM's platform for this process: "cuda" (a catalog GPU, see :func:`use`) or "cpu" (vLLM's
    own CPU platform, as detected). Call before importing any other vLLM module; idempotent."""
    if _state["installed"] is not None:
        if _state["installed"] != kind:
            raise RuntimeError(f"this process runs vLLM as {_state['installed']}; start another for {kind}")
        return kind
    if kind == "cuda":
        for name in _STUB_MODULES:
            sys.modules.setdefault(name, _stub_module(name))
        import importlib.util

        if any(importlib.util.find_spec(p) is None for p in _STUB_PACKAGES):
            sys.meta_path.append(_StubFinder)
        import vllm.platforms as platforms

        platforms.current_platform = _target_class()()
        import vllm._custom_ops as ops

        for q in _KERNEL_QUERIES:
            setattr(ops, q, lambda *a, **k: False)
        _stub_missing_torch_ops()
    elif kind == "cpu":
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            raise RuntimeError(f"vLLM detected {type(current_platform).__name__}, not its CPU platform")
    else:
        raise ValueError(f"kind {kind!r}: use 'cuda' or 'cpu'")
    _state["installed"] = kind
    return kind


def gpu_facts(gpu: str, count: int = 8) -> dict:
    """What the target platform answers for a catalog GPU: capability, vLLM-style name, total memory
    (cuda_total_gib where the catalog has it, else nvidia-smi's MiB), device count."""
    gid = gpu_catalog.resolve(gpu, "gpu")
    g = gpu_catalog.catalog()[gid]
    cc = round(float(g["compute_capability"]) * 10)
    total = int(g["cuda_total_gib"] * GiB) if g.get("cuda_total_gib") else int(g["memory_mib_reported"]) << 20
    return {"id": gid, "capability": (cc // 10, cc % 10), "name": g["name"], "total_memory": total, "count": count}


@contextlib.contextmanager
def use(gpu: str, count: int = 8):
    """Within the block vLLM's platform is the catalog GPU ``gpu`` (``count`` of them in the node)."""
    if _state["installed"] != "cuda":
        raise RuntimeError("target_platform.install('cuda') first")
    prev = _state["target"]
    _state["target"] = gpu_facts(gpu, count)
    try:
        yield _state["target"]
    finally:
        _state["target"] = prev
