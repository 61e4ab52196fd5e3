"""Differential test: the course's KV formula against vLLM's own KV-cache specs (vllm/v1/kv_cache_interface.py).

For each public model config and TP x PP layout, inferopt.vllm_oracle.kv_specs builds the FullAttentionSpec /
SlidingWindowSpec / MLAAttentionSpec objects vLLM registers per layer, from what vLLM's ModelConfig derives (KV heads
per rank, head size, MLA, the stage's layers, the sliding window), and reads their page_size_bytes and
max_memory_usage_bytes. The course's side is planning.model_specs (KV heads per GPU, entry width), planning.pipeline
(the stages) and memory.calculate (page and block bytes). Any difference fails unless EXPLAINED lists it with its
reason, and an explained difference must be exactly the one its reason predicts.

Configs: assets/models/*.json (shipped) and tests/data/kv_configs/*.json (each with its Hugging Face source in _source).
"""
import pytest

from inferopt.errors import CourseError
from inferopt.planning import memory as M
from inferopt.planning import pipeline
from inferopt.planning.model_specs import load_spec

KV = "tests/data/kv_configs/"
MML, BLOCK = 2048, 16
# (id, model, tp, pp, kv_dtype, block_size)
CASES = [
    ("llama-3.1-8b tp1", "llama-3.1-8b", 1, 1, "bfloat16", BLOCK),
    ("llama-3.1-8b tp8 (= KV heads)", "llama-3.1-8b", 8, 1, "bfloat16", BLOCK),
    ("llama-3.1-8b tp2 pp2", "llama-3.1-8b", 2, 2, "bfloat16", BLOCK),
    ("llama-3.1-8b fp8 KV", "llama-3.1-8b", 1, 1, "fp8", BLOCK),
    ("llama-3-70b tp8 pp2 (two nodes)", "llama-3-70b", 8, 2, "bfloat16", BLOCK),
    ("llama-3-70b tp16 (beyond KV heads)", "llama-3-70b", 16, 1, "bfloat16", BLOCK),
    ("llama-3-70b tp4 pp3 (uneven)", "llama-3-70b", 4, 3, "bfloat16", BLOCK),
    ("mixtral-8x7b tp2 (MoE)", "mixtral-8x7b", 2, 1, "bfloat16", BLOCK),
    ("mixtral-8x7b tp8 pp2", "mixtral-8x7b", 8, 2, "bfloat16", BLOCK),
    ("qwen2.5-7b tp1 (window configured, off)", "qwen2.5-7b-instruct", 1, 1, "bfloat16", BLOCK),
    ("qwen2.5-7b tp4 (= 4 KV heads)", "qwen2.5-7b-instruct", 4, 1, "bfloat16", BLOCK),
    ("smollm2-135m tp1 (tied)", "smollm2-135m-instruct", 1, 1, "bfloat16", BLOCK),
    ("smollm2-135m tp3 CPU blocks", "smollm2-135m-instruct", 3, 1, "float32", 128),
    ("qwen1.5-moe tp2 (shared experts)", "qwen1.5-moe-a2.7b", 2, 1, "bfloat16", BLOCK),
    ("deepseek-v2-lite tp1 (MLA)", "deepseek-v2-lite", 1, 1, "bfloat16", BLOCK),
    ("deepseek-v2-lite tp2 pp2 (MLA, uneven)", "deepseek-v2-lite", 2, 2, "bfloat16", BLOCK),
    ("qwen2.5-0.5b tp2 (tied)", KV + "qwen2.5-0.5b.json", 2, 1, "bfloat16", BLOCK),
    ("qwen3-8b tp4", KV + "qwen3-8b.json", 4, 1, "bfloat16", BLOCK),
    ("qwen3-30b-a3b tp8 pp2 (MoE, beyond KV heads)", KV + "qwen3-30b-a3b.json", 8, 2, "bfloat16", BLOCK),
    ("mistral-nemo tp8 (head_dim != hidden/heads)", KV + "mistral-nemo-instruct-2407.json", 8, 1, "bfloat16", BLOCK),
    ("tinyllama tp1 pp2", KV + "tinyllama-1.1b-chat.json", 1, 2, "bfloat16", BLOCK),
    ("mistral-7b-v0.1 tp1 (sliding everywhere)", KV + "mistral-7b-v0.1.json", 1, 1, "bfloat16", BLOCK),
    ("gemma-2-9b tp2 (local/global)", KV + "gemma-2-9b.json", 2, 1, "bfloat16", BLOCK),
    ("gemma-3-1b tp1 (5 local : 1 global)", KV + "gemma-3-1b-it.json", 1, 1, "bfloat16", BLOCK),
]

# Differences the course does not model, each with its reason. Anything else that differs fails.
EXPLAINED = {
    # vLLM sizes sliding-window layers with SlidingWindowSpec: one request holds at most
    # cdiv(min(window - 1 + max_in_flight_tokens, max_model_len), block) + 1 blocks per such layer (the +1: the
    # window need not start on a block boundary), not cdiv(max_model_len, block). The calculator sizes these
    # models with vLLM's own KV-cache groups (kv_specs.sizing), not as full attention; the page per layer agrees.
    "sliding_window": ("mistral-7b-v0.1 tp1 (sliding everywhere)", "gemma-2-9b tp2 (local/global)",
                       "gemma-3-1b tp1 (5 local : 1 global)"),
    # (Gemma 2 / 3 were refused by load_spec until their weights were sized: tests/test_memory_architectures.py)
    "model_type_refused": (),
}
KV_BYTES = {"bfloat16": 2, "float32": 4, "fp8": 1}


@pytest.fixture(scope="module")
def vllm_stages():
    from inferopt.vllm_oracle import kv_specs
    return {cid: kv_specs.stage_summary(model, tp, pp, block, kvd, MML) for cid, model, tp, pp, kvd, block in CASES}


def _course_stages(model, tp, pp, kv_dtype, block):
    """The course's formula: per stage (get_pp_indices split) page = block x max(1, kv//TP) x entry width x bytes."""
    kvb = KV_BYTES[kv_dtype]
    try:
        spec = load_spec(model)
        layers, heads, width = spec.num_layers, spec.kv_heads_per_gpu(tp), spec.kv_entry_width()
    except CourseError:
        import json
        cfg = json.loads(open(model, encoding="utf-8").read())
        layers, heads = cfg["num_hidden_layers"], max(1, cfg["num_key_value_heads"] // tp)
        width = 2 * cfg["head_dim"]
    page = block * heads * width * kvb
    return [{"layers": n, "kv_heads_per_rank": heads, "pages": [page], "block_bytes": page * n,
             "max_memory_usage_bytes": -(-MML // block) * page * n} for n in pipeline.stage_layers(layers, pp)]


def test_enough_configs_and_layouts():
    assert len(CASES) >= 20 and len({m for _, m, *_ in CASES}) >= 14
    kinds = {"tp>kv": any("beyond" in c[0] for c in CASES), "pp": any(c[3] > 1 for c in CASES)}
    assert all(kinds.values())
    assert set().union(*EXPLAINED.values()) <= {c[0] for c in CASES}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_course_kv_equals_vllm_kv_specs(vllm_stages, case):
    cid, model, tp, pp, kvd, block = case
    ours, theirs = _course_stages(model, tp, pp, kvd, block), vllm_stages[cid]
    assert [s["layers"] for s in ours] == [s["layers"] for s in theirs]
    for o, t in zip(ours, theirs, strict=True):
        assert o["kv_heads_per_rank"] == t["kv_heads_per_rank"], (cid, o, t)
        assert o["pages"] == t["pages"], (cid, o, t)                 # page_size_bytes of every layer
        assert o["block_bytes"] == t["block_bytes"]
        if cid in EXPLAINED["sliding_window"]:
            win = load_window(model)
            held = -(-min(win - 1 + t["max_in_flight_tokens"], t["max_model_len"]) // block) + 1
            full = -(-t["max_model_len"] // block)
            assert t["sliding_layers"] > 0
            assert t["max_memory_usage_bytes"] - o["max_memory_usage_bytes"] == \
                t["sliding_layers"] * (held - full) * o["pages"][0], cid
        else:
            assert t["sliding_layers"] == 0 and o["max_memory_usage_bytes"] == t["max_memory_usage_bytes"], (cid, o, t)
    if cid in EXPLAINED["model_type_refused"]:
        with pytest.raises(CourseError, match="is not an architecture this calculator models"):
            load_spec(model)
        return
    if cid in EXPLAINED["sliding_window"]:
        # the calculator sizes them with vLLM's own KV-cache groups (vllm_oracle.runtime.kv_sizing), not as full
        # attention: per request the window's blocks + 1, which the full-attention count misses
        from inferopt.vllm_oracle import kv_specs

        r = M.calculate(model, None, tp=tp, pp=pp, kv_cache_memory_bytes=1 << 30, block_size=block, max_model_len=MML)
        sized = kv_specs.sizing(model, 1 << 30, tp, pp, block, kvd, MML)
        assert (r.num_blocks, r.blocks_per_request, r.kv_cache_tokens) == (
            sized["num_blocks"], sized["blocks_per_request"], sized["kv_cache_tokens"])
        assert r.blocks_per_request != -(-MML // block)          # the old full-attention answer is rejected
        return
    r = M.calculate(model, None, tp=tp, pp=pp, kv_dtype=kvd, dtype="float32" if kvd == "float32" else "bfloat16",
                    weight_format="bf16", kv_cache_memory_bytes=1 << 40, block_size=block, max_model_len=MML)
    assert r.page_bytes_per_layer == theirs[0]["pages"][0]
    assert r.bytes_per_block == max(t["block_bytes"] for t in theirs)   # the largest stage bounds the blocks


def load_window(model):
    import json
    return json.loads(open(model, encoding="utf-8").read())["sliding_window"]


def test_the_old_tp16_treatment_and_a_fractional_head_count_are_rejected(vllm_stages):
    # PP folded into TP (TP8 x PP2 sized as TP16 with every layer on each GPU) disagrees with vLLM's specs
    spec = load_spec("llama-3-70b")
    tp16 = 16 * max(1, spec.num_kv_heads // 16) * spec.kv_entry_width() * 2 * spec.num_layers
    assert tp16 != vllm_stages["llama-3-70b tp8 pp2 (two nodes)"][0]["block_bytes"]
    # kv_heads / TP without the max(1, ...) floor (0.5 head per GPU at TP16) disagrees too
    frac = 16 * (spec.num_kv_heads / 16) * spec.kv_entry_width() * 2
    assert frac != vllm_stages["llama-3-70b tp16 (beyond KV heads)"][0]["pages"][0]
    # MLA sized as K and V heads would disagree with MLAAttentionSpec
    ds = load_spec("deepseek-v2-lite")
    assert 16 * ds.num_kv_heads * 2 * ds.head_dim * 2 != vllm_stages["deepseek-v2-lite tp1 (MLA)"][0]["pages"][0]
