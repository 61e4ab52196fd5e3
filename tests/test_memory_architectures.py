"""Architectures beyond one dense Llama: MLA, MoE (routed + shared experts, dense first layers),
per-layer weight formats from quantization_config, and the architectures the calculator refuses.

The KV page sizes are checked against vLLM 0.32's own spec classes (vllm/v1/kv_cache_interface.py,
imported from the venv), not against numbers typed here."""
import json
import subprocess
import sys

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.planning import memory as m
from inferopt.planning import model_specs as ms

GiB = 1 << 30


@pytest.fixture(scope="module")
def vllm_specs():
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec
    return torch, FullAttentionSpec, MLAAttentionSpec


def test_deepseek_v2_lite_params_and_latent_kv():
    s = ms.load_spec("deepseek-v2-lite")
    assert s.is_mla and s.is_moe and s.first_dense_layers == 1 and s.num_shared_experts == 2
    assert abs(s.params().total / 15.7e9 - 1) < 0.01                 # not the 2.7 B a dense count gives
    whole, per_gpu = m.kv_bytes_per_token(s, 2)
    assert whole == per_gpu == 27 * (512 + 64) * 2 == 31_104        # not 2 x 27 x 16 x 192 x 2 = 221,184
    for tp in (1, 2, 4, 8):                                          # the latent is replicated on every rank
        assert m.kv_bytes_per_token(s, 2, tp)[1] == 31_104
    r = m.calculate("deepseek-v2-lite", "H100", tp=2, max_model_len=32768)
    assert r.kv_latent and r.kv_heads_per_gpu == 1 and r.page_bytes_per_layer == 16 * 576 * 2
    assert any("MLA" in how for _, _, how in r.terms())


def test_page_sizes_are_vllm_s_own(vllm_specs):
    torch, FullAttentionSpec, MLAAttentionSpec = vllm_specs
    ds = m.calculate("deepseek-v2-lite", "H100", tp=4, max_model_len=4096)
    mla = MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=512 + 64, dtype=torch.bfloat16)
    assert ds.page_bytes_per_layer == mla.page_size_bytes
    fp8 = m.calculate("deepseek-v2-lite", "H100", tp=4, max_model_len=4096, kv_dtype="fp8")
    assert fp8.page_bytes_per_layer == MLAAttentionSpec(block_size=16, num_kv_heads=1, head_size=576,
                                                        dtype=torch.uint8).page_size_bytes
    ll = m.calculate("llama-3.1-8b", "H100", tp=2, max_model_len=4096)
    full = FullAttentionSpec(block_size=16, num_kv_heads=4, head_size=128, dtype=torch.bfloat16)
    assert ll.page_bytes_per_layer == full.page_size_bytes
    # the check is real: a GQA page for the MLA model (K and V of 16 heads) is not vLLM's
    assert 2 * 16 * 16 * 192 * 2 != mla.page_size_bytes


def test_moe_counts_routed_shared_and_dense_layers(tmp_path):
    mix = ms.load_spec("mixtral-8x7b").params()
    assert abs(mix.total / 46.7e9 - 1) < 0.01 and abs(mix.active / 12.9e9 - 1) < 0.01
    q = ms.load_spec("qwen1.5-moe-a2.7b")
    assert abs(q.params().total / 14.3e9 - 1) < 0.01 and abs(q.params().active / 2.7e9 - 1) < 0.01
    # one more dense first layer in DeepSeek-V2-Lite: one MoE layer's experts replaced by a dense MLP
    cfg = json.loads(ms.resolve_config_path("deepseek-v2-lite")[1].read_text())
    cfg["first_k_dense_replace"] = 2
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    base, two = ms.load_spec("deepseek-v2-lite").params(), ms.load_spec(p).params()
    h = 2048
    moe_layer = (64 + 2) * 3 * h * 1408 + 64 * h
    assert base.total - two.total == moe_layer - 3 * h * 10944
    # without the shared experts the count drops by 2 x 3 x h x 1408 per MoE layer (26 of them)
    cfg["first_k_dense_replace"], cfg["n_shared_experts"] = 1, 0
    p.write_text(json.dumps(cfg))
    assert base.total - ms.load_spec(p).params().total == 26 * 2 * 3 * h * 1408


def test_fp8_405b_keeps_its_bf16_layers():
    s = ms.load_spec("llama-3.1-405b-instruct-fp8")
    assert s.quant_weight_format == "fp8" and len(s.quant_ignore) == 126 * 4 + 2 * 3 + 1
    auto = m.weight_bytes(s, "auto")
    assert auto["format"] == "fp8" and auto["linear_kept_16bit"] > 70e9     # all attention + 2 MLPs in BF16
    r = m.calculate(s, "H100", tp=8, weight_format="auto", max_model_len=8192)
    logged = 57.752                      # vllm-project/vllm#6746: 'Loading model weights took 57.7520 GB' per GPU
    assert abs(r.weights_gib_per_gpu / logged - 1) < 0.02, r.weights_gib_per_gpu
    # sized as all-FP8 (ignoring modules_to_not_convert) it would be 17 % too small
    cfg = json.loads(ms.resolve_config_path("llama-3.1-405b-instruct-fp8")[1].read_text())
    cfg["quantization_config"]["modules_to_not_convert"] = []
    naive = ms.spec_from_config(cfg, name="405b-all-fp8")
    naive_gib = m.calculate(naive, "H100", tp=8, weight_format="auto", max_model_len=8192).weights_gib_per_gpu
    assert naive_gib / logged < 0.85
    # sizing a quantized checkpoint in another format says so
    assert any("quantized" in w for w in m.calculate(s, "H200", tp=8, weight_format="int4",
                                                     max_model_len=8192).warnings)


def test_ignore_patterns_and_compressed_tensors():
    cfg = json.loads(ms.resolve_config_path("llama-3.1-8b")[1].read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "ignore": ["lm_head", "re:.*layers\\.0\\..*"],
                                  "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int",
                                                                       "group_size": 128}}}}
    s = ms.spec_from_config(cfg, name="w4a16")
    w = m.weight_bytes(s, "auto")
    layer = sum(n for name, n in s.linear_modules() if name.startswith("model.layers.0."))
    assert w["format"] == "int4" and w["linear_kept_16bit"] == layer


@pytest.mark.parametrize("patch, match", [
    ({"model_type": "jamba"}, "not an architecture this calculator models"),
    ({"model_type": "deepseek_v32"}, "not an architecture this calculator models"),
    ({"model_type": None}, "not an architecture this calculator models"),
    ({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}, "quant_method 'bitsandbytes'"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 3}}, "3-bit int weights"),
    ({"mlp_only_layers": [3, 7]}, "mlp_only_layers"),
])
def test_unmodelled_configs_refused_in_one_line(patch, match):
    cfg = json.loads(ms.resolve_config_path("llama-3.1-8b")[1].read_text())
    cfg.update(patch)
    if patch.get("model_type", "x") is None:
        del cfg["model_type"]
    with pytest.raises(CourseError, match=match) as e:
        ms.spec_from_config(cfg, name="x")
    assert "\n" not in str(e.value)


def test_sliding_window_sized_by_vllm_and_disabled_window_sized(tmp_path):
    mistral_v01 = {"model_type": "mistral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000,
                   "max_position_embeddings": 32768, "sliding_window": 4096}
    s = ms.spec_from_config(mistral_v01, name="mistral-7b-v0.1")
    assert s.sliding_window == 4096 and s.sliding_window_layers == 32
    with pytest.raises(CourseError, match="sizes a sliding-window model from its config.json"):
        m.calculate(s, "H100", max_model_len=8192)                # no config.json to give vLLM: one line
    # from its config.json, vLLM's own KV-cache code sizes it (vllm_oracle.runtime.kv_sizing): on an H100 (token
    # budget 8192) a request of 8192 tokens holds cdiv(min(4095 + 8192, 8192), 16) + 1 = 513 blocks per layer
    # (SlidingWindowSpec.max_memory_usage_bytes), not the 512 of full attention
    r = m.calculate("tests/data/kv_configs/mistral-7b-v0.1.json", "H100", max_model_len=8192)
    assert r.blocks_per_request == 513 and r.kv_groups == [["SlidingWindowSpec", 32]]
    assert r.max_concurrency == pytest.approx(r.num_blocks / 513)
    # Qwen2.5 ships a sliding_window value with use_sliding_window false: full attention, sized
    assert ms.load_spec("qwen2.5-7b-instruct").sliding_window == 0
    gemma_like = dict(mistral_v01, sliding_window=4096, layer_types=["sliding_attention", "full_attention"] * 16)
    assert ms.spec_from_config(gemma_like).sliding_window_layers == 16


def test_cli_refuses_unmodelled_config_in_one_line(tmp_path):
    cfg = json.loads(ms.resolve_config_path("llama-3.1-8b")[1].read_text())
    cfg["model_type"] = "nemotron_h"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    p = subprocess.run([sys.executable, "-m", "inferopt", "memory", "--model", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO_ROOT)
    assert p.returncode == 2 and "nemotron_h" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_qwen3_moe_counts():
    """Qwen/Qwen3-30B-A3B's config.json shapes; its model card: 30.5B parameters, 3.3B activated."""
    cfg = {"model_type": "qwen3_moe", "num_hidden_layers": 48, "hidden_size": 2048, "num_attention_heads": 32,
           "num_key_value_heads": 4, "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
           "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
           "vocab_size": 151936, "tie_word_embeddings": False, "max_position_embeddings": 40960,
           "sliding_window": None, "use_sliding_window": False}
    p = ms.spec_from_config(cfg, name="qwen3-30b-a3b").params()
    assert abs(p.total / 30.5e9 - 1) < 0.01 and abs(p.active / 3.3e9 - 1) < 0.02
    assert m.kv_bytes_per_token(ms.spec_from_config(cfg), 2)[0] == 2 * 48 * 4 * 128 * 2


GEMMA2_9B, GEMMA3_1B = "tests/data/kv_configs/gemma-2-9b.json", "tests/data/kv_configs/gemma-3-1b-it.json"


def test_gemma_weights_are_sized_from_config():
    """Gemma 2 / 3 were refused (their KV was sized, their weights not). Now from config.json: tied embeddings
    (the config classes' default), four RMSNorms per layer and, in Gemma 3, q_norm/k_norm. Against the published
    counts: Gemma 2 report (arXiv:2408.00118, Table 2), 9B: 917,504,000 embedding and 8,324,201,984 non-embedding
    parameters; Gemma 3 report (arXiv:2503.19786, Table 1), 1B: 302M embedding, 698M non-embedding."""
    g2 = ms.load_spec(GEMMA2_9B).params()
    assert (g2.embedding, g2.total - g2.embedding, g2.lm_head) == (917_504_000, 8_324_201_984, 0)
    g3 = ms.load_spec(GEMMA3_1B).params()
    assert (round(g3.embedding / 1e6), round((g3.total - g3.embedding) / 1e6), g3.lm_head) == (302, 698, 0)
    # the weights the memory calculator counts: every parameter once, in the checkpoint's 16 bits for BF16
    assert m.weight_bytes(ms.load_spec(GEMMA2_9B), "bf16")["total"] == 2 * g2.total
    # the old answers are rejected: Llama's layout (two norms per layer, an untied lm_head) is 917.8M off
    cfg = json.loads(open(GEMMA2_9B, encoding="utf-8").read())
    as_llama = ms.spec_from_config({**cfg, "model_type": "llama", "tie_word_embeddings": False}).params()
    assert as_llama.total - g2.total == 917_504_000 - 42 * 2 * 3584


def test_gemma_defaults_are_the_config_classes():
    """What a Gemma config.json leaves out (tied embeddings, which layers slide) is what transformers' config
    classes derive, asked here rather than retyped."""
    from transformers import Gemma2Config, Gemma3TextConfig

    for path, cls in ((GEMMA2_9B, Gemma2Config), (GEMMA3_1B, Gemma3TextConfig)):
        cfg = {k: v for k, v in json.loads(open(path, encoding="utf-8").read()).items() if not k.startswith("_")}
        hf = cls(**cfg)
        s = ms.load_spec(path)
        assert s.tie_word_embeddings == hf.tie_word_embeddings is True
        assert ms._gemma_layer_types(cfg) == list(hf.layer_types)
        assert s.sliding_window_layers == sum(t == "sliding_attention" for t in hf.layer_types)
    assert ms.load_spec(GEMMA2_9B).sliding_window_layers == 21 and ms.load_spec(GEMMA3_1B).sliding_window_layers == 22
