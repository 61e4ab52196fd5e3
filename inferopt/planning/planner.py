"""Deployment planner: requirements file -> plan, memory check, launch command, Little's law, capacity.

``load_scenario(name_or_path)`` reads a requirements file from ``assets/scenarios/`` (the seed's
§5.1 scenario is ``llama3-70b-chat``) and checks it against :data:`SCENARIO_SCHEMA`.
``make_plan(scenario)`` answers "what do I deploy, and does it hold up?" with a
:class:`DeploymentPlan`:

- ``memory``: the per-GPU memory plan (:func:`inferopt.planning.memory.calculate`) at the plan's max_model_len;
- ``seed_check``: each figure of the seed's §5.2 estimate next to the recomputed one, with a verdict;
- ``errata``: the working of the per-request KV figure (the seed's "≈ 2.5 GB" is 0.67 GB);
- ``littles_law``: requests in flight = arrival rate x time in the system, against ``--max-num-seqs``;
- ``command``: the vLLM 0.32 launch command in both forms (``vllm serve`` and
  ``python -m vllm.entrypoints.openai.api_server``) as argv lists and shell text;
- ``capacity``, ``availability``, ``canary``: from :mod:`inferopt.planning.capacity` (seed §6.3, §5.3).

Units: QPS = requests/s, latencies in ms in the requirements and in s in Little's law,
memory in GiB (2^30 B) or GB (10^9 B) as the names say.
"""
from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.planning import capacity as cap
from inferopt.planning.memory import GB, GiB, MemoryResult, calculate, kv_bytes_per_request, start_verdict
from inferopt.planning.model_specs import load_spec

_pos = {"type": "number", "exclusiveMinimum": 0}
_posint = {"type": "integer", "minimum": 1}
SCENARIO_SCHEMA = {
    "type": "object",
    "required": ["id", "title", "source", "requirements", "plan"],
    "properties": {
        "id": {"type": "string"}, "title": {"type": "string"}, "source": {"type": "string"},
        "requirements": {
            "type": "object",
            "required": ["model", "qps", "input_tokens", "output_tokens", "ttft_p95_ms", "tpot_p95_ms",
                         "gpu", "gpus", "availability"],
            "properties": {"model": {"type": "string"}, "qps": _pos, "input_tokens": _posint,
                           "output_tokens": _posint, "ttft_p95_ms": _pos, "tpot_p95_ms": _pos,
                           "gpu": {"type": "string"}, "gpus": _posint, "gpus_per_node": _posint,
                           "availability": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}},
        },
        "plan": {
            "type": "object",
            "required": ["checkpoint", "tensor_parallel_size", "weight_format", "kv_cache_dtype",
                         "max_num_seqs", "gpu_memory_utilization"],
            "properties": {"checkpoint": {"type": "string"}, "tensor_parallel_size": _posint,
                           "pipeline_parallel_size": _posint,
                           "weight_format": {"type": "string"}, "kv_cache_dtype": {"type": "string"},
                           "prefix_caching": {"type": "boolean"}, "chunked_prefill": {"type": "boolean"},
                           "speculative": {"type": "boolean"}, "max_num_batched_tokens": _posint,
                           "max_num_seqs": _posint,
                           "gpu_memory_utilization": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                           "runtime_buffer_gib": {"type": "number", "minimum": 0},
                           "max_model_len": _posint, "port": _posint},
        },
        "seed_estimate": {"type": "object"},
        "capacity": {
            "type": "object",
            "required": ["per_instance_qps", "target_qps"],
            "properties": {"per_instance_qps": _pos, "target_qps": _pos,
                           "surge_instances": {"type": "integer", "minimum": 0},
                           "redundancy": {"enum": list(cap.REDUNDANCY_SPARES)},
                           "instance_availability": {"type": "number", "exclusiveMinimum": 0,
                                                     "exclusiveMaximum": 1}},
        },
        "canary": {"type": "object", "properties": {"fractions": {"type": "array", "items": _pos},
                                                    "hold_minutes": {"type": "array"}}},
    },
}


SCHEMA_LABEL = "inferopt.planning.planner.SCENARIO_SCHEMA; assets/scenarios/llama3-70b-chat.yaml is a complete example"


def scenario_names() -> list[str]:
    return [Path(n).stem for n in assets.names("scenarios", ".yaml")]


def load_scenario(name_or_path="llama3-70b-chat") -> dict:
    """Read and validate a requirements file (a name in assets/scenarios/ or a YAML path); a copy
    the caller may change."""
    if Path(str(name_or_path)).is_file():
        return copy.deepcopy(assets.load_file(name_or_path, SCENARIO_SCHEMA, SCHEMA_LABEL))
    if str(name_or_path) in scenario_names():
        return copy.deepcopy(assets.load(f"scenarios/{name_or_path}.yaml", SCENARIO_SCHEMA, SCHEMA_LABEL))
    raise CourseError(f"no scenario {name_or_path!r}: give a YAML path or one of {', '.join(scenario_names())}.")


@dataclass
class LittlesLaw:
    """Requests in flight L = arrival rate (QPS) x time each request spends in the system W (s)."""

    qps: float
    ttft_s: float
    tpot_s: float
    output_tokens: int
    latency_s: float            # W = TTFT + (output_tokens - 1) x TPOT (vLLM's TPOT definition)
    in_flight: float            # L = qps x W
    max_num_seqs: int
    fits: bool                  # in_flight <= max_num_seqs
    latency_cap_s: float        # the W that max_num_seqs allows: max_num_seqs / qps
    tpot_cap_ms: float          # the TPOT that W cap allows with this TTFT
    kv_concurrency: float       # how many requests of this length the KV cache holds
    working: list[str] = field(default_factory=list)


def littles_law(qps: float, ttft_ms: float, tpot_ms: float, output_tokens: int, max_num_seqs: int,
                kv_concurrency: float | None = None) -> LittlesLaw:
    """Check ``--max-num-seqs`` against the requests in flight when latency sits at the given TTFT/TPOT.

    With the SLO limits (P95) as inputs this is a conservative bound; with measured means it is
    the steady state. A request stays TTFT + (n - 1) x TPOT seconds (n output tokens; the first
    arrives at TTFT, then n - 1 gaps of TPOT).
    """
    if qps <= 0 or ttft_ms < 0 or tpot_ms < 0 or output_tokens < 1 or max_num_seqs < 1:
        raise CourseError("littles_law needs qps > 0, ttft_ms >= 0, tpot_ms >= 0, output_tokens >= 1, "
                          "max_num_seqs >= 1.")
    ttft, tpot = ttft_ms / 1000, tpot_ms / 1000
    w = ttft + (output_tokens - 1) * tpot
    inflight = qps * w
    w_cap = max_num_seqs / qps
    tpot_cap = (w_cap - ttft) / (output_tokens - 1) * 1000 if output_tokens > 1 else float("inf")
    fits = inflight <= max_num_seqs
    working = [
        f"W = TTFT + (n - 1) x TPOT = {ttft:g} s + {output_tokens - 1} x {tpot:g} s = {w:.2f} s",
        f"L = QPS x W = {qps:g} x {w:.2f} s = {inflight:.1f} requests in flight",
        f"--max-num-seqs {max_num_seqs}: {'enough' if fits else 'TOO FEW, requests queue and TTFT grows'}",
        f"{max_num_seqs} seqs at {qps:g} QPS allow W <= {w_cap:.2f} s, i.e. TPOT <= {tpot_cap:.1f} ms at this TTFT",
    ]
    if kv_concurrency is not None:
        working.append(f"KV cache holds {kv_concurrency:.0f} requests of this length: "
                       f"{'room for' if kv_concurrency >= inflight else 'NOT enough for'} {inflight:.0f} in flight")
    return LittlesLaw(qps=qps, ttft_s=ttft, tpot_s=tpot, output_tokens=output_tokens, latency_s=w,
                      in_flight=inflight, max_num_seqs=max_num_seqs, fits=fits, latency_cap_s=w_cap,
                      tpot_cap_ms=tpot_cap,
                      kv_concurrency=kv_concurrency if kv_concurrency is not None else float("nan"),
                      working=working)


@dataclass
class LaunchCommand:
    """The same launch in vLLM 0.32's two forms: argv lists (no shell) and copy-paste shell text."""

    serve_argv: list[str]
    module_argv: list[str]
    flags: list[str]

    @property
    def serve_shell(self) -> str:
        return _shell(self.serve_argv, head=3)

    @property
    def module_shell(self) -> str:
        return _shell(self.module_argv, head=5)


def _shell(argv: list[str], head: int) -> str:
    lines = [" ".join(shlex.quote(a) for a in argv[:head])]
    rest = argv[head:]
    i = 0
    while i < len(rest):
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            lines.append(f"{rest[i]} {shlex.quote(rest[i + 1])}")
            i += 2
        else:
            lines.append(rest[i])
            i += 1
    return " \\\n    ".join(lines)


def launch_command(model: str, *, gpu: str, checkpoint_dtype: str = "bfloat16", tensor_parallel_size: int = 1,
                   kv_cache_dtype: str = "auto",
                   prefix_caching: bool = True, chunked_prefill: bool = True,
                   max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                   gpu_memory_utilization: float | None = None, max_model_len: int | None = None,
                   port: int = 8000, extra: list[str] | None = None,
                   pipeline_parallel_size: int = 1) -> LaunchCommand:
    """Build the vLLM 0.32 launch command for a plan.

    ``gpu``: the GPU the command is for (a catalog name or alias); the command states its ``--dtype``, what vLLM's
    ``--dtype auto`` resolves to there for a checkpoint saved in ``checkpoint_dtype`` (bfloat16 where the GPU has it,
    float16 below the hardware table's ``platform.bf16_dtype`` floor: :func:`inferopt.planning.hardware.model_dtype`).
    Prefix caching and chunked prefill are on by default in vLLM 0.32; we still write
    ``--enable-prefix-caching --enable-chunked-prefill`` when asked (harmless, and it documents
    the plan), and ``--no-enable-prefix-caching`` / ``--no-enable-chunked-prefill`` to turn them off.
    """
    from inferopt.planning import hardware

    dtype = hardware.model_dtype(gpu, checkpoint_dtype)
    if dtype is None:
        raise CourseError(f"gpu={gpu!r}: a launch command is for a CUDA GPU of assets/gpus.yaml (T4, L4, A100, "
                          "H100, ...), whose --dtype the hardware table gives")
    flags: list[str] = ["--dtype", dtype]
    if tensor_parallel_size != 1:
        flags += ["--tensor-parallel-size", str(tensor_parallel_size)]
    if pipeline_parallel_size != 1:
        flags += ["--pipeline-parallel-size", str(pipeline_parallel_size)]
    if kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", kv_cache_dtype]
    flags.append("--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching")
    flags.append("--enable-chunked-prefill" if chunked_prefill else "--no-enable-chunked-prefill")
    if max_num_batched_tokens is not None:
        flags += ["--max-num-batched-tokens", str(max_num_batched_tokens)]
    if max_num_seqs is not None:
        flags += ["--max-num-seqs", str(max_num_seqs)]
    if gpu_memory_utilization is not None:
        flags += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if max_model_len is not None:
        flags += ["--max-model-len", str(max_model_len)]
    flags += ["--port", str(port)]
    flags += list(extra or [])
    return LaunchCommand(serve_argv=["vllm", "serve", model, *flags],
                         module_argv=["python", "-m", "vllm.entrypoints.openai.api_server", "--model", model, *flags],
                         flags=flags)


@dataclass
class DeploymentPlan:
    scenario: dict
    memory: MemoryResult
    memory_seed_4k: MemoryResult
    seed_check: list[dict]
    errata: list[str]
    littles_law: LittlesLaw
    command: LaunchCommand
    capacity: cap.InstancePlan | None
    availability: cap.Availability | None
    canary: list[cap.CanaryStep]
    decisions: list[tuple[str, str, str]]
    dtype: str | None = None      # the model dtype on the plan's GPU (hardware table: platform.bf16_dtype)

    def summary(self) -> dict:
        """The headline figures, JSON-ready (what ``plan --json`` prints)."""
        m = self.memory
        out = {
            "scenario": self.scenario["id"],
            "weights_gib_per_gpu": round(m.weights_gib_per_gpu, 3),
            "kv_budget_gib_per_gpu": round(m.kv_budget_gib_per_gpu, 3),
            "kv_bytes_per_token": m.kv_bytes_per_token,
            "kv_bytes_per_token_per_gpu": m.kv_bytes_per_token_per_gpu,
            "kv_cache_tokens": m.kv_cache_tokens,
            "max_model_len": m.max_model_len,
            "will_start": True,
            "max_concurrency": round(m.max_concurrency, 2),
            "max_concurrency_4k": round(self.memory_seed_4k.max_concurrency, 2),
            "max_concurrency_workload": round(m.max_concurrency_workload, 2),
            "kv_gb_per_request_4k": round(self.memory_seed_4k.kv_gb_per_request_max_len, 3),
            "littles_law_in_flight": round(self.littles_law.in_flight, 1),
            "max_num_seqs": self.littles_law.max_num_seqs,
            "max_num_seqs_enough": self.littles_law.fits,
            "command_serve": self.command.serve_argv,
            "command_module": self.command.module_argv,
            "seed_check": self.seed_check,
            "warnings": m.warnings,
        }
        if self.capacity is not None:
            out["instances"] = self.capacity.instances
            out["gpus"] = self.capacity.gpus
        if self.availability is not None:
            out["availability"] = round(self.availability.service_availability, 6)
        return out


def make_plan(scenario="llama3-70b-chat") -> DeploymentPlan:
    """Turn a requirements file (name, path or loaded dict) into a checked deployment plan."""
    sc = scenario if isinstance(scenario, dict) else load_scenario(scenario)
    req, pl = sc["requirements"], sc["plan"]
    pp = pl.get("pipeline_parallel_size", 1)
    per_node = req.get("gpus_per_node", req["gpus"])
    if pl["tensor_parallel_size"] * pp > req["gpus"]:
        raise CourseError(f"TP={pl['tensor_parallel_size']} x PP={pp} needs more GPUs than the {req['gpus']} in the "
                          f"budget; lower tensor_parallel_size / pipeline_parallel_size or raise the GPU budget.")
    if pl["tensor_parallel_size"] > per_node:
        from inferopt.planning import topology

        t = topology.layout(pl["tensor_parallel_size"] * pp, per_node)
        raise CourseError(f"TP={pl['tensor_parallel_size']} spans nodes of {per_node} GPUs: tensor parallelism's "
                          f"all-reduce needs NVLink inside one node; use {t.describe()} "
                          f"(tensor_parallel_size: {t.tp}, pipeline_parallel_size: {t.pp})")
    # memory per GPU with PP: each stage holds its own layers (get_pp_indices), KV heads per GPU from TP alone
    common = dict(tp=pl["tensor_parallel_size"], pp=pp, weight_format=pl["weight_format"],
                  kv_dtype=pl["kv_cache_dtype"], gpu_memory_utilization=pl["gpu_memory_utilization"],
                  runtime_buffer_gib=pl.get("runtime_buffer_gib"),   # None: vLLM 0.32's runtime model (runtime_memory)
                  input_tokens=req["input_tokens"], output_tokens=req["output_tokens"])
    verdict = start_verdict(req["model"], req["gpu"], max_model_len=pl.get("max_model_len"), **common)
    if not verdict.will_start:  # the plan must start before anything else can be judged
        est = (f" (vLLM's estimated maximum model length: {verdict.max_model_len_estimate})"
               if verdict.max_model_len_estimate else "")
        raise CourseError(f"this plan will not start on vLLM: {verdict.reason}{est}. {verdict.advice}")
    mem = verdict.result
    from inferopt.vllm_oracle.runtime import check_request

    check_request(req["input_tokens"], req["output_tokens"], mem.max_model_len,
                  "plan.max_model_len" if pl.get("max_model_len") else "the model's derived maximum",
                  "requirements.input_tokens")
    seed = sc.get("seed_estimate") or {}
    seed_len = int(seed.get("request_tokens", 4096))
    mem4k = calculate(req["model"], req["gpu"], max_model_len=seed_len, **common)

    spec = load_spec(req["model"])
    kv_tok = mem.kv_bytes_per_token
    per_req = kv_bytes_per_request(spec, seed_len, pl["kv_cache_dtype"])
    errata = [
        f"KV per token = 2 (K,V) x {spec.num_layers} layers x {spec.num_kv_heads} KV heads x "
        f"{spec.head_dim} head_dim x {mem.kv_dtype_bytes} B = {kv_tok:,} B",
        f"KV per {seed_len}-token request = {kv_tok:,} B x {seed_len} = {per_req:,} B "
        f"= {per_req / GB:.2f} GB = {per_req / GiB:.3f} GiB",
    ]
    if "kv_gb_per_request" in seed:
        errata.append(f"the original chapter says ≈ {seed['kv_gb_per_request']} GB: "
                      f"{seed['kv_gb_per_request'] * GB / per_req:.1f}x too high")
    if "kv_gb_total" in seed:
        n_seed_numbers = seed["kv_gb_total"] * GB / per_req
        errata.append(f"with the original chapter's own {seed['kv_gb_total']} GB of KV: {seed['kv_gb_total']} GB / "
                      f"{per_req / GB:.2f} GB = {n_seed_numbers:.0f} requests of {seed_len} tokens, not ≈ "
                      f"{seed.get('max_concurrency', '?')}")
    errata.append(f"recomputed with vLLM's block rule: {mem4k.max_concurrency:.0f} requests of {seed_len} tokens; "
                  f"{mem.max_concurrency_workload:.0f} of the real {mem.workload_tokens} tokens")

    seed_check = []

    def row(q, seed_val, ours, unit, tol):
        if seed_val is None:
            return
        ok = abs(ours - seed_val) <= tol * max(abs(seed_val), 1e-9)
        seed_check.append({"quantity": q, "seed": seed_val, "computed": round(ours, 3), "unit": unit,
                           "verdict": "agrees" if ok else "differs"})

    tp = pl["tensor_parallel_size"] * pp
    row("weights per GPU", seed.get("weights_gb_per_gpu"), mem.weights_gib_per_gpu * GiB / GB, "GB", 0.05)
    row("runtime buffer", seed.get("runtime_buffer_gb"), mem.runtime_buffer_gib * GiB / GB, "GB", 0.1)
    rt = mem.runtime or {}
    if seed_check and seed_check[-1]["quantity"] == "runtime buffer" and rt.get("unverified"):
        # an estimate no start-up log backs cannot refute the original (review 2026-12-01, finding 11): judged
        # against the estimate's range, and the verdict says it is unverified
        lo, hi = (x * GiB / GB for x in (rt["total_low_gib"], rt["total_high_gib"]))
        inside = lo <= seed["runtime_buffer_gb"] <= hi
        seed_check[-1].update(low=round(lo, 3), high=round(hi, 3), verdict=(
            f"unverified: {'inside' if inside else 'outside'} the estimate's range {lo:.2f}-{hi:.2f} GB"))
    row("KV per GPU", seed.get("kv_gb_per_gpu"), mem.kv_budget_gib_per_gpu * GiB / GB, "GB", 0.1)
    row("KV, all GPUs", seed.get("kv_gb_total"), mem.kv_budget_gib_per_gpu * GiB / GB * tp, "GB", 0.1)
    row(f"KV per {seed_len}-token request", seed.get("kv_gb_per_request"), per_req / GB, "GB", 0.1)
    row(f"max concurrency at {seed_len} tokens", seed.get("max_concurrency"), mem4k.max_concurrency, "requests", 0.1)

    ll = littles_law(req["qps"], req["ttft_p95_ms"], req["tpot_p95_ms"], req["output_tokens"],
                     pl["max_num_seqs"], kv_concurrency=mem.max_concurrency_workload)
    # every flag memory was sized on goes into the command (issue 19): without --max-model-len vLLM
    # would start at the model's full context, which the calculator did not check
    # the model dtype for the plan's GPU (hardware.model_dtype through launch_command): stated in every command
    # a precision the checkpoint is not stored in is a flag (FP8 from BF16: --quantization fp8) or another
    # checkpoint (INT4 AWQ/GPTQ, INT8 W8A8: refused here with the kind of checkpoint to get)
    from inferopt.vllm_oracle.runtime import precision_flags

    quant = precision_flags(pl["checkpoint"], pl["weight_format"])
    cmd = launch_command(pl["checkpoint"], gpu=req["gpu"], checkpoint_dtype=spec.torch_dtype, extra=quant,
                         tensor_parallel_size=pl["tensor_parallel_size"],
                         pipeline_parallel_size=pp, kv_cache_dtype=pl["kv_cache_dtype"],
                         max_model_len=mem.max_model_len,
                         prefix_caching=pl.get("prefix_caching", True),
                         chunked_prefill=pl.get("chunked_prefill", True),
                         max_num_batched_tokens=pl.get("max_num_batched_tokens"),
                         max_num_seqs=pl["max_num_seqs"],
                         gpu_memory_utilization=pl["gpu_memory_utilization"], port=pl.get("port", 8000))
    capacity_plan = avail = None
    if "capacity" in sc:
        c = sc["capacity"]
        capacity_plan = cap.plan_instances(c["target_qps"], c["per_instance_qps"], c.get("surge_instances", 1),
                                           c.get("redundancy", "N+1"), req["gpus"])
        if "instance_availability" in c:
            avail = cap.availability(c["instance_availability"], capacity_plan.instances,
                                     capacity_plan.base_instances, target=req["availability"])
    can = sc.get("canary") or {}
    canary = cap.canary_steps(tuple(can.get("fractions", (0.05, 0.5, 1.0))), total_qps=req["qps"],
                              ttft_p95_ms=req["ttft_p95_ms"], tpot_p95_ms=req["tpot_p95_ms"],
                              hold_minutes=tuple(can.get("hold_minutes", (30, 60, 0))))
    par = f"TP={pl['tensor_parallel_size']}" + (f" x PP={pp}" if pp > 1 else "")
    decisions = [
        ("parallelism", par,
         "TP inside one node with NVLink (it splits every layer, so each GPU holds 1/TP of the weights)"
         + (f"; PP={pp} splits the layers across {pp} nodes" if pp > 1 else "")),
        ("weights", pl["weight_format"], "halves weight memory vs BF16 and uses FP8 tensor cores on H100"),
        ("KV cache", pl["kv_cache_dtype"], "halves KV bytes per token: twice the tokens in the same memory"),
        ("prefix caching", "on" if pl.get("prefix_caching", True) else "off", "chat turns share the system prompt"),
        ("chunked prefill", "on" if pl.get("chunked_prefill", True) else "off",
         "long prompts no longer stall running decodes (TPOT tail)"),
        ("speculative decoding", "on" if pl.get("speculative") else "off",
         "gains shrink at high concurrency (the GPU is already busy)"),
    ]
    return DeploymentPlan(scenario=sc, memory=mem, memory_seed_4k=mem4k, seed_check=seed_check, errata=errata,
                          littles_law=ll, command=cmd, capacity=capacity_plan, availability=avail,
                          canary=canary, decisions=decisions, dtype=cmd.flags[cmd.flags.index("--dtype") + 1])


def oracle_verdict(plan: DeploymentPlan):
    """vLLM's verdict (inferopt.vllm_oracle.runtime) on the plan's launch command, on the plan's GPU."""
    from inferopt.vllm_oracle.runtime import check_command

    pl = plan.scenario["plan"]
    return check_command(plan.command.serve_argv, gpu=plan.scenario["requirements"]["gpu"],
                         count=max(8, pl["tensor_parallel_size"] * pl.get("pipeline_parallel_size", 1)))


# ---------------------------------------------------------------- CLI: python -m inferopt plan
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("plan", help="deployment plan from a requirements file (assets/scenarios)",
                              description=make_plan.__doc__)
    p.add_argument("scenario", nargs="?", default="llama3-70b-chat", help="scenario name or YAML path")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--k8s", metavar="DIR", help="also write validated Kubernetes manifests for the plan to DIR")
    p.add_argument("--canary-weight", type=float, default=5.0, help="with --k8s: percent of traffic to the canary")
    p.add_argument("--instances", type=int, help="with --k8s: override the plan's instance count (at least N+1)")
    p.add_argument("--gpus-per-node", type=int, help="GPUs in one node (TP stays inside a node; PP spans nodes); "
                   "overrides the scenario's requirements.gpus_per_node")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    scenario = args.scenario
    if getattr(args, "gpus_per_node", None) is not None:
        if args.gpus_per_node < 1:
            raise CourseError(f"--gpus-per-node {args.gpus_per_node}: give at least 1")
        import copy

        scenario = copy.deepcopy(load_scenario(scenario))
        scenario["requirements"]["gpus_per_node"] = args.gpus_per_node
    plan = make_plan(scenario)
    # vLLM's own config classes on the command the plan emits: its refusal first, else what it resolves
    verdict = oracle_verdict(plan).require()
    if getattr(args, "k8s", None):
        from inferopt.planning.k8s import write_manifests

        paths = write_manifests(plan, args.k8s, canary_weight=args.canary_weight, instances=args.instances)
        print(f"wrote {len(paths)} files to {args.k8s} (validated against the Kubernetes API schemas and the plan)",
              file=sys.stderr)
    if args.json:
        print(json.dumps({**plan.summary(), "vllm": verdict.as_dict()}, indent=2, sort_keys=True))
        return 0
    from inferopt.i18n import columns, localize  # the edition's words (English: unchanged); the command stays as it is

    for name, value, how in plan.memory.terms():
        name = name[:len(name) - len(name.lstrip())] + localize(name.strip())
        print(f"{name}{' ' * max(0, 32 - columns(name))} {value:>18}   {localize(how)}")
    print()
    print("\n".join(localize(x) for x in plan.errata))
    print()
    print("\n".join(localize(x) for x in plan.littles_law.working))
    print()
    print(plan.command.serve_shell)
    print("\n".join(verdict.lines()))
    if plan.capacity:
        print()
        print("\n".join(localize(x) for x in plan.capacity.working))
    return 0
