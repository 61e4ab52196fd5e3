"""A running vLLM engine this Python did not start, with the interface of :class:`VLLMServer`.

    from inferopt.serving.attach import AttachedEngine
    with AttachedEngine("http://10.0.0.5:8000") as srv:      # the room's engine
        srv.requires(max_model_len=2048, enable_prefix_caching=True)   # one line if it lacks them
        print(srv.chat("What is the capital of France?"), srv.kv_cache_tokens, srv.facts.block_size)

It reads the engine's own account (model, max_model_len, block size, KV blocks and tokens, KV dtype,
prefix caching, KV budget) from ``/v1/models`` and ``/metrics`` (:mod:`inferopt.serving.engine_facts`)
only, never a log or a process of this machine (the engine may run elsewhere), sends requests like a
``VLLMServer`` (``chat``, ``stream_chat``, ``metrics_text``, ``base_url``, ``model_name``, and
``loadgen.Endpoint.from_server``), and never stops it: ``stop()`` and the end of a ``with`` block only
let it go. The room switch needs no code change in a notebook: ``VLLMServer(...).start()`` attaches
to the engine at ``INFEROPT_ENGINE_URL`` itself (see :mod:`inferopt.serving.shared_engine`).
"""
from __future__ import annotations

from inferopt.errors import CourseError
from inferopt.serving import shared_engine as se
from inferopt.serving.engine import VLLMServer


class AttachedEngine(VLLMServer):
    """The engine at ``url`` (e.g. http://127.0.0.1:8000), read and used, never started or stopped here."""

    def __init__(self, url: str, *, quiet: bool = True, timeout: float = 10.0):
        self.url = se.base_url(url)
        self.kind = "attached"
        self.model = self.served_name = None
        self.max_model_len = None
        self.kv_cache_gib = self.dtype = None
        self.extra_args, self.env, self.cpu_cores = [], {}, None
        self.requested_port = None
        self.quiet, self.timeout = quiet, timeout
        self.host, self.port = se.split_url(self.url)
        self.log_path = None
        self.startup_seconds = None
        self._pidfile = None
        from inferopt.serving.engine_facts import EngineFacts

        self.facts = EngineFacts()

    def start(self) -> AttachedEngine:
        if self.attached_url is None:
            facts = se.read_shared_facts(self.url, timeout=self.timeout)
            self._attach_to(self.url, facts)
            self.max_model_len = facts.max_model_len
        return self

    def requires(self, *, model: str | None = None, max_model_len: int | None = None,
                 kv_cache_gib: float | None = None, dtype: str | None = None,
                 enable_prefix_caching: bool | None = None, kv_cache_tokens_at_least: int | None = None,
                 max_model_len_at_least: int | None = None) -> AttachedEngine:
        """Refuse in one line (CourseError) when the engine lacks any of these; return self when it has them."""
        self.start()
        missing = se.mismatches(self.facts, model=model, max_model_len=max_model_len,
                                kv_cache_memory_bytes=None if kv_cache_gib is None else int(kv_cache_gib * (1 << 30)),
                                dtype=dtype, enable_prefix_caching=enable_prefix_caching,
                                kv_cache_tokens_at_least=kv_cache_tokens_at_least,
                                max_model_len_at_least=max_model_len_at_least)
        if missing:
            raise se.refusal(self.url, missing)
        return self

    def memory_mib(self) -> float:
        raise CourseError(f"the engine at {self.url} was not started here, so its processes are not visible "
                          "from here: read its memory on the machine that runs it")

    def __repr__(self) -> str:
        state = "attached" if self.attached_url else "not attached"
        return f"<AttachedEngine {self.facts.model or '?'} at {self.url} ({state}; never stopped here)>"

