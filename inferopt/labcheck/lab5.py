"""Lab 5 checks: an alert rule with its promtool test; a load-test table checked with Little's law;
a fleet sized from the table; a canary step judged from its gate readings. The sizing functions run
with ``plan_instances`` made unavailable, the canary decision without ``gate_passes`` and ``rollout``."""
from __future__ import annotations

from inferopt.labcheck import (
    CheckFailed,
    call,
    counted,
    follows,
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

FORBIDDEN = [("inferopt.planning.capacity", "plan_instances"), ("inferopt.planning.planner", "littles_law")]


@counted
def task1(ns: dict) -> None:
    from inferopt.monitoring.grading import check_rule_and_test

    task = "Task 1"
    rule, test = need(ns, task, "my_rule", "my_test")
    if not isinstance(rule, dict) or not isinstance(test, dict):
        raise CheckFailed(f"{task}: my_rule and my_test should be dicts")
    if rule.get("alert") != "KVCacheNearlyFull":
        raise CheckFailed(f"{task}: name the alert KVCacheNearlyFull")
    if duration_seconds(rule.get("for")) != 120:
        raise CheckFailed(f"{task}: the rule should wait 2 minutes before it fires ('for': '2m', or '120s')")
    severity = (rule.get("labels") or {}).get("severity") if isinstance(rule.get("labels"), dict) else None
    if severity != "warning":
        raise CheckFailed(f"{task}: the task asks for severity `warning` in the rule's labels (a full cache is a "
                          "warning here, not a page)")
    if "vllm:kv_cache_usage_perc" not in str(rule.get("expr", "")):
        raise CheckFailed(f"{task}: the expression should read vllm:kv_cache_usage_perc")
    problems = check_rule_and_test(rule, test)
    if not problems:  # the rule must also be right, not only consistent with its own test
        problems = _threshold_problems(rule, test)
    if problems:
        for p in problems:
            print("-", p)
        raise CheckFailed(f"{task}: {len(problems)} problem(s) with the rule or its test, listed above")
    passed(f"{task} passes: promtool accepts the rule, your test passes on it and fails on a rule that never "
           "fires and on one that always fires; the threshold is right")


_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_seconds(text) -> float | None:
    """Seconds in a Prometheus duration ('2m', '120s', '1m60s', '90s30s' is not one); None if not one."""
    import re

    if not isinstance(text, str) or not text:
        return None
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(int(n) * _UNITS[u] for n, u in parts)


def _threshold_problems(rule: dict, test: dict) -> list:
    """Run a hidden test: the rule must fire above 0.9 and stay quiet at 0.9 and below (a fraction, not %), and
    watch the vLLM job only: a full cache of another job (a staging engine scraped by the same Prometheus) does
    not page anyone, as the course's own rules select ``job=...`` (assets/monitoring/alerts.yaml)."""
    import copy
    import tempfile
    from pathlib import Path

    from inferopt.monitoring.grading import _run

    hidden = {"evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="a:1"}', "values": "0.93x10"},
            {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="b:1"}', "values": "0.9x10"},
            {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="c:1"}', "values": "0.6x10"},
            {"series": 'vllm:kv_cache_usage_perc{job="staging",instance="d:1"}', "values": "0.97x10"},
        ],
        "alert_rule_test": [{"eval_time": "1m", "alertname": "KVCacheNearlyFull", "exp_alerts": []}],
    }]}
    rule_q = copy.deepcopy(rule)
    rule_q.pop("annotations", None)
    with tempfile.TemporaryDirectory(prefix="lab5-hidden-") as d:
        folder = Path(d)
        _, quiet_ok = _run(rule_q, hidden, folder)
        if not quiet_ok.ok:
            return ["the rule fires too early: it must wait 2 minutes"]
        for inst, should, what in (("a:1", True, "a cache above 0.9"), ("b:1", False, "a cache at or below 0.9"),
                                   ("c:1", False, "a cache at or below 0.9"),
                                   ("d:1", False, "a full cache of another Prometheus job")):
            case = copy.deepcopy(hidden)
            case["tests"][0]["input_series"] = [s for s in case["tests"][0]["input_series"] if inst in s["series"]]
            case["tests"][0]["alert_rule_test"] = [{"eval_time": "5m", "alertname": "KVCacheNearlyFull",
                                                    "exp_alerts": [{"exp_labels": {"severity": rule_q["labels"].get("severity"),
                                                                                   "instance": inst}}] if should else []}]
            _, res = _run(rule_q, case, folder)
            if not res.ok:
                return [(f"on a series the check made up, the rule does not behave as asked for {what}: "
                        "vllm:kv_cache_usage_perc is a fraction 0..1, the expression selects the series the task "
                        "names, the alert is per instance and keeps only the severity and instance labels")]
    return []


def boundary_table(r, output_tokens, tol):
    """Rows just inside and just outside the tolerance on both sides, with qps unrounded, so a fixed
    threshold or the ratio taken the other way round (c / L) gets a row wrong; and, for a tolerance that
    is a binary fraction (0.25), rows exactly at it on both sides (:func:`rows_at_tolerance`), so `>=`
    for `>` gets a row wrong."""
    rows = rows_at_tolerance(output_tokens, tol)
    for k, c in enumerate([16, 32, 64, 128, 256, 512]):
        ttft, tpot = 100.0 + 37 * k, 20.0 + 3 * k
        w = (ttft + (output_tokens - 1) * tpot) / 1000
        implied = (1 + tol + 0.02, 1 + tol - 0.02, 1 - tol - 0.02, 1 - tol + 0.02, 1.0, 1 + tol + 0.001)[k]
        rows.append({"concurrency": c, "qps": c * implied / w, "ttft_mean_ms": ttft, "tpot_mean_ms": tpot,
                     "ttft_p95_ms": round(1.5 * ttft), "tpot_p95_ms": round(1.2 * tpot)})
    r.shuffle(rows)
    return sorted(rows, key=lambda row: row["concurrency"])


def rows_at_tolerance(output_tokens, tol) -> list[dict]:
    """Two rows whose Little's-law concurrency is exactly (1 + tol) and (1 - tol) times the measured one, in
    floating point whatever order a learner computes L = qps x (TTFT + (n - 1) x TPOT) / 1000 in: TPOT is
    1/64 s, TTFT a multiple of it, W a power of two seconds and the concurrencies powers of two, so every
    intermediate value is a short binary fraction (exact). None for a tolerance such as 0.2, which no
    float ratio meets exactly."""
    from fractions import Fraction

    if Fraction(tol).denominator > 64:
        return []
    tpot = 15.625                                       # ms: 1/64 s
    w = 1
    while w * 1000 < (output_tokens - 1) * tpot + tpot:  # W (s) a power of two, TTFT at least one TPOT
        w *= 2
    ttft = w * 1000 - (output_tokens - 1) * tpot
    return [{"concurrency": c, "qps": c * implied / w, "ttft_mean_ms": ttft, "tpot_mean_ms": tpot,
             "ttft_p95_ms": round(1.5 * ttft), "tpot_p95_ms": round(1.2 * tpot)}
            for c, implied in ((8, 1 + tol), (1024, 1 - tol))]


def random_table(r, output_tokens):
    rows = []
    for c in sorted(r.sample([8, 16, 32, 64, 128, 256, 384, 512], r.randint(3, 6))):
        ttft, tpot = r.uniform(80, 1500), r.uniform(15, 90)
        w = (ttft + (output_tokens - 1) * tpot) / 1000
        factor = r.choice([r.uniform(0.97, 1.03)] * 3 + [r.uniform(1.6, 6), r.uniform(0.15, 0.6)])
        rows.append({"concurrency": c, "qps": round(c / w * factor, 2), "ttft_mean_ms": round(ttft, 1),
                     "tpot_mean_ms": round(tpot, 2), "ttft_p95_ms": round(1.5 * ttft), "tpot_p95_ms": round(1.2 * tpot)})
    return rows


@counted
def task2(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Task 2"
    in_flight, impossible_rows = need_callable(ns, task, "in_flight", "impossible_rows")
    table_a, table_b, trusted = need(ns, task, "load_test_a", "load_test_b", "trusted")
    r = rng(seed)
    for _ in range(n_cases):
        qps, ttft, tpot, n = r.uniform(0.5, 80), r.uniform(50, 3000), r.uniform(5, 200), r.randint(2, 1000)
        want = _ref.ref_in_flight(qps, ttft, tpot, n)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, in_flight, qps, ttft, tpot, n)
        if not is_real(got):
            raise not_a_number(task, "what in_flight returns", got)
        if abs(got - want) > 1e-9 * max(1, want):
            known = {1000: "the latencies are in ms and the rate in requests per second: convert ms to s"}
            if isinstance(got, (int, float)) and abs(got - qps * (ttft + n * tpot) / 1000) < 1e-9 * max(1, want):
                hint = "after the first token come n - 1 more, each one TPOT apart: (n - 1) x TPOT"
            elif isinstance(got, (int, float)) and abs(got - qps * (n - 1) * tpot / 1000) < 1e-9 * max(1, want):
                hint = "a request's latency starts with its TTFT: W = TTFT + (n - 1) x TPOT"
            else:
                hint = ratio_hint(got, want, "your L", known) if isinstance(got, (int, float)) else "return a number"
            raise CheckFailed(f"{task}: in_flight is wrong on a case the check made up: {hint} (Little's law: L = lambda x W)")
    for i in range(n_cases // 3):
        n = r.choice([64, 150, 256])
        table = random_table(r, n)
        tol = r.choice([0.1, 0.2, 0.25])
        if i < 3:  # every run: rows on both sides of each tolerance
            tol = (0.1, 0.25, 0.2)[i]
            table = boundary_table(r, n, tol)
        want = _ref.ref_impossible(table, n, tol)
        with forbid(ns, FORBIDDEN), quiet():
            got = call(task, impossible_rows, [dict(x) for x in table], n, tol)
        if list(got) != want if isinstance(got, (list, tuple)) else True:
            at = [row["concurrency"] for row in table if row["concurrency"] not in want and row in rows_at_tolerance(n, tol)]
            hint = ("a row exactly at the tolerance is not impossible: flag only the rows that differ by more than it"
                    if at and isinstance(got, (list, tuple)) and set(at) <= set(got) else
                    "flag a row when the concurrency implied by Little's law differs from the measured one by more "
                    "than the tolerance (relative); return the concurrency of each such row, in table order")
            raise CheckFailed(f"{task}: impossible_rows is wrong on a table the check made up: {hint}")
    with forbid(ns, FORBIDDEN), quiet():
        bad_a = call(task, impossible_rows, table_a, 150, 0.2)
        bad_b = call(task, impossible_rows, table_b, 150, 0.2)
    if trusted is not table_b or not bad_a or bad_b:
        raise CheckFailed(f"{task}: `trusted` should be the table that survives Little's law (impossible_rows finds "
                          "no row in it); the other one cannot have been measured")
    # when graded: with the two tables swapped, `trusted` follows the table that obeys the law (a typed choice does not)
    follows(ns, task, {"load_test_a": table_b, "load_test_b": table_a}, ["trusted"], {"trusted": table_b},
            "choose it with impossible_rows, do not name a table", about="the two load-test tables")
    passed(f"{task} passes: in_flight and impossible_rows are right on {n_cases + n_cases // 3} cases made up just now, "
           "and you trust the table that obeys Little's law")


# Task 3 runs without the course's order-statistic tools too: min_requests is the learner's to derive
STATS_FORBIDDEN = [("inferopt.bench.stats", f) for f in ("min_samples_for_upper_bound", "upper_rank", "lower_rank",
                                                         "binom_cdf", "percentile_bounds", "slo_verdict",
                                                         "slo_verdict_counts")]
SIZING_FORBIDDEN = FORBIDDEN + STATS_FORBIDDEN
LEVELS = (0.8, 0.85, 0.9, 0.95, 0.975, 0.99)   # none puts log(1 - level) / log(q / 100) on a whole number
QS = (90, 95, 99)
COURSE_LEVEL = 0.9
PRINT_FLOOR = 20   # the course's floor for printing a percentile (bench.stats.MIN_PERCENTILE_SAMPLES), not a bound

HINT_N_IGNORED = ("a row whose P95 rests on fewer than min_requests(level) requests cannot show that the SLO holds at "
                  "that confidence, however low its P95: skip the rows with too few `requests`")
HINT_N_STRICT = ("off by one in the comparison: a row with exactly min_requests(level) requests is enough (its slowest "
                 "request is then an upper bound of the P95 at that confidence); keep the rows with requests >= "
                 "min_requests(level)")
HINT_N_LEVEL = "use the level you are given: min_requests(level), not the course's default confidence"
HINT_PRINT_FLOOR = ("20 requests is the course's floor for printing a percentile, not for an SLO verdict: all n requests "
                    "fall below the true P_q with probability (q/100)^n, so the slowest bounds it only with confidence "
                    "1 - (q/100)^n")
HINT_BOUND = ("the slowest of n requests lies below the true P_q only when all n do, with probability (q/100)^n: "
              "min_requests is the smallest n with 1 - (q/100)^n >= level")
HINT_BOUND_OFF = ("off by one in the bound: min_requests is the smallest whole n with 1 - (q/100)^n >= level; at that n "
                  "the confidence is reached and one fewer falls short (the solution of (q/100)^n = 1 - level, rounded up "
                  "once)")
HINT_BOUND_Q = "follow the percentile you are given: (q/100)^n, not a fixed 0.95^n"


def min_requests_hint(got, level: float, q: float) -> str:
    """The hint for a wrong min_requests(level, q); never the right number."""
    want = _ref.ref_min_requests(level, q)
    if got == PRINT_FLOOR:
        return HINT_PRINT_FLOOR
    if got in (want - 1, want + 1):
        return HINT_BOUND_OFF
    if level != COURSE_LEVEL and got == _ref.ref_min_requests(COURSE_LEVEL, q):
        return "min_requests must follow the level it is given: a higher confidence needs more requests"
    if q != 95 and got == _ref.ref_min_requests(level, 95):
        return HINT_BOUND_Q
    return HINT_BOUND


DIAGNOSTIC_LEVEL = 0.95   # a level whose bound lies above the default level's, so each mistake picks its own row


def diagnostic_table() -> list:
    """Rows inside both SLOs (and one outside) whose request counts sit between the bounds the usual mistakes use,
    so the right rule and each mistake pick a different best row: >= the bound, > the bound, the default level's
    bound, the print floor, no bound at all, no SLO."""
    right = _ref.ref_min_requests(DIAGNOSTIC_LEVEL)
    default = _ref.ref_min_requests(COURSE_LEVEL)
    counts = [right + 900, right, (default + right) // 2, (PRINT_FLOOR + default) // 2, PRINT_FLOOR // 4, right + 900]
    qps = (11.5, 23.5, 37.5, 41.5, 53.5, 67.5)   # no round figure: a typed constant matches no mistake
    return [{"concurrency": 8 * (k + 1), "requests": n, "qps": qps[k], "ttft_mean_ms": 200.0,
             "tpot_mean_ms": 30.0, "ttft_p95_ms": 300 if k < 5 else 1500, "tpot_p95_ms": 40} for k, n in enumerate(counts)]


def best_qps_hint(ns: dict, task: str, best_qps) -> str:
    """The hint for a wrong best_qps_within_slo: the learner's function runs on the diagnostic table, and the row it
    picks names the mistake (never the right row's numbers)."""
    table, ttft_slo, tpot_slo, level = diagnostic_table(), 1000, 80, DIAGNOSTIC_LEVEL
    with forbid(ns, SIZING_FORBIDDEN), quiet():
        got = call(task, best_qps, [dict(x) for x in table], ttft_slo, tpot_slo, level)
    variants = [(_ref.ref_best_qps(table, ttft_slo, tpot_slo, level, enough=0), HINT_N_IGNORED),
                (_ref.ref_best_qps(table, ttft_slo, tpot_slo, level, strict_n=True), HINT_N_STRICT),
                (_ref.ref_best_qps(table, ttft_slo, tpot_slo, COURSE_LEVEL), HINT_N_LEVEL),
                (_ref.ref_best_qps(table, ttft_slo, tpot_slo, level, enough=PRINT_FLOOR), HINT_PRINT_FLOOR),
                (max(row["qps"] for row in table), "that is the raw peak: take the best QPS among the rows that meet "
                 "both SLOs on enough requests")]
    if got != _ref.ref_best_qps(table, ttft_slo, tpot_slo, level):
        for value, hint in variants:
            if got == value:
                return hint
    return ("a row counts when TTFT P95 < its SLO and TPOT P95 < its SLO (strictly, as the SLO says) and it has at "
            "least min_requests(level) requests; return that row's qps, or None when no row counts")


def sized_table(r, level: float, case: int | None = None):
    """A table with a `requests` column. The boundary cases (case 0..5) are in every run: the best row inside the
    SLOs with one request too few (out), with exactly enough (in), with the course's print floor but fewer than the
    bound, with a count the default level accepts and the given level does not, and on an SLO limit / just under."""
    need_n = _ref.ref_min_requests(level)
    table = random_table(r, 150)
    for row in table:
        row["requests"] = r.choice([r.randint(1, max(1, need_n - 1)), need_n - 1, need_n, need_n + 1,
                                    r.randint(need_n, 6000), r.randint(need_n, 6000)])
    if case is None:
        return table
    ttft_slo, tpot_slo = 1000, 80
    ordered = sorted(table, key=lambda row: row["qps"])
    for below, row in zip([None, *ordered[:-1]], ordered, strict=True):  # distinct qps: the best row is one row
        if below is not None and row["qps"] <= below["qps"]:
            row["qps"] = round(below["qps"] + 0.5, 2)
    for row in ordered:  # every row inside both SLOs, with plenty of requests
        row["ttft_p95_ms"], row["tpot_p95_ms"], row["requests"] = ttft_slo // 2, tpot_slo // 2, need_n + r.randint(5, 900)
    top = ordered[-1]
    if case == 0:
        top["requests"] = need_n - 1
    elif case == 1:
        top["requests"] = need_n
    elif case == 2:
        top["requests"] = r.randint(PRINT_FLOOR, need_n - 1)
    elif case == 3:
        top["requests"] = r.randint(_ref.ref_min_requests(COURSE_LEVEL), need_n - 1)
    elif case == 4:
        top["ttft_p95_ms"] = ttft_slo
    else:
        top["tpot_p95_ms"] = tpot_slo - 1
    return table


@counted
def task3(ns: dict, n_cases: int = 300, seed=None) -> None:
    task = "Task 3"
    min_requests, best_qps, instances_needed = need_callable(ns, task, "min_requests", "best_qps_within_slo",
                                                             "instances_needed")
    per_instance_qps, sizing, table_b = need(ns, task, "per_instance_qps", "sizing", "load_test_b")
    r = rng(seed)
    for level in LEVELS:  # every level and percentile: the bound, derived
        for q in QS:
            with forbid(ns, SIZING_FORBIDDEN), quiet():
                got = call(task, min_requests, level, q)
            if got is None or isinstance(got, bool) or not is_real(got):
                raise not_a_number(task, "what min_requests returns", got)
            if got != _ref.ref_min_requests(level, q):
                raise CheckFailed(f"{task}: min_requests(level={level:g}, q={q:g}) is wrong: "
                                  f"{min_requests_hint(got, level, q)}")
    for i in range(n_cases // 3):
        level = r.choice(LEVELS)
        if i < 6:  # every run: the boundary cases, at a level where each mistake shows
            level = (COURSE_LEVEL, r.choice(LEVELS), 0.95, 0.99, r.choice(LEVELS), r.choice(LEVELS))[i]
            table, ttft_slo, tpot_slo = sized_table(r, level, i), 1000, 80
        else:
            table = sized_table(r, level)
            ttft_slo, tpot_slo = r.choice([300, 500, 1000]), r.choice([30, 50, 80])
            if r.random() < 0.3:  # a row exactly at the limit does not meet "P95 < SLO"
                table[0]["ttft_p95_ms"] = ttft_slo
        want = _ref.ref_best_qps(table, ttft_slo, tpot_slo, level)
        with forbid(ns, SIZING_FORBIDDEN), quiet():
            got = call(task, best_qps, [dict(x) for x in table], ttft_slo, tpot_slo, level)
        if got != want:
            raise CheckFailed(f"{task}: best_qps_within_slo is wrong on a table the check made up (level {level:g}): "
                              f"{best_qps_hint(ns, task, best_qps)}")
    for i in range(n_cases):
        per = r.choice([r.randint(5, 80), round(r.uniform(5, 80), 1)])
        # exact multiples too (whole numbers only, so float rounding never decides the answer)
        target = per * r.randint(1, 12) if isinstance(per, int) and r.random() < 0.5 else r.randint(10, 1000)
        if i < 3:  # every run: an exact multiple, one more, one less
            per = r.randint(5, 80)
            target = per * r.randint(2, 12) + (0, 1, -1)[i]
        if isinstance(per, float) and abs(target / per - round(target / per)) < 1e-6:
            continue
        surge, spares, gpi = r.randint(0, 2), r.randint(0, 2), r.choice([1, 2, 4, 8])
        want = _ref.ref_instances(target, per, surge, spares, gpi)
        with forbid(ns, SIZING_FORBIDDEN), quiet():
            got = call(task, instances_needed, target, per, surge, spares, gpi)
        if tuple(got) != want if isinstance(got, (list, tuple)) else True:
            base = want[0]
            if isinstance(got, (list, tuple)) and len(got) == 3 and got[0] != base:
                hint = ("one instance too many when the target is an exact multiple: ceil, not floor + 1"
                        if got[0] == base + 1 else "base = ceil(target / per-instance QPS): a fraction of an "
                        "instance does not exist, round up")
            else:
                hint = "instances = base + surge + spares; GPUs = instances x GPUs per instance"
            raise CheckFailed(f"{task}: instances_needed({target}, {per}, {surge}, {spares}, {gpi}) is wrong: {hint}")
    ttft, tpot, level = need(ns, task, "TTFT_SLO_MS", "TPOT_SLO_MS", "LEVEL")
    want_qps = _ref.ref_best_qps(table_b, ttft, tpot, level)
    if per_instance_qps != want_qps:
        raise CheckFailed(f"{task}: per_instance_qps should come from best_qps_within_slo on the trusted table, at LEVEL")
    if tuple(sizing) != _ref.ref_instances(need(ns, task, "TARGET_QPS"), want_qps, 1, 1, 8):
        raise CheckFailed(f"{task}: sizing should be instances_needed for the target, with one surge instance and N+1")
    for _ in range(3):  # when graded: both follow another target, other SLOs and another level (typed numbers do not)
        target, ttft, tpot = r.randint(20, 2000), r.choice([300, 500, 1200, 2000]), r.choice([35, 50, 70, 80])
        level = r.choice(LEVELS)
        qps = _ref.ref_best_qps(table_b, ttft, tpot, level)
        if qps is None:
            continue
        if not follows(ns, task, {"TARGET_QPS": target, "TTFT_SLO_MS": ttft, "TPOT_SLO_MS": tpot, "LEVEL": level},
                       ["per_instance_qps", "sizing"],
                       {"per_instance_qps": qps, "sizing": lambda v, t=target, q=qps: isinstance(v, (list, tuple))
                        and tuple(v) == _ref.ref_instances(t, q, 1, 1, 8)},
                       "compute them with your functions from the trusted table, the SLOs, LEVEL and TARGET_QPS"):
            break
    passed(f"{task} passes: min_requests is right at {len(LEVELS) * len(QS)} levels and percentiles, both sizing "
           f"functions on {n_cases + n_cases // 3} cases made up just now, and the fleet follows from the trusted table")


CANARY_FORBIDDEN = [("inferopt.monitoring.alerts", "gate_passes"), ("inferopt.serving.canary", "rollout")]
GATES = [("TTFT P95", "below", 1.0), ("TPOT P95", "below", 0.15), ("requests > 30 s", "equal", 0),
         ("preemptions", "equal", 0), ("error rate", "below", 0.001)]


MISTAKES = [  # kept for the tests' wrong submissions: the usual mistakes, as reference variants
    ({"no_data_passes": True}, "a gate without data (None or NaN) cannot pass: a step that cannot be judged is not promoted"),
    ({"at_or_below": True}, "'below' means strictly below the threshold, as 'P95 < SLO' does: a value on it fails"),
    ({"exact": True}, "a counter that did not move can read 1e-12 after Prometheus' extrapolation: round before comparing"),
    ({"done": False}, "after the last step there is nothing left to promote to"),
]


def random_readings(r):
    """Gate readings of one step: mostly passing, with the edge cases a real trace has."""
    out = []
    for name, pass_if, threshold in r.sample(GATES, r.randint(1, len(GATES))):
        t = threshold * r.choice([1, 0.5, 2]) if pass_if == "below" else threshold
        kind = r.random()
        if kind < 0.55:
            v = t * r.uniform(0, 0.95) if pass_if == "below" else r.choice([0.0, 1e-12, -1e-12, 0.0])
        elif kind < 0.7:
            v = t if pass_if == "below" else r.choice([1.0, 0.6, 3.2])          # on the threshold / moved
        elif kind < 0.85:
            v = t * r.uniform(1.01, 5) if pass_if == "below" else r.uniform(0.01, 10)
        else:
            v = r.choice([None, float("nan")])                                  # no data
        out.append({"gate": name, "pass_if": pass_if, "threshold": t, "value": v})
    return out


PROBES = [  # (readings, last_step, right answer, the hint when the learner's answer differs)
    ([("TTFT P95", "below", 1.0, 2.0)], False, "roll back",
     "every gate must pass for the rollout to go on; one failing gate is enough to roll back"),
    ([("TTFT P95", "below", 1.0, 2.0)], True, "roll back", "a failing gate rolls back at the last step too"),
    ([("TTFT P95", "below", 1.0, 0.5)], False, "promote", "when every gate passes, the step is promoted"),
    ([("TTFT P95", "below", 1.0, 0.5)], True, "done", "after the last step there is nothing left to promote to"),
    ([("TTFT P95", "below", 1.0, None)], False, "roll back",
     "a gate without data (None) cannot pass: a step that cannot be judged is not promoted"),
    ([("TTFT P95", "below", 1.0, float("nan"))], False, "roll back",
     "a gate without data (NaN) cannot pass: a step that cannot be judged is not promoted"),
    ([("TTFT P95", "below", 1.0, 1.0)], False, "roll back",
     "'below' means strictly below the threshold, as 'P95 < SLO' does: a value on it fails"),
    ([("preemptions", "equal", 0, 1e-12)], False, "promote",
     "a counter that did not move can read 1e-12 after Prometheus' extrapolation: round (to 6 decimals) before "
     "comparing"),
    ([("preemptions", "equal", 0, 0.4)], False, "roll back",
     "0.4 preemptions is a counter that moved: round to 6 decimals, not to a whole number"),
    ([("requests > 30 s", "equal", 0, 2e-7)], True, "done",
     "2e-7 is extrapolation noise: round (to 6 decimals) before comparing"),
]


def _readings(spec):
    return [{"gate": g, "pass_if": p, "threshold": t, "value": v} for g, p, t, v in spec]


@counted
def task4(ns: dict, n_cases: int = 400, seed=None) -> None:
    task = "Task 4"
    decide = need_callable(ns, task, "step_decision")
    for spec, last, want, hint in PROBES:  # every run: the edge cases, each with its own hint
        with forbid(ns, CANARY_FORBIDDEN), quiet():
            got = call(task, decide, _readings(spec), last)
        if got != want:
            raise CheckFailed(f"{task}: step_decision is wrong on a step the check made up: {_answer_kind(got) or hint}")
    r = rng(seed)
    for _ in range(n_cases):
        readings, last = random_readings(r), r.random() < 0.3
        want = _ref.ref_step_decision(readings, last)
        with forbid(ns, CANARY_FORBIDDEN), quiet():
            got = call(task, decide, [dict(g) for g in readings], last)
        if got == want:
            continue
        hint = _answer_kind(got) or "every gate must pass for the rollout to go on; one failing gate is enough to roll back"
        raise CheckFailed(f"{task}: step_decision is wrong on a step the check made up: {hint}")
    passed(f"{task} passes: step_decision is right on {len(PROBES)} edge cases and {n_cases} steps made up just now")


def _answer_kind(got) -> str:
    if got in ("promote", "roll back", "done"):
        return ""
    if got is None:
        return "it returned None: did you forget `return`?"
    return f"return one of 'promote', 'roll back', 'done' (got {got!r})"
