"""Read a Prometheus text exposition (vLLM's ``/metrics``) and answer service-layer questions.

    snap = parse_metrics(srv.metrics_text())
    snap.value("vllm:num_requests_waiting")            # queue length now (requests)
    kv_cache_usage(snap)                                 # fraction of KV blocks in use, 0..1
    window = delta(snap_after, snap_before)              # counters/histograms over a time window
    prefix_cache_hit_rate(window)                        # hits / queries, 0..1 (None if no queries)
    histogram_quantile(0.95, window.buckets("vllm:time_to_first_token_seconds"))   # seconds

Parsing uses the Prometheus client library's own parser
(``prometheus_client.parser.text_string_to_metric_families``).

The quantile caveat. A Prometheus histogram keeps only cumulative counts per bucket upper
bound (``le``). :func:`histogram_quantile` does what PromQL's ``histogram_quantile`` does: find
the bucket holding the rank ``q x count`` and interpolate *linearly* inside it, i.e. it assumes
the observations are spread evenly between the bucket's lower and upper bound. The true value
can be anywhere in that bucket, so the error is up to one bucket width (vLLM's TTFT buckets
around 0.5 s are 0.25 s wide). If the rank falls in the ``+Inf`` bucket the answer is the
highest finite bound, however slow the requests really were. To check an SLO exactly, put the
threshold on a bucket bound and compare the share of requests below it
(``bucket{le="0.5"} / count``): :func:`fraction_below` does that.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from inferopt.errors import CourseError

Labels = tuple  # sorted ((name, value), ...)


def _key(labels: dict) -> Labels:
    return tuple(sorted(labels.items()))


@dataclass
class MetricsSnapshot:
    """One scrape: every sample as (sample name, labels) -> value, plus each family's type.

    ``types`` maps a sample name to its family type ('counter', 'gauge', 'histogram', ...);
    ``families`` maps a family name (as the client parser names it: counters without ``_total``)
    to its type."""

    samples: dict = field(default_factory=dict)        # (name, labels) -> float
    types: dict = field(default_factory=dict)          # sample name -> family type
    families: dict = field(default_factory=dict)       # family name -> type

    @property
    def sample_names(self) -> set:
        """Every sample name exposed (``vllm:foo_total``, ``vllm:bar_bucket``, ...)."""
        return {name for name, _ in self.samples}

    def select(self, name: str, **match) -> list:
        """[(labels dict, value)] of samples called ``name`` whose labels include ``match``."""
        out = []
        for (n, labels), v in self.samples.items():
            if n != name:
                continue
            d = dict(labels)
            if all(d.get(k) == str(val) for k, val in match.items()):
                out.append((d, v))
        return out

    def value(self, name: str, **match) -> float:
        """Sum of the samples called ``name`` (all label sets, or those matching ``match``).

        Raises CourseError when the engine exposes no such sample (names changed between vLLM
        versions: e.g. ``vllm:gpu_cache_usage_perc`` became ``vllm:kv_cache_usage_perc``)."""
        rows = self.select(name, **match)
        if not rows:
            raise CourseError(f"/metrics has no sample named {name!r}{' with ' + str(match) if match else ''}. "
                              "Check the name against the engine's /metrics (vLLM 0.32 names, counters end "
                              "in _total); `sorted(snap.sample_names)` lists what is there.")
        return float(sum(v for _, v in rows))

    def buckets(self, histogram: str, **match) -> list:
        """[(upper bound, cumulative count)] of histogram ``histogram`` (name without ``_bucket``),
        summed over every other label (as ``sum by (le)`` does), sorted by bound, +Inf last."""
        acc: dict[float, float] = {}
        for labels, v in self.select(histogram + "_bucket", **match):
            le = labels.get("le")
            if le is None:
                continue
            acc[float(le)] = acc.get(float(le), 0.0) + v
        if not acc:
            raise CourseError(f"/metrics has no histogram named {histogram!r} (no {histogram}_bucket samples). "
                              "Give the name without _bucket, e.g. 'vllm:time_to_first_token_seconds'.")
        return sorted(acc.items())


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse Prometheus text exposition format into a :class:`MetricsSnapshot`."""
    from prometheus_client.parser import text_string_to_metric_families

    if not isinstance(text, str) or not text.strip():
        raise CourseError("the /metrics text is empty: is the engine running? Use srv.metrics_text().")
    snap = MetricsSnapshot()
    try:
        for fam in text_string_to_metric_families(text):
            snap.families[fam.name] = fam.type
            for s in fam.samples:
                snap.samples[(s.name, _key(s.labels))] = float(s.value)
                snap.types[s.name] = fam.type
    except ValueError as exc:
        raise CourseError(f"this is not Prometheus text format ({exc}); pass the body of GET /metrics.") from None
    return snap


def delta(later: MetricsSnapshot, earlier: MetricsSnapshot) -> MetricsSnapshot:
    """What happened between two scrapes: counters and histogram series become later - earlier
    (what PromQL's ``increase`` gives without extrapolation); gauges keep the later value.

    A counter that went down (engine restarted between the scrapes) keeps its later value, as
    Prometheus treats a reset."""
    out = MetricsSnapshot(types=dict(later.types), families=dict(later.families))
    for key, v in later.samples.items():
        name = key[0]
        kind = later.types.get(name)
        cumulative = kind in ("counter", "histogram", "summary") and not name.endswith("_created")
        if cumulative:
            before = earlier.samples.get(key, 0.0)
            out.samples[key] = v - before if v >= before else v
        else:
            out.samples[key] = v
    return out


def histogram_quantile(q: float, buckets) -> float:
    """The ``q``-quantile (0..1) of a histogram given as [(upper bound, cumulative count)], in
    the histogram's unit (seconds for vLLM's latency histograms).

    Same algorithm as PromQL's ``histogram_quantile`` (Prometheus 2.x ``bucketQuantile``): NaN
    when there are no observations; linear interpolation inside the bucket that holds rank
    q x count (the first bucket starts at 0); the highest finite bound when the rank falls in
    +Inf. See the module docstring for why this is an estimate."""
    if not isinstance(q, (int, float)) or math.isnan(q):
        raise CourseError(f"q must be a number between 0 and 1 (0.95 for P95), got {q!r}.")
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    bs = sorted((float(b), float(c)) for b, c in buckets)
    if not bs or not math.isinf(bs[-1][0]):
        raise CourseError("a histogram needs its +Inf bucket (le=\"+Inf\"); pass snap.buckets(name).")
    # coalesce equal bounds, then force monotonic counts (as Prometheus does)
    merged: list[list[float]] = []
    for b, c in bs:
        if merged and merged[-1][0] == b:
            merged[-1][1] += c
        else:
            merged.append([b, c])
    top = 0.0
    for m in merged:
        top = max(top, m[1])
        m[1] = top
    if len(merged) < 2:
        return math.nan
    observations = merged[-1][1]
    if observations == 0:
        return math.nan
    rank = q * observations
    b = next((i for i in range(len(merged) - 1) if merged[i][1] >= rank), len(merged) - 1)
    if b == len(merged) - 1:
        return merged[-2][0]
    if b == 0 and merged[0][0] <= 0:
        return merged[0][0]
    start, end, count = 0.0, merged[b][0], merged[b][1]
    if b > 0:
        start = merged[b - 1][0]
        count -= merged[b - 1][1]
        rank -= merged[b - 1][1]
    return start + (end - start) * (rank / count)


def fraction_below(bound: float, buckets) -> float:
    """Share (0..1) of observations <= ``bound``, exact when ``bound`` is a bucket bound.

    Raises CourseError if it is not one (then the answer would be an interpolation too)."""
    bs = dict((float(b), float(c)) for b, c in buckets)
    if float(bound) not in bs:
        raise CourseError(f"{bound} is not a bucket bound of this histogram (bounds: "
                          f"{sorted(b for b in bs if not math.isinf(b))}); pick one of them.")
    total = bs[math.inf]
    return math.nan if total == 0 else bs[float(bound)] / total


# ---------------------------------------------------------------- service-layer questions
def queue_length(snap: MetricsSnapshot) -> float:
    """Requests waiting for a slot in the running batch now (``vllm:num_requests_waiting``)."""
    return snap.value("vllm:num_requests_waiting")


def running_requests(snap: MetricsSnapshot) -> float:
    """Requests in the running batch now (``vllm:num_requests_running``)."""
    return snap.value("vllm:num_requests_running")


def kv_cache_usage(snap: MetricsSnapshot) -> float:
    """Fraction (0..1, not percent despite the name) of KV-cache blocks in use now
    (``vllm:kv_cache_usage_perc``)."""
    return snap.value("vllm:kv_cache_usage_perc")


def prefix_cache_hit_rate(window: MetricsSnapshot) -> float | None:
    """Prefix-cache hit rate (0..1) = hit tokens / queried tokens over a window
    (``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total``; pass a
    :func:`delta`, or a single snapshot for the rate since start). None when nothing was queried."""
    queries = window.value("vllm:prefix_cache_queries_total")
    return None if queries == 0 else window.value("vllm:prefix_cache_hits_total") / queries


LATENCY_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
}


def latency_quantiles(window: MetricsSnapshot, qs=(0.5, 0.95, 0.99)) -> dict:
    """{'ttft': {'p50': s, 'p95': s, 'p99': s, 'count': n}, 'tpot': ..., 'itl': ..., 'e2e': ...}
    in seconds, estimated from vLLM's histograms with :func:`histogram_quantile`."""
    out = {}
    for short, name in LATENCY_HISTOGRAMS.items():
        bs = window.buckets(name)
        row = {f"p{round(q * 100)}": histogram_quantile(q, bs) for q in qs}
        row["count"] = bs[-1][1]
        out[short] = row
    return out


def summary(snap: MetricsSnapshot, window: MetricsSnapshot | None = None) -> dict:
    """One row of service-layer figures: queue, running, KV use (0..1), prefix hit rate,
    requests finished and TTFT/TPOT P50/P95 (seconds) over ``window`` (default: since start)."""
    window = window or snap
    lat = latency_quantiles(window, qs=(0.5, 0.95))
    return {
        "running": running_requests(snap),
        "waiting": queue_length(snap),
        "kv_cache_usage": kv_cache_usage(snap),
        "prefix_cache_hit_rate": prefix_cache_hit_rate(window),
        "requests_finished": lat["e2e"]["count"],
        "ttft_p50_s": lat["ttft"]["p50"], "ttft_p95_s": lat["ttft"]["p95"],
        "tpot_p50_s": lat["tpot"]["p50"], "tpot_p95_s": lat["tpot"]["p95"],
    }
