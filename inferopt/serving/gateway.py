"""The canary split: an nginx gateway with a weighted upstream over a stable and a canary version.

    with NginxGateway(stable=[a], canary=[b], canary_weight=5) as gw:
        ...                                   # send OpenAI requests to gw.base_url
        gw.set_canary_weight(50)              # rewrite the upstream and reload nginx, no dropped request
        gw.requests_per_version()             # {'stable': n, 'canary': m}, from nginx's own access log

vLLM's router has no per-worker weights, so a weighted split needs another component; in
production it is the gateway in front of the routers (see :mod:`inferopt.planning.k8s`, which
writes the same upstream for Kubernetes). Here nginx (Debian's ``nginx`` package, installed by
``make tools``) runs in the foreground as a :class:`ManagedProcess`: its own process group, a
free port on 127.0.0.1, a temporary folder for its config, logs and temp files (deleted on
``stop()``), stopped at the end of a ``with`` block, after a failed cell and at interpreter exit.

nginx's weighted round-robin is "smooth" and deterministic: with weights 95/5 the canary gets
exactly one request in every 20, spread out, never a burst. One worker process keeps that
count exact (each worker balances on its own). A weight change is a new config plus SIGHUP:
nginx starts new workers with the new upstream and lets the old ones finish their requests,
which is how a real rollout moves the split without cutting a stream. ``set_canary_weight``
returns once the old workers are gone, so every request sent after it follows the new weight.

Weights are whole percentages, checked by :func:`inferopt.planning.capacity.check_canary_weight`
(0-100); at 0 the canary leaves the upstream, at 100 the stable version does.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.planning.capacity import check_canary_weight
from inferopt.serving.managed_process import ManagedProcess, free_port, log_tail
from inferopt.serving.router import _worker_url, probe_worker

INSTALL_HINT = "sudo apt-get install nginx   (or: make tools)"
VERSIONS = ("stable", "canary")


def nginx_binary() -> str:
    """Path of the nginx binary: ``INFEROPT_NGINX``, else PATH, else /usr/sbin/nginx."""
    exe = os.environ.get("INFEROPT_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise CourseError(f"nginx is not installed (looked for {exe}): the canary split needs it. Run: {INSTALL_HINT}")
    return exe


def _host_port(w) -> str:
    """'127.0.0.1:PORT' of a running server or URL (router's ``_worker_url`` reads either), loopback only."""
    try:
        url = _worker_url(w)
    except CourseError:
        url = None
    m = re.fullmatch(r"http://(127\.0\.0\.1|localhost):(\d+)", url) if url else None
    if not m:
        raise CourseError(f"upstream {w!r}: give a running VLLMServer or a loopback URL such as http://127.0.0.1:8000")
    return f"127.0.0.1:{m.group(2)}"


def _still_running(p) -> bool:
    """A psutil process that has not exited (a zombie has); one that vanished meanwhile has too."""
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:      # reaped between the two questions
        return False


class NginxGateway(ManagedProcess):
    """nginx on 127.0.0.1 splitting traffic between ``stable`` and ``canary`` upstreams by weight.

    Args:
        stable, canary: running VLLMServers (or routers) or their loopback base URLs, one or more each.
        canary_weight: percent of requests sent to the canary version, 0-100.
        startup_timeout: seconds to wait for nginx to answer.
        drain_timeout: seconds a weight change waits for the old workers to finish their requests.
    """

    stop_grace_s = 5.0

    def __init__(self, stable, canary, *, canary_weight: float = 5, startup_timeout: float = 15.0,
                 drain_timeout: float = 60.0):
        self.upstreams = {"stable": [_host_port(w) for w in stable], "canary": [_host_port(w) for w in canary]}
        for version, addrs in self.upstreams.items():
            if not addrs:
                raise CourseError(f"the {version} version needs at least one upstream: pass a running engine")
        self.canary_weight = round(check_canary_weight(canary_weight))
        self.startup_timeout, self.drain_timeout = startup_timeout, drain_timeout
        self.port: int | None = None
        self.workdir: Path | None = None
        self.model: str | None = None
        self.reloads = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path | None:
        return self.workdir / "error.log" if self.workdir else None

    def config(self) -> str:
        """nginx.conf for the current weight (the upstream block is the part that changes)."""
        w = self.canary_weight
        servers = []
        if w < 100:
            servers += [f"        server {a} weight={100 - w};" for a in self.upstreams["stable"]]
        if w > 0:
            servers += [f"        server {a} weight={w};" for a in self.upstreams["canary"]]
        d = self.workdir
        version_of = "\n".join(f"        {a} {v};" for v, addrs in self.upstreams.items() for a in addrs)
        return f"""# written by inferopt.serving.gateway: canary weight {w} %
worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    map $upstream_addr $version {{
        default other;
{version_of}
    }}
    log_format split '$msec $version $status $upstream_addr $request_time';
    access_log {d}/access.log split;
    upstream split {{
{chr(10).join(servers)}
    }}
    server {{
        listen 127.0.0.1:{self.port};
        location = /split {{ return 200 "{w}\\n"; }}
        location / {{
            # a new upstream connection per request: no idle keep-alive connection that the
            # engine (uvicorn closes them after 5 s) could close under nginx's feet
            proxy_pass http://split;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 600s;
        }}
    }}
}}
"""

    def _write_config(self) -> None:
        (self.workdir / "nginx.conf").write_text(self.config(), encoding="utf-8")

    def start(self) -> NginxGateway:
        if self.proc is not None:
            return self
        exe = nginx_binary()
        # every upstream must be a live vLLM server (asked directly, so nginx's split stays untouched)
        models = {probe_worker(f"http://{a}") for addrs in self.upstreams.values() for a in addrs}
        if len(models) > 1:
            raise CourseError(f"the versions serve different model names {sorted(models)}: a client could not "
                              "send the same request to both; serve the same name (--served-model-name)")
        self.model = models.pop()
        self.port = free_port()
        self.workdir = Path(tempfile.mkdtemp(prefix="inferopt-nginx-"))
        (self.workdir / "tmp").mkdir()
        os.chmod(self.workdir / "tmp", 0o777)        # nginx's workers may run as another user
        self._write_config()
        cmd = [exe, "-p", str(self.workdir), "-c", str(self.workdir / "nginx.conf"), "-e", str(self.log_path)]
        t0 = time.monotonic()
        self._spawn(cmd, self.workdir / "stdout.log")
        try:
            self._wait_for_weight(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _wait_for_weight(self, t0: float) -> None:
        """Until /split answers the current weight (nginx up, or its reload done)."""
        import requests

        while True:
            code = self.proc.poll()
            if code is not None:
                raise CourseError(f"nginx exited (exit code {code}). Last lines of {self.log_path}:\n"
                                  f"{log_tail(self.log_path)}")
            try:
                r = requests.get(self.base_url + "/split", timeout=1)
                if r.status_code == 200 and r.text.strip() == str(self.canary_weight):
                    return
            except requests.RequestException:
                pass
            if time.monotonic() - t0 > self.startup_timeout:
                raise CourseError(f"nginx did not serve weight {self.canary_weight} within {self.startup_timeout:.0f} s. "
                                  f"Last lines of {self.log_path}:\n{log_tail(self.log_path)}")
            time.sleep(0.05)

    def set_canary_weight(self, weight) -> NginxGateway:
        """Move the split: ``weight`` percent to the canary (0 = roll back, 100 = fully rolled out)."""
        w = round(check_canary_weight(weight))
        if self.proc is None:
            raise CourseError("the gateway is not running: use `with NginxGateway(...) as gw:`")
        if w == self.canary_weight:
            return self
        self.canary_weight = w
        self._write_config()
        old_workers = self._workers()
        os.kill(self.proc.pid, signal.SIGHUP)
        self.reloads += 1
        t0 = time.monotonic()
        self._wait_for_weight(t0)
        # an old worker still holds the listening socket until its last connection closes, and
        # would send a new request by the old weights: wait for the old workers to go
        while any(_still_running(p) for p in old_workers):
            if time.monotonic() - t0 > self.drain_timeout:
                break
            time.sleep(0.05)
        return self

    def _workers(self) -> list:
        import psutil

        try:
            return psutil.Process(self.proc.pid).children()
        except psutil.Error:
            return []

    def _log_barrier(self) -> None:
        """Return once nginx has logged every request whose answer a client has already read.

        nginx writes a request's access-log line when it finalizes the request, just *after* it sent
        the last bytes of the answer, so a client that reads the log right after its answer can miss
        its own line when nginx is descheduled in between (a 2-core machine under load). The single
        worker handles its events one after another: once it has answered a request sent now, the
        lines of every earlier request are in the file."""
        import requests

        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            requests.get(self.base_url + "/split", timeout=10)
        except requests.RequestException:
            pass

    def access_log(self) -> list:
        """[(unix time, version, HTTP status)] for every request passed upstream so far."""
        rows = []
        self._log_barrier()
        path = self.workdir / "access.log" if self.workdir else None
        if path and path.exists():
            for line in path.read_text().splitlines():
                parts = line.split()
                if len(parts) >= 3 and parts[1] in VERSIONS:
                    rows.append((float(parts[0]), parts[1], int(parts[2])))
        return rows

    def requests_per_version(self) -> Counter:
        """Requests nginx passed to each version so far ('stable', 'canary'), from its access log."""
        return Counter(version for _, version, _ in self.access_log())

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.proc else "stopped"
        return f"<NginxGateway canary {self.canary_weight} % {state}>"
