"""The performance model against measured vLLM runs at load: TTFT and TPOT error, fitted rows and held-out rows.

``assets/performance/measured_runs_h200.csv`` (source and columns: ``measured_runs_h200.md`` beside it): 81
closed-loop runs of vLLM on one to eight H200 GPUs at 4 to 128 requests in flight, from the accuracy sample
of NVIDIA's AIConfigurator (github.com/ai-dynamo/aiconfigurator, ``systems/silicon_sample.csv``,
Apache-2.0). Each row is predicted with :func:`inferopt.performance.predict.predict` (the run's model,
GPU, TP, FP8 weights, prompt / output tokens, concurrency, vLLM's defaults for the rest).

Fit and check: the rows of :func:`is_fit` (Llama-3.1-70B at TP 2 and 8) fix one figure, the run length of
a closed loop when the run does not state it (``predict.PROMPTS_PER_CONCURRENCY``: how many prompts per
request in flight, which sets the weight of the first burst in the means); every other row (70B at TP 1
and 4, and Llama-3.1-8B at every TP) is a prediction. The compute efficiency stays the profile's stated
0.6: these rows cannot tell it from 0.5 (held-out TTFT median error 20.7 % at 0.5, 22.1 % at 0.6; TPOT
22.8 % and 23.0 %). ``python -m inferopt.performance.measured [--fit] [--lockstep]`` prints the table (with
``--fit`` the grid search first; with ``--lockstep`` the mechanism before the fix);
tests/test_performance_measured.py recomputes the errors.
"""
from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from dataclasses import dataclass

from inferopt import assets
from inferopt.performance import predict as PR
from inferopt.performance import profiles as P

CSV = "performance/measured_runs_h200.csv"
# the shipped config with each run's architecture: Llama-3.1-70B has Llama-3-70B's shapes (its longer RoPE
# context changes no weight or KV size); Llama-3.1-8B-Instruct-FP8 has Llama-3.1-8B's, with FP8 weights
MODELS = {"meta-llama/Llama-3.1-70B": "llama-3-70b", "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b"}
GPUS = {"H200-SXM-141GB": "H200-SXM-141GB"}
FIT_GRID = {"prompts_per_concurrency": [2, 5, 10, 20]}


@dataclass(frozen=True)
class Run:
    model: str
    gpu: str
    weights: str
    tp: int
    input_tokens: int
    output_tokens: int
    concurrency: int
    ttft_ms: float
    tpot_ms: float

    @property
    def label(self) -> str:
        return f"{self.model.split('/')[-1]} tp{self.tp} {self.input_tokens}/{self.output_tokens} c{self.concurrency}"


@dataclass(frozen=True)
class RowError:
    run: Run
    fit: bool
    ttft_ms: float
    tpot_ms: float
    binding_limit: str

    @property
    def ttft_err(self) -> float:
        return abs(self.ttft_ms - self.run.ttft_ms) / self.run.ttft_ms

    @property
    def tpot_err(self) -> float:
        return abs(self.tpot_ms - self.run.tpot_ms) / self.run.tpot_ms


def is_fit(run: Run) -> bool:
    """The rule that picks the rows the factors are fitted on: Llama-3.1-70B at TP 2 and TP 8."""
    return run.model == "meta-llama/Llama-3.1-70B" and run.tp in (2, 8)


def runs() -> list:
    """The measured runs of ``assets/performance/measured_runs_h200.csv``."""
    with open(assets.path(CSV), newline="") as f:
        return [Run(r["model"], r["gpu"], r["weights"], int(r["tp"]), int(r["input_tokens"]), int(r["output_tokens"]),
                    int(r["concurrency"]), float(r["ttft_mean_ms"]), float(r["tpot_mean_ms"])) for r in csv.DictReader(f)]


def predict_run(run: Run, profile: P.Profile | None = None, *, prompts_per_concurrency: int | None = None,
                spread: bool = True) -> PR.Prediction:
    """The model's prediction for one measured run (vLLM's defaults for everything the row does not give)."""
    k = prompts_per_concurrency or PR.PROMPTS_PER_CONCURRENCY
    return PR.predict(MODELS[run.model], GPUS[run.gpu], tp=run.tp, weights=run.weights,
                      input_tokens=run.input_tokens, output_tokens=run.output_tokens, concurrency=run.concurrency,
                      num_requests=k * run.concurrency if spread else None, profile=profile, spread=spread)


def errors(profile: P.Profile | None = None, *, rows: list | None = None, only_fit: bool = False,
           prompts_per_concurrency: int | None = None, spread: bool = True) -> list:
    """One :class:`RowError` per run (``only_fit``: the fit rows only)."""
    out = []
    for run in rows or runs():
        if only_fit and not is_fit(run):
            continue
        p = predict_run(run, profile, prompts_per_concurrency=prompts_per_concurrency, spread=spread)
        out.append(RowError(run, is_fit(run), p.ttft_ms, p.tpot_ms, p.binding_limit))
    return out


def summary(errs: list) -> dict:
    """Median and mean relative error of TTFT and TPOT, for the fitted rows, the held-out rows and all."""
    out = {}
    for part, sel in (("fitted", [e for e in errs if e.fit]), ("held_out", [e for e in errs if not e.fit]),
                      ("all", errs)):
        if sel:
            out[part] = {"n": len(sel),
                         **{f"{m}_{s}": round(f([getattr(e, f"{m}_err") for e in sel]), 3)
                            for m in ("ttft", "tpot") for s, f in (("median", statistics.median),
                                                                   ("mean", statistics.mean))}}
    return out


def table(errs: list) -> str:
    lines = [f"{'run':44s} {'fit':4s} {'TTFT meas/pred':>18s} {'err':>6s}  {'TPOT meas/pred':>15s} {'err':>6s}  limit"]
    for e in errs:
        lines.append(f"{e.run.label:44s} {'yes' if e.fit else 'no':4s} {e.run.ttft_ms:8.1f}/{e.ttft_ms:9.1f} "
                     f"{e.ttft_err:6.0%}  {e.run.tpot_ms:6.2f}/{e.tpot_ms:8.2f} {e.tpot_err:6.0%}  {e.binding_limit}")
    for part, s in summary(errs).items():
        lines.append(f"{part:9s} ({s['n']:2d} runs): TTFT median {s['ttft_median']:.1%}, mean {s['ttft_mean']:.1%}; "
                     f"TPOT median {s['tpot_median']:.1%}, mean {s['tpot_mean']:.1%}")
    return "\n".join(lines)


def _score(errs: list) -> float:
    """Mean |log(predicted / measured)| over TTFT and TPOT (what the fit minimises)."""
    return statistics.mean(abs(math.log(x)) for e in errs
                           for x in (e.ttft_ms / e.run.ttft_ms, e.tpot_ms / e.run.tpot_ms))


def fit(profile: P.Profile | None = None) -> int:
    """The prompts per concurrency on ``FIT_GRID`` that fit the :func:`is_fit` rows best."""
    rows = [r for r in runs() if is_fit(r)]
    scores = {k: _score(errors(profile, rows=rows, prompts_per_concurrency=k))
              for k in FIT_GRID["prompts_per_concurrency"]}
    return min(scores, key=scores.get)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.performance.measured")
    ap.add_argument("--fit", action="store_true", help="search FIT_GRID on the fit rows and print the best")
    ap.add_argument("--lockstep", action="store_true", help="the model before: every request in one burst's lockstep")
    a = ap.parse_args(argv)
    if a.fit:
        print(f"best on the fit rows: {fit()} prompts per request in flight "
              f"(stored: predict.PROMPTS_PER_CONCURRENCY = {PR.PROMPTS_PER_CONCURRENCY})")
    print(table(errors(spread=not a.lockstep)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
