"""``python -m inferopt diagnose ...``: the decision engine (:mod:`inferopt.diagnosis.decision`) on
metrics given as options, an ``--input`` file, or a ``--baseline`` benchmark export read by
:mod:`inferopt.diagnosis.baseline`.

The command lives here, not in ``decision``, so that ``baseline`` (which reads decision's field
names) and ``decision`` do not import each other.
"""
from __future__ import annotations

from inferopt.diagnosis.baseline import load_baseline
from inferopt.diagnosis.decision import (
    METRIC_FIELDS,
    SLO_FIELDS,
    WORKLOAD_FIELDS,
    diagnose,
    format_text,
    time_diagnosis,
)
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
    for k, h in METRIC_FIELDS.items():
        if k == "oom":
            p.add_argument("--oom", action="store_true", default=None, help=h)
        else:
            p.add_argument(_opt(k), type=float, dest=f"m_{k}", help=h)
    for k, h in SLO_FIELDS.items():
        p.add_argument("--slo-" + k.replace("_", "-"), type=float, dest=f"s_{k}", help=h)
    for k, h in WORKLOAD_FIELDS.items():
        p.add_argument(_opt(k), dest=f"w_{k}", type=str if k in ("gpu_type", "draft_model") else float, help=h)
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
    except Exception as exc:  # yaml is a superset of JSON
        raise CourseError(f"--input {path}: cannot parse ({exc})") from None
    if not isinstance(data, dict):
        raise CourseError(f"--input {path}: expected a mapping with metrics, slos, workload, techniques_on")
    unknown = set(data) - {"metrics", "slos", "workload", "techniques_on"}
    if unknown:
        raise CourseError(f"--input {path}: unknown top-level key(s) {sorted(unknown)}; "
                          "use metrics, slos, workload, techniques_on")
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
    on = data.get("techniques_on")
    if args.baseline:
        metrics.update(load_baseline(args.baseline, label=args.label))
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
    if args.on is not None:
        on = [] if args.on.strip().lower() == "none" else args.on
    d = diagnose(metrics, slos, workload, on)
    if args.json:
        print(d.to_json())
    else:
        print(format_text(d))
    return 0
