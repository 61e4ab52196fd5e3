"""The one service-level-objective type of the course, and the one place where ms and s meet.

``SLO`` (milliseconds, judged at one percentile) is used by the benchmark
(``inferopt.bench.metrics.SLO`` is this class), the decision engine (``SLO.decision_slos()`` gives
its ``slos`` dict; ``diagnose`` also accepts an ``SLO`` directly) and the alert generator
(``inferopt.monitoring.alerts.SLOs.from_slo(slo)`` builds the alert thresholds in seconds, as
Prometheus wants them). Conversions between units go through :func:`to_ms` / :func:`ms_to_s` only.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from inferopt.errors import CourseError

PERCENTILES = (50, 90, 95, 99)
TAIL_PERCENTILES = (90, 95, 99)   # the percentiles a table or a verdict treats as a tail (bench.stats)
TAIL_LEVEL = 0.9                  # the one-sided confidence of every tail verdict of the course
MS_PER = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}


def to_ms(value: float, unit: str) -> float:
    """``value`` in ``unit`` (ms, s, us, ns) as milliseconds; an unknown unit is an error."""
    if unit not in MS_PER:
        raise CourseError(f"unit {unit!r}: use one of {', '.join(MS_PER)}")
    return float(value) * MS_PER[unit]


def ms_to_s(value_ms: float | None) -> float | None:
    return None if value_ms is None else value_ms / 1000.0


def min_samples_for_upper_bound(q: float = 95, level: float = 0.9) -> int:
    """The fewest requests whose maximum is a ``level`` upper bound of the P_q: 45 for P95 at 90 %.

    Each request falls below the true P_q with probability q/100, so all n do with (q/100)^n; the slowest
    is an upper bound at ``level`` when 1 - (q/100)^n >= level (the order-statistic argument of
    :mod:`inferopt.bench.stats`, which re-exports this function)."""
    if not 0 < q < 100:
        raise CourseError(f"min_samples_for_upper_bound: q={q} must lie between 0 and 100 (a percentile, e.g. 95)")
    if not 0 < level < 1:
        raise CourseError(f"min_samples_for_upper_bound: level={level} must lie between 0 and 1, e.g. 0.9")
    return math.ceil(math.log(1 - level) / math.log(q / 100) - 1e-12)


def tail_samples_needed(q: int, level: float = TAIL_LEVEL) -> int:
    """The fewest values whose slowest bounds the true P_q at the course's ``TAIL_LEVEL``: 22 for a P90, 45 for
    a P95, 230 for a P99."""
    return min_samples_for_upper_bound(q, level)


def _fmt(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0f}"


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


@dataclass(frozen=True)
class SLO:
    """Service-level objectives in milliseconds, judged at one percentile (default P95).

    ``None`` means no objective for that metric."""
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    percentile: int = 95

    def __post_init__(self):
        for name in ("ttft_ms", "tpot_ms", "e2e_ms"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or v <= 0):
                raise CourseError(f"SLO {name}={v!r}: give a positive number of milliseconds or None")
        if self.percentile not in PERCENTILES:
            raise CourseError(f"SLO percentile={self.percentile}: use one of {PERCENTILES}")

    def items(self):
        """(metric, threshold_ms) pairs that are set."""
        return [(m, getattr(self, f"{m}_ms")) for m in ("ttft", "tpot", "e2e") if getattr(self, f"{m}_ms") is not None]

    def request_meets(self, rec) -> bool:
        """Did this one request meet every objective? (the goodput rule)"""
        if not rec.ok:
            return False
        for metric, limit in self.items():
            value = {"ttft": rec.ttft_s, "e2e": rec.e2e_s, "tpot": rec.tpot_s}[metric]
            if value is not None and value * 1000.0 > limit:
                return False
        return True

    def summary_meets(self, summary: dict) -> bool:
        """Is every objective shown to hold, by the order-statistic verdict (:meth:`violations`)?"""
        return not self.violations(summary)

    def violations(self, summary: dict) -> list[str]:
        """The objectives a summary does not show to be met (empty when all are), by the course's order-statistic
        verdict (:func:`inferopt.bench.stats.slo_verdict`, here from the summary's fields):

        - from fewer values than the percentile needs (45 for a P95 at 90 %), the slowest request is judged
          (``{metric}_max_ms``): every request within the limit, or not; a point P95 of 8 requests decides nothing;
        - from enough, the ``TAIL_LEVEL`` upper bound ``{metric}_p{q}_bound_ms`` must lie within the limit (a sample
          percentile under the limit with its bound above it is undecided, and listed);
        - a summary with no count (``{metric}_count`` or ``completed``) and no bound is judged on its sample
          percentile, as the tool that wrote it reported it."""
        out = []
        q = self.percentile
        for metric, limit in self.items():
            name = f"{metric.upper()} P{q}"
            n = summary.get(f"{metric}_count", summary.get("completed"))
            need = tail_samples_needed(q) if q in TAIL_PERCENTILES else 1
            bound = summary.get(f"{metric}_p{q}_bound_ms")
            if n is not None and n < need:
                top = summary.get(f"{metric}_max_ms")
                if _missing(top):
                    out.append(f"{name}: {n} requests cannot show it <= {limit:g} ms (a P{q} needs {need}; "
                               "no slowest request recorded to judge instead)")
                elif top > limit:
                    out.append(f"{metric.upper()} max {_fmt(top)} ms > {limit:g} ms (n={n} < {need}: the slowest "
                               "request is judged)")
            elif not _missing(bound):
                if bound > limit:
                    out.append(f"{name} not shown <= {limit:g} ms: its {TAIL_LEVEL:.0%} upper bound is "
                               f"{_fmt(bound)} ms (n={n})")
            else:
                value = summary.get(f"{metric}_p{q}_ms")
                if _missing(value) or value > limit:
                    out.append(f"{name} {_fmt(value)} ms > {limit:g} ms")
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_seconds(cls, ttft_s: float | None = None, tpot_s: float | None = None, e2e_s: float | None = None,
                     percentile: int = 95) -> SLO:
        """The same objectives given in seconds (as Prometheus and the alert rules use them)."""
        return cls(*(None if v is None else to_ms(v, "s") for v in (ttft_s, tpot_s, e2e_s)), percentile=percentile)

    @property
    def ttft_s(self) -> float | None:
        return ms_to_s(self.ttft_ms)

    @property
    def tpot_s(self) -> float | None:
        return ms_to_s(self.tpot_ms)

    def decision_slos(self) -> dict:
        """The decision engine's ``slos`` dict (``ttft_p95_ms`` ...; P50/P90 objectives are judged as P95)."""
        p = 99 if self.percentile == 99 else 95
        return {f"{m}_p{p}_ms": v for m, v in (("ttft", self.ttft_ms), ("tpot", self.tpot_ms)) if v is not None}
