"""The workshop room's server: ``make room`` (``python -m inferopt room serve``) serves the course to a room
from one Linux machine with JupyterHub; laptops need only a browser.

- **One shared environment**: the course's ``.venv`` (JupyterHub, its single-user server, the kernels).
- **One JupyterLab per learner**, with its own kernels, started by :class:`RoomSpawner` as this OS user in the
  learner's own folder ``<room>/learners/<name>``, which holds a copy of the learner pack (``make learner-pack``:
  the course without solutions, references or tests). The learner's kernels import that copy's ``inferopt``
  (``PYTHONPATH``: so ``handin`` hands in *their* labs), read the prepared model from the instructor's cache
  (``INFEROPT_CACHE``) and hand in to ``<room>/handin`` (``INFEROPT_HANDIN_DIR``).
- **Core binding and limits** per learner (the server and every kernel it starts inherit them): its own CPU
  cores (``os.sched_setaffinity``: the cores the engines do not use, ``--learner-cores`` each, round robin
  when there are more learners than cores), its own thread count (``OMP_NUM_THREADS`` and friends) and an
  address-space limit (``RLIMIT_AS``, ``--learner-mem-gib``: an allocation past it fails in that process
  only). The machine's cgroups are not used: a course machine rarely lets a user write them.
- **The room engine**, started once (``--engines``, the course's default shape, each pinned to its own cores),
  or one already running (``--engine-url``), attached for every learner through ``INFEROPT_ENGINE_URL``;
  ``INFEROPT_ROOM_POLICY=refuse`` makes a learner's own engine start fail in one line that names the room
  engine (inferopt/serving/engine.py, ``room_policy_check``). With several engines, learners are spread
  over them in turn.
- **Sign-in**: JupyterHub's ``SharedPasswordAuthenticator``, any name with the room's password (printed at
  start, kept in ``<room>/password``; ``--password`` or ``INFEROPT_ROOM_PASSWORD`` to choose it).
- **Loopback by default** (``--ip 0.0.0.0`` or the room's LAN address to serve the room); the hub, its proxy
  (npm's ``configurable-http-proxy``, installed by ``make tools`` into ``.cache/tools``), each learner's server
  and each engine run in process groups of their own, stopped when ``serve`` ends (Ctrl-C).

All learners run as one OS user: JupyterHub keeps each learner's browser in their own server and folder, but
code in a kernel can read whatever that user can read. Run the room as an account that holds only the
unpacked learner pack and its ``.venv`` (INSTRUCTORS.md, "The room server").

``python -m inferopt room measure`` measures what INSTRUCTORS.md publishes: a learner session's memory and
CPU, learners per room engine, learners per server (inferopt/room/capacity.py).
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
import tarfile
import time
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT, cache_dir
from inferopt.serving.managed_process import ManagedProcess, _pdeathsig

CHP = REPO_ROOT / ".cache" / "tools" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
DEFAULT_ROOM = REPO_ROOT / ".cache" / "room"
PACK_PREFIX = "inference-course/"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
KERNEL_INFO_TIMEOUT_S = 600        # as tests/browser_lab.py: a loaded room starts kernels slowly
MIN_PASSWORD = 8                   # SharedPasswordAuthenticator's own minimum


def chp_command() -> str:
    """The proxy JupyterHub starts: .cache/tools' configurable-http-proxy (make tools), else one on PATH."""
    if CHP.exists():
        return str(CHP)
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    raise CourseError("configurable-http-proxy is not installed: run `make tools` (npm installs it into "
                      ".cache/tools; Debian: apt-get install nodejs npm first)")


def learner_cores(slot: int, usable: list[int], per_learner: int) -> list[int]:
    """The cores of the learner in ``slot`` (0, 1, ...): ``per_learner`` consecutive cores of ``usable``,
    round robin once every core has a learner."""
    if not usable:
        raise CourseError("no CPU core is left for the learners: start fewer engines or use a bigger machine")
    per_learner = max(1, min(per_learner, len(usable)))
    return sorted({usable[(slot * per_learner + j) % len(usable)] for j in range(per_learner)})


def split_cores(all_cores: list[int], engines: int, engine_cores: int) -> tuple[list[list[int]], list[int]]:
    """(each engine's cores, the learners' cores). Engines take the first cores; when that leaves none,
    the learners share all of them (a small machine: the engines' cores are then shared too)."""
    all_cores = sorted(all_cores)
    taken = [all_cores[i * engine_cores:(i + 1) * engine_cores] for i in range(engines)]
    if engines and (engines * engine_cores > len(all_cores) or not all(taken)):
        raise CourseError(f"{engines} engine(s) x {engine_cores} core(s) do not fit the {len(all_cores)} "
                          "cores this process may use: pass fewer --engines or --engine-cores")
    rest = all_cores[engines * engine_cores:]
    return taken, rest or all_cores


def unpack_pack(pack: Path, dest: Path) -> None:
    """The learner pack's files under ``dest`` (its ``inference-course/`` prefix dropped)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(pack) as tar:
        members = []
        for m in tar.getmembers():
            if not m.name.startswith(PACK_PREFIX) or m.name == PACK_PREFIX.rstrip("/"):
                continue
            m.name = m.name[len(PACK_PREFIX):]
            members.append(m)
        tar.extractall(dest, members=members, filter="data")


# --- JupyterHub's side (imported by the generated jupyterhub_config.py) ----------------------------------

def _spawner_class():
    from jupyterhub.spawner import SimpleLocalProcessSpawner
    from traitlets import Dict, Int, List, Unicode

    class RoomSpawner(SimpleLocalProcessSpawner):
        """A learner's JupyterLab as this OS user, in the learner's own folder with a copy of the learner pack,
        bound to its cores, under its address-space limit, attached to a room engine."""

        pack = Unicode(config=True, help="the learner pack (.tar.gz) copied into a new learner's folder")
        core_sets = List(config=True, help="the learners' cores (round robin)")
        cores_per_learner = Int(1, config=True)
        mem_limit_bytes = Int(0, config=True, help="RLIMIT_AS of every learner process (0: none)")
        engine_urls = List(config=True, help="the room engines; learners are spread over them in turn")
        room_env = Dict(config=True, help="environment every learner gets")
        slots_file = Unicode(config=True, help="JSON: learner -> slot (cores and engine), kept across restarts")

        def _slot(self) -> int:
            path = Path(self.slots_file)
            slots = json.loads(path.read_text()) if path.exists() else {}
            if self.user.name not in slots:
                slots[self.user.name] = len(slots)
                path.write_text(json.dumps(slots))
            return slots[self.user.name]

        @property
        def cores(self) -> list[int]:
            return learner_cores(self._slot(), list(self.core_sets), self.cores_per_learner)

        def engine_url(self) -> str:
            return self.engine_urls[self._slot() % len(self.engine_urls)] if self.engine_urls else ""

        def user_env(self, env):
            env = super().user_env(env)
            home = Path(self.home_dir)
            env.update(self.room_env)
            env["PYTHONPATH"] = str(home)              # the learner's own copy of the course package
            env["INFEROPT_ENGINE_URL"] = self.engine_url()
            env["JUPYTERLAB_SETTINGS_DIR"] = str(home / ".jupyter" / "lab" / "user-settings")
            env["JUPYTERLAB_WORKSPACES_DIR"] = str(home / ".jupyter" / "lab" / "workspaces")
            for var in THREAD_VARS:
                env[var] = str(len(self.cores))
            return env

        def make_preexec_fn(self, name):
            home, cores, mem = self.home_dir, set(self.cores), self.mem_limit_bytes

            def preexec():
                import resource

                _pdeathsig()           # the hub gone (even killed): this server stops, and its kernels with it
                os.makedirs(home, 0o755, exist_ok=True)
                os.chdir(home)
                os.sched_setaffinity(0, cores)
                if mem:
                    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))

            return preexec

        async def start(self):
            home = Path(self.home_dir)
            if self.pack and not (home / "chapters").is_dir():
                unpack_pack(Path(self.pack), home)
                now = time.time()      # one modification time: jupytext opens a notebook whose .md twin is older
                for f in home.rglob("*"):
                    os.utime(f, (now, now))
            self.notebook_dir = str(home)
            self.log.info("learner %s: cores %s, engine %s", self.user.name, self.cores, self.engine_url())
            return await super().start()

    return RoomSpawner


def configure(c, settings_path: str) -> None:
    """Fill JupyterHub's config ``c`` from the room's settings (written by ``serve``)."""
    s = json.loads(Path(settings_path).read_text())
    room = Path(s["room_dir"])
    c.JupyterHub.ip = s["ip"]
    c.JupyterHub.port = s["port"]
    c.JupyterHub.hub_ip = "127.0.0.1"
    c.JupyterHub.hub_port = s["hub_port"]
    c.JupyterHub.db_url = f"sqlite:///{room / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(room / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(room / "jupyterhub.pid")
    c.JupyterHub.cleanup_servers = True
    c.JupyterHub.cleanup_proxy = True
    c.ConfigurableHTTPProxy.command = [s["chp"]]
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s['proxy_api_port']}"
    c.ConfigurableHTTPProxy.pid_file = str(room / "jupyterhub-proxy.pid")
    c.ConfigurableHTTPProxy.auth_token = s["proxy_token"]
    c.JupyterHub.authenticator_class = "jupyterhub.authenticators.shared.SharedPasswordAuthenticator"
    c.SharedPasswordAuthenticator.user_password = s["password"]
    c.Authenticator.allow_all = True
    if s.get("admin_token"):           # the room's own token (its tests and `room measure`): admin of the hub
        c.JupyterHub.services = [{"name": "room-admin", "api_token": s["admin_token"]}]
        c.JupyterHub.load_roles = [{"name": "room-admin", "services": ["room-admin"],
                                    "scopes": ["admin:users", "admin:servers", "tokens", "access:servers",
                                               "read:users"]}]
    c.JupyterHub.spawner_class = _spawner_class()
    c.Spawner.cmd = [str(Path(sys.executable).parent / "jupyterhub-singleuser")]
    c.Spawner.default_url = "/lab"
    c.Spawner.args = [f"--MappingKernelManager.kernel_info_timeout={KERNEL_INFO_TIMEOUT_S}",
                      *(["--allow-root"] if os.getuid() == 0 else [])]
    c.Spawner.http_timeout = 120
    c.Spawner.start_timeout = 180
    c.Spawner.mem_limit = s["mem_limit_bytes"] or None     # informative (MEM_LIMIT); RLIMIT_AS enforces it
    c.Spawner.cpu_limit = float(s["cores_per_learner"])    # informative (CPU_LIMIT); the affinity binds it
    c.RoomSpawner.home_dir_template = str(room / "learners" / "{username}")
    c.RoomSpawner.pack = s["pack"]
    c.RoomSpawner.core_sets = s["learner_cores"]
    c.RoomSpawner.cores_per_learner = s["cores_per_learner"]
    c.RoomSpawner.mem_limit_bytes = s["mem_limit_bytes"]
    c.RoomSpawner.engine_urls = s["engine_urls"]
    c.RoomSpawner.slots_file = str(room / "slots.json")
    c.RoomSpawner.room_env = s["room_env"]


# --- the room: engines, then the hub ---------------------------------------------------------------------

class Room:
    """The room's processes: engines (unless given a URL), then JupyterHub (its proxy and the learners'
    servers are its children). ``start()`` returns once the hub answers; ``stop()`` ends everything."""

    def __init__(self, room_dir: Path | str = DEFAULT_ROOM, *, ip: str = "127.0.0.1", port: int | None = None,
                 engine_urls: list[str] | None = None, engines: int = 1, engine_cores: int = 1,
                 cores_per_learner: int = 1, mem_gib: float = 8.0, password: str | None = None,
                 pack: Path | str | None = None, admin_token: str | None = None, policy: str = "refuse",
                 references: Path | str | None = None):
        self.room_dir = Path(room_dir).resolve()
        self.ip = ip
        self.port = port
        self.given_urls = list(engine_urls or [])
        self.engines = 0 if self.given_urls else engines
        self.engine_cores = engine_cores
        self.cores_per_learner = cores_per_learner
        self.mem_bytes = int(mem_gib * (1 << 30)) if mem_gib else 0
        self.password = password or os.environ.get("INFEROPT_ROOM_PASSWORD") or ""
        self.pack = Path(pack) if pack else None
        self.admin_token = admin_token
        self.policy = policy
        self.references = str(references) if references else None
        self.servers: list = []
        self.hub = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.ip in ("", "0.0.0.0") else self.ip
        return f"http://{host}:{self.port}"

    def _password(self) -> str:
        pw_file = self.room_dir / "password"
        if not self.password:
            self.password = pw_file.read_text().strip() if pw_file.exists() else secrets.token_urlsafe(9)
        if len(self.password) < MIN_PASSWORD:
            raise CourseError(f"the room password has {len(self.password)} characters: give at least {MIN_PASSWORD} "
                              "(--password or INFEROPT_ROOM_PASSWORD)")
        pw_file.write_text(self.password + "\n")
        pw_file.chmod(0o600)
        return self.password

    def start(self) -> Room:
        from inferopt.serving.engine import VLLMServer
        from inferopt.serving.managed_process import free_port

        if self.pack is None or not self.pack.is_file():
            raise CourseError(f"the learner pack {self.pack} is missing: build it with `make learner-pack` "
                              "(make room does)")
        self.room_dir.mkdir(parents=True, exist_ok=True)
        (self.room_dir / "learners").mkdir(exist_ok=True)
        (self.room_dir / "handin").mkdir(exist_ok=True)
        chp = chp_command()
        engine_sets, learner_set = split_cores(sorted(os.sched_getaffinity(0)), self.engines, self.engine_cores)
        urls = list(self.given_urls)
        try:
            for cores in engine_sets:       # the course's default shape: every learner's VLLMServer() attaches
                srv = VLLMServer(cpu_cores=cores, own=True).start()
                self.servers.append(srv)
                urls.append(srv.base_url)
            self.port = self.port or free_port()
            settings = {
                "room_dir": str(self.room_dir), "ip": self.ip, "port": self.port, "hub_port": free_port(),
                "proxy_api_port": free_port(), "proxy_token": secrets.token_hex(16), "chp": chp,
                "password": self._password(), "admin_token": self.admin_token, "pack": str(self.pack.resolve()),
                "learner_cores": learner_set, "cores_per_learner": self.cores_per_learner,
                "mem_limit_bytes": self.mem_bytes, "engine_urls": urls,
                "room_env": {"INFEROPT_ROOM_POLICY": self.policy, "INFEROPT_ENGINE_MISMATCH": "refuse",
                             "INFEROPT_CACHE": str(cache_dir()),
                             "INFEROPT_HANDIN_DIR": str(self.room_dir / "handin"),
                             "JUPYTER_CONFIG_PATH": str(REPO_ROOT / "jupyter"),
                             **({"INFEROPT_REFERENCES": self.references} if self.references else {})},
            }
            (self.room_dir / "room.json").write_text(json.dumps(settings, indent=1))
            (self.room_dir / "room.json").chmod(0o600)
            (self.room_dir / "jupyterhub_config.py").write_text(
                "from inferopt.room.hub import configure\n\n"
                f"configure(get_config(), {str(self.room_dir / 'room.json')!r})  # noqa: F821\n")
            self.engine_urls = urls
            self.learner_cores = learner_set
            self.hub = _Hub(self.room_dir, self.url).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.hub is not None:
            self.hub.stop()
            self.hub = None
        while self.servers:
            self.servers.pop().stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class _Hub(ManagedProcess):
    """``jupyterhub -f <room>/jupyterhub_config.py`` in its own process group; stopped with SIGTERM first, so
    that JupyterHub stops the learners' servers and its proxy itself (cleanup_servers, cleanup_proxy)."""

    stop_grace_s = 30.0
    ready_timeout_s = 120.0

    def __init__(self, room_dir: Path, url: str):
        self.room_dir, self.url = room_dir, url
        self.log_path = room_dir / "jupyterhub.log"

    def start(self):
        import requests

        from inferopt.serving.managed_process import log_tail

        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
        cmd = [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(self.room_dir / "jupyterhub_config.py")]
        self._spawn(cmd, self.log_path, cwd=self.room_dir, env=env)
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise CourseError(f"JupyterHub exited (code {self.proc.returncode}); its log "
                                  f"{self.log_path} ends:\n{log_tail(self.log_path)}")
            try:
                if requests.get(self.url + "/hub/health", timeout=5).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise CourseError(f"JupyterHub did not answer in {self.ready_timeout_s:.0f} s: see {self.log_path}")
            time.sleep(0.5)

    def stop(self) -> None:
        self._terminate()
        self._reap_leftovers()

    def _reap_leftovers(self) -> None:
        """A proxy or learner server the hub left (it was killed, not stopped): their own process groups."""
        from inferopt.serving.managed_process import _kill_group, group_alive

        pids = []
        proxy = self.room_dir / "jupyterhub-proxy.pid"
        if proxy.exists():
            try:
                pids.append(int(proxy.read_text().strip()))
            except ValueError:
                pass
            proxy.unlink(missing_ok=True)
        for pid in pids:
            try:
                pgid = os.getpgid(pid)
            except ProcessLookupError:
                continue
            if pgid == pid and group_alive(pgid):
                _kill_group(pgid, grace=5)
