"""One engine step's time: the per-kernel roofline (:func:`inferopt.planning.roofline.step_roofline`)
with a :class:`~inferopt.performance.profiles.Profile`'s efficiency factors and overheads.

:class:`Engine` fixes what does not change from step to step (model, device roof, TP/PP, weight and KV
precision, eager or CUDA graphs) and answers :meth:`Engine.step` for a step's composition: decode
requests and their mean context, prefill tokens and the requests they belong to. The overhead kernel
is ``step_overhead_ms`` + (eager: ``eager_launch_us_per_layer`` x layers per stage) +
``per_seq_step_us`` x sequences in the step + (TP > 1) ``tp_sync_us_per_doubling`` x log2(tp): the executor's
broadcast of each step to its TP workers and their lockstep (see :mod:`inferopt.performance.profiles`; with
vLLM 0.6's multi-step scheduling one broadcast serves ``scheduler_steps`` steps).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from inferopt.performance.profiles import Profile
from inferopt.planning import roofline as R
from inferopt.planning.model_specs import ModelSpec


@dataclass(frozen=True)
class Engine:
    spec: ModelSpec
    roof: R.Roof
    profile: Profile
    tp: int = 1
    pp: int = 1
    weights: str = "bf16"
    kv_dtype_bytes: float = 2.0
    enforce_eager: bool = False
    scheduler_steps: int = 1      # vLLM 0.6's --num-scheduler-steps: one broadcast to the workers per k steps

    @property
    def fixed_overhead_s(self) -> float:
        p = self.profile
        eager = p.eager_launch_us_per_layer * self.spec.num_layers / self.pp if self.enforce_eager else 0.0
        sync = p.tp_sync_us_per_doubling * math.log2(self.tp) / self.scheduler_steps if self.tp > 1 else 0.0
        return (p.step_overhead_ms * 1e3 + eager + sync) * 1e-6

    def step(self, decode_batch: int, context_tokens: float = 0.0, prefill_tokens: int = 0,
             prefill_context: float = 0.0, prefill_requests: int = 0) -> R.StepRoofline:
        seqs = decode_batch + prefill_requests
        overhead = self.fixed_overhead_s + self.profile.per_seq_step_us * 1e-6 * seqs
        return R.step_roofline(
            self.spec, self.roof, decode_batch=decode_batch, context_tokens=context_tokens,
            prefill_tokens=prefill_tokens, prefill_context=prefill_context, prefill_requests=prefill_requests,
            tp=self.tp, pp=self.pp, weights=self.weights, kv_dtype_bytes=self.kv_dtype_bytes,
            act_bytes=4.0 if self.weights == "fp32" else 2.0, efficiency=self.profile.efficiency,
            overhead_s=overhead, allreduce_latency_s=self.profile.allreduce_latency_us * 1e-6,
            overlap=self.profile.overlap)

    def step_time(self, *args, **kw) -> float:
        """Seconds one step takes on one pipeline stage; with PP a token passes every stage, so a
        request's step is ``pp`` stages long while ``pp`` batches are in flight at once."""
        return self.step(*args, **kw).time_s * self.pp
