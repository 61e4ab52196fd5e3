"""Write the source of chapters/06-monitoring-and-capacity.ipynb and solutions/lab5-monitoring-alerts.ipynb
(cells only, no outputs). Then execute them for real to store outputs:

    .venv/bin/python scripts/build_chapter06_lab5.py [chapter06] [lab5]
    flock /tmp/inferopt-engine.lock .venv/bin/python -m inferopt.nbtools run \
        chapters/06-monitoring-and-capacity.ipynb solutions/lab5-monitoring-alerts.ipynb
"""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from nbbuild import ROOT, code, md, write  # noqa: F401  (shared cell helpers)


def chapter06():
    return [
        md("""
        # 6. After go-live: monitoring, alerting and capacity

        A deployment that passed its load test is not done: traffic changes, prompts get longer, a
        driver update halves throughput, a neighbour process eats GPU memory. This chapter follows
        the seed's §6 and makes every part of it run here:

        1. **Monitoring (监控)** in three layers: infrastructure (基础设施层), service (服务层) and
           business (业务层). Each metric is mapped to where it really comes from, and the service
           layer is read live from the engine's `/metrics`.
        2. **Alerting (告警)**: the five alerts of the seed's table become Prometheus rules,
           generated from the service-level objectives (SLO, 服务等级目标), and Prometheus' own
           `promtool` proves that each rule fires on a series that breaks it and stays quiet on one
           that does not. Then a real Prometheus server scrapes the live engine and we watch an
           alert go to *firing*.
        3. **Capacity planning (容量规划)** and rollout: the seed's arithmetic (50 QPS per instance,
           200 QPS target, 6 instances = 48 H100), then the same arithmetic fed with a throughput we
           *measure* on the engine, and a canary plan (灰度发布) with the metric and threshold to read
           at each step.

        On this machine the engine is the CPU build of vLLM serving SmolLM2-135M, so absolute
        numbers are small; the names, the queries and the method are exactly those of a GPU fleet.
        """),
        code("""
        import json
        import math
        import threading
        import time

        from IPython.display import Markdown, display

        from inferopt.capacity import availability, canary_steps, plan_instances
        from inferopt.engine import VLLMServer
        from inferopt.monitoring import catalog, dashboard
        from inferopt.monitoring import metrics_parse as mp
        from inferopt.monitoring.alerts import (SLOs, alert_table, build_rules, canary_gates, rules_yaml,
                                                write_rules_and_tests)
        from inferopt.monitoring.load import run_load
        from inferopt.monitoring.plots import load_run_figure, timeseries_rows
        from inferopt.monitoring.prometheus_server import PrometheusServer
        from inferopt.monitoring.promtool import check_rules, test_rules
        from inferopt.paths import ASSETS, results_dir


        def md_table(rows, cols):
            head = "| " + " | ".join(cols) + " |\\n|" + "---|" * len(cols) + "\\n"
            body = "".join("| " + " | ".join(str(r[c]).replace("|", "\\\\|") for c in cols) + " |\\n" for r in rows)
            return Markdown(head + body)
        """),
        md("""
        ## 6.1 Three layers of metrics (监控指标)

        The seed lists what to watch in each layer. A list of names is not enough to build a
        dashboard: each metric has to come from somewhere. The catalog
        `assets/monitoring/metrics_catalog.yaml` maps every item to its source:

        - **infrastructure**: NVIDIA's DCGM exporter (one series per GPU: utilisation
          `DCGM_FI_DEV_GPU_UTIL`, frame-buffer memory `DCGM_FI_DEV_FB_USED` / `DCGM_FI_DEV_FB_FREE` in
          MiB, temperature `DCGM_FI_DEV_GPU_TEMP`), node_exporter's InfiniBand counters for the
          network, and kube-state-metrics for container restarts and OOM kills;
        - **service**: vLLM's own `/metrics` endpoint (names as vLLM 0.32 exposes them; a test checks
          each one against the live engine);
        - **business**: nothing in the engine can know whether an answer helped the user. The
          application in front of it must count outcomes, streaming session lengths and sampled
          human quality verdicts; the catalog proposes names for them.
        """),
        code("""
        rows = catalog.metrics()
        display(md_table(rows, ["layer", "seed", "source", "metric", "type", "unit"]))
        print({layer: sum(1 for r in rows if r["layer"] == layer) for layer in ("infrastructure", "service", "business")})
        """),
        md("""
        Two notes from the catalog. `vllm:kv_cache_usage_perc` is a fraction between 0 and 1, not a
        percentage, and it replaced `vllm:gpu_cache_usage_perc`; `vllm:request_time_per_output_token_seconds`
        replaced `vllm:time_per_output_token_seconds`. Dashboards copied from older blog posts show
        empty panels for exactly this reason, which is why the course checks names against a live
        engine rather than against documentation.

        ### Reading `/metrics` from the live engine

        We start the engine once for the whole chapter (about 40 s on a laptop CPU) and parse its
        metrics page with the Prometheus client library's own text parser
        (`prometheus_client.parser.text_string_to_metric_families`).
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        srv = VLLMServer(quiet=True).start()
        print(f"engine ready in {srv.startup_seconds:.0f} s; KV cache {srv.kv_cache_tokens} tokens")
        assert srv.kv_cache_tokens and srv.kv_cache_tokens > 0
        """),
        code("""
        snap = mp.parse_metrics(srv.metrics_text())
        check = []
        for m in catalog.metrics(source="vllm"):
            sample = m["metric"] + ("_bucket" if m["type"] == "histogram" else "")
            check.append({"metric": m["metric"], "catalog type": m["type"], "engine type": snap.types.get(sample),
                          "exposed": sample in snap.sample_names})
        display(md_table(check, ["metric", "catalog type", "engine type", "exposed"]))
        assert all(r["exposed"] and r["catalog type"] == r["engine type"] for r in check)
        print("old names present:", sorted({"vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds_bucket"}
                                           & snap.sample_names))
        """),
        md("""
        ### Quantiles from histograms, and their caveat (分位数与直方图)

        vLLM does not export TTFT percentiles; it exports a **histogram (直方图)**: for each bucket
        upper bound `le` the number of requests at or below it. A percentile has to be *estimated*
        from those counts. PromQL's `histogram_quantile` (and `inferopt.monitoring.metrics_parse.histogram_quantile`,
        which follows the same algorithm) finds the bucket that holds the q-th rank and interpolates
        linearly inside it, as if the requests were spread evenly between the bucket's bounds.

        The consequence: the estimate can be wrong by up to one bucket width. vLLM's TTFT buckets
        near the seed's 500 ms SLO are 250 ms wide (…, 0.25, 0.5, 0.75, 1.0, …). Below is a real
        `/metrics` page of this engine after 8 requests (stored in `assets/monitoring/`).
        """),
        code("""
        sample = mp.parse_metrics((ASSETS / "monitoring" / "vllm-0.32-metrics-sample.txt").read_text())
        ttft = sample.buckets("vllm:time_to_first_token_seconds")
        print("le (s)   cumulative requests")
        for le, n in ttft:
            if 0.1 <= le <= 1.0 or math.isinf(le):
                print(f"{le:>6}   {n:.0f}")
        for q in (0.5, 0.95, 0.99):
            print(f"P{round(q * 100)} estimate: {mp.histogram_quantile(q, ttft) * 1000:.0f} ms")
        print(f"share of requests with TTFT <= 500 ms (exact, 0.5 is a bound): {mp.fraction_below(0.5, ttft):.3f}")
        """),
        md("""
        The P95 estimate above only says that the 95th-percentile request lies somewhere in the
        bucket between 500 and 750 ms; the digits after that are the interpolation, not a
        measurement. Two practical rules follow. Put SLO thresholds **on bucket bounds** (500 ms for TTFT
        and 50 ms for TPOT are bounds in vLLM 0.32), and when a yes/no answer is enough, compare the
        *share of requests under the bound* (`bucket{le="0.5"} / count`), which is exact. If the rank
        falls into the last, `+Inf` bucket, the estimate is the highest finite bound however slow the
        requests really were.

        ### The service layer over a short load run

        Four client threads keep four requests in flight for about 12 seconds, while a sampler reads
        `/metrics` every second. All prompts share a ~290-token preamble, so from the second wave on
        the prefix cache can serve two 128-token KV blocks of each prompt (the CPU engine's block
        size is 128; only whole blocks are shared). Quantiles are computed over the run only: the
        difference of two scrapes, which is what PromQL's `increase()` gives.
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        run = run_load(srv, concurrency=4, duration_s=12, max_tokens=32, sample_every_s=1.0)
        series = timeseries_rows(run.samples, run.before)
        s = mp.summary(run.after, run.window())
        print(f"{run.completed} requests in {run.wall_s:.1f} s = {run.qps:.2f} QPS (closed loop, 4 in flight)")
        print(f"peak running {max(r['running'] for r in series):.0f}, peak waiting {max(r['waiting'] for r in series):.0f}, "
              f"peak KV use {max(r['kv_cache_usage'] for r in series):.3f}")
        print(f"prefix-cache hit rate over the run {s['prefix_cache_hit_rate']:.2f}")
        print(f"TTFT P50/P95 {s['ttft_p50_s'] * 1000:.0f}/{s['ttft_p95_s'] * 1000:.0f} ms, "
              f"TPOT P50/P95 {s['tpot_p50_s'] * 1000:.0f}/{s['tpot_p95_s'] * 1000:.0f} ms (histogram estimates)")
        assert run.completed >= 4 and not run.errors
        assert max(r["running"] for r in series) <= 4
        assert s["prefix_cache_hit_rate"] > 0.2          # the shared preamble is served from cache
        assert 0 < s["ttft_p50_s"] <= s["ttft_p95_s"]
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        fig = load_run_figure(series)
        fig.show()
        assert len(fig.data) == 6 and len(series) >= 5
        """),
        md("""
        ## 6.2 Alerts (告警) generated from the SLOs

        The seed's alert table has five rows. Each becomes a Prometheus alerting rule whose
        thresholds come from the SLOs (TTFT P95 < 500 ms, TPOT P95 < 50 ms for the §5 scenario), so
        changing the SLO changes the rules. The templates are data
        (`assets/monitoring/alerts.yaml`); `inferopt.monitoring.alerts.build_rules` fills them.
        """),
        code("""
        slo = SLOs(ttft_p95_s=0.5, tpot_p95_s=0.05, max_request_s=30, gpu_memory_fraction=0.95)
        table = alert_table(slo)
        display(md_table(table, ["alert", "seed", "severity", "for", "expr"]))
        """),
        code("""
        for row in table:
            print(f"{row['alert']}: {row['why']}\\n")
        """),
        md("""
        A few choices deserve a word:

        - **"TTFT P95 above the SLO for 5 min"** is a P95 over a 5-minute rate window, held for 5
          minutes (`for: 5m`) before it fires; while it waits the alert is *pending*.
        - **"Any request slower than 30 s"** cannot come from a quantile. vLLM's end-to-end histogram
          has a bucket at exactly 30 s (the live check above shows the bound as `le="30.0"`), so
          `count − bucket{le="30"}` is the *exact* number of slower requests. The matcher
          `le=~"30(\\\\.0)?"` accepts both `30.0` (Prometheus 2.x keeps the exposed text) and `30`
          (Prometheus 3.x normalises it). If your threshold is not a bound, `SLOs` refuses it and
          names the nearest bound.
        - **Instance OOM** has no metric called "OOM". A host-memory OOM is the kernel's OOM killer,
          visible on Kubernetes through kube-state-metrics as the container's last termination
          reason `OOMKilled`, paired with a fresh restart. A CUDA out-of-memory error is different:
          it ends vLLM's engine, the server exits and is restarted, and the engine's
          `process_start_time_seconds` changes. The rule fires on either.

        The rule file and promtool's unit tests are written side by side:
        """),
        code("""
        alerts_dir = results_dir() / "ch06-alerts"
        paths = write_rules_and_tests(alerts_dir, slo)
        print(paths["rules"].read_text())
        """),
        code("""
        def show(res):
            print(f"$ {res.command.replace(str(alerts_dir) + '/', '')}  ->  exit {res.returncode}")
            print(res.output.replace(str(alerts_dir) + "/", "").strip())

        checked, tested = check_rules(paths["rules"]), test_rules(paths["tests"])
        show(checked)
        show(tested)
        assert checked.ok and tested.ok
        """),
        md("""
        Each promtool test feeds synthetic series for two instances (one that breaks the rule, one
        that does not) and states which alerts must be firing at given times, including a time
        *before* `for:` has passed, when nothing may fire yet. A test that cannot fail proves
        nothing, so here are rules built from a **wrong** SLO, run against the same tests:
        """),
        code("""
        import re

        for label, wrong in [("TTFT SLO 1 s instead of 0.5 s", build_rules(SLOs(ttft_p95_s=1.0))),
                             ("for: 0m instead of 5m", build_rules(slo, for_="0m"))]:
            paths["rules"].write_text(rules_yaml(wrong))
            res = test_rules(paths["tests"])
            failed = sorted(set(re.findall(r"^\\s*name: (\\w+):", res.output, flags=re.M)))
            print(f"{label:32s} promtool test ok={res.ok}  failing tests: {failed}")
            assert not res.ok
        paths["rules"].write_text(rules_yaml(build_rules(slo)))          # restore the right rules
        assert test_rules(paths["tests"]).ok
        """),
        md("""
        ### A real Prometheus, scraping the live engine

        Unit tests run on synthetic series. Now the real thing: a Prometheus server (Debian's
        `prometheus` package, the same one that ships `promtool`) on a free loopback port, scraping
        the engine every second and evaluating the rules every second. To see an alert fire within
        a minute we set the SLO **below what the CPU engine can meet** (TTFT P95 < 50 ms, TPOT P95 <
        20 ms), and shorten the windows: the same `build_rules` with `for_="5s"`, `window="15s"`.
        Then we put load on the engine and poll Prometheus' HTTP API (`/api/v1/alerts`) until the
        alert is *firing*. Prometheus also scrapes itself, so we can ask it how long its scrapes and
        rule evaluations take.
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        demo_slo = SLOs(ttft_p95_s=0.05, tpot_p95_s=0.02)
        demo_rules = build_rules(demo_slo, for_="5s", window="15s", only=["TTFTP95AboveSLO", "TPOTP95AboveSLO"])
        with PrometheusServer({"vllm": [srv.base_url]}, rules=demo_rules, scrape_interval="1s",
                              evaluation_interval="1s", self_scrape=True) as prom:
            prom.wait_for_target("vllm")
            before = [a["state"] for a in prom.alerts()]      # idle engine: nothing pending or firing
            dash_queries = dashboard.queries(dashboard.build_dashboard())
            for q in dash_queries:                             # each raises if Prometheus rejects it
                prom.query(dashboard.resolve_variables(q))
            box = {}
            loader = threading.Thread(target=lambda: box.setdefault(
                "run", run_load(srv, concurrency=4, duration_s=15, max_tokens=32, first_index=1000)))
            t_load, wall_load = time.monotonic(), time.time()
            loader.start()
            ttft_alert = prom.wait_for_alert("TTFTP95AboveSLO", state="firing", timeout_s=60)
            t_ttft = time.monotonic() - t_load
            tpot_alert = prom.wait_for_alert("TPOTP95AboveSLO", state="firing", timeout_s=60)
            t_tpot = time.monotonic() - t_load
            loader.join()
            time.sleep(1.5)                                    # one more scrape after the last request
            scrape = prom.query_value('avg_over_time(scrape_duration_seconds{job="vllm"}[1m])')
            scrape_max = prom.query_value('max_over_time(scrape_duration_seconds{job="vllm"}[1m])')
            evaluation = prom.query_value("avg_over_time(prometheus_rule_group_last_duration_seconds[1m])")
            evaluation_max = prom.query_value("max_over_time(prometheus_rule_group_last_duration_seconds[1m])")
            p95_prom = prom.query_value("histogram_quantile(0.95, sum by (le) (vllm:time_to_first_token_seconds_bucket))")
            p95_ours = mp.histogram_quantile(0.95, mp.parse_metrics(srv.metrics_text()).buckets("vllm:time_to_first_token_seconds"))
            workdir = prom.workdir
        pending_at = ttft_alert["alert"]["active_at_epoch_s"] - wall_load
        print(f"scrape of the engine's /metrics: mean {scrape * 1000:.1f} ms, max {scrape_max * 1000:.1f} ms")
        print(f"rule-group evaluation: mean {evaluation * 1000:.2f} ms, max {evaluation_max * 1000:.2f} ms")
        print(f"TTFT alert: condition true (pending) {pending_at:.1f} s after the load started, "
              f"firing seen at {t_ttft:.1f} s -> {t_ttft - pending_at:.1f} s from pending to firing (for: 5s)")
        print(f"TPOT alert firing seen at {t_tpot:.1f} s (TPOT is recorded when a request finishes)")
        print(f"alerts before the load: {before}; {box['run'].completed} requests; {len(dash_queries)} dashboard queries ran; "
              f"P95 TTFT since start: Prometheus {p95_prom:.4f} s, ours {p95_ours:.4f} s")
        assert 0 < scrape < 1.0 and 0 < evaluation < 0.5
        assert t_ttft - pending_at >= 4.5 and t_ttft < 60
        assert abs(p95_prom - p95_ours) < 1e-9 and not workdir.exists()
        """),
        md("""
        Reading the figures: a scrape of vLLM's `/metrics` takes milliseconds, and
        evaluating the rule group well under a millisecond, so neither limits how fast an alert can
        fire. What does is the chain *observation → next scrape (≤ 1 scrape interval) → next
        evaluation (≤ 1 evaluation interval) → `for:` duration*. Here the intervals are 1 s and
        `for:` is 5 s; in production, with scrape and evaluation intervals of 15 s or more and
        `for: 5m`, the seed's TTFT alert pages a little over five minutes after the P95 crossed the
        line, by design: a single slow minute should not wake anyone. The last line shows that our bucket interpolation gives Prometheus'
        answer to the last digit, on the same buckets. When the block ended, Prometheus was stopped
        and its temporary folder (config, rules, time-series database) deleted.

        ### The Grafana dashboard

        Grafana cannot run here, but its dashboard is plain JSON. `assets/monitoring/grafana_dashboard.json`
        (generated by `inferopt.monitoring.dashboard`, import it with *Dashboards → New → Import*) has
        one panel per service-layer item, with the SLOs drawn as threshold lines. Every query in it
        was run through the real Prometheus above; here we check that every metric it names is
        exposed by the live engine.
        """),
        code("""
        dash = json.loads(dashboard.STORED_PATH.read_text())
        for p in dash["panels"]:
            print(f"{p['id']:>2} {p['type']:10s} {p['title']}")
        names = set()
        for q in dashboard.queries(dash):
            names |= catalog.promql_metric_names(dashboard.resolve_variables(q))
        live = mp.parse_metrics(srv.metrics_text()).sample_names
        print(f"{len(names)} metric names in {len(dashboard.queries(dash))} queries; not exposed by the engine: "
              f"{sorted(names - live)}")
        assert names <= live
        """),
        md("""
        ## 6.3 Capacity planning (容量规划) and rollout

        The seed's arithmetic first. One instance (8 × H100, TP = 8) sustains 50 QPS inside the SLO;
        the target is 200 QPS; one more instance absorbs peaks (surge, 峰值冗余) and one more lets an
        instance fail at peak without breaking the SLO (N+1). `inferopt.capacity.plan_instances`
        does the sums:
        """),
        code("""
        seed_plan = plan_instances(target_qps=200, per_instance_qps=50, surge_instances=1, redundancy="N+1",
                                   gpus_per_instance=8)
        print("\\n".join(seed_plan.working))
        assert (seed_plan.instances, seed_plan.gpus) == (6, 48)
        fleet = availability(instance_availability=0.99, instances=seed_plan.instances,
                             required_instances=seed_plan.base_instances, target=0.999)
        print("\\n".join(fleet.working))
        """),
        md("""
        The one number that carries the whole plan is the **per-instance QPS**, and it must be
        measured, at the SLO, on the real hardware with the real request shape. Here is the same
        method on this engine, using the course's benchmark package (`inferopt.bench`): a
        closed-loop sweep over concurrency with fresh 100-token prompts and 32 output tokens,
        client-side TTFT/TPOT from streaming. The CPU engine cannot meet the GPU SLO, so we use a
        CPU-scale SLO (TTFT P95 < 2 s, TPOT P95 < 250 ms, the same as chapter 05b). The capacity of one
        instance is the request throughput at the highest concurrency that still meets it.
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        from inferopt.bench import experiments
        from inferopt.bench.metrics import SLO, max_level_meeting, table as bench_table

        SLO_CPU = SLO(ttft_ms=2000, tpot_ms=250)
        sweep_rows = experiments.concurrency_sweep(srv, concurrencies=[1, 2, 4], input_tokens=100, output_tokens=32,
                                                   min_rounds=2, slo=SLO_CPU, progress=False)
        print(bench_table(sweep_rows, ["concurrency", "completed", "ttft_p95_ms", "tpot_p95_ms",
                                       "request_throughput_rps", "meets_slo"]))
        best = max_level_meeting(sweep_rows, SLO_CPU)
        assert best is not None, "not even concurrency 1 meets the CPU SLO on this machine"
        measured_qps = next(r["request_throughput_rps"] for r in sweep_rows if r["concurrency"] == best)
        print(f"one CPU instance: {measured_qps:.2f} QPS inside the SLO (at concurrency {best})")
        assert measured_qps > 0
        """),
        md("""
        Now the plan for a small internal assistant that must serve **3 QPS** at peak on such
        instances (one machine each), with the same surge and N+1 rules:
        """),
        code("""
        # NBVAL_IGNORE_OUTPUT
        TARGET_QPS = 3.0
        cpu_plan = plan_instances(TARGET_QPS, round(measured_qps, 3), surge_instances=1, redundancy="N+1",
                                  gpus_per_instance=1)
        print("\\n".join(line.replace("GPUs", "machines").replace("GPU", "machine") for line in cpu_plan.working))
        assert cpu_plan.instances == math.ceil(round(TARGET_QPS / round(measured_qps, 3), 9)) + 2
        """),
        md("""
        ### The canary plan (灰度发布): what to read at each step

        The seed rolls out 5% → 50% → 100%. Each step holds long enough to collect a few thousand
        requests, and moves on only if every gate passes, read **on the new version's series only**
        (the deployment labels the canary's pods, e.g. `version="canary"`). The gates are the same
        histograms and thresholds as the alerts, so what blocks a rollout is what would page
        someone after it.
        """),
        code("""
        CPU_SLO = SLOs(ttft_p95_s=2.0, tpot_p95_s=0.25)
        steps = canary_steps(fractions=(0.05, 0.5, 1.0), total_qps=TARGET_QPS, ttft_p95_ms=2000, tpot_p95_ms=250)
        for st in steps:
            hold = f"hold {st.hold_minutes} min" if st.hold_minutes else "hold until the next release"
            print(f"step {st.step}: {st.traffic_fraction:>4.0%} of traffic = {st.qps_on_new_version:.2f} QPS "
                  f"on the new version, {hold}")
        print()
        gates = canary_gates(CPU_SLO, selector='job="vllm",version="canary"', window="5m")
        for g in gates:
            print(f"gate {g['gate']:16s} pass if {g['pass_if']} {g['threshold']:g} {g['unit']}\\n    {g['promql']}")
        print("\\nroll back if:", "; ".join(steps[0].rollback_if))
        """),
        md("""
        How many requests does the first gate rest on? The P95 is decided by the slowest 5% of the
        requests the canary served during its hold:
        """),
        code("""
        for total in (TARGET_QPS, 200):
            first = canary_steps(total_qps=total)[0]
            n = first.qps_on_new_version * first.hold_minutes * 60
            print(f"target {total:g} QPS: step 1 = {first.qps_on_new_version:g} QPS x {first.hold_minutes} min = "
                  f"{n:,.0f} requests; the P95 rests on the slowest {n * 0.05:,.0f}")
        """),
        md("""
        On a small service a few hundred requests give a shaky P95: hold the first step longer, or
        send a fixed share of synthetic traffic to the canary. At the seed's scale the first step
        alone sees thousands of requests.

        We are done with the engine:
        """),
        code("""
        srv.stop()
        print(srv)
        """),
        md("""
        ## Summary

        - Monitoring has three layers; each metric comes from a specific exporter, and names change
          between versions (check them against a live `/metrics`, as this chapter and its tests do).
        - Latency percentiles come from histograms and are interpolated within a bucket: set SLO
          thresholds on bucket bounds and prefer exact "share below the bound" checks where you can.
        - Alert rules are generated from the SLOs and tested with `promtool test rules`, including
          tests that must fail for a wrong rule; a real Prometheus then showed one firing live.
        - Capacity = ceil(target / measured per-instance QPS) + surge + redundancy; the seed's
          200 QPS at 50 QPS per instance gives 6 instances = 48 H100. The canary reads the same
          metrics, on the new version only, before each step.

        Lab 5 (`labs/lab5-monitoring-alerts.ipynb`) asks you to write one alert rule and its
        promtool test, and to size a deployment from a load-test table.
        """),
    ]


LAB_ROWS = """[
    {"concurrency": 16,  "qps": 21.0, "ttft_p95_ms": 180, "tpot_p95_ms": 28},
    {"concurrency": 32,  "qps": 38.0, "ttft_p95_ms": 240, "tpot_p95_ms": 34},
    {"concurrency": 64,  "qps": 50.0, "ttft_p95_ms": 410, "tpot_p95_ms": 46},
    {"concurrency": 96,  "qps": 61.0, "ttft_p95_ms": 620, "tpot_p95_ms": 55},
    {"concurrency": 128, "qps": 72.0, "ttft_p95_ms": 900, "tpot_p95_ms": 71},
]"""


def lab5():
    return [
        md("""
        # Lab 5: an alert rule with its test, and a deployment sized from a load test

        Chapter 06 generated the seed's five alerts and proved them with `promtool`. Here you add a
        sixth, the one every vLLM operator eventually wants: **the KV cache is nearly full**. When
        `vllm:kv_cache_usage_perc` (a fraction 0..1) stays above 0.9, the scheduler is about to
        preempt requests, and tail latency follows.

        Then you size a deployment from a load-test table, as in the seed's §6.3.

        No engine is needed: the rule is checked with Debian's `promtool` (installed by
        `make setup`) against the metric names of a real vLLM 0.32 `/metrics` page stored in
        `assets/monitoring/`.
        """),
        code("""
        import math

        import yaml

        from inferopt.capacity import plan_instances
        from inferopt.monitoring.grading import check_rule_and_test, exposed_names

        print(sorted(n for n in exposed_names() if "kv_cache" in n or "num_requests" in n))
        """),
        md("""
        ## Task 1: the rule and its promtool test

        Write `my_rule`, a Prometheus alerting rule as a dict (the shape of one entry under
        `rules:` in a rule file), with:

        - `alert: KVCacheNearlyFull`, severity `warning` (in `labels`);
        - an expression that is true, per `instance`, while `vllm:kv_cache_usage_perc{job="vllm"}`
          is above **0.9**;
        - `for: 2m`, so a short burst does not page anyone.

        Then write `my_test`, a promtool unit-test file as a dict (`evaluation_interval` and
        `tests`; the checker adds `rule_files`). Feed two instances with `interval: 1m`: one that
        stays at 0.97, one that stays at 0.5. Expect **no** alert at `1m` (still pending), and
        exactly one alert, for the full instance, at `5m`. Remember that promtool compares labels
        *and* annotations of the expected alerts exactly.
        """),
        code("""
        ### BEGIN SOLUTION
        my_rule = {
            "alert": "KVCacheNearlyFull",
            "expr": 'max by (instance) (vllm:kv_cache_usage_perc{job="vllm"}) > 0.9',
            "for": "2m",
            "labels": {"severity": "warning"},
            "annotations": {"summary": "KV cache above 90% on {{ $labels.instance }}"},
        }
        my_test = {
            "evaluation_interval": "1m",
            "tests": [{
                "interval": "1m",
                "input_series": [
                    {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="full:8000"}', "values": "0.97x10"},
                    {"series": 'vllm:kv_cache_usage_perc{job="vllm",instance="ok:8000"}', "values": "0.5x10"},
                ],
                "alert_rule_test": [
                    {"eval_time": "1m", "alertname": "KVCacheNearlyFull", "exp_alerts": []},
                    {"eval_time": "5m", "alertname": "KVCacheNearlyFull", "exp_alerts": [{
                        "exp_labels": {"severity": "warning", "instance": "full:8000"},
                        "exp_annotations": {"summary": "KV cache above 90% on full:8000"},
                    }]},
                ],
            }],
        }
        ### END SOLUTION
        print(yaml.safe_dump({"groups": [{"name": "lab5", "rules": [my_rule]}]}, sort_keys=False))
        """),
        md("""
        **Check.** The checker runs `promtool check rules` and `promtool test rules` on your pair,
        verifies the metric exists in vLLM 0.32's `/metrics`, and then runs *your test* against two
        broken rules, one that never fires and one that always fires. Your test must fail on both:
        a test that cannot fail proves nothing.
        """),
        code("""
        problems = check_rule_and_test(my_rule, my_test)
        for p in problems:
            print("-", p)
        assert my_rule["alert"] == "KVCacheNearlyFull" and my_rule["for"] == "2m"
        assert "vllm:kv_cache_usage_perc" in my_rule["expr"] and "0.9" in my_rule["expr"]
        assert not problems, "fix the problems listed above"
        print("rule and test: all checks passed")
        """),
        md("""
        ## Task 2: size the deployment

        A load test of one instance (8 × H100, TP = 8, the seed's §5 plan) at increasing
        concurrency gave the table below (illustrative figures in the shape chapter 05b measures).
        The SLO is TTFT P95 < 500 ms and TPOT P95 < 50 ms; the target is **200 QPS**, with **one
        surge instance** and **N+1** redundancy.

        Set `per_instance_qps` to the throughput one instance sustains *inside the SLO*, and
        `plan` to the result of `plan_instances(...)` for this target.
        """),
        code("load_test = " + LAB_ROWS + "\nTTFT_SLO_MS, TPOT_SLO_MS, TARGET_QPS = 500, 50, 200"),
        code("""
        ### BEGIN SOLUTION
        inside = [r for r in load_test if r["ttft_p95_ms"] < TTFT_SLO_MS and r["tpot_p95_ms"] < TPOT_SLO_MS]
        per_instance_qps = max(r["qps"] for r in inside)
        plan = plan_instances(TARGET_QPS, per_instance_qps, surge_instances=1, redundancy="N+1", gpus_per_instance=8)
        ### END SOLUTION
        print("\\n".join(plan.working))
        """),
        code("""
        assert per_instance_qps == 50, "use the best throughput among the rows that meet both SLOs"
        assert plan.target_qps == TARGET_QPS and plan.surge_instances == 1 and plan.redundancy == "N+1"
        assert (plan.base_instances, plan.instances, plan.gpus) == (4, 6, 48)
        naive = plan_instances(TARGET_QPS, max(r["qps"] for r in load_test), 1, "N+1", 8)
        print(f"sized on the raw peak of {naive.per_instance_qps:g} QPS: {naive.instances} instances = {naive.gpus} GPUs")
        assert naive.instances == plan.instances - 1
        """),
        md("""
        Note how the naive sizing (peak throughput, ignoring the SLO) buys one instance less. At
        that throughput the table shows TTFT P95 far above 500 ms, so at full load the fleet would
        break its TTFT SLO, and the `TTFTP95AboveSLO` rule from chapter 06 would fire after five
        minutes.
        """),
    ]


if __name__ == "__main__":
    which = set(sys.argv[1:]) or {"chapter06", "lab5"}
    if "chapter06" in which:
        write("chapters/06-monitoring-and-capacity.ipynb", chapter06())
    if "lab5" in which:
        write("solutions/lab5-monitoring-alerts.ipynb", lab5())
