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


# The one unit policy of every importer: a known time unit is converted to ms; an unknown or missing
# unit is an error (never silently taken as ms).
TIME_UNITS_MS = {"ms": 1.0, "millisecond": 1.0, "milliseconds": 1.0, "s": 1000.0, "sec": 1000.0,
                 "second": 1000.0, "seconds": 1000.0, "us": 1e-3, "µs": 1e-3, "ns": 1e-6}


def _to_ms(value, unit, what: str = "value"):
    if value is None:
        return None
    u = str(unit).strip().lower() if unit is not None else ""
    if u not in TIME_UNITS_MS:
        raise CourseError(f"{what}.unit: {unit!r} is not a time unit I know ({', '.join(sorted(TIME_UNITS_MS))}); "
                          "fix the export or convert it to ms")
    return float(value) * TIME_UNITS_MS[u]


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
        unit = m.get("unit")
        if "avg" in m:
            out[f"{ours}_mean_ms"] = _to_ms(m["avg"], unit, theirs)
        for q in PERCENTILES:
            if f"p{q}" in m:
                out[f"{ours}_p{q}_ms"] = _to_ms(m[f"p{q}"], unit, theirs)
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
            return _to_ms(x["value"], x.get("unit"), key) / 1000.0 if isinstance(x, dict) and x.get("value") is not None else None

        err = r.get("error")
        icl = m.get("inter_chunk_latency")
        out.append(RequestRecord(
            request_id=meta.get("session_num", i),
            prompt_tokens=int(val("input_sequence_length") or val("error_isl") or 0),
            output_tokens=int(val("output_sequence_length") or val("output_token_count") or 0),
            ttft_s=None if err else sec("time_to_first_token"),
            e2e_s=None if err else sec("request_latency"),
            start_s=((meta.get("request_start_ns") or 0) - t0) / 1e9,
            itl_s=[_to_ms(v, icl.get("unit"), "inter_chunk_latency") / 1000.0 for v in icl["value"]] if isinstance(icl, dict) else [],
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


# ---------------------------------------------------------------- the decision engine's baseline
# Read a measured baseline into the decision engine's ``metrics`` dict (latencies in ms).
#
# Two sources:
#
# 1. aiperf / genai-perf summary exports (``profile_export_aiperf.json``,
#    ``profile_export_genai_perf.json``): ``{metric: {unit, avg, min, max, std, p1 .. p99}}`` at the
#    top level (other top-level keys such as ``input_config`` are ignored; a ``records`` wrapper is
#    accepted too). Mapping (the metric-name map the course teaches):
#        time_to_first_token.p95 / .p99    -> ttft_p95_ms / ttft_p99_ms
#        inter_token_latency.p95 / .p99    -> tpot_p95_ms / tpot_p99_ms   (aiperf's ITL is
#                                             (e2e - TTFT) / (n - 1) per request = vLLM's TPOT)
#        output_token_throughput.avg       -> throughput_tok_s
#    Units ``ms``, ``s``/``sec``, ``us``, ``ns`` are converted to ms.
# 2. The course's own benchmark results: JSON lines, one run per line; a line's metrics are read
#    from the keys of ``inferopt.diagnosis.decision.METRIC_FIELDS`` at the top level or under ``summary`` or
#    ``metrics`` (``inferopt.bench.results`` writes ``{"type": "summary", "run": ..., **summary}``
#    lines; ``"type": "request"`` lines are skipped). Other keys are ignored. With ``label`` the
#    last line whose ``run``, ``label`` or ``name`` equals it is used, else the last line.
# The metric keys of inferopt.diagnosis.decision.METRIC_FIELDS, named here so that the decision engine
# and this importer do not import each other (tests/test_decision.py checks that the two agree).
DECISION_METRIC_KEYS = ("ttft_p95_ms", "tpot_p95_ms", "ttft_p99_ms", "tpot_p99_ms", "e2e_p95_ms", "throughput_tok_s",
                        "gpu_util",
                        "oom", "memory_used_frac", "queue_len", "preemptions", "kv_cache_usage",
                        "prefix_cache_hit_rate", "spec_acceptance_rate", "requests", "ttft_p95_bound_ms",
                        "tpot_p95_bound_ms", "ttft_p99_bound_ms", "tpot_p99_bound_ms", "e2e_p95_bound_ms")
# The confidence of every tail verdict the diagnosis gives (inferopt.bench.stats: one-sided, order statistics).
from inferopt.slo import TAIL_LEVEL  # noqa: E402  (one constant for the diagnosis, the tables and SLO.violations)


def sample_fields(records) -> dict:
    """The sample size and what it allows, from per-request records: ``requests`` (completed) and, for each
    tail percentile the diagnosis judges, the ``TAIL_LEVEL`` order-statistic upper bound of that percentile
    (``ttft_p95_bound_ms`` ...; :func:`inferopt.bench.stats.percentile_bounds`), left out when the sample is
    too small for any request to bound it (fewer than 45 for a P95, 230 for a P99)."""
    from inferopt.bench.stats import percentile_bounds

    ok = [r for r in records if r.ok]
    out: dict = {"requests": len(ok)}
    series = {"ttft": [r.ttft_s for r in ok], "tpot": [r.tpot_s for r in ok], "e2e": [r.e2e_s for r in ok]}
    for name, vals in series.items():
        ms = [v * 1000.0 for v in vals if v is not None]
        for q in (95, 99):
            key = f"{name}_p{q}_bound_ms"
            if key in DECISION_METRIC_KEYS and ms:
                upper = percentile_bounds(ms, q, level=TAIL_LEVEL).upper
                if upper is not None:
                    out[key] = round(upper, 6)
    return out


def from_vllm_bench(path) -> dict:
    """Metrics dict from a ``vllm bench serve --save-result`` JSON (vllm/benchmarks/serve.py: ``completed``,
    ``p95_ttft_ms`` ... for the ``--metric-percentiles`` asked for (default 99 only), ``output_throughput``;
    with ``--save-detailed`` the per-request ``ttfts``/``latencies``/``output_lens``, from which every
    percentile and its order-statistic bound are computed). The request count travels as ``requests``."""
    summary, records = import_vllm_bench(path)
    out = {k: summary[k] for k in DECISION_METRIC_KEYS if summary.get(k) is not None}
    if summary.get("completed") is not None:
        out["requests"] = int(summary["completed"])
    if records:
        out.update(sample_fields(records))
    if "ttft_p95_ms" not in out and "tpot_p95_ms" not in out:
        raise CourseError(f"--baseline {path}: this `vllm bench serve` result holds no P95 (vLLM reports P99 only "
                          "by default); rerun with --metric-percentiles 95,99 or --save-detailed")
    return out


_LATENCY = {"time_to_first_token": "ttft", "inter_token_latency": "tpot"}


def _ms(metric: str, block: dict, stat: str):
    _to_ms(0.0, block.get("unit"), metric)  # the unit is checked even when the statistic is absent
    return _to_ms(block.get(stat), block.get("unit"), metric)


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
    block = data.get("request_latency")
    if isinstance(block, dict) and block.get("p95") is not None:
        out["e2e_p95_ms"] = round(_ms("request_latency", block, "p95"), 6)
    count = data.get("request_count")
    if isinstance(count, dict) and count.get("avg") is not None:
        out["requests"] = int(count["avg"])
    if "ttft_p95_ms" not in out or "tpot_p95_ms" not in out:
        raise CourseError("profile export: time_to_first_token.p95 and inter_token_latency.p95 are needed "
                          "(run aiperf/genai-perf with --streaming so it measures them)")
    return out


def _record_metrics(rec: dict) -> dict:
    for holder in (rec, rec.get("summary"), rec.get("metrics")):
        if isinstance(holder, dict) and any(k in holder for k in DECISION_METRIC_KEYS):
            out = {k: holder[k] for k in DECISION_METRIC_KEYS if k in holder and holder[k] is not None}
            if "requests" not in out and isinstance(holder.get("completed"), (int, float)):
                out["requests"] = int(holder["completed"])   # the summary's sample size travels with it
            return out
    return {}


_LEVEL_KEYS = ("run", "label", "concurrency", "rate")


def _same_level(req: dict, summary: dict) -> bool:
    """A request line of the level a summary line sums up (same run, label, concurrency or rate)."""
    return all(req.get(k) == summary.get(k) for k in _LEVEL_KEYS if summary.get(k) is not None)


def from_bench_records(records, label: str | None = None) -> dict:
    """Metrics dict from the course's benchmark result records (dicts, one per run). When the file holds
    the request lines of the level chosen, their count and order-statistic bounds come with it
    (:func:`sample_fields`)."""
    chosen = chosen_rec = None
    requests = [r for r in records if isinstance(r, dict) and r.get("type") == "request"]
    for rec in records:
        if not isinstance(rec, dict):
            continue
        if rec.get("type") == "request":
            continue
        if label is not None and label not in (rec.get("label"), rec.get("name"), rec.get("run")):
            continue
        m = _record_metrics(rec)
        if m:
            chosen, chosen_rec = m, rec
    if chosen is not None and requests:
        mine = [r for r in requests if _same_level(r, chosen_rec)]
        if mine:
            chosen.update(sample_fields(records_from_lines(mine)))
    if chosen is None:
        which = f" with label {label!r}" if label else ""
        raise CourseError(f"benchmark results: no record{which} holds metrics such as ttft_p95_ms; "
                          "run the benchmark first or check the label")
    return chosen


def load_baseline(path, label: str | None = None) -> dict:
    """Metrics dict from a file: an aiperf/genai-perf profile export (.json), a ``vllm bench serve
    --save-result`` JSON, or the course's benchmark JSON lines (.jsonl). Each keeps its request count."""
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
    if isinstance(data, dict) and ("mean_ttft_ms" in data or "ttfts" in data):
        return from_vllm_bench(p)
    return from_bench_records(data if isinstance(data, list) else [data], label)


# ---------------------------------------------------------------- a sweep for the diagnosis's throughput roof
_SWEEP_KEYS = ("request_throughput_rps", "goodput_rps", "ttft_p95_ms", "tpot_p95_ms")


def load_sweep(paths) -> list[dict]:
    """Sweep levels (inferopt.diagnosis.saturation) from files: the course's sweep JSON lines (one summary
    line a level, load = its concurrency or rate) and/or ``vllm bench serve --save-result`` JSONs (one level
    each: load = max_concurrency, else a finite request_rate; request_throughput, request_goodput, p95s)."""
    levels = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        p = Path(path)
        if not p.exists():
            raise CourseError(f"--sweep {path}: no such file")
        if p.suffix == ".jsonl":
            _, sums = read_jsonl(p)
            for s in sums:
                load = {k: s[k] for k in ("concurrency", "rate") if s.get(k) is not None}
                levels.append({**load, **{k: s[k] for k in _SWEEP_KEYS if s.get(k) is not None},
                               "requests": s.get("completed")})
            continue
        d = _load_json(p)
        if "request_throughput" not in d:
            raise CourseError(f"--sweep {path}: neither the course's sweep JSON lines nor a `vllm bench serve` result")
        rate = d.get("request_rate")
        if d.get("max_concurrency") is not None:
            load = {"concurrency": d["max_concurrency"]}
        elif rate not in (None, "inf") and not (isinstance(rate, float) and math.isinf(rate)):
            load = {"rate": float(rate)}
        else:
            raise CourseError(f"--sweep {path}: the run has neither --max-concurrency nor a finite --request-rate, "
                              "so it measured no load level")
        summary, _ = import_vllm_bench(p)
        levels.append({**load, "request_throughput_rps": d["request_throughput"], "requests": d.get("completed"),
                       **({"goodput_rps": d["request_goodput"]} if d.get("request_goodput") is not None else {}),
                       **{k: summary[k] for k in ("ttft_p95_ms", "tpot_p95_ms") if summary.get(k) is not None}})
    if not levels:
        raise CourseError(f"--sweep {paths}: no level found (a sweep's summary lines, or vllm bench serve results)")
    return [{k: v for k, v in lv.items() if v is not None} for lv in levels]
