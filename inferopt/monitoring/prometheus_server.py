"""A real Prometheus server on loopback, scraping the live engine: start it, query it, stop it.

    with VLLMServer() as srv, PrometheusServer({"vllm": [srv.base_url]}, rules=build_rules(...)) as prom:
        prom.wait_for_target("vllm")
        prom.query_value('vllm:num_requests_running')
        prom.wait_for_alert("TTFTP95AboveSLO", state="firing", timeout_s=60)

Same hygiene as :class:`inferopt.serving.engine.VLLMServer`: its own process group, a free port on
127.0.0.1, a temporary folder for config, rules and the TSDB (deleted on stop), SIGTERM when
the Python process that started it dies (PR_SET_PDEATHSIG), stopped at the end of the ``with``
block, when a cell fails, and at interpreter exit. Clear errors when the binary is missing,
the config is rejected or it does not become ready.

The binary is Debian's ``prometheus`` package (2.42 here), found on PATH or through
``INFEROPT_PROMETHEUS``. Durations are Prometheus strings ('1s', '5m'); figures returned are
seconds.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import yaml

from inferopt.errors import CourseError
from inferopt.monitoring.promtool import find_tool
from inferopt.serving.managed_process import ManagedProcess, free_port, log_tail


def parse_timestamp(text):
    """Unix seconds of an RFC 3339 time as Prometheus writes it ('2026-01-02T03:04:05.123456789Z');
    None for None."""
    if not text:
        return None
    import re
    from datetime import datetime, timezone

    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if not m:
        raise CourseError(f"unexpected time format from Prometheus: {text!r}")
    base = datetime.fromisoformat(m.group(1) + ("+00:00" if m.group(3) == "Z" else m.group(3)))
    frac = float("0." + m.group(2)) if m.group(2) else 0.0
    return base.replace(tzinfo=base.tzinfo or timezone.utc).timestamp() + frac


def prometheus_binary() -> str:
    """Path of the prometheus server binary (CourseError naming the install command if absent)."""
    return find_tool("prometheus", "INFEROPT_PROMETHEUS")


def _target(addr: str) -> str:
    """'http://127.0.0.1:8000' or '127.0.0.1:8000' -> '127.0.0.1:8000'."""
    if "://" in addr:
        u = urlparse(addr)
        if not u.hostname or not u.port:
            raise CourseError(f"target {addr!r} needs a host and a port, e.g. http://127.0.0.1:8000")
        return f"{u.hostname}:{u.port}"
    if ":" not in addr:
        raise CourseError(f"target {addr!r} needs a port, e.g. 127.0.0.1:8000")
    return addr


class PrometheusServer(ManagedProcess):
    """A Prometheus server started as a subprocess, scraping ``targets`` and evaluating ``rules``.

    Args:
        targets: {job name: [engine base URL or host:port, ...]}; each is scraped at /metrics.
        target_labels: {engine base URL or host:port: {label: value}}, labels Prometheus attaches to
            every series of that target, e.g. {canary.base_url: {"version": "canary"}}.
        rules: a rule-file dict (from :func:`inferopt.monitoring.alerts.build_rules`), a path to
            a rule file, or None.
        scrape_interval / evaluation_interval: Prometheus durations; the demo uses '1s'.
        self_scrape: also scrape Prometheus itself (job 'prometheus').
        startup_timeout: seconds to wait for /-/ready.
    """

    stop_grace_s = 5.0

    def __init__(self, targets: dict, rules=None, *, target_labels: dict | None = None, scrape_interval: str = "1s",
                 evaluation_interval: str = "1s", self_scrape: bool = False,
                 port: int | None = None, startup_timeout: float = 60.0):
        if not isinstance(targets, dict) or not targets:
            raise CourseError("targets must be a dict {job name: [address, ...]}, e.g. {'vllm': [srv.base_url]}.")
        self.targets = {job: [_target(a) for a in addrs] for job, addrs in targets.items()}
        self.target_labels = {_target(a): {str(k): str(v) for k, v in labels.items()}
                              for a, labels in (target_labels or {}).items()}
        unknown = set(self.target_labels) - {a for addrs in self.targets.values() for a in addrs}
        if unknown:
            raise CourseError(f"target_labels names {sorted(unknown)[0]}, which is not among the targets: "
                              "label only addresses you scrape")
        self.rules = rules
        self.scrape_interval = scrape_interval
        self.evaluation_interval = evaluation_interval
        self.self_scrape = self_scrape
        self.requested_port = port
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.workdir: Path | None = None
        self.startup_seconds: float | None = None

    # ---- properties
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self.workdir / "prometheus.log" if self.workdir else None

    def config(self) -> dict:
        """The prometheus.yml this server runs with (dict)."""
        def static(addrs):
            plain = [a for a in addrs if a not in self.target_labels]
            return ([{"targets": plain}] if plain else []) + [
                {"targets": [a], "labels": self.target_labels[a]} for a in addrs if a in self.target_labels]

        jobs = [{"job_name": job, "metrics_path": "/metrics", "static_configs": static(addrs)}
                for job, addrs in self.targets.items()]
        if self.self_scrape:
            jobs.append({"job_name": "prometheus", "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}]})
        cfg = {"global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval,
                          "evaluation_interval": self.evaluation_interval},
               "scrape_configs": jobs}
        if self.rules is not None:
            cfg["rule_files"] = ["rules.yml"]
        return cfg

    # ---- life cycle
    def start(self) -> PrometheusServer:
        if self.proc is not None:
            return self
        exe = prometheus_binary()
        self.port = self.requested_port or free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="inferopt-prometheus-"))
        if self.rules is not None:
            if isinstance(self.rules, dict):
                from inferopt.monitoring.alerts import rules_yaml

                (self.workdir / "rules.yml").write_text(rules_yaml(self.rules), encoding="utf-8")
            else:
                src = Path(self.rules)
                if not src.is_file():
                    raise CourseError(f"rule file {src} does not exist.")
                shutil.copy(src, self.workdir / "rules.yml")
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config(), sort_keys=False), encoding="utf-8")
        cmd = [exe, f"--config.file={self.workdir / 'prometheus.yml'}",
               f"--storage.tsdb.path={self.workdir / 'data'}",
               f"--web.listen-address=127.0.0.1:{self.port}",
               "--storage.tsdb.retention.time=1h", "--log.level=info"]
        t0 = time.monotonic()
        self._spawn(cmd, self.log_path, cwd=self.workdir)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _log_tail(self, n: int = 15) -> str:
        return log_tail(self.log_path, n)

    def _wait_ready(self, t0: float) -> None:
        import requests

        while True:
            code = self.proc.poll()
            if code is not None:
                tail = self._log_tail()
                hint = ""
                if "error loading config" in tail.lower() or "parsing yaml" in tail.lower():
                    hint = "Prometheus rejected its configuration or rule file (check the rules with promtool). "
                elif "address already in use" in tail.lower():
                    hint = "The port was taken: start again (a free port is picked each time). "
                raise CourseError(f"prometheus exited during start-up (exit code {code}). {hint}"
                                  f"Last log lines:\n{tail}")
            try:
                if requests.get(self.base_url + "/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() - t0 > self.startup_timeout:
                raise CourseError(f"prometheus was not ready after {self.startup_timeout:.0f} s. Last log lines:\n"
                                  f"{self._log_tail()}")
            time.sleep(0.2)

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.proc else "stopped"
        return f"<PrometheusServer jobs={sorted(self.targets)} {state}>"

    # ---- HTTP API
    def api(self, path: str, **params) -> dict:
        """GET /api/v1/<path> and return its ``data`` (CourseError on an error answer)."""
        import requests

        if self.proc is None or self.proc.poll() is not None:
            raise CourseError("prometheus is not running: use `with PrometheusServer(...) as prom:`."
                              + (f" Last log lines:\n{self._log_tail()}" if self.workdir else ""))
        try:
            resp = requests.get(f"{self.base_url}/api/v1/{path}", params=params, timeout=10)
        except requests.RequestException as exc:
            raise CourseError(f"prometheus API {path} failed: {exc}") from None
        body = resp.json()
        if body.get("status") != "success":
            raise CourseError(f"prometheus API {path} answered {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list:
        """Instant query: [{'metric': {labels}, 'value': float}] (NaN stays NaN)."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": float(data["result"][1])}]
        return [{"metric": r["metric"], "value": float(r["value"][1])} for r in data["result"]]

    def query_value(self, expr: str):
        """The single value of an instant query, or None when it returns no series."""
        rows = self.query(expr)
        if len(rows) > 1:
            raise CourseError(f"{expr!r} returned {len(rows)} series; aggregate it (e.g. sum(...)) for one value.")
        return rows[0]["value"] if rows else None

    def targets_health(self) -> list:
        """[{'job', 'health', 'last_scrape_duration_s', 'last_error'}] for the active targets."""
        return [{"job": t["labels"].get("job"), "health": t["health"],
                 "last_scrape_duration_s": float(t.get("lastScrapeDuration", 0.0)),
                 "last_error": t.get("lastError", "")} for t in self.api("targets")["activeTargets"]]

    def rule_groups(self) -> list:
        """[{'name', 'evaluation_time_s', 'rules': [{'name', 'state', 'health', 'evaluation_time_s'}]}]."""
        out = []
        for g in self.api("rules")["groups"]:
            out.append({"name": g["name"], "evaluation_time_s": float(g.get("evaluationTime", 0.0)),
                        "rules": [{"name": r["name"], "state": r.get("state"), "health": r.get("health"),
                                   "evaluation_time_s": float(r.get("evaluationTime", 0.0)),
                                   "last_error": r.get("lastError", "")} for r in g["rules"]]})
        return out

    def alerts(self) -> list:
        """Active alerts: [{'name', 'state' ('pending'|'firing'), 'labels', 'active_at' (RFC 3339 text),
        'active_at_epoch_s' (when the condition first held, Unix seconds), 'value'}]."""
        return [{"name": a["labels"].get("alertname"), "state": a["state"], "labels": a["labels"],
                 "active_at": a.get("activeAt"), "active_at_epoch_s": parse_timestamp(a.get("activeAt")),
                 "value": a.get("value")} for a in self.api("alerts")["alerts"]]

    def wait_for_target(self, job: str, timeout_s: float = 30.0) -> dict:
        """Wait until every target of ``job`` was scraped successfully; return its health row."""
        deadline = time.monotonic() + timeout_s
        rows = []
        while time.monotonic() < deadline:
            rows = [t for t in self.targets_health() if t["job"] == job]
            if rows and all(t["health"] == "up" for t in rows):
                return rows[0]
            time.sleep(0.25)
        raise CourseError(f"job {job!r} was not scraped successfully within {timeout_s:.0f} s: {rows}. "
                          "Is the engine running and its /metrics reachable?")

    def wait_for_alert(self, name: str, state: str = "firing", timeout_s: float = 60.0,
                       poll_s: float = 0.25) -> dict:
        """Poll /api/v1/alerts until alert ``name`` is in ``state``. Returns
        {'seconds': waited, 'first_pending_after_s': when it was first seen pending (or None),
        'alert': the alert row}. CourseError (with the rule states) on time-out."""
        if state not in ("pending", "firing"):
            raise CourseError(f"state must be 'pending' or 'firing', got {state!r}.")
        t0 = time.monotonic()
        first_pending = None
        while True:
            waited = time.monotonic() - t0
            for a in self.alerts():
                if a["name"] != name:
                    continue
                if a["state"] == "pending" and first_pending is None:
                    first_pending = waited
                if a["state"] == state or (state == "pending" and a["state"] == "firing"):
                    return {"seconds": waited, "first_pending_after_s": first_pending, "alert": a}
            if waited > timeout_s:
                states = [(r["name"], r["state"], r["health"]) for g in self.rule_groups() for r in g["rules"]]
                raise CourseError(f"alert {name!r} did not reach {state!r} within {timeout_s:.0f} s. "
                                  f"Rule states: {states}")
            time.sleep(poll_s)
