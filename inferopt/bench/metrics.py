"""Per-request latency records and their summaries: TTFT, TPOT, ITL, E2E, throughput, goodput.

Definitions (all times measured by the client, from the moment the request is sent):
- TTFT, time to first token (首 token 延迟): arrival of the first streamed chunk that carries a choice.
- E2E, end-to-end latency (端到端延迟): arrival of the last such chunk.
- TPOT, time per output token (每个输出 token 的时间) of one request = (E2E − TTFT) / (n − 1), n = output
  tokens. vLLM's ``tpot``; genai-perf/aiperf call the same number ``inter_token_latency``.
- ITL, inter-token latency as vLLM reports it: every gap between two successive chunks, pooled over
  all requests. With speculative decoding a chunk may carry several tokens, so ITL ≠ TPOT.
- Throughput: output tokens / wall time (tok/s), total tokens (prompt + output) / wall time, and
  completed requests / wall time (req/s).
- Goodput (有效吞吐): requests per second that met *every* SLO on their own (TTFT, TPOT, E2E).

Percentiles use numpy's linear interpolation, the same rule as ``vllm bench serve``.
Records hold seconds; summaries hold milliseconds (``*_ms``) as the tools print them.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field

import numpy as np

from inferopt.errors import CourseError
from inferopt.slo import PERCENTILES, SLO, TAIL_LEVEL, TAIL_PERCENTILES, tail_samples_needed

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass
class RequestRecord:
    """One request as the client saw it. Times in seconds (s)."""
    request_id: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float | None = None
    e2e_s: float | None = None
    start_s: float = 0.0                 # send time, relative to the start of the run
    itl_s: list[float] = field(default_factory=list)  # gaps between successive chunks
    error: str | None = None
    tag: str = ""                        # free label, e.g. 'long' / 'decode' in a mixed workload

    @property
    def ok(self) -> bool:
        return self.error is None and self.ttft_s is not None and self.e2e_s is not None

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) / (n − 1) in seconds; None for a failed or one-token request."""
        if not self.ok or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tpot_s"] = self.tpot_s
        return d

    @classmethod
    def from_dict(cls, d: dict) -> RequestRecord:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})


# The SLO type lives in inferopt.slo (shared by the benchmark, the decision engine and the alerts);
# ``from inferopt.bench.metrics import SLO`` keeps working and gives the same class.


def _fmt(v) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.0f}"


def percentile(values, q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (numpy's default); NaN when empty."""
    vals = [v for v in values if v is not None]
    if not vals:
        return float("nan")
    if not 0 <= q <= 100:
        raise CourseError(f"percentile q={q}: give a number between 0 and 100")
    return float(np.percentile(np.asarray(vals, dtype=float), q))


def _stats_ms(values_s) -> dict:
    vals = [v * 1000.0 for v in values_s if v is not None]
    out = {"mean": float(np.mean(vals)) if vals else float("nan")}
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(vals, q)
    out["max"] = max(vals) if vals else float("nan")
    return out


def _tail_fields(name: str, values_s) -> dict:
    """``{name}_count`` (the sample size), and for each tail percentile the ``TAIL_LEVEL`` order-statistic
    upper bound ``{name}_p{q}_bound_ms`` where the sample is large enough for one (bench.stats)."""
    from inferopt.bench.stats import percentile_bounds

    ms = [v * 1000.0 for v in values_s if v is not None]
    out: dict = {f"{name}_count": len(ms)}
    if name == "itl" or not ms:       # the gaps are pooled over requests: counted, not bounded
        return out
    for q in TAIL_PERCENTILES:
        upper = percentile_bounds(ms, q, level=TAIL_LEVEL).upper
        if upper is not None:
            out[f"{name}_p{q}_bound_ms"] = upper
    return out


def summarize(records, duration_s: float | None = None, slo: SLO | None = None, **labels) -> dict:
    """Summarize per-request records into one flat dict.

    Keys: ``ttft|tpot|itl|e2e`` × ``mean|p50|p90|p95|p99|max`` + ``_ms``; ``{metric}_count`` (values in the
    sample: requests, or for ``itl`` the gaps pooled over requests); ``{metric}_p{90,95,99}_bound_ms``, the
    90 % order-statistic upper bound of that percentile where the sample holds one (none below 22 / 45 /
    230 values; not for ``itl``, whose gaps within a request are not independent); ``output_throughput_tok_s``,
    ``total_throughput_tok_s``, ``request_throughput_rps``, ``goodput_rps`` and ``slo_attainment``
    (fraction of requests meeting every SLO; only with ``slo``), ``completed``, ``failed``,
    ``duration_s``, ``throughput_tok_s`` (= output throughput, the name the decision engine reads),
    plus any ``labels`` (e.g. concurrency=4). ``duration_s`` defaults to first send → last token.
    """
    records = list(records)
    ok = [r for r in records if r.ok]
    if duration_s is None:
        duration_s = max((r.start_s + r.e2e_s for r in ok), default=0.0) - min((r.start_s for r in ok), default=0.0)
    if ok and duration_s <= 0:
        raise CourseError(f"duration_s={duration_s}: a run with completed requests needs a positive duration")
    out: dict = dict(labels)
    out["completed"] = len(ok)
    out["failed"] = len(records) - len(ok)
    out["duration_s"] = float(duration_s)
    series = {"ttft": [r.ttft_s for r in ok], "tpot": [r.tpot_s for r in ok],
              "itl": [g for r in ok for g in r.itl_s], "e2e": [r.e2e_s for r in ok]}
    for name, vals in series.items():
        for stat, v in _stats_ms(vals).items():
            out[f"{name}_{stat}_ms"] = v
        out.update(_tail_fields(name, vals))
    out_tok = sum(r.output_tokens for r in ok)
    in_tok = sum(r.prompt_tokens for r in ok)
    safe = duration_s if duration_s > 0 else float("nan")
    out["input_tokens"] = in_tok
    out["output_tokens"] = out_tok
    out["output_throughput_tok_s"] = out_tok / safe if ok else 0.0
    out["total_throughput_tok_s"] = (out_tok + in_tok) / safe if ok else 0.0
    out["request_throughput_rps"] = len(ok) / safe if ok else 0.0
    out["throughput_tok_s"] = out["output_throughput_tok_s"]
    if slo is not None:
        good = sum(1 for r in ok if slo.request_meets(r))
        out["goodput_rps"] = good / safe if ok else 0.0
        out["slo_attainment"] = good / len(records) if records else float("nan")
        out["meets_slo"] = slo.summary_meets(out)
    return out


def max_level_meeting(summaries, slo: SLO, key: str = "concurrency"):
    """The largest ``key`` value (e.g. concurrency) whose summary meets every SLO, or None.

    Levels are tested in increasing order; the answer is the last level before the first miss, so a
    lucky pass after a miss does not count."""
    best = None
    for s in sorted(summaries, key=lambda s: s[key]):
        if slo.summary_meets(s) and s.get("failed", 0) == 0:
            best = s[key]
        else:
            break
    return best


def sample_size(summary: dict, metric: str) -> int | None:
    """How many values a summary's ``metric`` (ttft, tpot, itl, e2e) was computed from: ``{metric}_count``,
    else ``completed``; None when the row says neither (a model's prediction, a hand-built row)."""
    n = summary.get(f"{metric}_count", summary.get("completed"))
    return None if n is None or isinstance(n, bool) else int(n)


def tail_withheld(summary: dict, column: str) -> tuple[int, int] | None:
    """``(n, need)`` when ``column`` is a tail percentile (``*_p90_ms``, ``*_p95_ms``, ``*_p99_ms``) that the
    summary's sample cannot carry: ``n`` values, fewer than the ``need`` whose slowest bounds that percentile at
    ``TAIL_LEVEL`` (45 for a P95 at 90 %, :func:`inferopt.slo.tail_samples_needed`). None when the value may be
    shown: not a tail column, enough values, or a row that does not say its sample size (a model's prediction).

    The one rule every table (:func:`tail_cell`) and figure (:mod:`inferopt.bench.plots`) of the course applies."""
    m = re.fullmatch(r"([a-z0-9]+)_p(\d+)_ms", column)
    if not m or int(m.group(2)) not in TAIL_PERCENTILES:
        return None
    n, need = sample_size(summary, m.group(1)), tail_samples_needed(int(m.group(2)))
    return (n, need) if n is not None and n < need else None


def tail_cell(summary: dict, column: str) -> str | None:
    """What a table shows in place of a tail percentile column that its sample cannot carry (:func:`tail_withheld`):
    ``"n<45"`` for a P95 of fewer than 45 values; None when the value may be shown."""
    held = tail_withheld(summary, column)
    return None if held is None else f"n<{held[1]}"


def table(summaries, columns=None) -> str:
    """A fixed-width text table of summaries (one row each), for the CLI and notebooks.

    A tail percentile (P90, P95, P99) is printed only where the row's sample can carry it: a P95 from fewer
    than 45 requests prints as ``n<45`` (:func:`tail_cell`); show the mean or the slowest request instead."""
    columns = columns or ["concurrency", "completed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms",
                          "tpot_p95_ms", "itl_p99_ms", "e2e_p95_ms", "output_throughput_tok_s", "goodput_rps"]
    columns = [c for c in columns if any(c in s for s in summaries)]
    rows = [[tail_cell(s, c) or _cell(s.get(c)) if c in s else _cell(None) for c in columns] for s in summaries]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.1f}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)
