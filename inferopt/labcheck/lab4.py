"""Lab 4 checks: percentiles, TPOT, goodput, the SLO frontier, the figures; then the same
functions on live records. The learner's code runs with numpy's and the course's percentile,
summarize and max_level_meeting made unavailable."""
from __future__ import annotations

import math

import numpy as np

from inferopt.bench.metrics import SLO, RequestRecord, summarize
from inferopt.labcheck import (
    CheckFailed,
    NotDone,
    call,
    counted,
    forbid,
    is_real,
    need_callable,
    not_a_number,
    passed,
    quiet,
    rng,
)
from inferopt.labcheck.references import REFS as _ref

FORBIDDEN = [("numpy", "percentile"), ("numpy", "quantile"), ("numpy", "nanpercentile"), ("numpy", "nanquantile"),
             ("statistics", "quantiles"), ("inferopt.bench.metrics", "percentile"),
             ("inferopt.bench.metrics", "summarize"), ("inferopt.bench.metrics", "max_level_meeting"),
             ("inferopt.bench.metrics", "SLO.request_meets"), ("inferopt.bench.metrics", "SLO.summary_meets"),
             ("inferopt.bench.metrics", "SLO.violations"), ("inferopt.bench.metrics", "RequestRecord.tpot_s"),
             ("inferopt.bench.metrics", "_stats_ms"), ("inferopt.bench.stats", "percentile_ci")]


# task 3 judges each level with the course's verdict (inferopt.bench.stats.slo_verdict, which lab 3 derives and which
# reads numpy's percentile for its estimate); what it re-implements is the scan over the levels
FRONTIER_FORBIDDEN = [t for t in FORBIDDEN if t[0] != "numpy" and t[1] != "percentile"]


def _close(a, b, rel=1e-9):
    if a is None or b is None:
        return a is b
    return is_real(a) and abs(a - b) <= rel * max(1.0, abs(b))


def random_record(r, concurrency=1):
    n = r.choice([1, r.randint(2, 300)]) if r.random() < 0.1 else r.randint(2, 300)
    ttft = r.uniform(0.02, 3.0)
    e2e = ttft + (n - 1) * r.uniform(0.005, 0.25)
    return {"output_tokens": n, "ttft_s": ttft, "e2e_s": e2e, "prompt_tokens": 100, "concurrency": concurrency,
            "error": None}


def failed_record(r, concurrency=1):
    """A request that failed after its first token (the stream was cut, a timeout): the client kept its
    first-token and last-chunk times and the tokens it got, but it has no valid TPOT or latency."""
    d = random_record(r, concurrency)
    d["output_tokens"] = r.randint(2, 40)
    d["e2e_s"] = d["ttft_s"] + r.uniform(5, 60)  # a stall, then the error
    d["error"] = r.choice(["timeout after 60 s", "ClientPayloadError: connection reset", "HTTP 500"])
    return d


FAILED_HINT = ("a failed request (its 'error' is set) has no TPOT and no latency to count: skip it (return None "
               "for its TPOT); its partial times would pull the percentiles")


@counted
def task1(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Task 1"
    percentile, tpot_ms = need_callable(ns, task, "percentile", "tpot_ms")
    r = rng(seed)
    for _ in range(n_cases):
        values = [round(r.uniform(1, 1000), r.choice([0, 3])) for _ in range(r.randint(1, 40))]
        q = r.choice([0, 50, 90, 95, 99, 100, round(r.uniform(0, 100), 2)])
        want = float(np.percentile(values, q))
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, percentile, list(values), q)
        if not _close(got, want):
            if not is_real(got):
                raise not_a_number(task, f"percentile of {len(values)} values made up by the check, q={q},", got)
            v = sorted(values)
            rank = (len(v) - 1) * q / 100
            if len(v) > 1 and any(_close(got, v[min(len(v) - 1, i)]) for i in (math.floor(rank), math.ceil(rank),
                                                                                 round(rank))):
                hint = "you picked a single rank: interpolate linearly between floor(r) and ceil(r)"
            elif got is not None and _close(got, v[min(len(v) - 1, max(0, math.ceil(len(v) * q / 100) - 1))]):
                hint = "that is the nearest-rank rule; the task asks for linear interpolation with r = (n - 1) * q / 100"
            else:
                hint = "sort the values first; r = (n - 1) * q / 100; interpolate between floor(r) and ceil(r)"
            raise CheckFailed(f"{task}: percentile of {len(values)} values made up by the check, q={q}, is wrong: {hint}")
    for i in range(n_cases):
        d = failed_record(r) if i < 3 or r.random() < 0.1 else random_record(r)  # failed ones in every run
        want = _ref.ref_tpot_ms(d)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, tpot_ms, dict(d))
        if not _close(got, want):
            n = d["output_tokens"]
            if d["error"] is not None:
                hint = FAILED_HINT
            elif want is None:
                hint = "with fewer than 2 output tokens there is no gap to time: return None"
            elif got is None:
                hint = ("it returned None: did you forget `return`? (None is right only for a failed request or "
                        "fewer than 2 output tokens)")
            elif not is_real(got):
                hint = f"return a number of milliseconds, got {type(got).__name__}"
            elif got is not None and _close(got, 1000.0 * (d["e2e_s"] - d["ttft_s"]) / n):
                hint = "n tokens leave n - 1 gaps after the first: divide by n - 1"
            elif got is not None and _close(got, want / 1000):
                hint = "the records hold seconds; TPOT is asked in milliseconds"
            elif got is not None and _close(got, 1000.0 * d["e2e_s"] / (n - 1)):
                hint = "TPOT starts after the first token: subtract the TTFT"
            else:
                hint = "TPOT = (e2e - ttft) / (n - 1), in ms"
            raise CheckFailed(f"{task}: tpot_ms is wrong for a record the check made up (n={n}): {hint}")
    passed(f"Task 1 passes: percentile and tpot_ms are right on {2 * n_cases} cases made up just now, without numpy's percentile")


@counted
def task2(ns: dict, n_cases: int = 200, seed=None) -> None:
    task = "Task 2"
    goodput_rps, ttft_p95_ms = need_callable(ns, task, "goodput_rps", "ttft_p95_ms")
    need_callable(ns, task, "tpot_ms")
    r = rng(seed)
    for _ in range(n_cases // 2):
        rows = [random_record(r) for _ in range(r.randint(3, 30))]
        for _ in range(1 + r.randint(0, 3)):  # failed after a long wait: counted, they would move the P95 up
            bad = failed_record(r)
            bad["ttft_s"] = r.uniform(20, 60)
            rows.insert(r.randint(0, len(rows)), bad)
        want = _ref.ref_ttft_p95_ms(rows)
        every = percentile_of([1000 * d["ttft_s"] for d in rows], 95)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, ttft_p95_ms, [dict(d) for d in rows])
        if not _close(got, want, rel=1e-6):
            if not is_real(got):
                raise not_a_number(task, "what ttft_p95_ms returns", got)
            if _close(got, every, rel=1e-6):
                hint = FAILED_HINT
            elif _close(got, want / 1000, rel=1e-6):
                hint = "the records hold seconds; the P95 is asked in milliseconds"
            else:
                hint = "the P95 (your percentile, q=95) of the TTFTs in ms of the requests that completed"
            raise CheckFailed(f"{task}: ttft_p95_ms is wrong on {len(rows)} records made up by the check: {hint}")
    for i in range(n_cases):
        slo = SLO(ttft_ms=r.choice([200, 500, 800, 1500]), tpot_ms=r.choice([30, 50, 80, 150]))
        rows = [random_record(r) for _ in range(r.randint(3, 30))]
        if r.random() < 0.3 or i < 6:  # a request exactly at the TTFT limit meets it (every run: i < 6)
            rows[0]["ttft_s"] = slo.ttft_ms / 1000
            rows[0]["e2e_s"] = rows[0]["ttft_s"] + 0.001 * (rows[0]["output_tokens"] - 1)
        if i < 6:  # every run: TPOT on its limit, a hair over, a hair under; binary-exact numbers, so
            # the order of the learner's operations cannot move a value across the limit
            slo = SLO(ttft_ms=500, tpot_ms=62.5)
            rows[0]["ttft_s"], rows[0]["e2e_s"] = 0.5, 0.5 + 0.001 * (rows[0]["output_tokens"] - 1)
            edge = (0, 1, -1, 0, 1, -1)[i] * 2.0**-20
            rows[1] = {"output_tokens": 9, "ttft_s": 0.125, "prompt_tokens": 100, "concurrency": 1,
                       "e2e_s": 0.125 + 8 * (0.0625 + edge), "error": None}
        if 6 <= i < 12 or r.random() < 0.2:  # failed, though fast: never good (every run: 6 <= i < 12)
            bad = failed_record(r)
            bad["ttft_s"], bad["e2e_s"] = 0.05, 0.05 + 0.001 * (bad["output_tokens"] - 1)
            rows.insert(r.randint(0, len(rows)), bad)
        duration = r.uniform(5, 120)
        want = _ref.ref_goodput(rows, slo, duration)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, goodput_rps, [dict(d) for d in rows], slo, duration)
        if not _close(got, want):
            if not is_real(got):
                raise not_a_number(task, "what goodput_rps returns", got)
            only_ttft = sum(1000 * d["ttft_s"] <= slo.ttft_ms for d in rows if d.get("error") is None) / duration
            with_failed = _ref.ref_goodput([dict(d, error=None) for d in rows], slo, duration)
            if _close(got, with_failed) and not _close(want, with_failed):
                hint = "a failed request is never good, even when its first token came fast: skip the rows whose "\
                       "'error' is set"
            elif _close(got, len(rows) / duration):
                hint = "that is the throughput: count only the requests that meet every SLO"
            elif _close(got, only_ttft):
                hint = "a good request meets the TPOT SLO too"
            elif _close(got * duration / len(rows), want * duration / len(rows)):
                hint = "divide by the duration in seconds"
            else:
                hint = ("a request is good when TTFT <= slo.ttft_ms and TPOT <= slo.tpot_ms (a request with one token "
                        "has no TPOT), and goodput is good requests / duration_s")
            raise CheckFailed(f"{task}: goodput_rps is wrong on {len(rows)} records made up by the check: {hint}")
    passed(f"Task 2 passes: ttft_p95_ms and goodput_rps are right on {n_cases // 2 + n_cases} runs made up just now, "
           "failed requests among them")


def percentile_of(values, q):
    return float(np.percentile(values, q))


def random_summaries(r, slo, few: bool | None = None):
    """2-6 levels of made-up summaries. Each sweep's sample sizes are a few requests per level (as the lab's sweep
    has), enough for a P95 at every level, a mix, or unsaid (a tool's or a model's rows); ``few=True``: a few."""
    from inferopt.labcheck._references import ref_tail_need

    need = ref_tail_need(slo.percentile)
    kind = "few" if few else r.choice(["few", "enough", "mixed", "unsaid"])
    levels = sorted(r.sample([1, 2, 4, 8, 16, 32, 64], r.randint(2, 6)))
    out = []
    for c in levels:
        s = {"concurrency": c}
        n = {"few": r.randint(2, 8), "enough": r.randint(need, 3 * need), "unsaid": None,
             "mixed": r.choice([r.randint(2, need - 1), r.randint(need, 3 * need)])}[kind]
        if n is not None:
            s.update({"completed": n, "ttft_count": n, "tpot_count": n})
        for m, limit in (("ttft", slo.ttft_ms), ("tpot", slo.tpot_ms)):
            p95 = limit * r.uniform(0.3, 1.6)
            s.update({f"{m}_p50_ms": 0.7 * p95, f"{m}_p95_ms": p95, f"{m}_p99_ms": 1.2 * p95,
                      f"{m}_max_ms": p95 * r.uniform(1.25, 1.6)})
            if n is not None and n >= need:
                s[f"{m}_p95_bound_ms"] = p95 * r.uniform(1.0, 1.2)
        s["output_throughput_tok_s"] = 9.0 * c
        s["failed"] = 0
        out.append(s)
    r.shuffle(out)
    return out


def random_sweep(r, i: int = 10):
    """(by_level, slo, level): 2-5 levels, each slower than the one before (times multiplied by whole numbers, so the
    ms stay exact), few requests at some levels and enough for a bound at others, a failed request now and then; the
    limits sit on a value some level's verdict rests on (a value at the limit meets it)."""
    from inferopt.labcheck.lab3 import LEVELS, QS, need_for_bound, verdict_records

    q, level = r.choice(QS), r.choice(LEVELS)
    need_n = need_for_bound(q, level)
    by_level = {}
    for k, c in enumerate(sorted(r.sample([1, 2, 4, 8, 16, 32, 64], r.randint(2, 5)))):
        n = r.choice([2 * c, r.randint(2, 8)]) if need_n > 120 or r.random() < 0.5 else r.randint(need_n, min(120, 2 * need_n))
        rows = verdict_records(r, max(2, min(n, 120)), failed=1 if (i < 3 and k == 0) or r.random() < 0.15 else 0)
        done = [d for d in rows if d["error"] is None]
        for d in rows:  # failed, though its partial times look like the others': counted, it would not show
            if d["error"] is not None:
                d.update({key: v for key, v in r.choice(done).items() if key != "error"})
        f = 1 + k * r.choice([0, 1, 1, 2])
        by_level[c] = [dict(d, ttft_s=f * d["ttft_s"], e2e_s=f * d["e2e_s"], concurrency=c) for d in rows]
    keys = list(by_level)
    r.shuffle(keys)
    by_level = {c: by_level[c] for c in keys}  # any order
    limits = {}
    for m in ("ttft", "tpot"):
        c = r.choice(keys)
        vals = _ref.ref_verdict_values(by_level[c])[m]
        decided = [_ref.ref_one_verdict(vals, x, q, level)[2] for x in (min(vals), max(vals))]
        limits[m] = r.choice(decided + [max(vals), sorted(vals)[len(vals) // 2] * r.uniform(1, 3)])
        if i < 3:  # every run: every level's verdict passes, and the lowest level has a failed request
            limits[m] = max(x for rows in by_level.values() for x in _ref.ref_verdict_values(rows)[m])
    return by_level, SLO(ttft_ms=limits["ttft"], tpot_ms=limits["tpot"], percentile=q), level


FRONTIER_VARIANTS = [
    ({"sample": True}, "the sample percentile of a few requests is no verdict on the true one: judge each level with "
                       "stats.slo_verdict (it says when it can only judge on the maximum)"),
    ({"no_stop": True}, "stop at the first level that does not meet the SLOs: a pass above a failing level is noise, "
                        "not capacity"),
    ({"unsorted": True}, "scan the levels in increasing concurrency (by_level is not sorted)"),
    ({"undecided_passes": True}, "a verdict the data cannot decide (passed is None) is not a pass: stop there"),
    ({"failed_counted": True}, "a failed request (its 'error' is set) has no latency to count: leave it out of the "
                               "verdicts' values; a level where one failed does not meet the SLOs"),
    ({"failed_level_ok": True}, "a level where a request failed does not meet the SLOs, whatever its latencies"),
]


def _frontier_hint(got, want) -> str:
    if got[0] != want[0]:
        return ("the largest concurrency is wrong: the levels in increasing order, each meeting when no request failed "
                "and both verdicts pass (passed is True)")
    return ("the basis is wrong: 'maximum' when a verdict of any level up to the answer was judged on the maximum, "
            "else 'bound' (None when no level meets the SLOs)")


@counted
def task3(ns: dict, n_cases: int = 40, seed=None) -> None:
    task = "Task 3"
    max_concurrency = need_callable(ns, task, "max_concurrency")
    need_callable(ns, task, "tpot_ms")
    r = rng(seed)
    alive, first, after = list(range(len(FRONTIER_VARIANTS))), None, 0
    for i in range(n_cases):
        by_level, slo, level = random_sweep(r, i)
        want = _ref.ref_frontier(by_level, slo, level)
        with forbid(ns, FRONTIER_FORBIDDEN), quiet():
            got = call(task, max_concurrency, {c: [dict(d) for d in rows] for c, rows in by_level.items()}, slo, level)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise CheckFailed(f"{task}: max_concurrency should return a pair (best, basis)")
        got = tuple(got)
        if got[1] not in ("maximum", "bound", None):
            raise CheckFailed(f"{task}: the basis is 'maximum', 'bound' or None, got {got[1]!r}")
        alive = [k for k in alive if _ref.ref_frontier(by_level, slo, level, **FRONTIER_VARIANTS[k][0]) == got]
        if got != want and first is None:
            first = (len(by_level), got, want)
        after += first is not None
        if first is not None and (after > 25 or not alive):
            break
    if first is not None:
        n, got, want = first
        hint = FRONTIER_VARIANTS[alive[0]][1] if alive else _frontier_hint(got, want)
        raise CheckFailed(f"{task}: max_concurrency is wrong on a sweep of {n} levels made up by the check: {hint}")
    passed(f"Task 3 passes: max_concurrency is right on {n_cases} sweeps made up just now")


@counted
def task4(ns: dict, n_cases: int = 5, seed=None) -> None:
    task = "Task 4"
    make_figures = need_callable(ns, task, "make_figures")
    r = rng(seed)
    for i in range(n_cases):
        slo = SLO(ttft_ms=r.choice([300, 800, 2000]), tpot_ms=r.choice([55, 120, 300]))
        rows = random_summaries(r, slo, few=i == 0)   # every run: a few requests per level, as the lab's sweep has
        # task 3's answer, as the figure is given it; the first case of every run differs from the summaries' P95s'
        by_p95 = _ref.ref_max_concurrency(rows, slo)
        best = r.choice([c for c in [None] + [s["concurrency"] for s in rows] if i or c != by_p95])
        with quiet():
            got = call(task, make_figures, [dict(s) for s in rows], slo, best)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise CheckFailed(f"{task}: make_figures should return two figures (latency, pareto)")
        fa, fb = got
        texts = [a.text or "" for a in getattr(getattr(fa, "layout", None), "annotations", ())]
        if not any(f"SLO P{slo.percentile} {slo.tpot_ms:g} ms" in t for t in texts) or \
                not any(f"SLO P{slo.percentile} {slo.ttft_ms:g} ms" in t for t in texts):
            raise CheckFailed(f"{task}: the latency figure has no SLO lines for the SLO it was given: pass `slo` on")
        marks = [t for t in texts if t.startswith("max concurrency meeting SLOs")]
        if marks != ([f"max concurrency meeting SLOs: {best}"] if best is not None else []):
            raise CheckFailed(f"{task}: the latency figure should mark the level it is given (`best`, task 3's answer), "
                              "not the one the summaries' P95s would give, and none when `best` is None")
        for m in ("ttft", "tpot"):
            few = _tail_from_few(fa, rows, m, slo.percentile)
            if few is not None:
                c, n, need = few
                raise CheckFailed(f"{task}: the latency figure draws a {m.upper()} P{slo.percentile} from {n} requests "
                                  f"at concurrency {c}, and a P{slo.percentile} needs {need}: with so few it is the "
                                  "slowest few, not a tail; draw the slowest request there "
                                  "(plots.latency_vs_concurrency does)")
        if not _shows_tail(fa, rows, "ttft", slo.percentile) or not _shows_tail(fa, rows, "tpot", slo.percentile):
            raise CheckFailed(f"{task}: the latency figure has its lines and labels but not the summaries' data: it "
                              "should plot each level's P95 TTFT and P95 TPOT against its concurrency where the "
                              "level's requests carry a P95, the slowest request where they do not (the summaries "
                              "it was given, not others)")
        xcol = "tpot_max_ms" if any(_withheld(s, "tpot", slo.percentile) for s in rows) else "tpot_p95_ms"
        if not _plots(fb, rows, xcol, "output_throughput_tok_s"):
            raise CheckFailed(f"{task}: the Pareto figure has no curve of the summaries it was given: output "
                              "throughput against P95 TPOT (the slowest request where a level's requests cannot "
                              "carry a P95), one point per level")
        xtitle = getattr(getattr(getattr(fb, "layout", None), "xaxis", None), "title", None)
        if not str(getattr(xtitle, "text", None) or "").startswith(xcol):
            raise CheckFailed(f"{task}: the Pareto figure should put P95 TPOT on the x axis (latency='tpot_p95_ms')")
        if not any(f"{slo.tpot_ms:g}" in (a.text or "") for a in fb.layout.annotations):
            raise CheckFailed(f"{task}: the Pareto figure has no line at the TPOT SLO it was given (slo_ms=...)")
    passed(f"Task 4 passes: both figures follow the SLO they are given ({n_cases} SLOs made up just now)")


def _withheld(s, metric, q) -> tuple[int, int] | None:
    """(n, need) when the summary's sample cannot carry its P_q: fewer requests than its slowest needs to bound it."""
    from inferopt.labcheck._references import ref_tail_need

    n, need = s.get(f"{metric}_count", s.get("completed")), ref_tail_need(q)
    return (n, need) if n is not None and n < need else None


def _points(fig):
    """(x, y) of every point the figure's traces draw (gaps left out)."""
    for tr in getattr(fig, "data", ()) or ():
        for a, b in zip(list(getattr(tr, "x", None) or ()), list(getattr(tr, "y", None) or ()), strict=False):
            if is_real(a) and is_real(b):
                yield a, b


def _tail_from_few(fig, rows, metric, q):
    """(concurrency, n, need) of a level whose P_q the figure draws although its requests cannot carry one."""
    for s in rows:
        held = _withheld(s, metric, q)
        v = s[f"{metric}_p{q}_ms"]
        if held and any(a == s["concurrency"] and abs(b - v) <= 1e-3 + 1e-6 * abs(v) for a, b in _points(fig)):
            return s["concurrency"], *held
    return None


def _same(got, want) -> bool:
    return len(got) == len(want) and all(
        (b is None and a is None) or (b is not None and is_real(a) and abs(a - b) <= 1e-3 + 1e-6 * abs(b))
        for a, b in zip(got, want, strict=True))


def _shows_tail(fig, rows, metric, q) -> bool:
    """Does the figure draw, against concurrency, each level's P_q where its sample carries one (a gap elsewhere),
    and each level's slowest request where some level's does not?"""
    rows = sorted(rows, key=lambda s: s["concurrency"])
    held = [_withheld(s, metric, q) for s in rows]
    wants = []
    if not all(held):
        wants.append([None if h else s[f"{metric}_p{q}_ms"] for s, h in zip(rows, held, strict=True)])
    if any(held):
        wants.append([s[f"{metric}_max_ms"] for s in rows])
    x = [s["concurrency"] for s in rows]
    traces = [(list(getattr(tr, "x", None) or ()), list(getattr(tr, "y", None) or ()))
              for tr in getattr(fig, "data", ()) or ()]
    return all(any(_same(tx, x) and _same(ty, want) for tx, ty in traces) for want in wants)


def _plots(fig, rows, xkey, ykey) -> bool:
    """Does a trace of the figure show ykey against xkey for these summaries (in concurrency order)?"""
    rows = sorted(rows, key=lambda s: s["concurrency"])
    want_x, want_y = [s[xkey] for s in rows], [s[ykey] for s in rows]
    for tr in getattr(fig, "data", ()) or ():
        x, y = list(getattr(tr, "x", None) or ()), list(getattr(tr, "y", None) or ())
        if len(x) == len(want_x) and len(y) == len(want_y) and all(
                is_real(a) and is_real(b) and abs(a - b) <= 1e-3 + 1e-6 * abs(b)
                for a, b in zip(x + y, want_x + want_y, strict=True)):
            return True
    return False


def ready_for_engine(ns: dict) -> None:
    for check in (task1, task2, task3, task4):
        try:
            with quiet():
                check(ns, n_cases=3 if check is task4 else 30)
        except CheckFailed as exc:
            raise NotDone(f"the engine starts once tasks 1-4 pass ({exc})") from None


def check_live(ns: dict, summaries, by_level, slo) -> None:
    """The learner's functions give the course's numbers on today's measurement."""
    task = "Live check"
    percentile, tpot_ms, goodput_rps, max_concurrency = need_callable(
        ns, task, "percentile", "tpot_ms", "goodput_rps", "max_concurrency")
    for s in summaries:
        rows = by_level[s["concurrency"]]
        ref = summarize([RequestRecord.from_dict(d) for d in rows])
        with forbid(ns, FORBIDDEN), quiet():
            ttft95 = call(task, percentile, [1000 * d["ttft_s"] for d in rows], 95)
            tpot95 = call(task, percentile, [call(task, tpot_ms, d) for d in rows], 95)
            good = call(task, goodput_rps, rows, slo, s["duration_s"])
        for what, got, want in (("P95 TTFT", ttft95, ref["ttft_p95_ms"]), ("P95 TPOT", tpot95, ref["tpot_p95_ms"]),
                                ("goodput", good, s["goodput_rps"])):
            if not _close(got, want, rel=1e-6):
                raise CheckFailed(f"{task}: your {what} at concurrency {s['concurrency']} differs from the course's "
                                  "on today's records")
    with forbid(ns, FRONTIER_FORBIDDEN), quiet():
        got = call(task, max_concurrency, by_level, slo)
    if tuple(got) != _ref.ref_course_frontier(by_level, slo):
        raise CheckFailed(f"{task}: your max_concurrency differs from the course's on today's sweep")
    passed("all your functions agree with inferopt.bench.metrics on today's measurement")
