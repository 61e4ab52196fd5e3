"""Monitoring, alerting and capacity (seed §6): read vLLM's /metrics, generate and test alert
rules from the SLOs, run a real Prometheus against the live engine, build a Grafana dashboard.

Modules:
- :mod:`.catalog`            the three-layer metrics catalog (``assets/monitoring/metrics_catalog.yaml``)
- :mod:`.metrics_parse`      parse the Prometheus text format; queue, KV use, hit rate, quantiles
- :mod:`.alerts`             the five §6.2 alerts as Prometheus rules + promtool unit tests
- :mod:`.promtool`           ``promtool check rules`` / ``promtool test rules``
- :mod:`.prometheus_server`  a real Prometheus on loopback, scraping the live engine
- :mod:`.dashboard`          the Grafana dashboard JSON (service layer)
- :mod:`.load`               a small closed-loop load generator (threads) for the demos
- :mod:`.plots`              plotly figures of metric time series
"""
