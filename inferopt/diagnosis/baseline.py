"""Read a measured baseline into the decision engine's ``metrics`` dict (latencies in ms).

Two sources:

1. aiperf / genai-perf summary exports (``profile_export_aiperf.json``,
   ``profile_export_genai_perf.json``): ``{metric: {unit, avg, min, max, std, p1 .. p99}}`` at the
   top level (other top-level keys such as ``input_config`` are ignored; a ``records`` wrapper is
   accepted too). Mapping (the metric-name map the course teaches):
       time_to_first_token.p95 / .p99    -> ttft_p95_ms / ttft_p99_ms
       inter_token_latency.p95 / .p99    -> tpot_p95_ms / tpot_p99_ms   (aiperf's ITL is
                                            (e2e - TTFT) / (n - 1) per request = vLLM's TPOT)
       output_token_throughput.avg       -> throughput_tok_s
   Units ``ms``, ``s``/``sec``, ``us``, ``ns`` are converted to ms.
2. The course's own benchmark results: JSON lines, one run per line; a line's metrics are read
   from the keys of ``inferopt.diagnosis.decision.METRIC_FIELDS`` at the top level or under ``summary`` or
   ``metrics`` (``inferopt.bench.results`` writes ``{"type": "summary", "run": ..., **summary}``
   lines; ``"type": "request"`` lines are skipped). Other keys are ignored. With ``label`` the
   last line whose ``run``, ``label`` or ``name`` equals it is used, else the last line.
"""
from __future__ import annotations

import json
from pathlib import Path

from inferopt.diagnosis.decision import METRIC_FIELDS
from inferopt.errors import CourseError

_TO_MS = {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "second": 1000.0, "seconds": 1000.0,
          "us": 1e-3, "µs": 1e-3, "ns": 1e-6}
_LATENCY = {"time_to_first_token": "ttft", "inter_token_latency": "tpot"}


def _ms(metric: str, block: dict, stat: str):
    unit = str(block.get("unit", "")).strip().lower()
    if unit not in _TO_MS:
        raise CourseError(f"{metric}.unit: {block.get('unit')!r} is not a time unit I know "
                          f"({', '.join(sorted(_TO_MS))}); fix the export or convert it to ms")
    v = block.get(stat)
    if v is None:
        return None
    return float(v) * _TO_MS[unit]


def from_profile_export(data: dict) -> dict:
    """Metrics dict from an aiperf/genai-perf profile_export JSON object."""
    if not isinstance(data, dict):
        raise CourseError("profile export: expected a JSON object {metric: {unit, avg, p95, ...}}")
    if "records" in data and isinstance(data["records"], dict):
        data = data["records"]
    out = {}
    for name, short in _LATENCY.items():
        block = data.get(name)
        if not isinstance(block, dict):
            continue
        for p in ("p95", "p99"):
            v = _ms(name, block, p)
            if v is not None:
                out[f"{short}_{p}_ms"] = round(v, 6)
    thr = data.get("output_token_throughput")
    if isinstance(thr, dict) and thr.get("avg") is not None:
        unit = str(thr.get("unit", "")).lower()
        if "token" not in unit or not ("/s" in unit or "per sec" in unit):
            raise CourseError(f"output_token_throughput.unit: {thr.get('unit')!r} is not tokens per second")
        out["throughput_tok_s"] = float(thr["avg"])
    if "ttft_p95_ms" not in out or "tpot_p95_ms" not in out:
        raise CourseError("profile export: time_to_first_token.p95 and inter_token_latency.p95 are needed "
                          "(run aiperf/genai-perf with --streaming so it measures them)")
    return out


def _record_metrics(rec: dict) -> dict:
    for holder in (rec, rec.get("summary"), rec.get("metrics")):
        if isinstance(holder, dict) and any(k in holder for k in METRIC_FIELDS):
            return {k: holder[k] for k in METRIC_FIELDS if k in holder and holder[k] is not None}
    return {}


def from_bench_records(records, label: str | None = None) -> dict:
    """Metrics dict from the course's benchmark result records (dicts, one per run)."""
    chosen = None
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if rec.get("type") == "request":
            continue
        if label is not None and label not in (rec.get("label"), rec.get("name"), rec.get("run")):
            continue
        m = _record_metrics(rec)
        if m:
            chosen = m
    if chosen is None:
        which = f" with label {label!r}" if label else ""
        raise CourseError(f"benchmark results: no record{which} holds metrics such as ttft_p95_ms; "
                          "run the benchmark first or check the label")
    return chosen


def load_baseline(path, label: str | None = None) -> dict:
    """Metrics dict from a file: a profile export (.json) or benchmark JSON lines (.jsonl)."""
    p = Path(path)
    if not p.exists():
        raise CourseError(f"--baseline {path}: no such file")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix == ".jsonl":
            data = None
        else:
            data = json.loads(text)
    except json.JSONDecodeError:
        data = None  # more than one JSON value: JSON lines
    if data is None:
        try:
            recs = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise CourseError(f"--baseline {path}: neither JSON nor JSON lines ({exc})") from None
        return from_bench_records(recs, label)
    if isinstance(data, dict) and isinstance(data.get("time_to_first_token", data.get("records")), dict):
        return from_profile_export(data)
    return from_bench_records(data if isinstance(data, list) else [data], label)
