"""Model specs from config.json: shapes, head_dim rule, parameter counts vs published counts."""
import json

import pytest

from inferopt.errors import CourseError
from inferopt.paths import ASSETS
from inferopt.planning import model_specs as ms

SHIPPED = ["llama-3-70b", "llama-3.1-8b", "qwen2.5-7b-instruct", "mixtral-8x7b", "smollm2-135m-instruct",
           "deepseek-v2-lite", "qwen1.5-moe-a2.7b", "llama-3.1-405b-instruct-fp8", "llama-3.1-8b-instruct-awq-int4",
           "llama-3.1-8b-instruct-w8a8-int8"]


def test_shipped_models_listed_and_files_exist():
    assert ms.model_names() == sorted(SHIPPED)
    for name, entry in ms.model_index().items():
        assert (ASSETS / "models" / entry["file"]).is_file(), name
        assert entry["params_source"] and entry["hf_id"]


@pytest.mark.parametrize("name", SHIPPED)
def test_param_count_within_1_percent_of_published(name):
    entry = ms.model_index()[name]
    total = ms.load_spec(name).params().total
    assert abs(total / entry["params_published"] - 1) < 0.01, (name, total)


def test_mixtral_active_params():
    spec = ms.load_spec("mixtral-8x7b")
    assert spec.is_moe and spec.num_experts == 8 and spec.experts_per_token == 2
    active = spec.params().active
    assert abs(active / ms.model_index()["mixtral-8x7b"]["params_active_published"] - 1) < 0.01


def test_smollm2_matches_course_facts():
    s = ms.load_spec("smollm2-135m-instruct")
    assert (s.num_layers, s.hidden_size, s.num_attention_heads, s.num_kv_heads, s.head_dim,
            s.vocab_size, s.tie_word_embeddings) == (30, 576, 9, 3, 64, 49152, True)
    assert s.params().lm_head == 0
    assert s.params().total == 134_515_008


def test_llama_3_70b_shape():
    s = ms.load_spec("llama-3-70b")
    assert (s.num_layers, s.num_kv_heads, s.head_dim, s.vocab_size) == (80, 8, 128, 128256)
    assert s.head_dim_from_config is False


def test_head_dim_taken_from_config_when_given(tmp_path):
    # Mistral-Small-24B style: head_dim 128 although hidden/heads = 5120/32 = 160
    cfg = {"model_type": "mistral", "num_hidden_layers": 40, "hidden_size": 5120, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 32768, "vocab_size": 131072}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    s = ms.load_spec(tmp_path)          # a folder holding config.json works too
    assert s.head_dim == 128 and s.head_dim_from_config
    assert ms.load_spec(p).params().attention == 40 * (5120 * 4096 * 2 + 2 * 5120 * 1024)


def test_bad_inputs():
    with pytest.raises(CourseError, match="unknown model"):
        ms.load_spec("gpt-17")
    with pytest.raises(CourseError, match="lacks"):
        ms.spec_from_config({"hidden_size": 8})
