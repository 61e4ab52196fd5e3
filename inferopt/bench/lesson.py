"""The SLOs of the live CPU lessons, calibrated on the learner's own machine.

``assets/lesson_slos.yaml`` says how: measure idle TTFT and TPOT (one request at a time) with the
lesson's prompt, then the lesson SLO is a fixed multiple of each. Every live notebook uses this, so
"meets the SLO" means the same on a slow laptop, a fast one and a GPU::

    cal = calibrate(srv, tok, input_tokens=200, output_tokens=32)
    slo = lesson_slo(cal)          # SLO(ttft_ms=3 x idle TTFT P50, tpot_ms=2 x idle TPOT P50, P95)
    print(cal.describe(), slo)
"""
from __future__ import annotations

from dataclasses import dataclass

from inferopt import assets
from inferopt.bench import loadgen
from inferopt.bench.metrics import SLO
from inferopt.bench.workload import Workload, build_requests, load_tokenizer
from inferopt.errors import CourseError

ASSET = "lesson_slos.yaml"   # checked against assets/schemas/lesson_slos.schema.json


def settings() -> dict:
    """The calibration workload and the SLO factors from ``assets/lesson_slos.yaml``."""
    return assets.load(ASSET)


@dataclass(frozen=True)
class Calibration:
    """Idle latencies of this machine for one workload (medians of ``n`` requests, one at a time)."""
    ttft_ms: float
    tpot_ms: float
    n: int
    input_tokens: int
    output_tokens: int

    def describe(self) -> str:
        return (f"idle on this machine ({self.n} requests one at a time, {self.input_tokens} tokens in, "
                f"{self.output_tokens} out): TTFT P50 {self.ttft_ms:.0f} ms, TPOT P50 {self.tpot_ms:.1f} ms")


def calibrate(srv_or_endpoint, tokenizer=None, *, input_tokens: int | None = None, output_tokens: int | None = None,
              num_requests: int | None = None, seed: int = 90_001, progress: bool = False) -> Calibration:
    """Measure idle TTFT and TPOT on a running engine (fresh random prompts, so no prefix-cache hits)."""
    cfg = settings()["calibration"]
    n = num_requests or cfg["num_requests"]
    wl = Workload(input_tokens=input_tokens or cfg["input_tokens"], output_tokens=output_tokens or cfg["output_tokens"],
                  num_requests=n, seed=seed)
    ep = (srv_or_endpoint if isinstance(srv_or_endpoint, loadgen.Endpoint)
          else loadgen.Endpoint.from_server(srv_or_endpoint))
    reqs = build_requests(wl, tokenizer or load_tokenizer())
    res = loadgen.run(ep, reqs, concurrency=cfg["concurrency"], warmup=1, progress=progress, desc="calibration")
    s = res.summary()
    if s["completed"] < n:
        raise CourseError(f"calibration: only {s['completed']} of {n} requests completed; is the engine healthy?")
    return Calibration(ttft_ms=s["ttft_p50_ms"], tpot_ms=s["tpot_p50_ms"], n=s["completed"],
                       input_tokens=wl.input_tokens, output_tokens=wl.output_tokens)


def lesson_slo(cal: Calibration) -> SLO:
    """The lesson SLO for this machine: the factors in ``assets/lesson_slos.yaml`` times idle latency."""
    f = settings()["slo"]
    return SLO(ttft_ms=round(f["ttft_factor"] * cal.ttft_ms, 1), tpot_ms=round(f["tpot_factor"] * cal.tpot_ms, 1),
               percentile=f["percentile"])
