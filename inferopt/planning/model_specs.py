"""Model architecture read from a Hugging Face ``config.json`` (a local file; no hub access).

``load_spec(name_or_path)`` answers "what shape is this model?": layers, hidden size, attention
and KV heads, head_dim (taken from the config when it gives one, otherwise hidden / heads),
intermediate size, vocabulary, tied embeddings and MoE experts. ``ModelSpec.params()`` counts the
parameters from that shape, split into the parts a weight format treats differently:

- ``linear``: the projection matrices inside the decoder layers (q/k/v/o, MLP or experts) — what
  FP8 / INT8 / INT4 checkpoints quantize;
- ``other``: embeddings, LM head (unless tied), norms, biases, MoE router — kept in 16 bit.

Architectures beyond one dense Llama: MLA (DeepSeek-V2/V3: the KV cache holds one latent of
``kv_lora_rank + qk_rope_head_dim`` per token and layer), MoE with routed and shared experts and
leading dense layers (``first_k_dense_replace``), and per-layer weight formats read from
``quantization_config`` (modules a checkpoint keeps in 16 bit). A ``model_type`` or quantization
method outside the modelled ones is refused with one line; sliding-window attention is recorded and
refused by the memory calculator (vLLM sizes it differently).

Names of shipped configs: see ``assets/models/index.yaml`` (:func:`model_names`). Any other path to
a ``config.json`` (or a folder holding one) works too.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from inferopt import assets
from inferopt.errors import CourseError

CONFIG_SCHEMA = {"type": "object"}   # spec_from_config names the fields a config lacks
INDEX_SCHEMA = {
    "type": "object", "required": ["models"],
    "properties": {"models": {"type": "object", "minProperties": 1, "additionalProperties": {
        "type": "object", "required": ["file", "hf_id"],
        "properties": {"file": {"type": "string", "pattern": r"^[^/]+\.json$"}, "hf_id": {"type": "string"},
                       "params_published": {"type": "integer", "minimum": 1},
                       "params_source": {"type": "string"},
                       "quantized_checkpoint_of": {"type": "string"}}}}},
}


def model_index() -> dict:
    """The shipped models: name -> {file, hf_id, params_published, params_source, ...}."""
    return assets.load("models/index.yaml", INDEX_SCHEMA, "inferopt.planning.model_specs.INDEX_SCHEMA")["models"]


def model_names() -> list[str]:
    return sorted(model_index())


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts (numbers of weights, not bytes)."""

    embedding: int
    lm_head: int          # 0 when tied to the embedding
    attention: int        # q, k, v, o matrices, all layers
    mlp: int              # dense MLP or all experts, all layers
    router: int           # MoE gate, all layers
    norms: int
    biases: int
    linear: int           # attention + mlp: the matrices a quantized format stores in 8/4 bit
    other: int            # everything else (kept in 16 bit by FP8/INT8/INT4 checkpoints)
    total: int
    active: int           # per token: total minus the experts a token does not use

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ModelSpec:
    """The architecture numbers the memory calculator needs (all counts, no units)."""

    name: str
    source: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_from_config: bool
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    num_experts: int              # 0 for a dense model
    experts_per_token: int
    moe_intermediate_size: int
    qkv_bias: bool
    o_bias: bool
    max_position_embeddings: int
    torch_dtype: str
    # --- added for issue 19 (defaults keep older constructions valid) ---
    attention: str = "gqa"            # "gqa" (MHA/GQA/MQA) or "mla" (DeepSeek-V2/V3 latent attention)
    kv_lora_rank: int = 0             # MLA: the latent KV width cached per token and layer
    q_lora_rank: int = 0              # MLA: 0 when q is projected directly
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0         # MLA: the rotary part, cached beside the latent
    v_head_dim: int = 0
    num_shared_experts: int = 0       # DeepSeek: shared experts of moe_intermediate_size each
    shared_expert_intermediate_size: int = 0   # Qwen-MoE: one shared expert of this width (+ a gate)
    first_dense_layers: int = 0       # DeepSeek first_k_dense_replace: leading layers with a dense MLP
    moe_layer_freq: int = 1           # every n-th layer (after the dense ones) is MoE
    sliding_window: int = 0           # > 0: sliding-window attention active on some layers
    sliding_window_layers: int = 0
    quant_method: str = ""            # quantization_config.quant_method ("" = unquantized checkpoint)
    quant_ignore: tuple = ()          # module names / "re:" patterns the checkpoint keeps unquantized
    quant_weight_format: str = ""     # "fp8" / "int8" / "int4" for a quantized checkpoint

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        return self.attention == "mla"

    def is_moe_layer(self, i: int) -> bool:
        """Whether decoder layer ``i`` has routed experts (DeepSeek's first_k_dense_replace / moe_layer_freq)."""
        return self.is_moe and i >= self.first_dense_layers and (i - self.first_dense_layers) % self.moe_layer_freq == 0

    def kv_heads_per_gpu(self, tp: int = 1) -> int:
        """KV heads one GPU caches: MLA caches one latent head, replicated on every TP rank
        (vLLM's MLAAttentionSpec, num_kv_heads=1); GQA max(1, kv_heads // TP)."""
        return 1 if self.is_mla else max(1, self.num_kv_heads // tp)

    def kv_entry_width(self) -> int:
        """Elements cached per token, layer and KV head: K and V (2 x head_dim) for GQA; for MLA the
        latent plus the rotary key, kv_lora_rank + qk_rope_head_dim, once (MLAAttentionSpec:
        head_size = kv_lora_rank + qk_rope_head_dim, head_size_v = 0)."""
        return self.kv_lora_rank + self.qk_rope_head_dim if self.is_mla else 2 * self.head_dim

    def linear_modules(self) -> list[tuple[str, int]]:
        """(module name, weights) of every quantizable linear layer, named as in the checkpoint
        (``model.layers.{i}.self_attn.q_proj`` ...; the experts of one layer as one entry). Embeddings
        and the LM head are not in it: vLLM's FP8/INT8/INT4 methods leave them in 16 bit."""
        return list(_linear_modules(self))

    def params(self) -> ParamCounts:
        return _count_params(self)

    def as_dict(self) -> dict:
        return asdict(self)


def _attn_modules(s: ModelSpec) -> list[tuple[str, int]]:
    """One layer's attention projections: (suffix, weights)."""
    h = s.hidden_size
    if s.is_mla:
        H = s.num_attention_heads
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        mods = []
        if s.q_lora_rank:
            mods += [("self_attn.q_a_proj", h * s.q_lora_rank), ("self_attn.q_b_proj", s.q_lora_rank * H * qk)]
        else:
            mods += [("self_attn.q_proj", h * H * qk)]
        mods += [("self_attn.kv_a_proj_with_mqa", h * (s.kv_lora_rank + s.qk_rope_head_dim)),
                 ("self_attn.kv_b_proj", s.kv_lora_rank * H * (s.qk_nope_head_dim + s.v_head_dim)),
                 ("self_attn.o_proj", H * s.v_head_dim * h)]
        return mods
    q_out, kv_out = s.num_attention_heads * s.head_dim, s.num_kv_heads * s.head_dim
    return [("self_attn.q_proj", h * q_out), ("self_attn.k_proj", h * kv_out), ("self_attn.v_proj", h * kv_out),
            ("self_attn.o_proj", q_out * h)]


def _mlp_modules(s: ModelSpec, i: int) -> list[tuple[str, int]]:
    """One layer's MLP / expert projections: (suffix, weights)."""
    h = s.hidden_size
    if not s.is_moe_layer(i):
        inter = s.intermediate_size
        return [("mlp.gate_proj", h * inter), ("mlp.up_proj", h * inter), ("mlp.down_proj", inter * h)]
    mods = [("mlp.experts", s.num_experts * 3 * h * s.moe_intermediate_size)]
    if s.num_shared_experts:
        mods.append(("mlp.shared_experts", s.num_shared_experts * 3 * h * s.moe_intermediate_size))
    if s.shared_expert_intermediate_size:
        mods.append(("mlp.shared_expert", 3 * h * s.shared_expert_intermediate_size))
    return mods


def _linear_modules(s: ModelSpec):
    for i in range(s.num_layers):
        for suffix, n in _attn_modules(s) + _mlp_modules(s, i):
            yield f"model.layers.{i}.{suffix}", n


@lru_cache(maxsize=256)
def _count_params(s: ModelSpec) -> ParamCounts:
    L, h = s.num_layers, s.hidden_size
    attn_layer = sum(n for _, n in _attn_modules(s))
    attn = L * attn_layer
    if s.is_mla:
        biases = 0
        extra_norms = L * (s.kv_lora_rank + s.q_lora_rank)     # kv_a_layernorm (+ q_a_layernorm)
    else:
        q_out, kv_out = s.num_attention_heads * s.head_dim, s.num_kv_heads * s.head_dim
        biases = L * ((q_out + 2 * kv_out) * s.qkv_bias + h * s.o_bias)
        qk_norm = s.model_type in ("qwen3", "qwen3_moe") or GEMMA.get(s.model_type, {}).get("qk_norm", False)
        extra_norms = L * 2 * s.head_dim if qk_norm else 0   # q_norm, k_norm
    mlp = router = unused = 0
    for i in range(L):
        mlp += sum(n for _, n in _mlp_modules(s, i))
        if s.is_moe_layer(i):
            router += h * s.num_experts + (h if s.shared_expert_intermediate_size else 0)
            unused += (s.num_experts - s.experts_per_token) * 3 * h * s.moe_intermediate_size
    norms = L * GEMMA.get(s.model_type, {}).get("norms_per_layer", 2) * h + h + extra_norms
    emb = s.vocab_size * h
    head = 0 if s.tie_word_embeddings else s.vocab_size * h
    linear = attn + mlp
    other = emb + head + norms + biases + router
    total = linear + other
    return ParamCounts(embedding=emb, lm_head=head, attention=attn, mlp=mlp, router=router,
                       norms=norms, biases=biases, linear=linear, other=other, total=total,
                       active=total - unused)


def resolve_config_path(name_or_path) -> tuple[str, Path]:
    """(name, path of config.json) for a shipped model name, a config.json path or a model folder."""
    key = str(name_or_path)
    idx = model_index()
    if key in idx:
        return key, assets.path(f"models/{idx[key]['file']}")
    p = Path(key).expanduser()
    if p.is_dir():
        p = p / "config.json"
    if p.is_file():
        return (p.parent.name if p.name == "config.json" else p.stem), p
    raise CourseError(f"unknown model {key!r}: give one of {', '.join(model_names())} "
                      f"or a path to a Hugging Face config.json (or a folder holding one).")


def load_spec(name_or_path) -> ModelSpec:
    """Read a model's architecture from its config.json (cached per file and modification time)."""
    name, path = resolve_config_path(name_or_path)
    return _load_cached(name, _real_path(str(path)), path.stat().st_mtime_ns)


@lru_cache(maxsize=256)
def _real_path(path: str) -> str:
    """A config file's real path (realpath costs ~0.1 ms: diagnose sizes a model several times per call)."""
    return str(Path(path).resolve())


@lru_cache(maxsize=64)
def _load_cached(name: str, path: str, _mtime: int) -> ModelSpec:
    cfg = assets.load_file(path, CONFIG_SCHEMA, "a Hugging Face config.json (an object)")
    return spec_from_config(cfg, name=name, source=path)


# Architectures whose weights and KV cache this calculator sizes the way vLLM does. Anything else is
# refused with one line (a hybrid Mamba/linear-attention model, an encoder-decoder, a sparse-attention
# MLA variant ... would be sized wrong without a word).
MODELLED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                        "deepseek_v2", "deepseek_v3", "phi3", "granite", "gemma2", "gemma3_text")
# Gemma 2 / 3 (text): what their config.json leaves to the config class's defaults (transformers' Gemma2Config and
# Gemma3TextConfig, checked against them in tests/test_memory_architectures.py): tied embeddings, and which layers
# slide (Gemma 2: every other one from the first; Gemma 3: all but every sliding_window_pattern-th, default 6).
# Their weights differ from Llama's in two places: four RMSNorms per layer (input, post-attention, pre- and
# post-feed-forward; vllm/model_executor/models/gemma2.py Gemma2DecoderLayer) and, in Gemma 3, a q_norm and a k_norm
# of head_dim each (gemma3.py Gemma3Attention). Logit soft-capping and the embedding scale hold no weights.
GEMMA = {"gemma2": {"tie_word_embeddings": True, "norms_per_layer": 4, "qk_norm": False},
         "gemma3_text": {"tie_word_embeddings": True, "norms_per_layer": 4, "qk_norm": True}}


def _gemma_layer_types(cfg: dict) -> list:
    """The layer_types a Gemma 2 / 3 config class derives when config.json gives none."""
    n = int(cfg["num_hidden_layers"])
    if cfg.get("model_type") == "gemma2":
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    k = int(cfg.get("sliding_window_pattern") or 6)
    return ["sliding_attention" if (i + 1) % k else "full_attention" for i in range(n)]
# quant_method -> weight format of its quantized linear layers (None: read num_bits from the config)
QUANT_METHODS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "gptq": None, "awq": None, "compressed-tensors": None}


def quant_format(cfg_q: dict, source: str = "<dict>") -> str:
    """The weight format ('fp8', 'int8', 'int4') of a config's quantization_config."""
    method = str(cfg_q.get("quant_method", "")).lower()
    if method not in QUANT_METHODS:
        raise CourseError(f"{source}: quantization_config.quant_method {method!r} is not one this calculator "
                          f"models ({', '.join(QUANT_METHODS)}); size such a checkpoint from its safetensors "
                          f"index instead.")
    if QUANT_METHODS[method]:
        return QUANT_METHODS[method]
    if method == "compressed-tensors":
        groups = [g.get("weights") or {} for g in (cfg_q.get("config_groups") or {}).values()]
        bits = {(int(w.get("num_bits", 0)), str(w.get("type", "int"))) for w in groups}
        if len(bits) != 1:
            raise CourseError(f"{source}: compressed-tensors config_groups use {sorted(bits)}; this calculator "
                              f"models one weight format per checkpoint.")
        nb, typ = bits.pop()
    else:
        nb, typ = int(cfg_q.get("bits", 0)), "int"
    fmt = {(8, "float"): "fp8", (8, "int"): "int8", (4, "int"): "int4"}.get((nb, typ))
    if fmt is None:
        raise CourseError(f"{source}: {nb}-bit {typ} weights ({method}) are not a format this calculator models "
                          f"(fp8, int8, int4).")
    return fmt


def quant_ignore_list(cfg_q: dict) -> tuple:
    """Module names (or ``re:`` patterns) a quantized checkpoint keeps in 16 bit: fbgemm/HF
    ``modules_to_not_convert``, compressed-tensors ``ignore``, vLLM fp8 ``ignored_layers``."""
    out = []
    for key in ("modules_to_not_convert", "ignore", "ignored_layers"):
        out += [str(x) for x in (cfg_q.get(key) or [])]
    return tuple(out)


def _sliding(cfg: dict) -> tuple[int, int]:
    """(window, layers using it) when sliding-window attention is active, else (0, 0)."""
    layers = int(cfg["num_hidden_layers"])
    types = cfg.get("layer_types")
    if isinstance(types, list) and "sliding_attention" in types:
        return int(cfg.get("sliding_window") or 0), sum(t == "sliding_attention" for t in types)
    win = cfg.get("sliding_window")
    if win and cfg.get("use_sliding_window", True) is not False:
        n = cfg.get("max_window_layers")
        return int(win), (layers if n is None or cfg.get("model_type") not in ("qwen2", "qwen2_moe") else
                          max(0, layers - int(n)))
    return 0, 0


def spec_from_config(cfg: dict, name: str = "model", source: str = "<dict>") -> ModelSpec:
    """Build a ModelSpec from a config dict (multimodal configs: their ``text_config``).

    Refuses (CourseError, one line) a model_type outside :data:`MODELLED_MODEL_TYPES` and a
    quantization method outside :data:`QUANT_METHODS`, rather than sizing them wrong.
    """
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "tie_word_embeddings": cfg.get("tie_word_embeddings", False),
               **({"quantization_config": cfg["quantization_config"]} if "quantization_config" in cfg else {})}
    need = ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"]
    missing = [k for k in need if k not in cfg]
    if missing:
        raise CourseError(f"{source}: config lacks {', '.join(missing)}; this calculator needs a "
                          f"decoder-only transformer config.json with those fields.")
    model_type = str(cfg.get("model_type", "unknown"))
    if model_type not in MODELLED_MODEL_TYPES:
        raise CourseError(f"{source}: model_type {model_type!r} is not an architecture this calculator models "
                          f"({', '.join(MODELLED_MODEL_TYPES)}); its KV cache or weights may be laid out "
                          f"differently (hybrid, linear or sparse attention ...), so it is not sized.")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    mla = bool(cfg.get("kv_lora_rank"))
    hd_cfg = cfg.get("head_dim")
    if mla:
        head_dim, from_cfg = int(cfg.get("qk_nope_head_dim", 0)) + int(cfg.get("qk_rope_head_dim", 0)), True
    elif hd_cfg:
        head_dim, from_cfg = int(hd_cfg), True
    else:
        if hidden % heads:
            raise CourseError(f"{source}: hidden_size {hidden} is not divisible by {heads} heads and "
                              f"the config gives no head_dim; add head_dim to the config.")
        head_dim, from_cfg = hidden // heads, False
    if heads % kv_heads:
        raise CourseError(f"{source}: {heads} attention heads are not a multiple of {kv_heads} KV heads.")
    n_exp = int(cfg.get("num_local_experts") or cfg.get("num_experts") or cfg.get("n_routed_experts") or 0)
    inter = int(cfg.get("intermediate_size") or 0)
    moe_inter = int(cfg.get("moe_intermediate_size") or (inter if n_exp else 0))
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = attention_bias or model_type in ("qwen2", "qwen2_moe")
    first_dense = int(cfg.get("first_k_dense_replace") or 0)
    freq = int(cfg.get("moe_layer_freq") or cfg.get("decoder_sparse_step") or 1)
    if cfg.get("mlp_only_layers"):
        raise CourseError(f"{source}: mlp_only_layers (dense layers between MoE ones) is not modelled; "
                          f"this calculator handles leading dense layers (first_k_dense_replace) only.")
    if model_type in GEMMA:
        cfg = {**{k: v for k, v in GEMMA[model_type].items() if k == "tie_word_embeddings"}, **cfg}
        if not cfg.get("layer_types") and cfg.get("sliding_window"):
            cfg = {**cfg, "layer_types": _gemma_layer_types(cfg)}
    window, window_layers = _sliding(cfg)
    q = cfg.get("quantization_config")
    qm, qi, qf = "", (), ""
    if isinstance(q, dict) and q:
        qf = quant_format(q, source)          # refuses a method it cannot size
        qm, qi = str(q.get("quant_method", "")).lower(), quant_ignore_list(q)
    return ModelSpec(
        name=name, source=str(source), model_type=model_type,
        num_layers=int(cfg["num_hidden_layers"]), hidden_size=hidden,
        num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        head_dim_from_config=from_cfg, intermediate_size=inter,
        vocab_size=int(cfg["vocab_size"]),
        tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        num_experts=n_exp, experts_per_token=int(cfg.get("num_experts_per_tok") or 0),
        moe_intermediate_size=moe_inter, qkv_bias=qkv_bias, o_bias=attention_bias,
        max_position_embeddings=int(cfg.get("max_position_embeddings") or 0),
        torch_dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"),
        attention="mla" if mla else "gqa",
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0), q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        qk_nope_head_dim=int(cfg.get("qk_nope_head_dim") or 0),
        qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0), v_head_dim=int(cfg.get("v_head_dim") or 0),
        num_shared_experts=int(cfg.get("n_shared_experts") or 0),
        shared_expert_intermediate_size=int(cfg.get("shared_expert_intermediate_size") or 0),
        first_dense_layers=first_dense if n_exp else 0, moe_layer_freq=max(1, freq),
        sliding_window=window, sliding_window_layers=window_layers,
        quant_method=qm, quant_ignore=qi, quant_weight_format=qf,
    )
