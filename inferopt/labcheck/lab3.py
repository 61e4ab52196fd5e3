"""Lab 3 checks: the plan's flags for the CPU engine, TTFT/TPOT from timestamps, /metrics, the SLO
verdict. All four are checked offline on cases made up at check time; the live cells run only
after they pass (``ready_for_engine``)."""
from __future__ import annotations

import contextlib
import io
import time

from inferopt import assets
from inferopt.bench.metrics import SLO
from inferopt.labcheck import (
    CheckFailed,
    NotDone,
    call,
    call_void,
    counted,
    forbid,
    is_real,
    need,
    need_callable,
    not_a_number,
    passed,
    quiet,
    ratio_hint,
    rng,
)
from inferopt.labcheck import _references as _ref

DROP, SCALE = _ref.DROP, _ref.SCALE


def random_flags(r):
    pool = [("--tensor-parallel-size", str(r.choice([2, 4, 8]))),
            ("--gpu-memory-utilization", r.choice(["0.85", "0.9", "0.92", "0.95"])),
            ("--port", str(r.randint(8000, 9999))), ("--kv-cache-dtype", "fp8"),
            ("--enable-prefix-caching", None), ("--enable-chunked-prefill", None),
            ("--max-num-batched-tokens", str(r.choice([4096, 8192, 16384]))),
            ("--max-num-seqs", str(r.choice([64, 128, 256, 512]))), ("--max-model-len", str(r.choice([4096, 8192]))),
            ("--disable-log-requests", None), ("--swap-space", str(r.randint(1, 16))),
            ("--served-model-name", r.choice(["chat", "llama3-70b"]))]
    chosen = r.sample(pool, r.randint(3, len(pool)))
    return [x for f, v in chosen for x in ((f,) if v is None else (f, v))]


def _flag_hint(flags, got, want):
    got = list(got) if isinstance(got, (list, tuple)) else got
    if not isinstance(got, list):
        return "return a list of strings"
    for f in DROP:
        if f in flags and f in got:
            return f"{f} should be dropped (with its value)"
    for i, f in enumerate(flags):
        if f in DROP and i + 1 < len(flags) and not flags[i + 1].startswith("--") and flags[i + 1] in got \
                and flags[i + 1] not in want:
            return f"you dropped {f} but kept its value: a flag's value is the next list item"
    kept = [x for x in want if x.startswith("--")]
    for f in kept:
        if f not in got:
            return f"{f} was dropped but should be kept"
    for f, v in SCALE.items():
        if f in got and got.index(f) + 1 < len(got) and got[got.index(f) + 1] != v:
            return f"{f} keeps the plan's value; scale it for the CPU engine as the task says"
    if sorted(got) == sorted(want):
        return "the flags are right but in a different order: keep the order of the flags you keep"
    return "compare your list with the rules of the task, flag by flag"


PARSE_FORBIDDEN = [("inferopt.bench.experiments", "parse_metrics"), ("inferopt.monitoring.metrics_parse", "parse_metrics"),
                   ("inferopt.monitoring.metrics_parse", "MetricsSnapshot.value")]
SLO_FORBIDDEN = [("inferopt.bench.metrics", "SLO.violations"), ("inferopt.bench.metrics", "SLO.summary_meets")]


@counted
def task1(ns: dict, n_cases: int = 200, seed=None) -> None:
    task = "Task 1"
    cpu_flags = need_callable(ns, task, "cpu_flags")
    r = rng(seed)
    for _ in range(n_cases):
        flags = random_flags(r)
        want = _ref.ref_cpu_flags(flags)
        with quiet():
            got = call(task, cpu_flags, list(flags))
        if list(got) != want if isinstance(got, (list, tuple)) else True:
            raise CheckFailed(f"{task}: cpu_flags({flags}) is wrong on a list the check made up: "
                              + _flag_hint(flags, got, want))
    passed(f"Task 1 passes: cpu_flags is right on {n_cases} flag lists made up just now")


@counted
def task2(ns: dict, n_cases: int = 200, seed=None) -> None:
    task = "Task 2"
    on_token, live_stats, stamps = need(ns, task, "on_token", "live_stats", "stamps")
    need_callable(ns, task, "on_token", "live_stats")
    saved = list(stamps)
    stamps.clear()
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            for piece in ("Pa", "ris", "."):
                before = time.perf_counter()
                call_void(task, on_token, piece)
                after = time.perf_counter()
                if not stamps or not (before <= stamps[-1] <= after):
                    raise CheckFailed(f"{task}: on_token should append time.perf_counter() to `stamps` "
                                      "when a piece arrives")
        if len(stamps) != 3:
            raise CheckFailed(f"{task}: on_token should append exactly one stamp per piece")
        if "Paris." not in buf.getvalue():
            raise CheckFailed(f"{task}: on_token should print each piece as it arrives (print(piece, end=''))")
    finally:
        stamps[:] = saved
    r = rng(seed)
    for _ in range(n_cases):
        t0 = r.uniform(1e3, 1e5)
        k = r.randint(2, 60)
        first = t0 + r.uniform(0.02, 3.0)
        stamps_case = [first]
        for _ in range(k - 1):
            stamps_case.append(stamps_case[-1] + r.uniform(0.005, 0.3))
        n_tokens = k + r.choice([0, 0, r.randint(1, 20)])  # a chunk may carry several tokens
        want_ttft, want_tpot = _ref.ref_live_stats(t0, stamps_case, n_tokens)
        with quiet():
            got = call(task, live_stats, t0, list(stamps_case), n_tokens)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise CheckFailed(f"{task}: live_stats should return a pair (ttft_ms, tpot_ms)")
        ttft, tpot = got
        for what, v in (("TTFT", ttft), ("TPOT", tpot)):
            if not is_real(v):
                raise not_a_number(task, f"the {what} live_stats returns", v)
        if abs(ttft - want_ttft) > 1e-6 * max(1, want_ttft):
            raise CheckFailed(f"{task}: TTFT is wrong on stamps the check made up: "
                              + ratio_hint(ttft, want_ttft, "your TTFT", {1000: "report milliseconds, not seconds"}))
        if abs(tpot - want_tpot) > 1e-6 * max(1, want_tpot):
            gaps = 1000 * (stamps_case[-1] - stamps_case[0])
            if abs(tpot - gaps / (len(stamps_case) - 1)) < 1e-6 * max(1, want_tpot) and len(stamps_case) != n_tokens:
                hint = "divide by n_tokens - 1 (the server's token count), not by the number of chunks"
            elif n_tokens > 1 and abs(tpot - gaps / n_tokens) < 1e-6 * max(1, want_tpot):
                hint = "n tokens leave n - 1 gaps after the first one: divide by n_tokens - 1"
            elif abs(tpot - 1000 * (stamps_case[-1] - t0) / (n_tokens - 1)) < 1e-6 * max(1, want_tpot):
                hint = "TPOT starts at the first token, not at the send time t0"
            else:
                hint = ratio_hint(tpot, want_tpot, "your TPOT", {1000: "report milliseconds, not seconds"})
            raise CheckFailed(f"{task}: TPOT is wrong on stamps the check made up: {hint}")
    passed(f"Task 2 passes: on_token records and prints; live_stats is right on {n_cases} timelines made up just now")


def random_exposition(r):
    names = ["vllm:num_requests_running", "vllm:num_requests_running_max", "vllm:prompt_tokens",
             "vllm:prompt_tokens_total", "vllm:e2e_request_latency_seconds_count",
             "vllm:e2e_request_latency_seconds_sum", "vllm:kv_cache_usage_perc"]
    lines = []
    for n in r.sample(names, len(names)):
        lines.append(f"# HELP {n} made up for the check")
        lines.append(f"# TYPE {n} gauge")
        for _ in range(r.randint(1, 4)):
            value = r.choice([str(r.randint(0, 5000)), f"{r.uniform(0, 100):.4f}", f"{r.uniform(1, 9):.3e}"])
            if r.random() < 0.25:
                lines.append(f"{n} {value}")
            else:
                model = r.choice(["m a", "smol", "b"])  # label values may hold spaces
                lines.append(f'{n}{{engine="{r.randint(0, 3)}",model_name="{model}"}} {value}')
    return "\n".join(lines) + "\n", names


@counted
def task3(ns: dict, n_cases: int = 40, seed=None) -> None:
    task = "Task 3"
    metric_value = need_callable(ns, task, "metric_value")
    r = rng(seed)
    sample = assets.text("monitoring/vllm-0.32-metrics-sample.txt")
    cases = [(sample, ["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total",
                       "vllm:time_to_first_token_seconds_count"])]
    cases += [random_exposition(r) for _ in range(n_cases)]
    for text, names in cases:
        for name in names:
            want = _ref.ref_metric_value(text, name)
            with forbid(ns, PARSE_FORBIDDEN), quiet():
                got = call(task, metric_value, text, name)
            if not is_real(got):
                raise not_a_number(task, f"metric_value(text, {name!r})", got)
            if abs(got - want) > 1e-9 * max(1, abs(want)):
                if not text.startswith("# HELP") or text is sample:
                    where = "on a stored vLLM 0.32 /metrics page"
                else:
                    where = "on a /metrics text the check made up"
                raise CheckFailed(f"{task}: metric_value(text, {name!r}) is wrong {where}: match the name exactly "
                                  "(vllm:x must not pick up vllm:x_total or vllm:x_max), add up every label set, "
                                  "skip # lines; label values may contain spaces, the value is after the last one")
    passed(f"Task 3 passes: metric_value is right on a real /metrics page and {n_cases} made up just now")


@counted
def task4(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Task 4"
    slo_verdict = need_callable(ns, task, "slo_verdict")
    r = rng(seed)
    edges = [1.0, 1.0 + 1e-9, 1.0 - 1e-9]  # on the limit (meets it), a hair over (fails), a hair under
    for i in range(n_cases):
        p = r.choice([90, 95, 99])
        slo = SLO(ttft_ms=r.choice([300, 500, 800, 2000]), tpot_ms=r.choice([40, 50, 120, 250]), percentile=p)
        summary = {}
        for m, limit in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms)):
            for q in (50, 90, 95, 99):
                summary[f"{m}_p{q}_ms"] = limit * r.uniform(0.3, 1.8)
            summary[f"{m}_p{p}_ms"] = r.choice([limit, limit * r.uniform(0.3, 1.8)])  # the boundary too
        if i < 2 * len(edges):  # every run: each metric on, just over and just under its limit
            m = ("ttft", "tpot")[i % 2]
            summary[f"{m}_p{p}_ms"] = getattr(slo, f"{m}_ms") * edges[i // 2]
        with forbid(ns, SLO_FORBIDDEN), quiet():
            got = call(task, slo_verdict, dict(summary), slo)
        if not isinstance(got, dict) or set(got) != {"ttft", "tpot"}:
            raise CheckFailed(f"{task}: slo_verdict should return a dict with the keys 'ttft' and 'tpot'")
        failing = {m for m in ("ttft", "tpot") if summary[f"{m}_p{p}_ms"] > getattr(slo, f"{m}_ms")}
        for m, limit in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms)):
            value = summary[f"{m}_p{p}_ms"]
            item = got[m]
            if not (isinstance(item, (tuple, list)) and len(item) == 3):
                raise CheckFailed(f"{task}: each verdict should be a triple (value_ms, limit_ms, ok)")
            gv, gl, ok = item
            if gv != value:
                hint = (f"use the key of the SLO's percentile (here P{p}: {m}_p{p}_ms), not a fixed one"
                        if p != 95 and gv == summary.get(f"{m}_p95_ms") else f"read {m}_p{{percentile}}_ms of the summary")
                raise CheckFailed(f"{task}: the {m} value is wrong on a case the check made up: {hint}")
            if gl != limit:
                raise CheckFailed(f"{task}: the {m} limit is wrong: take it from the SLO (slo.{m}_ms)")
            if bool(ok) != (m not in failing):
                hint = ("a value exactly at the limit meets the SLO (value <= limit)" if value == limit
                        else "ok means value <= limit")
                raise CheckFailed(f"{task}: the {m} verdict is wrong on a case the check made up: {hint}")
    passed(f"Task 4 passes: slo_verdict agrees with the course's SLO check on {n_cases} cases made up just now")


def ready_for_engine(ns: dict) -> None:
    """One line, no engine, unless tasks 1-4 pass (run again here, quietly)."""
    for check in (task1, task2, task3, task4):
        try:
            with quiet():
                check(ns, n_cases=20)
        except CheckFailed as exc:
            raise NotDone(f"the engine starts once tasks 1-4 pass ({exc})") from None


def check_live(ns: dict, answer: dict) -> None:
    """The learner's live TTFT/TPOT come from their own stamps by the formula of task 2."""
    t0, stamps, ttft_ms, tpot_ms = need(ns, "Task 2 (live)", "t0", "stamps", "ttft_ms", "tpot_ms")
    if len(stamps) < 2:
        raise CheckFailed("Task 2 (live): on_token recorded fewer than two pieces; was it passed to stream_chat?")
    want_ttft, want_tpot = _ref.ref_live_stats(t0, stamps, answer["output_tokens"])
    if abs(ttft_ms - want_ttft) > 1e-6 * want_ttft or abs(tpot_ms - want_tpot) > 1e-6 * want_tpot:
        raise CheckFailed("Task 2 (live): ttft_ms/tpot_ms do not follow from your stamps; recompute them with live_stats")
    if abs(ttft_ms - 1000 * answer["ttft_s"]) > 50:
        raise CheckFailed("Task 2 (live): your first stamp is more than 50 ms from the helper's first-token time: "
                          "does on_token stamp before it prints?")


__all__ = ["check_live", "forbid", "ready_for_engine", "task1", "task2", "task3", "task4"]
