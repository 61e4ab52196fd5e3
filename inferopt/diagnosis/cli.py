"""The ``diagnose`` command: ``python -m inferopt diagnose ...`` (options, input files, output)."""
from __future__ import annotations

from inferopt.diagnosis.decision import diagnose, time_diagnosis
from inferopt.diagnosis.inputs import (
    DEPLOYMENT_FIELDS,
    DRAFT_DTYPES,
    INT4_KERNELS,
    METRIC_FIELDS,
    SLO_FIELDS,
    WORKLOAD_FIELDS,
    deployment_from_plan,
)
from inferopt.diagnosis.report import format_text
from inferopt.diagnosis.signals import read_metrics_source, signals_from_metrics
from inferopt.errors import CourseError


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
    p.add_argument("--sweep", nargs="+", metavar="FILE",
                   help="a load sweep: the course's bench sweep JSON lines, or vllm bench serve results (one per "
                        "level); a flat top of completed requests/s is the throughput roof (saturation)")
    # the field texts are prose ("90 % confidence"): argparse formats help with %, so each % is escaped once here
    metric, slo, work, dep = ({k: h.replace("%", "%%") for k, h in d.items()}
                              for d in (METRIC_FIELDS, SLO_FIELDS, WORKLOAD_FIELDS, DEPLOYMENT_FIELDS))
    for k, h in metric.items():
        if k == "oom":
            p.add_argument("--oom", action="store_true", default=None, help=h)
        else:
            p.add_argument(_opt(k), type=float, dest=f"m_{k}", help=h)
    for k, h in slo.items():
        p.add_argument("--slo-" + k.replace("_", "-"), type=float, dest=f"s_{k}", help=h)
    for k, h in work.items():
        extra = {"choices": DRAFT_DTYPES} if k == "draft_dtype" else {"choices": INT4_KERNELS} if k == "int4_kernel" else {}
        p.add_argument(_opt(k), dest=f"w_{k}", type=str if k in ("gpu_type", "draft_model", "draft_dtype", "int4_kernel") else float,
                       help=h, **extra)
    g = p.add_argument_group("deployment (joins the memory calculator in)")
    for k, h in dep.items():
        if k == "enforce_eager":
            g.add_argument(_opt(k), dest=f"d_{k}", action="store_const", const=True, default=None, help=h)
            continue
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
    unknown = set(data) - {"metrics", "slos", "workload", "techniques_on", "deployment", "sweep"}
    if unknown:
        raise CourseError(f"--input {path}: unknown top-level key(s) {sorted(unknown)}; use metrics, slos, workload, "
                          "techniques_on, deployment, sweep")
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
    sweep = data.get("sweep")
    if args.sweep:
        from inferopt.bench.results import load_sweep

        sweep = load_sweep(args.sweep)
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
    d = diagnose(metrics, slos, workload, on, deployment or None, sweep)
    # vLLM's own config classes on the deployment's command and on each change it emits (vllm_oracle.runtime)
    from inferopt.vllm_oracle.runtime import change_lines, check_diagnosis

    d.vllm = check_diagnosis(deployment or None, d)
    if args.json:
        print(d.to_json())
    else:
        from inferopt.i18n.prose import prose

        lines = change_lines(d.vllm)
        if lines and d.vllm["verdict"].get("ok") is False:       # vLLM would not start it: its refusal first
            print(lines[0])
            lines = []
        print("\n".join(prose(line) for line in format_text(d).splitlines()))   # asset prose in the edition's language
        print("\n".join(lines))
    return 0
