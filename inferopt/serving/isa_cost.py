"""What the CPU engine's instruction set costs in speed, measured on this machine (issue #33).

``python -m inferopt isa-cost`` starts the CPU engine once as the machine is (native) and once limited to AVX2
(``INFEROPT_CPU_ISA=avx2``, :mod:`inferopt.serving.cpu_isa`), one after the other, never both at once (they would
share the cores), and on each measures the lesson calibration (:func:`inferopt.bench.lesson.calibrate`: idle
requests one at a time, fresh prompts, medians): TTFT (the prompt's prefill) and TPOT (one decode step). Each
engine's row names the vLLM kernel library its processes mapped (read from ``/proc``), so the record shows which
code ran. ``--rounds 2`` alternates native, avx2, native, avx2 and takes the median per side: a machine whose
speed drifts (a shared host) then weighs on both sides alike.

It changes which code runs, not the machine: the ratio is what the ISA costs here, not what a real AVX2-only
machine (older cores, other clocks, other neighbours) would measure.
"""
from __future__ import annotations

import json
import statistics

from inferopt.errors import CourseError
from inferopt.i18n import pad, tr
from inferopt.serving import cpu_isa

SIDES = ("native", "avx2")


def _has_avx512() -> bool:
    import torch

    return bool(torch.cpu._is_avx512_supported())


def measure_side(isa: str, *, requests: int, input_tokens: int, output_tokens: int, tokenizer=None) -> dict:
    """One engine limited to ``isa`` ('native' or 'avx2'): its ready time, kernel library and idle latencies."""
    from inferopt.bench.lesson import calibrate
    from inferopt.serving.engine import VLLMServer

    with VLLMServer(own=True, quiet=True, kind="cpu", max_model_len=512, kv_cache_gib=0.25,
                    env={cpu_isa.ENV: isa}) as srv:
        libs = sorted(cpu_isa.kernel_libs(srv.pid)) if srv.pid else []
        cal = calibrate(srv, tokenizer, input_tokens=input_tokens, output_tokens=output_tokens,
                        num_requests=requests)
        ready = srv.startup_seconds
    return {"isa": isa, "kernels": libs, "ready_s": round(ready, 1), "ttft_ms": round(cal.ttft_ms, 1),
            "tpot_ms": round(cal.tpot_ms, 2), "requests": cal.n}


def summarize(rows: list[dict]) -> dict:
    """Per side, the median of its rounds; and avx2 / native for TTFT, TPOT and ready time."""
    out: dict = {"rounds": rows}
    for side in SIDES:
        mine = [r for r in rows if r["isa"] == side]
        if not mine:
            raise CourseError(f"no {side} round in the record; run both sides")
        out[side] = {k: round(statistics.median(r[k] for r in mine), 2) for k in ("ready_s", "ttft_ms", "tpot_ms")}
    out["ratio"] = {k: round(out["avx2"][k] / out["native"][k], 2) for k in ("ready_s", "ttft_ms", "tpot_ms")}
    return out


def check_args(rounds: int, requests: int, input_tokens: int, output_tokens: int) -> None:
    """Refuse, in one line, a measurement that cannot give the figure."""
    if rounds < 1:
        raise CourseError(f"--rounds {rounds}: give 1 or more (each round starts two engines, ~1.5 min)")
    if requests < 3:
        raise CourseError(f"--requests {requests}: give 3 or more per engine (the figure is their median)")
    if input_tokens < 1 or output_tokens < 2 or input_tokens + output_tokens > 512:
        raise CourseError(f"--input-tokens {input_tokens} --output-tokens {output_tokens}: give at least 1 in "
                          "and 2 out (TPOT needs two tokens), together at most 512 (the engines' max_model_len)")


def measure(*, rounds: int = 1, requests: int = 8, input_tokens: int = 200, output_tokens: int = 48,
            progress=print) -> dict:
    """Alternate native and avx2 engines ``rounds`` times; return the rows, the medians and the ratios."""
    check_args(rounds, requests, input_tokens, output_tokens)
    from inferopt.bench.workload import load_tokenizer

    tok = load_tokenizer()
    rows = []
    for i in range(rounds):
        for side in SIDES:
            progress(tr("round {i}/{rounds}: {side} engine, {requests} idle requests ({inp} tokens in, {out} out) ...",
                        i=i + 1, rounds=rounds, side=side, requests=requests, inp=input_tokens, out=output_tokens))
            row = measure_side(side, requests=requests, input_tokens=input_tokens, output_tokens=output_tokens,
                               tokenizer=tok)
            progress("  " + tr("{side}: kernels {libs}; ready {ready} s, TTFT P50 {ttft} ms, TPOT P50 {tpot} ms",
                               side=side, libs=", ".join(row["kernels"]) or "?", ready=row["ready_s"],
                               ttft=row["ttft_ms"], tpot=row["tpot_ms"]))
            rows.append(row)
    out = summarize(rows)
    out["avx512"] = _has_avx512()
    return out


def report(out: dict) -> str:
    """The medians and ratios as a small table, in the edition's language."""
    r = out["ratio"]
    lines = [" " * 8 + pad(tr("ready s"), 9, True) + f"{'TTFT ms':>10}{'TPOT ms':>10}"]
    for side in SIDES:
        s = out[side]
        lines.append(f"{side:8}{s['ready_s']:>9}{s['ttft_ms']:>10}{s['tpot_ms']:>10}")
    lines.append(f"{'avx2/nat':8}{r['ready_s']:>8}x{r['ttft_ms']:>9}x{r['tpot_ms']:>9}x")
    lines.append(tr("medians of idle requests, one at a time, fresh prompts; the engines ran one after the other"))
    return "\n".join(lines)


def add_subcommand(sub) -> None:
    p = sub.add_parser("isa-cost", help="what AVX-512 buys the CPU engine here: native against AVX2-limited")
    p.add_argument("--rounds", type=int, default=1, help="native/avx2 pairs, alternated (default 1)")
    p.add_argument("--requests", type=int, default=8, help="idle requests per engine (default 8)")
    p.add_argument("--input-tokens", type=int, default=200)
    p.add_argument("--output-tokens", type=int, default=48)
    p.add_argument("--json", action="store_true", help="print the record as JSON")

    def run(a) -> int:
        check_args(a.rounds, a.requests, a.input_tokens, a.output_tokens)
        if not _has_avx512():
            print(tr("this machine has no AVX-512: its CPU engine already runs vLLM's AVX2 kernels, so there is "
                     "nothing to compare; run this on an AVX-512 machine"))
            return 0
        out = measure(rounds=a.rounds, requests=a.requests, input_tokens=a.input_tokens,
                      output_tokens=a.output_tokens)
        print(json.dumps(out) if a.json else report(out))
        return 0

    p.set_defaults(func=run)
