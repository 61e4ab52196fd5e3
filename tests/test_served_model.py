"""The served model's tokenizer and name on every set-up (serving/served_model.py, bench/workload.py)."""
import shutil

import pytest

from inferopt.bench.workload import load_tokenizer
from inferopt.errors import CourseError
from inferopt.serving import served_model as sm
from inferopt.serving.engine import VLLMServer
from inferopt.serving.model_prep import MODEL_NAME, default_model_dir, require_model

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt")


@pytest.fixture
def other_model(tmp_path):
    """Another model's folder (the default model's config and tokenizer under another name)."""
    src = require_model()
    dst = tmp_path / "Other-Model-1B"
    dst.mkdir()
    for name in (*TOKENIZER_FILES, "config.json", "generation_config.json"):
        if (src / name).exists():
            shutil.copy(src / name, dst / name)
    return dst


def test_gpu_setup_without_a_model_uses_the_prepared_default(monkeypatch):
    monkeypatch.setenv("INFEROPT_ENGINE", "gpu")
    monkeypatch.delenv("INFEROPT_MODEL", raising=False)
    assert sm.served_model() == str(default_model_dir())
    tok = load_tokenizer()
    assert len(tok(" marine marine").input_ids) == 2
    srv = VLLMServer(kind="gpu")
    assert srv.model == str(default_model_dir()) and srv.served_name == MODEL_NAME
    assert srv.spec_source == "smollm2-135m-instruct"


def test_another_models_folder_gives_its_own_tokenizer_name_and_config(monkeypatch, other_model):
    monkeypatch.setenv("INFEROPT_ENGINE", "gpu")
    monkeypatch.setenv("INFEROPT_MODEL", str(other_model))
    assert load_tokenizer().name_or_path == str(other_model)        # that folder's tokenizer, not SmolLM2's
    assert load_tokenizer(str(default_model_dir())).name_or_path != str(other_model)
    srv = VLLMServer(kind="gpu")
    assert srv.served_name == "Other-Model-1B" and srv.model == str(other_model)
    assert srv.spec_source == str(other_model / "config.json")
    assert load_tokenizer(srv).name_or_path == str(other_model)      # a server object names its model


def test_a_hub_id_is_served_under_its_id_and_its_spec_is_the_shipped_one(monkeypatch):
    monkeypatch.setenv("INFEROPT_ENGINE", "gpu")
    monkeypatch.setenv("INFEROPT_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    srv = VLLMServer(kind="gpu", kv_cache_gib=1.0)
    assert srv.model == "Qwen/Qwen2.5-7B-Instruct" and srv.served_name == "Qwen/Qwen2.5-7B-Instruct"
    assert srv.spec_source == "qwen2.5-7b-instruct"
    from inferopt.planning.memory import engine_prediction

    p = engine_prediction(srv)
    assert p.model == "qwen2.5-7b-instruct" and p.block_size == 16     # not SmolLM2's arithmetic


def test_the_readme_qwen_example_needs_its_config(monkeypatch, tmp_path):
    """docs/setup-details.md: INFEROPT_MODEL=Qwen/Qwen2.5-1.5B-Instruct; no shipped spec, no hub cache here: one line."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("INFEROPT_ENGINE", "gpu")
    monkeypatch.setenv("INFEROPT_MODEL", "Qwen/Qwen2.5-1.5B-Instruct")
    srv = VLLMServer(kind="gpu", kv_cache_gib=1.0)
    assert srv.served_name == "Qwen/Qwen2.5-1.5B-Instruct"
    with pytest.raises(CourseError, match="no config.json"):
        _ = srv.spec_source


def test_cpu_engine_ignores_inferopt_model_and_bad_names_are_refused(monkeypatch):
    monkeypatch.setenv("INFEROPT_MODEL", "Qwen/Qwen2.5-1.5B-Instruct")
    assert sm.served_model(kind="cpu") == str(default_model_dir())
    for bad in ("./no/such/folder", "not-an-id", "a/b/c"):
        with pytest.raises(CourseError):
            sm.served_model(bad, "gpu")
