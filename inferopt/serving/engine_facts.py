"""What a running vLLM engine says about itself: the one source of platform facts.

Block size, KV blocks and tokens, KV dtype, model dtype, max length and token budget differ between
vLLM's CPU and GPU builds (CPU: 128-token blocks, float32 here; GPU: 16-token blocks, bf16; token
budget 2048 on small GPUs, 8192 on H100/H200). The course never types them: it reads them from the
engine that is running, through three public windows:

- ``/metrics``: ``vllm:cache_config_info``, an info-gauge whose labels are the engine's whole
  ``CacheConfig`` (``vllm/v1/metrics/loggers.py: PrometheusStatLogger.log_metrics_info`` exports
  ``vllm/config/cache.py: CacheConfig.metrics_info()``): ``block_size``, ``num_gpu_blocks`` (the
  KV blocks the engine allocated, on CPU too), ``cache_dtype``, ``kv_cache_size_tokens``,
  ``kv_cache_max_concurrency``, ``gpu_memory_utilization``, ``kv_cache_memory_bytes``,
  ``enable_prefix_caching``;
- ``/v1/models``: the served name and ``max_model_len``;
- the start-up log, where the course started the engine itself: the model dtype
  (``Initializing a V1 LLM engine ... dtype=torch.float32``), the token budget
  (``Chunked prefill is enabled with max_num_batched_tokens=N``, ``vllm/config/scheduler.py``; where
  that line is not printed, the upper end of ``compile_ranges_endpoints`` in the same config line,
  which ``vllm/config/vllm.py: VllmConfig._set_compile_ranges`` sets to ``max_num_batched_tokens``),
  and the KV line (``KV cache size: N tokens, Maximum concurrency for L tokens per request: Xx``).

vLLM's block pool keeps one block as the *null block* (``vllm/v1/core/block_pool.py: BlockPool``),
so ``usable_blocks = num_blocks - 1``: a request can hold at most that many blocks at once.

``facts_from_sources`` is pure (text in, facts out); ``read_engine_facts`` fetches the two HTTP
windows of a running engine and calls it.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from inferopt.errors import CourseError

_INFO_RE = re.compile(r"^vllm:cache_config_info\{(?P<labels>.*)\}\s+\S+\s*$", re.MULTILINE)
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_KV_RE = re.compile(r"KV cache size: ([\d,]+) tokens")
_CONC_RE = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_DTYPE_RE = re.compile(r"Initializing a V1 LLM engine .*?\bdtype=(?:torch\.)?(\w+)")
_BUDGET_RE = re.compile(r"max_num_batched_tokens=(\d+)")
_RANGES_RE = re.compile(r"'compile_ranges_endpoints': \[([\d, ]*)\]")
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
                "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "fp8_ds_mla": 1}


@dataclass(frozen=True)
class EngineFacts:
    """A running engine's own account of itself (None where no window told)."""
    model: str | None = None                  # the served model name (/v1/models id)
    max_model_len: int | None = None          # tokens per request (prompt + output)
    block_size: int | None = None             # tokens per KV block
    num_blocks: int | None = None             # KV blocks allocated, the null block included
    kv_cache_tokens: int | None = None        # as vLLM reports it (int(max concurrency x max_model_len))
    max_concurrency: float | None = None      # vLLM's 'Maximum concurrency for max_model_len'
    concurrency_for_tokens: int | None = None  # the max_model_len that concurrency was computed for
    cache_dtype: str | None = None            # --kv-cache-dtype as resolved ('auto' = the model dtype)
    model_dtype: str | None = None            # e.g. 'float32' (CPU engine here), 'bfloat16' (GPU)
    max_num_batched_tokens: int | None = None  # the token budget per engine step
    enable_prefix_caching: bool | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None  # the explicit KV budget, if one was given

    @property
    def usable_blocks(self) -> int | None:
        """Blocks a request can actually hold: vLLM keeps one as the null block."""
        return None if self.num_blocks is None else max(0, self.num_blocks - 1)

    @property
    def kv_dtype(self) -> str | None:
        """The KV cache's element type: the model dtype unless --kv-cache-dtype set another."""
        if self.cache_dtype in (None, "auto"):
            return self.model_dtype
        return self.cache_dtype

    @property
    def kv_dtype_bytes(self) -> int | None:
        return _DTYPE_BYTES.get(self.kv_dtype or "")

    def kv_dtype_bytes_from_budget(self, elements_per_token: int) -> int | None:
        """Bytes per KV element, from the engine's own /metrics alone: the one element width (1, 2 or 4 bytes) for
        which vLLM's block count is what an explicit KV budget gives, ``num_blocks == budget // (bytes x
        elements_per_token x block_size)``. For an engine the course did not start (a room's engine on another
        machine), whose start-up log, and so its model dtype, is not here. ``elements_per_token``: K and V of
        every layer and KV head, 2 x layers x KV heads x head_dim. None when the engine reported no explicit
        budget or no width fits."""
        if not (self.kv_cache_memory_bytes and self.num_blocks and self.block_size) or elements_per_token <= 0:
            return None
        fits = [b for b in (1, 2, 4)
                if self.kv_cache_memory_bytes // (b * elements_per_token * self.block_size) == self.num_blocks]
        return fits[0] if len(fits) == 1 else None

    def blocks_for_tokens(self, tokens: int) -> int:
        """KV blocks one request of ``tokens`` tokens occupies (ceil)."""
        return math.ceil(int(tokens) / self.require("block_size"))

    def tokens_for_blocks(self, blocks: int) -> int:
        return int(blocks) * self.require("block_size")

    def require(self, name: str):
        """The fact ``name``, or a one-line error naming which engine window was missing."""
        value = getattr(self, name)
        if value is None:
            raise CourseError(f"the engine did not report {name}: is it vLLM 0.32 with /metrics enabled? "
                              "Read it from the start-up log or pass it explicitly.")
        return value

    def as_dict(self) -> dict:
        return asdict(self) | {"usable_blocks": self.usable_blocks, "kv_dtype": self.kv_dtype}

    def summary(self) -> str:
        """One line for a notebook: what this engine is."""
        def show(v):
            return "?" if v is None else (f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v))
        return (f"{show(self.model)}: max_model_len {show(self.max_model_len)}, {show(self.model_dtype)} weights, "
                f"KV {show(self.kv_dtype)} in {show(self.num_blocks)} blocks of {show(self.block_size)} tokens "
                f"({show(self.kv_cache_tokens)} tokens), token budget {show(self.max_num_batched_tokens)}")


# ---------------------------------------------------------------- pure parsers
def cache_config_labels(metrics_text: str) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info`` in a /metrics text ({} when absent)."""
    found = _INFO_RE.findall(metrics_text or "")
    if not found:
        return {}
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL_RE.findall(found[-1])}


def _int(v) -> int | None:
    try:
        return None if v in (None, "", "None") else int(float(str(v).replace(",", "")))
    except ValueError:
        return None


def _float(v) -> float | None:
    try:
        return None if v in (None, "", "None") else float(v)
    except ValueError:
        return None


def _round2(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _bool(v) -> bool | None:
    return {"True": True, "False": False, "true": True, "false": False}.get(v) if v is not None else None


def token_budget_from_log(log_text: str) -> int | None:
    """The engine's max_num_batched_tokens from its start-up log (None if the log does not say)."""
    found = _BUDGET_RE.findall(log_text or "")
    if found:
        return int(found[-1])
    ranges = _RANGES_RE.findall(log_text or "")
    if ranges:
        values = [int(x) for x in ranges[-1].replace(" ", "").split(",") if x]
        return max(values) if values else None
    return None


@dataclass
class StartupFacts:
    """What the engine said about itself at start-up (None where the log had no such line)."""
    kv_cache_tokens: int | None
    max_concurrency: float | None
    concurrency_for_tokens: int | None


def parse_startup_log(text: str) -> StartupFacts:
    """Parse vLLM's 'KV cache size: N tokens' and 'Maximum concurrency for L tokens per request: Xx'."""
    kv = _KV_RE.findall(text or "")
    conc = _CONC_RE.findall(text or "")
    return StartupFacts(
        kv_cache_tokens=int(kv[-1].replace(",", "")) if kv else None,
        max_concurrency=float(conc[-1][1]) if conc else None,
        concurrency_for_tokens=int(conc[-1][0].replace(",", "")) if conc else None,
    )


def facts_from_sources(metrics_text: str = "", models_json: dict | None = None, log_text: str = "") -> EngineFacts:
    """Combine what /metrics, /v1/models and the start-up log say (any may be empty)."""
    labels = cache_config_labels(metrics_text)
    model = max_len = None
    data = (models_json or {}).get("data") or []
    if data:
        model = data[0].get("id")
        max_len = _int(data[0].get("max_model_len"))
    startup = parse_startup_log(log_text)
    dtype = _DTYPE_RE.findall(log_text or "")
    return EngineFacts(
        model=model,
        max_model_len=max_len,
        block_size=_int(labels.get("block_size")),
        num_blocks=_int(labels.get("num_gpu_blocks")),
        # the log's figures first (what the course has always compared with), the labels where no log
        kv_cache_tokens=startup.kv_cache_tokens if startup.kv_cache_tokens is not None
        else _int(labels.get("kv_cache_size_tokens")),
        # the label holds vLLM's unrounded figure, the log prints it with '%.2fx' (vllm/v1/core/kv_cache_utils.py:
        # update_kv_cache_capacity): both rounded to 2 decimals, so an engine read from its endpoints alone (a room's
        # engine on another machine) reports what one read with its log does
        max_concurrency=startup.max_concurrency if startup.max_concurrency is not None
        else _round2(_float(labels.get("kv_cache_max_concurrency"))),
        concurrency_for_tokens=startup.concurrency_for_tokens or max_len,
        cache_dtype=labels.get("cache_dtype"),
        model_dtype=dtype[-1] if dtype else None,
        max_num_batched_tokens=token_budget_from_log(log_text),
        enable_prefix_caching=_bool(labels.get("enable_prefix_caching")),
        gpu_memory_utilization=_float(labels.get("gpu_memory_utilization")),
        kv_cache_memory_bytes=_int(labels.get("kv_cache_memory_bytes")),
    )


# ---------------------------------------------------------------- the live windows
def read_engine_facts(base_url: str, log_text: str = "", timeout: float = 10.0) -> EngineFacts:
    """Ask a running engine at ``base_url`` (e.g. http://127.0.0.1:8000) for its facts."""
    import requests

    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[:-3]
    try:
        models = requests.get(base + "/v1/models", timeout=timeout)
        metrics = requests.get(base + "/metrics", timeout=timeout)
    except requests.RequestException as exc:
        raise CourseError(f"no vLLM engine answered at {base} ({type(exc).__name__}): check the URL and that "
                          "the engine is running (curl URL/health).") from None
    if models.status_code != 200 or metrics.status_code != 200:
        raise CourseError(f"{base} is not a vLLM OpenAI server: /v1/models answered {models.status_code}, "
                          f"/metrics {metrics.status_code}. Point at the engine itself, not a proxy.")
    try:
        models_json = models.json()
    except ValueError:
        raise CourseError(f"{base}/v1/models did not answer JSON: is this a vLLM server?") from None
    facts = facts_from_sources(metrics.text, models_json, log_text)
    if facts.model is None:
        raise CourseError(f"{base}/v1/models lists no model: is the engine still starting?")
    return facts
