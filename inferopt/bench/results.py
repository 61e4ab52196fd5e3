"""Benchmark results on disk: JSON lines written as they complete, and importers for other tools.

Our format (one file per run or sweep, under ``inferopt.paths.results_dir()``): one JSON object a
line, ``{"type": "request", "run": ..., **RequestRecord}`` as each request finishes and
``{"type": "summary", "run": ..., **summary}`` as each level finishes. Lines are flushed at once,
so an interrupted sweep keeps every request and level that completed.

Importers turn other tools' files into the same structures (a summary dict with our keys, and
RequestRecords where the file has per-request data):
- ``vllm bench serve --save-result [--save-detailed]`` result JSON;
- genai-perf ``profile_export_genai_perf.json`` / aiperf ``profile_export_aiperf.json``
  (``{metric: {unit, avg, p50, p90, p95, p99, ...}}``) and aiperf's per-request
  ``profile_export.jsonl``.
Name map: genai-perf/aiperf ``inter_token_latency`` is our (and vLLM's) TPOT; their
``inter_chunk_latency`` is vLLM's ITL; ``request_latency`` is E2E.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path

from inferopt.bench.metrics import PERCENTILES, RequestRecord, summarize
from inferopt.errors import CourseError
from inferopt.paths import results_dir


def _clean(obj):
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def new_results_path(name: str) -> Path:
    """A fresh ``results/<name>-<YYYYmmdd-HHMMSS>.jsonl`` path (name: letters, digits, - and _)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise CourseError(f"result name {name!r}: use letters, digits, '-', '_' or '.' only")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = results_dir() / f"{name}-{stamp}.jsonl"
    i = 1
    while path.exists():
        path = results_dir() / f"{name}-{stamp}-{i}.jsonl"
        i += 1
    return path


class ResultWriter:
    """Append-only JSON-lines writer; every line is flushed when written."""

    def __init__(self, path: str | Path, run: str = ""):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.run = run
        self._fh = open(self.path, "a", encoding="utf-8")

    def write(self, kind: str, payload: dict, **extra) -> None:
        line = {"type": kind, "run": self.run, **extra, **payload}
        self._fh.write(json.dumps(_clean(line), sort_keys=True) + "\n")
        self._fh.flush()

    def request(self, rec: RequestRecord, **extra) -> None:
        self.write("request", rec.to_dict(), **extra)

    def summary(self, summary: dict, **extra) -> None:
        self.write("summary", summary, **extra)

    def on_record(self, **extra):
        """A callback for loadgen.run(on_record=...) that saves each record with ``extra`` labels."""
        return lambda rec: self.request(rec, **extra)

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_jsonl(path: str | Path) -> tuple[list[dict], list[dict]]:
    """(request lines, summary lines) of one of our result files. A torn last line is ignored, and
    so are lines of other types (a sweep's "config" line)."""
    path = Path(path)
    if not path.exists():
        raise CourseError(f"result file {path} does not exist; list {results_dir()} to see the runs")
    reqs, sums = [], []
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                continue  # a run killed while writing its last line
            raise CourseError(f"{path}:{i + 1} is not JSON; the file is damaged") from None
        if obj.get("type") == "summary":
            sums.append(obj)
        elif obj.get("type", "request") == "request":
            reqs.append(obj)   # other line types (e.g. "config") are not results
    return reqs, sums


def records_from_lines(lines, **match) -> list[RequestRecord]:
    """RequestRecords from request lines whose fields equal ``match`` (e.g. concurrency=4)."""
    return [RequestRecord.from_dict(d) for d in lines if all(d.get(k) == v for k, v in match.items())]


# ---------------------------------------------------------------- importers
def _load_json(path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CourseError(f"{path} does not exist") from None
    except ValueError as exc:
        raise CourseError(f"{path} is not a JSON file ({exc})") from None


def import_vllm_bench(path) -> tuple[dict, list[RequestRecord]]:
    """A ``vllm bench serve --save-result`` JSON → (summary in our keys, records).

    Records need ``--save-detailed``; without it the list is empty and the summary holds the
    percentiles vLLM printed (it reports median = p50 and the ``--metric-percentiles`` asked for)."""
    d = _load_json(path)
    if "mean_ttft_ms" not in d and "ttfts" not in d:
        raise CourseError(f"{path} has no 'mean_ttft_ms' or 'ttfts': it is not a `vllm bench serve` result file")
    records: list[RequestRecord] = []
    if d.get("ttfts"):
        starts = d.get("start_times") or [0.0] * len(d["ttfts"])
        t0 = min(starts) if starts else 0.0
        errors = d.get("errors") or [""] * len(d["ttfts"])
        for i, ttft in enumerate(d["ttfts"]):
            err = errors[i] or None
            out_len = d["output_lens"][i] if d.get("output_lens") else 0
            records.append(RequestRecord(
                request_id=i, prompt_tokens=int(d["input_lens"][i]) if d.get("input_lens") else 0,
                output_tokens=int(out_len or 0),
                ttft_s=ttft if (ttft and not err) else None,
                e2e_s=d["latencies"][i] if (d.get("latencies") and not err) else None,
                start_s=starts[i] - t0, itl_s=list(d["itls"][i]) if d.get("itls") else [], error=err))
    if records:
        summary = summarize(records, duration_s=d["duration"])
    else:
        summary = {"completed": d.get("completed"), "failed": d.get("failed"), "duration_s": d.get("duration")}
    for metric, ours in (("ttft", "ttft"), ("tpot", "tpot"), ("itl", "itl"), ("e2el", "e2e")):
        if f"mean_{metric}_ms" in d:
            summary[f"{ours}_mean_ms"] = d[f"mean_{metric}_ms"]
            summary[f"{ours}_p50_ms"] = d[f"median_{metric}_ms"]
            for q in PERCENTILES:
                if f"p{q}_{metric}_ms" in d:
                    summary[f"{ours}_p{q}_ms"] = d[f"p{q}_{metric}_ms"]
    summary["output_throughput_tok_s"] = d.get("output_throughput", summary.get("output_throughput_tok_s"))
    summary["total_throughput_tok_s"] = d.get("total_token_throughput", summary.get("total_throughput_tok_s"))
    summary["request_throughput_rps"] = d.get("request_throughput", summary.get("request_throughput_rps"))
    summary["throughput_tok_s"] = summary["output_throughput_tok_s"]
    if d.get("request_goodput") is not None:
        summary["goodput_rps"] = d["request_goodput"]
    if d.get("max_concurrency") is not None:
        summary["concurrency"] = d["max_concurrency"]
    rate = d.get("request_rate")
    if rate not in (None, "inf") and not (isinstance(rate, float) and math.isinf(rate)):
        summary["rate"] = float(rate)
    summary["source"] = "vllm bench serve"
    return summary, records


_GP_MAP = {"time_to_first_token": "ttft", "inter_token_latency": "tpot", "inter_chunk_latency": "itl",
           "request_latency": "e2e"}


def _to_ms(value, unit: str):
    if value is None:
        return None
    unit = (unit or "ms").lower()
    return value * {"ms": 1.0, "s": 1000.0, "sec": 1000.0, "us": 1e-3, "ns": 1e-6}.get(unit, 1.0)


def import_genai_perf(path) -> dict:
    """A genai-perf ``profile_export_genai_perf.json`` or aiperf ``profile_export_aiperf.json`` → summary.

    Their ``inter_token_latency`` becomes our ``tpot_*``, ``inter_chunk_latency`` our ``itl_*``,
    ``request_latency`` our ``e2e_*``; ``avg`` becomes ``mean``."""
    d = _load_json(path)
    if "time_to_first_token" not in d and "request_latency" not in d:
        raise CourseError(f"{path} has no 'time_to_first_token' or 'request_latency': it is not a genai-perf/"
                          "aiperf profile export (use the *_genai_perf.json / *_aiperf.json file)")
    out: dict = {}
    for theirs, ours in _GP_MAP.items():
        m = d.get(theirs)
        if not isinstance(m, dict):
            continue
        unit = m.get("unit", "ms")
        if "avg" in m:
            out[f"{ours}_mean_ms"] = _to_ms(m["avg"], unit)
        for q in PERCENTILES:
            if f"p{q}" in m:
                out[f"{ours}_p{q}_ms"] = _to_ms(m[f"p{q}"], unit)
    def avg(key):
        m = d.get(key)
        return m.get("avg") if isinstance(m, dict) else None
    out["output_throughput_tok_s"] = avg("output_token_throughput")
    out["request_throughput_rps"] = avg("request_throughput")
    out["throughput_tok_s"] = out["output_throughput_tok_s"]
    if avg("benchmark_duration") is not None:
        out["duration_s"] = avg("benchmark_duration")
    if avg("request_count") is not None:
        out["completed"] = int(avg("request_count"))
    loadgen = (d.get("input_config") or {}).get("loadgen") or (d.get("input_config") or {}).get("perf_analyzer") or {}
    conc = loadgen.get("concurrency")
    if isinstance(conc, dict):  # genai-perf keeps {"stimulus": {"concurrency": N}}
        conc = conc.get("concurrency")
    if conc is not None:
        out["concurrency"] = conc
    out["source"] = "aiperf" if "aiperf" in Path(path).name or "telemetry_data" in d else "genai-perf"
    return out


def import_aiperf_records(path) -> list[RequestRecord]:
    """aiperf's per-request ``profile_export.jsonl`` → RequestRecords (failed requests keep their error)."""
    path = Path(path)
    if not path.exists():
        raise CourseError(f"{path} does not exist")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    starts = [r.get("metadata", {}).get("request_start_ns") or 0 for r in rows]
    t0 = min(starts) if starts else 0
    out = []
    for i, r in enumerate(rows):
        m = r.get("metrics") or {}
        meta = r.get("metadata") or {}

        def val(key, m=m):
            x = m.get(key)
            return x.get("value") if isinstance(x, dict) else None

        def sec(key, m=m):
            x = m.get(key)
            if not isinstance(x, dict) or x.get("value") is None:
                return None
            return _to_ms(x["value"], x.get("unit")) / 1000.0

        err = r.get("error")
        icl = m.get("inter_chunk_latency")
        out.append(RequestRecord(
            request_id=meta.get("session_num", i),
            prompt_tokens=int(val("input_sequence_length") or val("error_isl") or 0),
            output_tokens=int(val("output_sequence_length") or val("output_token_count") or 0),
            ttft_s=None if err else sec("time_to_first_token"),
            e2e_s=None if err else sec("request_latency"),
            start_s=((meta.get("request_start_ns") or 0) - t0) / 1e9,
            itl_s=[_to_ms(v, icl.get("unit")) / 1000.0 for v in icl["value"]] if isinstance(icl, dict) else [],
            error=(f"{err.get('code')} {err.get('type')}: {err.get('message')}" if err else None)))
    return out


def import_any(path) -> tuple[dict, list[RequestRecord]]:
    """Guess the tool from the file and import it: (summary, records)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        first = path.read_text(encoding="utf-8").split("\n", 1)[0]
        if '"metadata"' in first and '"metrics"' in first:
            recs = import_aiperf_records(path)
            return summarize(recs), recs
        reqs, sums = read_jsonl(path)
        return (sums[-1] if sums else summarize(records_from_lines(reqs))), records_from_lines(reqs)
    d = _load_json(path)
    if "mean_ttft_ms" in d or "ttfts" in d:
        return import_vllm_bench(path)
    return import_genai_perf(path), []
