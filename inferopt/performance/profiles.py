"""The performance model's fitted factors: ``assets/performance/profiles.yaml``, one profile per device kind.

A :class:`Profile` holds what the roofline alone does not know: the share of each datasheet roof the
kernels reach (``efficiency``), the fixed cost of an engine step (``step_overhead_ms``: scheduling,
input preparation, sampling, the CUDA-graph replay), the extra launch cost per layer without CUDA
graphs (``eager_launch_us_per_layer``, paid with ``--enforce-eager``), a cost per sequence in the step
(``per_seq_step_us``: its share of scheduling, sampling and output processing), the latency of one
all-reduce (``allreduce_latency_us``, a device outside the GPU catalog), the API server's cost (``frontend``),
and whether a closed loop's arrivals spread out after its first burst (``closed_loop_spread``: measured per
kind, see :func:`inferopt.performance.predict.predict`), and the per-step cost of keeping ``tp`` workers in
lockstep (``tp_sync_us_per_doubling`` x log2(tp): vLLM's MultiprocExecutor broadcasts every step to its TP
workers, vllm/v1/executor/multiproc_executor.py:MultiprocExecutor.collective_rpc through
vllm/distributed/device_communicators/shm_broadcast.py:MessageQueue, and the slowest rank sets the step;
fitted on the measured TP 2 and TP 8 runs, :mod:`inferopt.performance.measured`). ``error`` is what the
calibration measured on runs not used for fitting (:mod:`inferopt.performance.calibration` re-fits
them and its test checks that the stored figures are what a re-fit gives).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from inferopt import assets
from inferopt.errors import CourseError


@dataclass(frozen=True)
class Profile:
    kind: str
    efficiency: dict
    step_overhead_ms: float
    eager_launch_us_per_layer: float
    per_seq_step_us: float
    allreduce_latency_us: float
    frontend_per_request_ms: float
    frontend_per_token_us: float
    overlap: bool = True
    error: dict = field(default_factory=dict)
    fitted_on: str = ""
    roof: dict | None = None          # {"peak_flops", "bandwidth"} for a device outside the GPU catalog
    closed_loop_spread: bool = True   # closed loop after the first burst: arrivals spread (see predict.predict)
    tp_sync_us_per_doubling: float = 0.0   # per step, x log2(tp): the TP workers' lockstep (see the docstring)

    def with_(self, **kw) -> Profile:
        """A copy with some factors changed (what calibration varies)."""
        return replace(self, **kw)


def _from_entry(kind: str, e: dict) -> Profile:
    fe = e["frontend"]
    return Profile(kind, dict(e["efficiency"]), float(e["step_overhead_ms"]), float(e["eager_launch_us_per_layer"]),
                   float(e["per_seq_step_us"]), float(e["allreduce_latency_us"]), float(fe["per_request_ms"]),
                   float(fe["per_token_us"]), bool(e["overlap"]), dict(e.get("error", {})), e["fitted_on"],
                   dict(e["roof"]) if e.get("roof") else None, bool(e.get("closed_loop_spread", True)),
                   float(e.get("tp_sync_us_per_doubling", 0.0)))


def profile(kind: str) -> Profile:
    """The stored profile ``gpu`` or ``cpu``."""
    data = assets.load("performance/profiles.yaml")["profiles"]
    if kind not in data:
        raise CourseError(f"no performance profile {kind!r}; known: {', '.join(sorted(data))}")
    return _from_entry(kind, data[kind])
