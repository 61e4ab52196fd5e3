"""The five alerts of seed §6.2 as Prometheus alerting rules, generated from the SLOs, plus
promtool unit tests that prove each rule fires on a series that breaks it and stays quiet on
one that does not.

    slo = SLOs()                                   # seed §5.1: TTFT P95 0.5 s, TPOT P95 0.05 s, ...
    rules = build_rules(slo)                       # dict in Prometheus' rule-file shape
    tests = build_rule_tests(slo)                  # dict in promtool's test-file shape
    paths = write_rules_and_tests(folder, slo)     # rules.yml + rules_test.yml
    # demo: the same rules with short windows, for a live Prometheus scraping every second
    build_rules(SLOs(ttft_p95_s=0.05), for_="5s", window="15s")

The templates live in ``assets/monitoring/alerts.yaml`` (instructors edit the data, not this
code). Thresholds are in seconds (latencies) and as a fraction (GPU memory, 0.95 = 95 %).

Command: ``python -m inferopt alerts --out DIR [--ttft-p95-s 0.5 ...] [--check]``.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import string
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from inferopt import assets
from inferopt.errors import CourseError

SPEC_NAME = "monitoring/alerts.yaml"
_DURATION = re.compile(r"^(\d+)(ms|s|m|h|d)$")
_UNIT_S = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


class _Template(string.Template):
    """Only ``${name}`` is a placeholder; ``$labels`` / ``$value`` (Prometheus templates) stay."""

    pattern = r"\$(?:(?P<escaped>(?!))|\{(?P<braced>[_a-z][_a-z0-9]*)\}|(?P<named>(?!))|(?P<invalid>(?!)))"


def load_spec() -> dict:
    """The alert templates (``assets/monitoring/alerts.yaml``), checked against their schema."""
    return assets.load(SPEC_NAME)


def duration_seconds(text: str) -> float:
    """Seconds in a simple Prometheus duration such as '5m', '15s', '0m' (one unit only)."""
    m = _DURATION.match(str(text))
    if not m:
        raise CourseError(f"{text!r} is not a Prometheus duration: write a number and one unit, e.g. '5m' or '15s'.")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


@dataclass(frozen=True)
class SLOs:
    """What the service promises, and the alert thresholds derived from it.

    ttft_p95_s / tpot_p95_s: P95 time to first token / per output token, seconds.
    max_request_s: no request may take longer end to end (seconds); must be a bucket bound of
        vLLM's e2e histogram (30 is), so that "any request" can be counted exactly.
    gpu_memory_fraction: GPU frame-buffer memory used / (used + free) that pages, 0..1.
    job: the Prometheus scrape job name of the engines."""

    ttft_p95_s: float = 0.5
    tpot_p95_s: float = 0.05
    max_request_s: float = 30.0
    gpu_memory_fraction: float = 0.95
    job: str = "vllm"

    def __post_init__(self):
        for name in ("ttft_p95_s", "tpot_p95_s", "max_request_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0 or math.isinf(v):
                raise CourseError(f"{name} must be a positive number of seconds, got {v!r} (e.g. 0.5 for 500 ms).")
        if not isinstance(self.gpu_memory_fraction, (int, float)) or not 0 < self.gpu_memory_fraction < 1:
            raise CourseError(f"gpu_memory_fraction must be a fraction between 0 and 1 (0.95 = 95 %), "
                              f"got {self.gpu_memory_fraction!r}.")
        if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_-]*", str(self.job)):
            raise CourseError(f"job {self.job!r}: use a plain scrape-job name such as 'vllm'.")
        for name in ("ttft_p95_s", "tpot_p95_s"):   # a part of a request is never slower than the whole of it
            v = getattr(self, name)
            if v >= self.max_request_s:
                raise CourseError(f"{name}={v:g} s is not below max_request_s={self.max_request_s:g} s (the whole "
                                  f"request), so no request could trip it; thresholds are in seconds: if {v:g} was "
                                  f"milliseconds, give {v / 1000:g}")
        bounds = histogram_bounds("vllm:e2e_request_latency_seconds")
        if float(self.max_request_s) not in bounds:
            near = min(bounds, key=lambda b: abs(b - self.max_request_s))
            raise CourseError(f"max_request_s={self.max_request_s} is not a bucket bound of vLLM's e2e histogram "
                              f"(bounds: {bounds}); the nearest is {near}. Counting requests slower than a "
                              "threshold is exact only at a bound.")

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_slo(cls, slo, **alerting) -> SLOs:
        """Alert thresholds from the course's one SLO type (:class:`inferopt.slo.SLO`, ms): the
        seconds Prometheus wants come from ``inferopt.slo.ms_to_s``, the one unit conversion."""
        from inferopt.slo import ms_to_s

        if slo.ttft_ms is None or slo.tpot_ms is None:
            raise CourseError("alerts need both a TTFT and a TPOT objective (SLO(ttft_ms=..., tpot_ms=...)).")
        return cls(ttft_p95_s=ms_to_s(slo.ttft_ms), tpot_p95_s=ms_to_s(slo.tpot_ms), **alerting)

    @property
    def slo(self):
        """The same objectives as the course's one SLO type (ms, P95)."""
        from inferopt.slo import SLO

        return SLO.from_seconds(self.ttft_p95_s, self.tpot_p95_s)


def histogram_bounds(metric: str) -> list:
    """Finite bucket upper bounds (seconds) vLLM 0.32 exposes for ``metric`` (from the spec)."""
    bounds = load_spec()["histogram_bounds_s"]
    if metric not in bounds:
        raise CourseError(f"no bucket bounds recorded for {metric!r}; known: {sorted(bounds)}.")
    return [float(b) for b in bounds[metric]]


def bucket_bound_at_or_above(metric: str, seconds: float) -> float:
    """The smallest bucket bound of ``metric`` that is >= ``seconds``.

    A P95 read from a histogram is only known to within its bucket: Prometheus interpolates
    inside it. A gate whose threshold falls between two bounds is decided by that interpolation,
    not by the requests; one on a bound passes exactly when 95 % of them fall at or below it."""
    for b in histogram_bounds(metric):
        if b >= seconds - 1e-12:
            return b
    raise CourseError(f"{seconds:g} s is above the last finite bucket of {metric}: no gate can read it.")


def slos_on_bucket_bounds(slo: SLOs) -> SLOs:
    """``slo`` with its TTFT and TPOT P95 targets moved up to the next bucket bound of vLLM's
    histograms (see :func:`bucket_bound_at_or_above`)."""
    from dataclasses import replace

    return replace(slo, ttft_p95_s=bucket_bound_at_or_above("vllm:time_to_first_token_seconds", slo.ttft_p95_s),
                   tpot_p95_s=bucket_bound_at_or_above("vllm:request_time_per_output_token_seconds", slo.tpot_p95_s))


# vLLM's bucket family (``--custom-histogram-buckets`` key) of each histogram a gate reads:
# vllm/v1/metrics/loggers.py builds request_time_per_output_token_seconds from the inter_token_latency family
BUCKET_FAMILY = {"vllm:time_to_first_token_seconds": "time_to_first_token",
                 "vllm:request_time_per_output_token_seconds": "inter_token_latency"}


def buckets_at_thresholds(slo: SLOs) -> dict:
    """The ``--custom-histogram-buckets`` value that puts a bucket bound *at* ``slo``'s TTFT and TPOT
    targets (vLLM's default bounds plus the two thresholds): a gate on such an engine counts the
    requests at or below the threshold exactly (``le`` = the threshold), with no rounding up to the next
    default bound and no interpolation. vLLM 0.32: ``vllm/config/observability.py:
    ObservabilityConfig.custom_histogram_buckets``, one list per family."""
    out = {}
    for metric, family in BUCKET_FAMILY.items():
        thr = slo.ttft_p95_s if family == "time_to_first_token" else slo.tpot_p95_s
        out[family] = sorted(set(histogram_bounds(metric)) | {float(thr)})
    return out


def histogram_bucket_args(slo: SLOs) -> list:
    """``["--custom-histogram-buckets", JSON]`` for an engine whose canary gates read ``slo``."""
    return ["--custom-histogram-buckets", json.dumps(buckets_at_thresholds(slo))]


def _le_regex(bound: float) -> str:
    """A PromQL regex (as the text inside "...") matching the le label of ``bound`` whether the
    server keeps it as exposed ('30.0', Prometheus 2.x) or normalises it ('30', Prometheus 3.x)."""
    if float(bound).is_integer():
        return f"{int(bound)}(\\\\.0)?"
    return re.escape(repr(float(bound))).replace("\\", "\\\\")


def _num(x: float) -> str:
    return f"{x:g}"


def _params(slo: SLOs, window: str, restart_window: str) -> dict:
    return {"job": slo.job, "window": window, "restart_window": restart_window,
            "ttft_p95_s": _num(slo.ttft_p95_s), "tpot_p95_s": _num(slo.tpot_p95_s),
            "max_request_s": _num(slo.max_request_s), "max_request_le": _le_regex(slo.max_request_s),
            "gpu_memory_fraction": _num(slo.gpu_memory_fraction)}


def build_rules(slo: SLOs | None = None, *, for_: str | None = None, window: str | None = None,
                restart_window: str | None = None, only=None) -> dict:
    """Answer "what rule file implements §6.2 for these SLOs?" as a dict (Prometheus rule format).

    ``for_`` / ``window`` / ``restart_window`` override every rule's ``for:`` duration, the rate
    window and the restart look-back (the live demo uses '5s' / '15s' with a 1 s scrape);
    by default each rule keeps its own ``for:`` from the spec (5m, 5m, 0m, 1m, 0m) and 5m / 10m
    windows. ``only`` keeps the named alerts."""
    slo = slo or SLOs()
    spec = load_spec()
    window = window or spec["defaults"]["window"]
    restart_window = restart_window or spec["defaults"]["restart_window"]
    for d in (window, restart_window) + ((for_,) if for_ else ()):
        duration_seconds(d)
    params = _params(slo, window, restart_window)
    names = [a["name"] for a in spec["alerts"]]
    if only is not None:
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise CourseError(f"unknown alert(s) {unknown}; the spec has {names}.")
    rules = []
    for a in spec["alerts"]:
        if only is not None and a["name"] not in only:
            continue
        p = dict(params, **{"for": for_ or a["for"]})

        def fill(t, p=p):
            return " ".join(_Template(t).substitute(p).split())

        rules.append({
            "alert": a["name"],
            "expr": fill(a["expr"]),
            "for": p["for"],
            "labels": {"severity": a["severity"], "layer": a["layer"]},
            "annotations": {"summary": fill(a["summary"]), "description": fill(a["description"])},
        })
    return {"groups": [{"name": spec["group"], "rules": rules}]}


def rules_yaml(rules: dict) -> str:
    """The rule file text (YAML) for a dict from :func:`build_rules`."""
    return yaml.safe_dump(rules, sort_keys=False, width=4096, allow_unicode=True)


# ---------------------------------------------------------------- promtool unit tests
def _series_name(name: str, labels: dict) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _ramp(per_step: float, steps: int) -> str:
    return f"0+{_num(per_step)}x{steps}"


def histogram_series(name: str, labels: dict, bounds, value: float, per_step: float = 10,
                     steps: int = 60) -> list:
    """promtool input series for a histogram that receives ``per_step`` observations of
    ``value`` (seconds) every interval: every bucket with bound >= value, +Inf and _count grow,
    the others stay 0; _sum grows by per_step x value."""
    out = []
    for b in list(bounds) + [math.inf]:
        le = "+Inf" if math.isinf(b) else repr(float(b))
        out.append({"series": _series_name(name + "_bucket", dict(labels, le=le)),
                    "values": _ramp(per_step if value <= b else 0, steps)})
    out.append({"series": _series_name(name + "_count", labels), "values": _ramp(per_step, steps)})
    out.append({"series": _series_name(name + "_sum", labels), "values": _ramp(per_step * value, steps)})
    return out


def _slow_fast_values(bounds, threshold: float, what: str) -> tuple:
    """Observation values whose interpolated P95 lands surely above / below ``threshold``."""
    above = [b for b in bounds if b > threshold]
    below = [b for b in bounds if b <= threshold]
    if len(above) < 2 or not below:
        raise CourseError(f"{what}={threshold} s is outside the range vLLM's histogram can resolve "
                          f"(bounds {bounds[0]}..{bounds[-1]} s): choose a threshold between two bounds.")
    # all observations in the bucket (above[0], above[1]]: P95 > above[0] > threshold
    # all observations in a bucket whose upper bound <= threshold: P95 <= that bound
    return above[1], below[-1]


def _fill_annotations(rule: dict, labels: dict) -> dict:
    return {k: v.replace("{{ $labels.instance }}", labels.get("instance", ""))
            for k, v in rule["annotations"].items()}


def _expect(rule: dict, labels: dict) -> dict:
    return {"exp_labels": dict(labels, **rule["labels"]), "exp_annotations": _fill_annotations(rule, labels)}


def _minutes(d: str) -> int:
    return math.ceil(duration_seconds(d) / 60)


def build_rule_tests(slo: SLOs | None = None, rule_file: str = "rules.yml") -> dict:
    """Answer "does each rule fire when it should, and only then?" as a promtool test file (dict).

    For each of the five alerts: one series that breaks it (must fire after its ``for:``), one
    that does not (must stay quiet), and an evaluation before ``for:`` has passed (nothing may
    fire yet). Run it with :func:`inferopt.monitoring.promtool.test_rules`."""
    slo = slo or SLOs()
    rules = {r["alert"]: r for r in build_rules(slo)["groups"][0]["rules"]}
    job = slo.job
    tests = []

    for alert, metric, thr in (("TTFTP95AboveSLO", "vllm:time_to_first_token_seconds", slo.ttft_p95_s),
                               ("TPOTP95AboveSLO", "vllm:request_time_per_output_token_seconds", slo.tpot_p95_s)):
        r = rules[alert]
        bounds = histogram_bounds(metric)
        slow_v, fast_v = _slow_fast_values(bounds, thr, alert)
        slow = {"job": job, "instance": "slow:8000"}
        fast = {"job": job, "instance": "fast:8000"}
        for_m = _minutes(r["for"])
        tests.append({
            "name": f"{alert}: requests of {_num(slow_v)} s fire after {r['for']}, "
                    f"requests of {_num(fast_v)} s stay quiet",
            "interval": "1m",
            "input_series": histogram_series(metric, slow, bounds, slow_v)
                            + histogram_series(metric, fast, bounds, fast_v),
            "alert_rule_test": [
                {"eval_time": f"{max(for_m - 1, 0)}m", "alertname": alert, "exp_alerts": []},
                {"eval_time": f"{for_m + 5}m", "alertname": alert,
                 "exp_alerts": [_expect(r, {"instance": slow["instance"]})]},
            ],
        })

    r = rules["RequestSlowerThan30s"]
    e2e = histogram_bounds("vllm:e2e_request_latency_seconds")
    slow_v = min(b for b in e2e if b > slo.max_request_s)
    fast_v = max(b for b in e2e if b <= slo.max_request_s)
    series = []
    for inst, v, pattern in (("slow:8000", slow_v, "0x2 1x20"), ("fast:8000", fast_v, "0+1x22")):
        labels = {"job": job, "instance": inst}
        for b in e2e + [math.inf]:
            le = "+Inf" if math.isinf(b) else repr(float(b))
            grows = v <= b
            series.append({"series": _series_name("vllm:e2e_request_latency_seconds_bucket", dict(labels, le=le)),
                           "values": pattern if grows else "0x22"})
        series.append({"series": _series_name("vllm:e2e_request_latency_seconds_count", labels), "values": pattern})
    tests.append({
        "name": f"RequestSlowerThan30s: one {_num(slow_v)} s request fires, {_num(fast_v)} s requests do not",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": "2m", "alertname": r["alert"], "exp_alerts": []},
            {"eval_time": "5m", "alertname": r["alert"], "exp_alerts": [_expect(r, {"instance": "slow:8000"})]},
            {"eval_time": "15m", "alertname": r["alert"], "exp_alerts": []},
        ],
    })

    r = rules["GPUMemoryAbove95"]
    total = 81559  # MiB, an H100 80GB as DCGM reports used + free
    hot_used = math.ceil(total * (slo.gpu_memory_fraction + (1 - slo.gpu_memory_fraction) / 2))
    ok_used = math.floor(total * slo.gpu_memory_fraction) - 2000
    series = []
    for gpu, used in (("0", hot_used), ("1", ok_used)):
        labels = {"instance": "node-a:9400", "gpu": gpu, "job": "dcgm"}
        series.append({"series": _series_name("DCGM_FI_DEV_FB_USED", labels), "values": f"{used}x20"})
        series.append({"series": _series_name("DCGM_FI_DEV_FB_FREE", labels), "values": f"{total - used}x20"})
    hot = {"instance": "node-a:9400", "gpu": "0", "job": "dcgm"}
    for_m = _minutes(r["for"])
    tests.append({
        "name": f"GPUMemoryAbove95: {hot_used}/{total} MiB fires after {r['for']}, {ok_used}/{total} MiB does not",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": f"{max(for_m - 1, 0)}m", "alertname": r["alert"], "exp_alerts": []},
            {"eval_time": f"{for_m + 2}m", "alertname": r["alert"], "exp_alerts": [_expect(r, hot)]},
        ],
    })

    r = rules["InstanceOOM"]
    ksm = {"job": "kube-state-metrics", "instance": "ksm:8080", "namespace": "llm", "container": "vllm"}
    oom_now = dict(ksm, pod="vllm-0", reason="OOMKilled")
    oom_old = dict(ksm, pod="vllm-1", reason="OOMKilled")
    series = [
        {"series": _series_name("kube_pod_container_status_last_terminated_reason", oom_now), "values": "0x9 1x20"},
        {"series": _series_name("kube_pod_container_status_restarts_total", dict(ksm, pod="vllm-0")),
         "values": "0x9 1x20"},
        # an OOM long ago: reason still OOMKilled, no new restart -> quiet
        {"series": _series_name("kube_pod_container_status_last_terminated_reason", oom_old), "values": "1x30"},
        {"series": _series_name("kube_pod_container_status_restarts_total", dict(ksm, pod="vllm-1")), "values": "1x30"},
        # engine restarted (CUDA OOM ended it): start time jumps; a steady engine stays quiet
        {"series": _series_name("process_start_time_seconds", {"job": job, "instance": "engine-a:8000"}),
         "values": "1000x9 1600x20"},
        {"series": _series_name("process_start_time_seconds", {"job": job, "instance": "engine-b:8000"}),
         "values": "1000x30"},
    ]
    tests.append({
        "name": "InstanceOOM: a fresh OOMKilled restart and an engine restart fire; "
                "an old OOM and a steady engine do not",
        "interval": "1m",
        "input_series": series,
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": r["alert"], "exp_alerts": []},
            {"eval_time": "12m", "alertname": r["alert"], "exp_alerts": [
                _expect(r, oom_now), _expect(r, {"job": job, "instance": "engine-a:8000"})]},
            {"eval_time": "25m", "alertname": r["alert"], "exp_alerts": []},
        ],
    })
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}


def write_rules_and_tests(folder, slo: SLOs | None = None, **rule_kw) -> dict:
    """Write ``rules.yml`` (from :func:`build_rules`) and ``rules_test.yml`` (from
    :func:`build_rule_tests`, default durations only) into ``folder``; return their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rules_path = folder / "rules.yml"
    rules_path.write_text(rules_yaml(build_rules(slo, **rule_kw)), encoding="utf-8")
    out = {"rules": rules_path}
    if not rule_kw:
        test_path = folder / "rules_test.yml"
        test_path.write_text(yaml.safe_dump(build_rule_tests(slo), sort_keys=False, width=4096,
                                            allow_unicode=True), encoding="utf-8")
        out["tests"] = test_path
    return out


def alert_table(slo: SLOs | None = None) -> list:
    """Rows {alert, seed, severity, for, threshold, expr} for a table in the chapter."""
    spec = load_spec()
    rules = {r["alert"]: r for r in build_rules(slo)["groups"][0]["rules"]}
    return [{"alert": a["name"], "seed": a["seed"], "severity": a["severity"], "layer": a["layer"],
             "for": rules[a["name"]]["for"], "expr": rules[a["name"]]["expr"], "why": " ".join(a["why"].split())}
            for a in spec["alerts"]]


ERROR_SOURCES = ("app", "engine")


def canary_gates(slo: SLOs | None = None, selector: str = 'job="vllm",version="canary"',
                 window: str = "5m", max_error_rate: float = 0.001, errors: str = "app") -> list:
    """Answer "what do I read before moving the canary to the next step?": one row per gate,
    {gate, promql, threshold, unit, pass_if}, restricted to the new version's series by ``selector``
    (a label matcher; the deployment must label the canary's pods, e.g. version="canary").
    The same histograms and thresholds as the alerts. The error rate is the application's
    ``app_chat_requests_total`` (business layer, ``errors="app"``), or, where there is no
    application in front (chapter 06b's miniature), the engine's own HTTP answers
    (``errors="engine"``: ``http_requests_total`` by status class)."""
    slo = slo or SLOs()
    duration_seconds(window)
    if errors not in ERROR_SOURCES:
        raise CourseError(f"errors={errors!r}: read the error rate from 'app' (the application's counter) "
                          "or 'engine' (vLLM's http_requests_total)")

    def q(m):
        return f"histogram_quantile(0.95, sum by (le) (rate({m}_bucket{{{selector}}}[{window}])))"

    return [
        {"gate": "TTFT P95", "promql": q("vllm:time_to_first_token_seconds"), "threshold": slo.ttft_p95_s,
         "unit": "s", "pass_if": "below", "metric": "vllm:time_to_first_token_seconds"},
        {"gate": "TPOT P95", "promql": q("vllm:request_time_per_output_token_seconds"), "threshold": slo.tpot_p95_s,
         "unit": "s", "pass_if": "below", "metric": "vllm:request_time_per_output_token_seconds"},
        {"gate": f"requests > {_num(slo.max_request_s)} s",
         "promql": f"sum(increase(vllm:e2e_request_latency_seconds_count{{{selector}}}[{window}])) - "
                   f"sum(increase(vllm:e2e_request_latency_seconds_bucket{{{selector},le=~\"{_le_regex(slo.max_request_s)}\"}}[{window}]))",
         "threshold": 0, "unit": "requests", "pass_if": "equal"},
        {"gate": "preemptions", "promql": f"sum(increase(vllm:num_preemptions_total{{{selector}}}[{window}]))",
         "threshold": 0, "unit": "preemptions", "pass_if": "equal"},
        {"gate": "error rate", "promql": _error_rate(errors, selector, window),
         "threshold": max_error_rate, "unit": "fraction", "pass_if": "below"},
    ]


def _error_rate(errors: str, selector: str, window: str) -> str:
    if errors == "app":
        return (f'1 - sum(rate(app_chat_requests_total{{outcome="success",version="canary"}}[{window}])) / '
                f'sum(rate(app_chat_requests_total{{version="canary"}}[{window}]))')
    api = f'{selector},handler=~"/v1/(chat/)?completions"'
    # no failed answer yet means no 4xx/5xx series at all: count that as 0, not as "no data"
    return (f'(sum(increase(http_requests_total{{{api},status!="2xx"}}[{window}])) or vector(0)) / '
            f'sum(increase(http_requests_total{{{api}}}[{window}]))')


def gate_passes(gate: dict, value) -> bool:
    """Did a canary gate pass with this measured ``value``? No data (None or NaN) does not pass:
    a step that cannot be judged is not promoted."""
    if value is None or math.isnan(value):
        return False
    if gate["pass_if"] == "below":
        return value < gate["threshold"]
    if gate["pass_if"] == "equal":
        return round(value, 6) == gate["threshold"]
    raise CourseError(f"gate {gate.get('gate')!r}: unknown pass_if {gate['pass_if']!r} (use 'below' or 'equal')")


# ---------------------------------------------------------------- CLI: python -m inferopt alerts
def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("alerts", help="write the §6.2 Prometheus alert rules (+ promtool tests) for SLOs",
                              description=build_rules.__doc__)
    d = SLOs()
    p.add_argument("--out", default="results/alerts", help="folder for rules.yml and rules_test.yml")
    p.add_argument("--ttft-p95-s", type=float, default=d.ttft_p95_s)
    p.add_argument("--tpot-p95-s", type=float, default=d.tpot_p95_s)
    p.add_argument("--max-request-s", type=float, default=d.max_request_s)
    p.add_argument("--gpu-memory-fraction", type=float, default=d.gpu_memory_fraction)
    p.add_argument("--job", default=d.job)
    p.add_argument("--check", action="store_true", help="run promtool check rules and promtool test rules")
    p.set_defaults(func=_cli)


def _cli(args: argparse.Namespace) -> int:
    slo = SLOs(args.ttft_p95_s, args.tpot_p95_s, args.max_request_s, args.gpu_memory_fraction, args.job)
    paths = write_rules_and_tests(args.out, slo)
    print(json.dumps({k: str(v) for k, v in paths.items()}, indent=2))
    if args.check:
        from inferopt.monitoring.promtool import check_rules, test_rules

        for res in (check_rules(paths["rules"]), test_rules(paths["tests"])):
            print(res.output.strip())
            if not res.ok:
                return 1
    return 0
