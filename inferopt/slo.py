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
MS_PER = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}


def to_ms(value: float, unit: str) -> float:
    """``value`` in ``unit`` (ms, s, us, ns) as milliseconds; an unknown unit is an error."""
    if unit not in MS_PER:
        raise CourseError(f"unit {unit!r}: use one of {', '.join(MS_PER)}")
    return float(value) * MS_PER[unit]


def ms_to_s(value_ms: float | None) -> float | None:
    return None if value_ms is None else value_ms / 1000.0


def _fmt(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0f}"


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
        """Does a summary meet every objective at this SLO's percentile?"""
        return not self.violations(summary)

    def violations(self, summary: dict) -> list[str]:
        """Human-readable list of the objectives a summary misses (empty when all are met)."""
        out = []
        for metric, limit in self.items():
            key = f"{metric}_p{self.percentile}_ms"
            value = summary.get(key)
            if value is None or (isinstance(value, float) and math.isnan(value)) or value > limit:
                out.append(f"{metric.upper()} P{self.percentile} {_fmt(value)} ms > {limit:g} ms")
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
