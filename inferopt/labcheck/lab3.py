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
from inferopt.labcheck.references import REFS as _ref


def random_flags(r):
    pool = [("--tensor-parallel-size", str(r.choice([2, 4, 8]))),
            ("--gpu-memory-utilization", r.choice(["0.85", "0.9", "0.92", "0.95"])),
            ("--port", str(r.randint(8000, 9999))), ("--kv-cache-dtype", "fp8"),
            ("--dtype", r.choice(["bfloat16", "float16"])),
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
    drop, scale = _ref.DROP, _ref.SCALE
    for f in drop:
        if f in flags and f in got:
            return f"{f} should be dropped (with its value)"
    for i, f in enumerate(flags):
        if f in drop and i + 1 < len(flags) and not flags[i + 1].startswith("--") and flags[i + 1] in got \
                and flags[i + 1] not in want:
            return f"you dropped {f} but kept its value: a flag's value is the next list item"
    kept = [x for x in want if x.startswith("--")]
    for f in kept:
        if f not in got:
            return f"{f} was dropped but should be kept"
    for f, v in scale.items():
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


VERDICT_FORBIDDEN = SLO_FORBIDDEN + [("inferopt.bench.stats", f) for f in (
    "slo_verdict", "percentile_bounds", "percentile_ci", "upper_rank", "lower_rank", "binom_cdf",
    "min_samples_for_upper_bound", "describe_ci", "describe_tail")] + [("inferopt.bench.metrics", "RequestRecord.tpot_s")]
BASES = ("lower bound", "upper bound", "maximum")
FAILED_HINT = ("a failed request (its 'error' is set) has no latency to count: leave it out of both metrics; its "
               "partial times pull the bounds and the maximum up")
LEVELS, QS = (0.8, 0.9, 0.95), (90, 95, 99)
MAX_N = 150  # the learner's binom_cdf is summed afresh for every rank: keep one check to seconds


def need_for_bound(q: int, level: float) -> int:
    """The fewest requests whose maximum is a ``level`` upper bound of the P_q (exact: the smallest n with a rank)."""
    n = 1
    while _ref.ref_ranks(n, q, level)[1] is None:
        n += 1
    return n


def verdict_records(r, n: int, failed: int = 0) -> list[dict]:
    """``n`` completed requests and ``failed`` failed ones. Times are multiples of 1/4096 s, so TTFT and TPOT in ms
    come out exactly the same whatever the order of the learner's arithmetic (a limit on a value stays on it)."""
    rows = []
    for i in range(n + failed):
        bad = i >= n
        ttft = max(20, round(1024 * (r.uniform(10, 60) if bad else 0.15 * r.lognormvariate(0, 0.6)))) / 1024
        k = r.randint(2, 40) if bad or i == 0 or r.random() > 0.05 else 1  # a one-token answer has no TPOT
        gap = max(20, round(4096 * (r.uniform(1, 2) if bad else 0.04 * r.lognormvariate(0, 0.4)))) / 4096
        rows.append({"output_tokens": k, "ttft_s": ttft, "e2e_s": ttft + (k - 1) * gap, "prompt_tokens": 200,
                     "error": r.choice(["timeout after 60 s", "ClientPayloadError: connection reset"]) if bad else None})
    r.shuffle(rows)
    return rows


def _limit(r, values, q, level, force=None):
    v, n = sorted(values), len(values)
    s, rk = _ref.ref_ranks(n, q, level)
    idx = [i for i in {(s or 0) - 1, (s or 0) - 2, (rk or 0) - 1, (rk or 0) - 2, rk or -1, n - 1, n - 2} if 0 <= i < n]
    if force is not None:
        idx = [force % n]
    if force is None and r.random() < 0.15:
        return v[n // 2] * r.uniform(0.5, 3)
    i = r.choice(idx)
    if force is None and r.random() < 0.3 and i + 1 < n and v[i + 1] > v[i]:
        return (v[i] + v[i + 1]) / 2
    return v[i]  # on a value: a value at the limit meets it


def verdict_case(r, i: int):
    """(records, slo, level): n below, near and above the size a P_q bound needs; the first cases of every run put a
    limit on the slowest completed request with failed ones present (counting them flips the verdict)."""
    q, level = r.choice(QS), r.choice(LEVELS)
    need_n = need_for_bound(q, level)
    kind = "small" if i < 4 or need_n + 2 > MAX_N else r.choice(["small", "near", "large"])
    n = {"small": lambda: r.randint(2, max(2, min(MAX_N, need_n - 1))), "near": lambda: max(2, need_n + r.randint(-2, 2)),
         "large": lambda: r.randint(need_n, min(MAX_N, 3 * need_n))}[kind]()
    failed = r.randint(1, 4) if i < 4 or r.random() < 0.5 else 0
    rows = verdict_records(r, n, failed)
    vals = _ref.ref_verdict_values(rows)
    lim = {m: _limit(r, vals[m], q, level, force=-1 if i < 4 and (i % 2 == ("ttft", "tpot").index(m)) else None)
           for m in ("ttft", "tpot")}
    return rows, SLO(ttft_ms=lim["ttft"], tpot_ms=lim["tpot"], percentile=q), level


def _same(a, b) -> bool:
    return (a[0] is None) == (b[0] is None) and (a[0] is None or bool(a[0]) == bool(b[0])) and a[1] == b[1] \
        and is_real(a[2]) and abs(a[2] - b[2]) <= 1e-9 * max(1.0, abs(b[2]))


# the usual mistakes, as variants of the reference: (keywords of ref_slo_verdict, hint). A hint is given when the
# learner's function agreed with that variant on every case the check tried (so a coincidence on one case does not
# name the wrong mistake); else the hint says what differs on the first wrong case.
VARIANTS = [
    ({"with_failed": True}, FAILED_HINT),
    ({"with_failed": "tpot"}, FAILED_HINT),
    ({"q": 95}, "use the SLO's percentile (p = slo.percentile / 100), not a fixed 95"),
    ({"level": 0.9}, "use the confidence you are given (the argument `level`), not a fixed one"),
    ({"sample": True}, "the sample percentile of a few requests is no bound of the true one: judge on an order "
                       "statistic whose confidence reaches the level, or on the maximum when none does"),
    ({"sample": True, "strict": True}, "the sample percentile of a few requests is no bound of the true one: judge on "
                                       "an order statistic whose confidence reaches the level, or on the maximum"),
    ({"undecided": False}, "when the upper bound is over the limit and the lower bound is not, the data cannot decide "
                           "at that confidence: ok is None (measure more requests), not False"),
    ({"always_max": True}, "with enough requests a rank below the maximum already bounds the percentile at the "
                           "level: the smallest r with binom_cdf(r - 1, n, p) >= level (and look at the lower bound)"),
    ({"no_lower": True}, "look at the lower bound first: the largest s with 1 - binom_cdf(s - 1, n, p) >= level; when "
                         "the s-th fastest is over the limit, the SLO fails at that confidence, whatever n is"),
    ({"shift": 1}, "a rank is off by one: X_(r) is the r-th fastest, index r - 1 of the sorted values"),
    ({"shift": -1}, "a rank is off by one: X_(r) is the r-th fastest, index r - 1 of the sorted values"),
    ({"strict": True}, "a value exactly at the limit meets it (value <= limit)"),
    ({"ttft_scale": 0.001}, "the records hold seconds; the verdict's values are in milliseconds"),
]


def _variant(rows, slo, level, kw):
    kw = dict(kw)
    return _ref.ref_slo_verdict(rows, slo, kw.pop("level", level), **kw)


def _verdict_hint(rows, slo, level, m, got, want) -> str:
    """What differs on one wrong case, when no usual mistake explains all of the learner's answers."""
    q = slo.percentile
    n, limit = len(_ref.ref_verdict_values(rows)[m]), getattr(slo, f"{m}_ms")
    gb, wb = got[1], want[1]
    if gb != wb:
        if wb == "maximum":
            return (f"with n={n} requests no rank reaches {level:.0%} confidence as an upper bound of the P{q} "
                    "(even the maximum only 1 - p**n): judge on the maximum, and say so with the basis 'maximum'")
        if wb == "upper bound" and gb == "maximum":
            return (f"with n={n} requests a rank below the maximum already bounds the P{q} at {level:.0%}: the "
                    "smallest r with binom_cdf(r - 1, n, p) >= level")
        if wb == "lower bound":
            return ("look at the lower bound first: the largest s with 1 - binom_cdf(s - 1, n, p) >= level; when the "
                    "s-th fastest is over the limit, the SLO fails at that confidence, whatever n is")
        return "a lower bound fails the SLO only when it is over the limit (X_(s) > limit)"
    if not (is_real(got[2]) and abs(got[2] - want[2]) <= 1e-9 * max(1.0, abs(want[2]))):
        return "value_ms is the value the verdict rests on (that bound, or the maximum), in ms: " + ratio_hint(
            got[2], want[2], "yours", {1000: "report milliseconds, not seconds"})
    if want[2] == limit:
        return "a value exactly at the limit meets it (value <= limit)"
    if want[0] is None:
        return ("when the upper bound is over the limit and the lower bound is not, the data cannot decide at "
                "that confidence: ok is None (measure more requests)")
    return "ok: an upper bound (or the maximum) <= limit passes; a lower bound > limit fails"


def _well_formed(task, got):
    if not isinstance(got, dict) or set(got) != {"ttft", "tpot"}:
        raise CheckFailed(f"{task}: slo_verdict should return a dict with the keys 'ttft' and 'tpot'")
    for item in got.values():
        if not (isinstance(item, (tuple, list)) and len(item) == 3):
            raise CheckFailed(f"{task}: each verdict should be a triple (ok, basis, value_ms)")
        if item[1] not in BASES:
            raise CheckFailed(f"{task}: the basis of a verdict is one of {', '.join(map(repr, BASES))}, got {item[1]!r}")
        if item[0] is not None and not isinstance(item[0], (bool, int)) and type(item[0]).__name__ != "bool_":
            raise CheckFailed(f"{task}: ok should be True, False or None, got {type(item[0]).__name__}")


@counted
def task4(ns: dict, n_cases: int = 80, seed=None) -> None:
    task = "Task 4"
    slo_verdict = need_callable(ns, task, "slo_verdict")
    r = rng(seed)
    alive, first, after = list(range(len(VARIANTS))), None, 0
    for i in range(n_cases):
        rows, slo, level = verdict_case(r, i)
        want = _ref.ref_slo_verdict(rows, slo, level)
        with forbid(ns, VERDICT_FORBIDDEN), quiet():
            got = call(task, slo_verdict, [dict(d) for d in rows], slo, level)
        _well_formed(task, got)
        got = {m: tuple(v) for m, v in got.items()}
        alive = [k for k in alive if all(_same(got[m], v) for m, v in _variant(rows, slo, level, VARIANTS[k][0]).items())]
        wrong = [m for m in ("ttft", "tpot") if not _same(got[m], want[m])]
        if wrong and first is None:
            first = (rows, slo, level, wrong[0], got[wrong[0]], want[wrong[0]])
        after += first is not None
        if first is not None and (after > 25 or not alive):
            break
    if first is not None:
        rows, slo, level, m, g, w = first
        n = len(_ref.ref_verdict_values(rows)[m])
        hint = VARIANTS[alive[0]][1] if alive else _verdict_hint(rows, slo, level, m, g, w)
        raise CheckFailed(f"{task}: the {m} verdict is wrong on {len(rows)} records made up by the check "
                          f"(P{slo.percentile}, level {level}, {n} completed): {hint}")
    passed(f"Task 4 passes: slo_verdict judges as the course's order-statistic rule does on {n_cases} runs made up "
           "just now (failed requests, few and many requests among them)")


def ready_for_engine(ns: dict) -> None:
    """One line, no engine, unless tasks 1-4 pass (run again here, quietly)."""
    for check in (task1, task2, task3, task4):
        try:
            with quiet():
                check(ns, n_cases=20)
        except CheckFailed as exc:
            raise NotDone(f"the engine starts once tasks 1-4 pass ({exc})") from None


def check_live(ns: dict, answer: dict) -> None:
    """The learner's live TTFT/TPOT come from their own stamps by the formula of task 2, their ``t0`` is taken
    just before the call, and their first stamp at the first piece. Judged on the helper's own instants
    (``answer['called_at']``, ``['first_token_at']``, one clock with the learner's), each against a time of the
    same run, never against a fixed number of ms: the helper's health check before sending took over 50 ms on a
    loaded 2-core machine, so a learner's right TTFT can differ from the helper's by that much."""
    t0, stamps, ttft_ms, tpot_ms = need(ns, "Task 2 (live)", "t0", "stamps", "ttft_ms", "tpot_ms")
    if len(stamps) < 2:
        raise CheckFailed("Task 2 (live): on_token recorded fewer than two pieces; was it passed to stream_chat?")
    want_ttft, want_tpot = _ref.ref_live_stats(t0, stamps, answer["output_tokens"])
    if abs(ttft_ms - want_ttft) > 1e-6 * abs(want_ttft) or abs(tpot_ms - want_tpot) > 1e-6 * abs(want_tpot):
        raise CheckFailed("Task 2 (live): ttft_ms/tpot_ms do not follow from your stamps; recompute them with live_stats")
    called, first = answer["called_at"], answer["first_token_at"]
    wait_ms = 1000 * (first - called)
    if t0 > called:
        raise CheckFailed("Task 2 (live): your t0 is later than the call to stream_chat: take t0 = time.perf_counter() "
                          "on the line before the call")
    if 1000 * (called - t0) > wait_ms:
        raise CheckFailed(f"Task 2 (live): your t0 is {1000 * (called - t0):.0f} ms before the call to stream_chat, "
                          f"longer than the whole wait for the first piece ({wait_ms:.0f} ms): take it on the line "
                          "before the call")
    piece_ms = 1000 * (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    late_ms = 1000 * (stamps[0] - first)
    if late_ms < 0:
        raise CheckFailed("Task 2 (live): your first stamp is earlier than the first piece: stamp in on_token, when a "
                          "piece arrives")
    if late_ms > piece_ms:
        raise CheckFailed(f"Task 2 (live): your first stamp is {late_ms:.0f} ms after the first piece arrived, more "
                          f"than one piece's time ({piece_ms:.0f} ms): stamp in on_token, as each piece arrives")


__all__ = ["check_live", "forbid", "ready_for_engine", "task1", "task2", "task3", "task4"]
