"""The diagnosis's inputs: the measured baseline, the SLOs, the workload and the deployment, each
checked on the way in (bad input raises CourseError naming the field: an unknown field, a negative
value, a percentage where a fraction is due, a non-finite number, an SLO that looks like seconds).
Plain dicts, so a benchmark summary can be passed as it is.

``metrics`` (the baseline; every latency in milliseconds; every field optional):
    ttft_p95_ms, tpot_p95_ms      P95 time to first token / time per output token, ms
    ttft_p99_ms, tpot_p99_ms      P99 of the same, ms (optional)
    throughput_tok_s              output tokens per second, all requests together (optional)
    gpu_util                      GPU busy fraction 0..1 (optional; not a percentage)
    oom                           bool: the server ran out of memory (default false)
    memory_used_frac              GPU/KV memory in use, fraction 0..1 (optional; checked and
                                  reported, not used by the tree: vLLM pre-allocates its pool)
    queue_len                     requests waiting (vllm:num_requests_waiting), >= 0 (optional)
    preemptions                   preempted requests in the run, >= 0 (optional)
    kv_cache_usage                vllm:kv_cache_usage_perc, 0..1 (optional)
    prefix_cache_hit_rate         vLLM prefix-cache hits / queries, 0..1 (optional)
    spec_acceptance_rate          accepted / proposed draft tokens, 0..1 (optional)
                                  (``signals_from_metrics(text)`` reads the last five from /metrics.)
    KV pressure = preemptions > 0, or KV usage >= kv_full_usage with requests waiting: with a
    failing SLO it sends the diagnosis to branch C (sub-branch C1).
``slos`` (only the SLOs given are checked; the others are listed in ``not_checked``;
an :class:`inferopt.slo.SLO` is accepted too):
    ttft_p95_ms, tpot_p95_ms      ms (e.g. {"ttft_p95_ms": 500, "tpot_p95_ms": 50})
    ttft_p99_ms, tpot_p99_ms      optional, ms; without them the tail counts as out of control
                                  when P99 > tail_ratio (decision_tree.yaml) x P95
    throughput_tok_s              optional minimum output tokens/s
``workload`` (all optional; a missing trait never matches a condition):
    prompt_tokens, output_tokens  mean tokens per request
    shared_prefix_frac            share of requests that start with a common prefix, 0..1
    concurrency                   requests in flight (the benchmark's concurrency)
    model_weights_gib             model weights in GiB (2^30 B)
    gpu_memory_gib                memory of one GPU in GiB (default: from gpu_type)
    gpu_type                      a GPU of assets/gpus.yaml by alias or id (H100, A100, L40S, T4, ...) or CPU
    num_gpus                      GPUs available to this deployment (default 1)
    gpus_per_node                 GPUs in one node (default: all in one): TP stays inside a node, PP spans
                                  nodes (inferopt.planning.topology)
    lora_adapters                 number of LoRA adapters served (default 0)
    draft_model                   name of a draft model for speculative decoding, or null
    draft_dtype                   bf16 | fp16 | fp8 | int8 | int4: the DRAFT's weights (pitfall 3.1)
    int4_kernel                   marlin | other: what runs INT4 weights (pitfall 3.3)
``deployment`` (optional, DEPLOYMENT_FIELDS; or ``deployment_from_plan(file)``): model, gpu, tp,
    weight_format, kv_dtype, max_model_len, gpu_memory_utilization, kv_cache_memory_bytes, ...
    With a model, the memory calculator decides weights_fit / kv_dominates, says whether vLLM
    will start, sizes the KV and concurrency actions and ranks memory candidates
    (``Diagnosis.memory["candidates"]``: "FP8 KV: +N tokens of KV, concurrency x2").
``techniques_on``: technique ids already in force (see ``technique_ids()``); ``None`` means
    vLLM 0.32's defaults (those marked default_on in techniques.yaml); ``[]`` means none.

Issue 19's families, each in its own module: the hardware table (``inferopt.planning.hardware``,
assets/hardware_rules.yaml) decides FP8/Marlin by compute capability; ``diagnosis.cost`` labels each
recommendation free / accuracy / hardware, orders them so and re-checks every memory change with the

A benchmark summary with more keys than these: ``metrics_from_summary(summary)`` keeps the
known fields and drops the rest (and None values).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError

METRIC_FIELDS = {
    "ttft_p95_ms": "P95 time to first token, ms",
    "tpot_p95_ms": "P95 time per output token, ms",
    "ttft_p99_ms": "P99 time to first token, ms",
    "tpot_p99_ms": "P99 time per output token, ms",
    "e2e_p95_ms": "P95 whole-request (end-to-end) latency, ms",
    "throughput_tok_s": "output tokens per second",
    "gpu_util": "GPU utilization, fraction 0..1",
    "oom": "true if the server ran out of memory",
    "memory_used_frac": "memory in use, fraction 0..1 (on vLLM: read as KV cache usage when kv_cache_usage is not given)",
    "queue_len": "requests waiting in the queue (vllm:num_requests_waiting)",
    "preemptions": "preempted requests during the run (vllm:num_preemptions_total)",
    "kv_cache_usage": "share of vLLM's KV cache blocks in use, 0..1 (vllm:kv_cache_usage_perc, a fraction despite its name)",
    "prefix_cache_hit_rate": "prefix-cache hits / queried tokens, 0..1 (vllm:prefix_cache_hits_total / queries_total)",
    "spec_acceptance_rate": "accepted / proposed draft tokens, 0..1 (vllm:spec_decode_num_accepted_tokens_total / num_draft_tokens_total)",
    "requests": "completed requests behind the percentiles (the sample size: a P95 shown under its SLO at 90 % "
                "confidence needs >= 45)",
    "ttft_p95_bound_ms": "90 % order-statistic upper bound of the TTFT P95, ms (--baseline computes it from "
                         "per-request latencies)",
    "tpot_p95_bound_ms": "90 % order-statistic upper bound of the TPOT P95, ms",
    "ttft_p99_bound_ms": "90 % order-statistic upper bound of the TTFT P99, ms",
    "tpot_p99_bound_ms": "90 % order-statistic upper bound of the TPOT P99, ms",
    "e2e_p95_bound_ms": "90 % order-statistic upper bound of the whole-request P95, ms",
}
BOUNDS = ("ttft_p95_bound_ms", "tpot_p95_bound_ms", "ttft_p99_bound_ms", "tpot_p99_bound_ms", "e2e_p95_bound_ms")
SLO_FIELDS = {
    "ttft_p95_ms": "TTFT P95 SLO, ms",
    "tpot_p95_ms": "TPOT P95 SLO, ms",
    "ttft_p99_ms": "TTFT P99 SLO, ms",
    "tpot_p99_ms": "TPOT P99 SLO, ms",
    "e2e_p95_ms": "whole-request (end-to-end) latency P95 SLO or alert threshold, ms",
    "throughput_tok_s": "minimum output tokens per second",
}
WORKLOAD_FIELDS = {
    "prompt_tokens": "mean prompt tokens per request",
    "output_tokens": "mean output tokens per request",
    "shared_prefix_frac": "share of requests with a common prefix, 0..1",
    "concurrency": "requests in flight",
    "model_weights_gib": "model weights, GiB",
    "gpu_memory_gib": "memory of one GPU, GiB",
    "gpu_type": "GPU class (H100, A100, L40S, T4, CPU, ...; see assets/gpus.yaml)",
    "num_gpus": "GPUs available",
    "gpus_per_node": "GPUs in one node (TP stays within a node; PP spans nodes; default: all GPUs in one node)",
    "lora_adapters": "LoRA adapters served",
    "draft_model": "draft model name for speculative decoding",
    "draft_dtype": "dtype of the draft model's weights: bf16, fp16, fp8, int8 or int4",
    "int4_kernel": "kernel that runs INT4 weights: marlin or other",
    "target_rps": "request rate the service must carry, req/s (with a sweep: sizes the fleet on goodput)",
}
# The deployment (all optional): with it the memory calculator (inferopt.planning.memory) decides
# whether the weights fit, whether KV or weights dominate, and what each candidate change frees.
DEPLOYMENT_FIELDS = {
    "model": "shipped model name (assets/models) or a config.json path",
    "gpu": "GPU id or alias of assets/gpus.yaml, or cpu",
    "tp": "tensor-parallel size",
    "weight_format": "weight format: fp32, bf16, fp16, fp8, int8, int4",
    "kv_dtype": "KV cache dtype: auto, bfloat16, float16, float32, fp8, ...",
    "dtype": "compute dtype (what kv_dtype auto means)",
    "max_model_len": "--max-model-len, tokens",
    "gpu_memory_utilization": "--gpu-memory-utilization, 0..1 (vLLM default 0.92)",
    "kv_cache_memory_bytes": "--kv-cache-memory-bytes (the CPU engine's KV budget), bytes",
    "max_num_batched_tokens": "--max-num-batched-tokens now in force (default: vLLM 0.32's for the hardware)",
    "max_num_seqs": "--max-num-seqs now in force (default: vLLM 0.32's for the hardware)",
    "runtime_buffer_gib": "activations/CUDA graphs/context besides weights and KV, GiB (default 5)",
    "enforce_eager": "true if the engine runs with --enforce-eager (no CUDA graphs)",
    "api_server_count": "--api-server-count (API server processes; default 1)",
}
DRAFT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
INT4_KERNELS = ("marlin", "other")
FRACTIONS = {"gpu_util", "memory_used_frac", "shared_prefix_frac", "kv_cache_usage", "prefix_cache_hit_rate",
             "spec_acceptance_rate"}
COUNTS = {"requests", "queue_len", "preemptions", "prompt_tokens", "output_tokens", "concurrency", "num_gpus", "lora_adapters",
          "gpus_per_node"}
# which branch a failing metric sends you to


# ----------------------------------------------------------------------------- input checking
def _number(section: str, key: str, value, *, fraction=False, count=False) -> float:
    where = f"{section}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise CourseError(f"{where}: {value!r} is not a number; give a number") from None
    if math.isnan(value) or math.isinf(value):
        raise CourseError(f"{where}: {value} is not a finite number")
    if value < 0:
        raise CourseError(f"{where}: {value} is negative; give a value >= 0")
    if fraction and value > 1:
        raise CourseError(f"{where}: {value} is above 1; give a fraction 0..1 "
                          f"(if you meant {value:g} %, write {value / 100:g})")
    if count and value != int(value):
        raise CourseError(f"{where}: {value} is not a whole number")
    return float(value)


def _unknown(section: str, key: str, known: dict) -> CourseError:
    hint = ""
    for suffix in ("_s", "_sec", "_us", "_seconds"):
        if key.endswith(suffix) and key[: -len(suffix)] + "_ms" in known:
            hint = f" (give it in milliseconds as {key[: -len(suffix)]}_ms)"
    return CourseError(f"{section}.{key}: unknown field{hint}; known fields: {', '.join(known)}")


def _as_dict(section: str, d) -> dict:
    if d is None:
        return {}
    if hasattr(d, "__dataclass_fields__"):
        d = {k: v for k, v in asdict(d).items() if v is not None}
    if not isinstance(d, dict):
        raise CourseError(f"{section}: expected a dict of field -> value, got {type(d).__name__}")
    return d


def metrics_from_summary(summary: dict) -> dict:
    """The ``metrics`` dict from a benchmark summary that holds other keys too (kept: METRIC_FIELDS)."""
    if not isinstance(summary, dict):
        raise CourseError(f"summary: expected a dict, got {type(summary).__name__}")
    return {k: summary[k] for k in METRIC_FIELDS if summary.get(k) is not None}


@dataclass(frozen=True)
class Baseline:
    """Measured metrics (latencies in ms). Build with ``Baseline.from_dict``."""
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p95_ms: float | None = None
    throughput_tok_s: float | None = None
    gpu_util: float | None = None
    oom: bool = False
    memory_used_frac: float | None = None
    queue_len: float | None = None
    preemptions: float | None = None
    kv_cache_usage: float | None = None
    prefix_cache_hit_rate: float | None = None
    spec_acceptance_rate: float | None = None
    requests: float | None = None
    ttft_p95_bound_ms: float | None = None
    tpot_p95_bound_ms: float | None = None
    ttft_p99_bound_ms: float | None = None
    tpot_p99_bound_ms: float | None = None
    e2e_p95_bound_ms: float | None = None

    @classmethod
    def from_dict(cls, d) -> Baseline:
        d = _as_dict("metrics", d)
        vals = {}
        for k, v in d.items():
            if k not in METRIC_FIELDS:
                raise _unknown("metrics", k, METRIC_FIELDS)
            if v is None:
                continue
            if k == "oom":
                if not isinstance(v, bool):
                    raise CourseError(f"metrics.oom: {v!r} is not true/false")
                vals[k] = v
            else:
                vals[k] = _number("metrics", k, v, fraction=k in FRACTIONS, count=k in COUNTS)
        _check_percentiles("metrics", vals)
        for k in BOUNDS:   # an upper bound of a percentile is one of the slowest values: never below the estimate
            est = vals.get(k.replace("_bound", ""))
            if vals.get(k) is not None and est is not None and vals[k] < est * (1 - 1e-9):
                raise CourseError(f"metrics.{k}: {vals[k]:g} ms is below the sample {k.replace('_bound', '')} "
                                  f"{est:g} ms, which an upper bound cannot be; check that both come from one run")
        if vals.get("requests") == 0:
            raise CourseError("metrics.requests: 0 completed requests; there is nothing to diagnose: run the "
                              "benchmark again and check its errors")
        return cls(**vals)


@dataclass(frozen=True)
class SLOs:
    """Service-level objectives (latencies in ms, throughput in output tokens/s). Every field is
    optional: only the SLOs given are checked, the others are reported as "not checked"."""
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p95_ms: float | None = None
    throughput_tok_s: float | None = None

    @classmethod
    def from_dict(cls, d) -> SLOs:
        from inferopt.slo import SLO

        if isinstance(d, SLO):  # the course's one SLO type (inferopt.slo)
            d = d.decision_slos()
        d = _as_dict("slos", d)
        vals = {}
        for k, v in d.items():
            if k not in SLO_FIELDS:
                raise _unknown("slos", k, SLO_FIELDS)
            if v is None:
                continue
            x = _number("slos", k, v)
            if x == 0:
                raise CourseError(f"slos.{k}: 0 is not a usable target; give a positive value")
            if k.endswith("_ms") and x < 1:
                raise CourseError(f"slos.{k}: {x:g} ms looks like seconds; give milliseconds "
                                  f"(e.g. {x * 1000:g})")
            vals[k] = x
        _check_percentiles("slos", vals)
        return cls(**vals)


def _check_percentiles(section: str, vals: dict) -> None:
    """A P99 below its P95 is impossible (the 99th percentile of one sample is never below its 95th)."""
    for m in ("ttft", "tpot"):
        p95, p99 = vals.get(f"{m}_p95_ms"), vals.get(f"{m}_p99_ms")
        if p95 is not None and p99 is not None and p99 < p95:
            raise CourseError(f"{section}.{m}_p99_ms: {p99:g} ms is below {m}_p95_ms {p95:g} ms, which no "
                              "distribution allows; check that the two were not swapped")


@dataclass(frozen=True)
class Workload:
    """Workload traits; every field optional (None = unknown, matches no condition)."""
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    shared_prefix_frac: float | None = None
    concurrency: float | None = None
    model_weights_gib: float | None = None
    gpu_memory_gib: float | None = None
    gpu_type: str | None = None
    num_gpus: float = 1
    gpus_per_node: float | None = None
    lora_adapters: float = 0
    draft_model: str | None = None
    draft_dtype: str | None = None
    int4_kernel: str | None = None
    target_rps: float | None = None

    @classmethod
    def from_dict(cls, d) -> Workload:
        d = _as_dict("workload", d)
        vals = {}
        for k, v in d.items():
            if k not in WORKLOAD_FIELDS:
                raise _unknown("workload", k, WORKLOAD_FIELDS)
            if v is None:
                continue
            if k == "gpu_type":
                vals[k] = knowledge.gpu_info(v)["name"]
            elif k == "draft_model":
                if not isinstance(v, str) or not v:
                    raise CourseError("workload.draft_model: give the draft model's name (a string) or leave it out")
                vals[k] = v
            elif k in ("draft_dtype", "int4_kernel"):
                choices = DRAFT_DTYPES if k == "draft_dtype" else INT4_KERNELS
                v = str(v).lower().replace("bfloat16", "bf16").replace("float16", "fp16")
                if v not in choices:
                    raise CourseError(f"workload.{k}: {v!r} is not one of {', '.join(choices)}")
                vals[k] = v
            else:
                vals[k] = _number("workload", k, v, fraction=k in FRACTIONS, count=k in COUNTS)
        if vals.get("num_gpus", 1) < 1:
            raise CourseError("workload.num_gpus: must be at least 1")
        if vals.get("gpus_per_node") is not None and vals["gpus_per_node"] < 1:
            raise CourseError("workload.gpus_per_node: must be at least 1")
        return cls(**vals)


@dataclass(frozen=True)
class Deployment:
    """The deployment being diagnosed (every field optional). With ``model`` and ``gpu`` (or a CPU
    KV budget) the memory calculator answers whether the weights fit and what each change frees."""
    model: str | None = None
    gpu: str | None = None
    tp: int = 1
    weight_format: str | None = None
    kv_dtype: str = "auto"
    dtype: str | None = None
    max_model_len: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    runtime_buffer_gib: float | None = None
    enforce_eager: bool = False
    api_server_count: int = 1

    @classmethod
    def from_dict(cls, d) -> Deployment:
        d = _as_dict("deployment", d)
        vals = {}
        for k, v in d.items():
            if k not in DEPLOYMENT_FIELDS:
                raise _unknown("deployment", k, DEPLOYMENT_FIELDS)
            if v is None:
                continue
            if k in ("model", "gpu", "weight_format", "kv_dtype", "dtype"):
                if not isinstance(v, str) or not v:
                    raise CourseError(f"deployment.{k}: give a name (a string), e.g. {DEPLOYMENT_FIELDS[k]}")
                vals[k] = v
            elif k in ("gpu_memory_utilization",):
                x = _number("deployment", k, v, fraction=True)
                if x == 0:
                    raise CourseError("deployment.gpu_memory_utilization: 0 leaves nothing; give e.g. 0.92")
                vals[k] = x
            elif k == "runtime_buffer_gib":
                vals[k] = _number("deployment", k, v)
            elif k == "enforce_eager":
                if not isinstance(v, bool):
                    raise CourseError(f"deployment.enforce_eager: give true or false, got {v!r}")
                vals[k] = v
            else:
                x = _number("deployment", k, v, count=True)
                if x < 1:
                    raise CourseError(f"deployment.{k}: must be at least 1")
                vals[k] = int(x)
        if vals.get("gpu", "").lower() == "cpu":
            vals["gpu"] = "cpu"
        if "weight_format" in vals:
            from inferopt.planning.memory import WEIGHT_FORMATS

            if vals["weight_format"] not in WEIGHT_FORMATS:
                raise CourseError(f"deployment.weight_format: {vals['weight_format']!r}; use one of {', '.join(WEIGHT_FORMATS)}")
        return cls(**vals)

    @property
    def on_cpu(self) -> bool:
        return self.gpu == "cpu"


def deployment_from_plan(path) -> tuple[dict, dict]:
    """(deployment, workload) dicts from a plan: ``inferopt plan NAME --json`` output, or a scenario
    YAML of assets/scenarios (requirements + plan)."""
    from pathlib import Path

    import yaml

    from inferopt.planning.planner import load_scenario

    pth = Path(path)
    if not pth.exists():
        raise CourseError(f"--plan {path}: no such file; write one with `python -m inferopt plan NAME --json > plan.json`")
    try:
        data = yaml.safe_load(pth.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise CourseError(f"--plan {path}: cannot parse ({exc})") from None
    if isinstance(data, dict) and "requirements" not in data and "scenario" in data:
        data = load_scenario(data["scenario"])
    if not isinstance(data, dict) or "requirements" not in data or "plan" not in data:
        raise CourseError(f"--plan {path}: expected the JSON of `inferopt plan NAME --json` or a scenario "
                          "YAML with requirements and plan")
    req, pl = data["requirements"], data["plan"]
    dep = {"model": req["model"], "gpu": req["gpu"], "tp": pl["tensor_parallel_size"],
           "weight_format": pl["weight_format"], "kv_dtype": pl["kv_cache_dtype"],
           "gpu_memory_utilization": pl.get("gpu_memory_utilization"), "max_model_len": pl.get("max_model_len"),
           "max_num_batched_tokens": pl.get("max_num_batched_tokens"), "max_num_seqs": pl.get("max_num_seqs"),
           "runtime_buffer_gib": pl.get("runtime_buffer_gib")}
    wl = {"prompt_tokens": req.get("input_tokens"), "output_tokens": req.get("output_tokens"),
          "num_gpus": req.get("gpus"), "gpu_type": req["gpu"]}
    return ({k: v for k, v in dep.items() if v is not None}, {k: v for k, v in wl.items() if v is not None})


def read_inputs(metrics, slos, workload=None, deployment=None) -> tuple[Baseline, SLOs, Workload, Deployment | None]:
    """The four inputs of ``diagnose`` checked (each may be given as its type or as a plain dict), field
    by field and then against each other and the model (:func:`check_meaning`)."""
    b = metrics if isinstance(metrics, Baseline) else Baseline.from_dict(metrics)
    s = slos if isinstance(slos, SLOs) else SLOs.from_dict(slos)
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    dep = deployment if isinstance(deployment, Deployment) or deployment is None else Deployment.from_dict(deployment)
    if isinstance(deployment, dict) and not deployment:
        dep = None
    check_meaning(b, s, w, dep)
    return b, s, w, dep


# A measured latency this many times above or below its SLO is a unit slip (s for ms, or us for ms), not a
# measurement: a 500 ms SLO met by a 0.5 "ms" TTFT, or missed by a 900,000 "ms" one (15 minutes).
UNIT_SLIP_RATIO = 500.0
_LATENCIES = ("ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms", "e2e_p95_ms")


def context_limit(dep: Deployment | None) -> tuple[int, str] | None:
    """(tokens, where it comes from): the longest request (prompt + output) the deployment serves:
    --max-model-len when given, else the model's max_position_embeddings (vLLM's default max_model_len,
    vllm/config/model.py); None without either."""
    if dep is None:
        return None
    if dep.max_model_len:
        return int(dep.max_model_len), "--max-model-len"
    if dep.model:
        from inferopt.planning.model_specs import load_spec

        n = load_spec(dep.model).max_position_embeddings
        if n:
            return int(n), f"{dep.model}'s max_position_embeddings"
    return None


def check_meaning(b: Baseline, s: SLOs, w: Workload, dep: Deployment | None) -> None:
    """The inputs checked against each other and against the model (each field alone is checked on the
    way in): an SLO or a measured latency in the wrong unit, a part of a request slower than the whole
    request, a request longer than the model's context. One CourseError naming what to fix."""
    for k in ("ttft_p95_ms", "tpot_p95_ms"):   # a part of a request is never slower than all of it
        part, whole = getattr(s, k), s.e2e_p95_ms
        if part is not None and whole is not None and part > whole:
            raise CourseError(f"slos.{k}: {part:g} ms is above the whole-request SLO e2e_p95_ms {whole:g} ms, which "
                              f"no request can meet (its {k[:4].upper()} is part of its whole latency); give both in "
                              f"ms (if {whole:g} was seconds, write {whole * 1000:g})")
        part, whole = getattr(b, k), b.e2e_p95_ms
        if part is not None and whole is not None and part > whole:
            raise CourseError(f"metrics.{k}: {part:g} ms is above the measured e2e_p95_ms {whole:g} ms, which no "
                              "distribution allows (every request's part is below its whole, so the P95s are "
                              "ordered too); check the units and that the two come from the same run")
    for k in _LATENCIES:
        v, slo = getattr(b, k), getattr(s, k)
        if v is None or slo is None or v == 0:
            continue
        if v * UNIT_SLIP_RATIO <= slo:
            raise CourseError(f"metrics.{k}: {v:g} ms is {slo / v:,.0f} times below its SLO {slo:g} ms, which "
                              f"looks like seconds; give milliseconds (e.g. {v * 1000:g})")
        if v >= slo * UNIT_SLIP_RATIO:
            raise CourseError(f"metrics.{k}: {v:g} ms is {v / slo:,.0f} times above its SLO {slo:g} ms, which "
                              f"looks like microseconds; give milliseconds (e.g. {v / 1000:g})")
    lim = context_limit(dep)
    if lim is not None and w.prompt_tokens is not None:
        n, where = lim
        if w.prompt_tokens > n:
            raise CourseError(f"workload.prompt_tokens: {w.prompt_tokens:,.0f} tokens is longer than the context of "
                              f"{n:,} tokens ({where}); vLLM refuses such a prompt (vllm/renderers/params.py "
                              "_token_len_check), so shorten the prompt or serve a longer-context model")
        total = w.prompt_tokens + (w.output_tokens or 0)
        if total > n:
            raise CourseError(f"workload: prompt_tokens + output_tokens = {total:,.0f} tokens is longer than the "
                              f"context of {n:,} tokens ({where}); vLLM cuts each output to {n - w.prompt_tokens:,.0f} "
                              "tokens (vllm/entrypoints/serve/utils/api_utils.py get_max_tokens), so give "
                              "output_tokens the run really produced, or raise --max-model-len (up to the model's "
                              "max_position_embeddings)")
