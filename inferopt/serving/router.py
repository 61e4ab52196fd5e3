"""vLLM's own router (PyPI ``vllm-router``, a Rust load balancer) in front of N live engines.

    from inferopt.serving.engine import VLLMServer
    from inferopt.serving.router import VLLMRouter
    with VLLMServer() as a, VLLMServer() as b, VLLMRouter([a, b], policy="cache_aware") as r:
        print(r.base_url, r.workers())          # send OpenAI requests to r.base_url
        print(r.metrics_text())                 # the router's own Prometheus metrics

What it does:
- checks every worker first: it must answer ``/health`` and list models at ``/v1/models`` with
  ``owned_by == "vllm"``; a URL that answers something else, or nothing, is a one-line CourseError;
- starts ``python -m vllm_router.launch_router`` (the wheel's Rust extension; same flags as its
  ``vllm-router`` console script) on 127.0.0.1 and a free port, with its Prometheus exporter on
  another free loopback port, in its own process group (ManagedProcess: PR_SET_PDEATHSIG, the
  whole group stopped on ``stop()``, at the end of a ``with`` block, when a cell fails and at
  interpreter exit);
- waits until the router answers ``/v1/models`` (it forwards to a healthy worker), bounded.

Flags used (all from ``vllm_router/router_args.py`` of vllm-router 0.1.17): ``--worker-urls``,
``--policy {random,round_robin,cache_aware,kv_aware,power_of_two,consistent_hash,sticky_least_loaded}``,
``--host``, ``--port``, ``--prometheus-host``, ``--prometheus-port``, ``--retry-max-retries``,
``--disable-retries``, ``--health-check-interval-secs``, ``--health-failure-threshold``,
``--health-success-threshold``, ``--worker-startup-timeout-secs``, ``--log-level``.
The router has no per-worker weights: a weighted canary split needs another component.

The bad-input guards for a canary weight and an N+1 instance count live in
:mod:`inferopt.planning.capacity` (the chapter and the Kubernetes manifest writer share them).
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time

from inferopt.errors import CourseError
from inferopt.paths import servers_dir
from inferopt.serving.managed_process import ManagedProcess, free_port, log_tail

ROUTER_MODULE = "vllm_router.launch_router"
POLICIES = ("random", "round_robin", "cache_aware", "kv_aware", "power_of_two", "consistent_hash",
            "sticky_least_loaded")
INSTALL_HINT = "pip install vllm-router==0.1.17   (pinned in requirements.txt)"



def _worker_url(w) -> str:
    url = getattr(w, "base_url", w)
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise CourseError(f"worker {w!r}: give a running VLLMServer or a URL such as http://127.0.0.1:8000")
    return url.rstrip("/").removesuffix("/v1")


def probe_worker(url: str, timeout_s: float = 5.0) -> str:
    """Check that ``url`` is a live vLLM OpenAI server; return its first model id.

    CourseError (one line) when nothing answers, /health is not 200, or /v1/models does not
    look like vLLM's (``owned_by: vllm``)."""
    import requests

    try:
        health = requests.get(url + "/health", timeout=timeout_s)
        models = requests.get(url + "/v1/models", timeout=timeout_s)
    except requests.RequestException:
        raise CourseError(f"worker {url} does not answer (nothing listening, or it died): start the engine "
                          "first, or remove it from the worker list") from None
    try:
        data = models.json().get("data") or []
    except ValueError:
        data = []
    if health.status_code != 200 or not data or data[0].get("owned_by") != "vllm":
        raise CourseError(f"worker {url} is not a vLLM server (/health {health.status_code}, /v1/models "
                          f"{models.status_code} without a vLLM model): give the URL of a running vLLM engine")
    return data[0]["id"]


class VLLMRouter(ManagedProcess):
    """vLLM's router as a managed subprocess in front of ``workers`` (VLLMServers or URLs).

    Args:
        workers: running VLLMServer objects or their base URLs (at least one).
        policy: one of POLICIES; 'cache_aware' (the router's default) or 'round_robin' here.
        retries: retry attempts on a failed worker (0 disables retries).
        health_check_interval_s: seconds between the router's health checks of each worker.
        health_failure_threshold: failed checks in a row before a worker is taken out.
        extra_args: further vllm-router flags.
        startup_timeout: seconds to wait for the router to answer.
    """

    stop_grace_s = 5.0

    def __init__(self, workers, *, policy: str = "cache_aware", retries: int = 5,
                 health_check_interval_s: int = 2, health_failure_threshold: int = 1,
                 health_success_threshold: int = 1, extra_args=(), host: str = "127.0.0.1",
                 startup_timeout: float = 60.0, log_level: str = "warning"):
        if policy not in POLICIES:
            raise CourseError(f"policy={policy!r}: vllm-router knows {', '.join(POLICIES)}")
        workers = list(workers)
        if not workers:
            raise CourseError("a router needs at least one worker: start a VLLMServer and pass it")
        self.worker_urls = [_worker_url(w) for w in workers]
        if retries < 0:
            raise CourseError(f"retries={retries}: give 0 (no retries) or more")
        self.policy, self.retries = policy, int(retries)
        self.health_check_interval_s = int(health_check_interval_s)
        self.health_failure_threshold = int(health_failure_threshold)
        self.health_success_threshold = int(health_success_threshold)
        self.extra_args = [str(a) for a in extra_args]
        self.host, self.startup_timeout, self.log_level = host, startup_timeout, log_level
        self.port: int | None = None
        self.metrics_port: int | None = None
        self.log_path = None
        self.model: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def model_name(self) -> str | None:
        return self.model

    def command(self) -> list[str]:
        args = [sys.executable, "-m", ROUTER_MODULE, "--host", self.host, "--port", str(self.port),
                "--worker-urls", *self.worker_urls, "--policy", self.policy,
                "--prometheus-host", self.host, "--prometheus-port", str(self.metrics_port),
                "--health-check-interval-secs", str(self.health_check_interval_s),
                "--health-failure-threshold", str(self.health_failure_threshold),
                "--health-success-threshold", str(self.health_success_threshold),
                "--worker-startup-timeout-secs", str(int(self.startup_timeout)),
                "--log-level", self.log_level]
        args += ["--disable-retries"] if self.retries == 0 else ["--retry-max-retries", str(self.retries)]
        return args + self.extra_args

    def start(self) -> VLLMRouter:
        import requests

        if self.proc is not None:
            return self
        if importlib.util.find_spec("vllm_router") is None:
            raise CourseError(f"vLLM's router is not installed in this Python ({sys.executable}). Run: {INSTALL_HINT}")
        healthy, problems = [], []
        for url in self.worker_urls:
            try:
                self.model = probe_worker(url)
                healthy.append(url)
            except CourseError as exc:
                problems.append(str(exc))
        not_vllm = [p for p in problems if "is not a vLLM server" in p]
        if not_vllm:
            raise CourseError(not_vllm[0])
        if not healthy:
            raise CourseError(f"router has no healthy worker: none of {len(self.worker_urls)} worker(s) answers "
                              f"({self.worker_urls[0]} first). Start the engines before the router.")
        if problems:   # start with the live ones (vllm-router would wait for every listed worker)
            print(f"[inferopt] router starts without {len(problems)} worker(s) that did not answer: {problems[0]}",
                  file=sys.stderr)
        self.worker_urls = healthy
        self.port, self.metrics_port = free_port(self.host), free_port(self.host)
        while self.metrics_port == self.port:
            self.metrics_port = free_port(self.host)
        self.log_path = servers_dir() / f"router-{self.port}.log"
        rust_level = {"warning": "warn", "critical": "error"}.get(self.log_level, self.log_level)
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", rust_level))
        t0 = time.monotonic()
        self._spawn(self.command(), self.log_path, env=env)
        try:
            while True:
                code = self.proc.poll()
                if code is not None:
                    raise CourseError(f"vllm-router exited during start-up (exit code {code}). "
                                      f"Last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                try:
                    if requests.get(self.base_url + "/v1/models", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() - t0 > self.startup_timeout:
                    raise CourseError(f"vllm-router did not answer within {self.startup_timeout:.0f} s; "
                                      f"last lines of {self.log_path}:\n{log_tail(self.log_path)}")
                time.sleep(0.3)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.proc else "stopped"
        return f"<VLLMRouter {self.policy} over {len(self.worker_urls)} worker(s), {state}>"

    # ---- what the router says about itself
    def workers(self) -> list:
        """The router's worker list (GET /workers), as it reports it."""
        import requests

        r = requests.get(self.base_url + "/workers", timeout=5)
        r.raise_for_status()
        data = r.json()
        return data.get("workers", data) if isinstance(data, dict) else data

    def metrics_text(self) -> str:
        """The router's Prometheus exposition (its own exporter port)."""
        import requests

        try:
            return requests.get(self.metrics_url, timeout=10).text
        except requests.RequestException as exc:
            raise CourseError(f"the router's metrics at {self.metrics_url} did not answer: {exc}") from None


def router_samples(text: str, prefix: str = "vllm_router_") -> dict:
    """{(name, labels as sorted tuple): value} for the router's samples in a metrics text."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith(prefix):
                out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out
