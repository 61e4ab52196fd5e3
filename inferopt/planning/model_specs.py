"""Model architecture read from a Hugging Face ``config.json`` (a local file; no hub access).

``load_spec(name_or_path)`` answers "what shape is this model?": layers, hidden size, attention
and KV heads, head_dim (taken from the config when it gives one, otherwise hidden / heads),
intermediate size, vocabulary, tied embeddings and MoE experts. ``ModelSpec.params()`` counts the
parameters from that shape, split into the parts a weight format treats differently:

- ``linear``: the projection matrices inside the decoder layers (q/k/v/o, MLP or experts) — what
  FP8 / INT8 / INT4 checkpoints quantize;
- ``other``: embeddings, LM head (unless tied), norms, biases, MoE router — kept in 16 bit.

Names of shipped configs (``assets/models/index.yaml``): llama-3-70b, llama-3.1-8b,
qwen2.5-7b-instruct, mixtral-8x7b, smollm2-135m-instruct. Any other path to a ``config.json``
(or a folder holding one) works too.
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
                       "params_source": {"type": "string"}}}}},
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

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    def params(self) -> ParamCounts:
        return _count_params(self)

    def as_dict(self) -> dict:
        return asdict(self)


def _count_params(s: ModelSpec) -> ParamCounts:
    L, h = s.num_layers, s.hidden_size
    q_out, kv_out = s.num_attention_heads * s.head_dim, s.num_kv_heads * s.head_dim
    attn = L * (h * q_out + 2 * h * kv_out + q_out * h)
    biases = L * ((q_out + 2 * kv_out) * s.qkv_bias + h * s.o_bias)
    if s.is_moe:
        per_expert = 3 * h * s.moe_intermediate_size
        mlp = L * s.num_experts * per_expert
        router = L * h * s.num_experts
        unused = L * (s.num_experts - s.experts_per_token) * per_expert
    else:
        mlp = L * 3 * h * s.intermediate_size     # gate, up, down (SwiGLU)
        router = 0
        unused = 0
    norms = L * 2 * h + h
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
    return _load_cached(name, str(path.resolve()), path.stat().st_mtime_ns)


@lru_cache(maxsize=64)
def _load_cached(name: str, path: str, _mtime: int) -> ModelSpec:
    cfg = assets.load_file(path, CONFIG_SCHEMA, "a Hugging Face config.json (an object)")
    return spec_from_config(cfg, name=name, source=path)


def spec_from_config(cfg: dict, name: str = "model", source: str = "<dict>") -> ModelSpec:
    """Build a ModelSpec from a config dict (multimodal configs: their ``text_config``)."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "tie_word_embeddings": cfg.get("tie_word_embeddings", False)}
    need = ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"]
    missing = [k for k in need if k not in cfg]
    if missing:
        raise CourseError(f"{source}: config lacks {', '.join(missing)}; this calculator needs a "
                          f"decoder-only transformer config.json with those fields.")
    heads = int(cfg["num_attention_heads"])
    hidden = int(cfg["hidden_size"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    hd_cfg = cfg.get("head_dim")
    if hd_cfg:
        head_dim, from_cfg = int(hd_cfg), True
    else:
        if hidden % heads:
            raise CourseError(f"{source}: hidden_size {hidden} is not divisible by {heads} heads and "
                              f"the config gives no head_dim; add head_dim to the config.")
        head_dim, from_cfg = hidden // heads, False
    if heads % kv_heads:
        raise CourseError(f"{source}: {heads} attention heads are not a multiple of {kv_heads} KV heads.")
    n_exp = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 0)
    inter = int(cfg.get("intermediate_size") or 0)
    moe_inter = int(cfg.get("moe_intermediate_size") or (inter if n_exp else 0))
    model_type = str(cfg.get("model_type", "unknown"))
    attention_bias = bool(cfg.get("attention_bias", False))
    qkv_bias = attention_bias or model_type in ("qwen2", "qwen2_moe")
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
    )
