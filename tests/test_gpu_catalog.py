"""assets/gpus.yaml is the one GPU table: its loader, names and aliases, and its internal consistency."""
import copy

import pytest

from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog, memory

# CUDA compute capabilities per architecture (major.minor); Ampere and Ada have more than one.
ARCH_CC = {"volta": {7.0, 7.2}, "turing": {7.5}, "ampere": {8.0, 8.6, 8.7}, "ada": {8.9},
           "hopper": {9.0}, "blackwell": {10.0, 10.3, 12.0}}


def test_one_table_only():
    assert "gpus" not in knowledge.load("techniques")
    assert "gpus" not in knowledge.schema("techniques")["properties"]
    assert memory.gpu_catalog() is gpu_catalog.catalog()
    assert memory.gpu_names() == gpu_catalog.ids()


@pytest.mark.parametrize("gid", gpu_catalog.ids())
def test_entry_is_consistent(gid):
    g = gpu_catalog.catalog()[gid]
    needs = knowledge.load("techniques")["hardware_needs"]
    assert g["compute_capability"] in ARCH_CC[g["arch"]], gid
    # fp8_support (used by the memory calculator) and compute capability (used by the decision
    # engine) must tell the same story
    assert g["fp8_support"] == (g["compute_capability"] >= needs["fp8_compute"]["min_compute_capability"]), gid
    assert (g["fp8_dense_tflops"] is not None) == g["fp8_support"], gid
    assert (g["bf16_dense_tflops"] is not None) == g["bf16_support"], gid
    assert 0.92 < g["memory_mib_reported"] / 1024 / g["memory_gb"] <= 1.03, gid
    assert gpu_catalog.resolve(gid) == gid
    for alias in g["aliases"]:
        assert gpu_catalog.resolve(alias) == gid
        assert gpu_catalog.resolve(alias.lower().replace("-", " ")) == gid


def test_short_names_learners_type():
    expect = {"H100": "H100-SXM-80GB", "h100": "H100-SXM-80GB", "A100": "A100-SXM-80GB",
              "RTX4090": "RTX-4090", "RTX 4090": "RTX-4090", "L40S": "L40S", "T4": "T4", "B200": "B200-SXM-180GB",
              "H20": "H20-96GB", "L4": "L4", "A10": "A10", "V100": "V100-SXM2-32GB", "H200": "H200-SXM-141GB"}
    assert {name: gpu_catalog.resolve(name) for name in expect} == expect


def test_decision_classes_and_cpu():
    names = gpu_catalog.class_names()
    assert names[-1] == "CPU" and len(names) == len(set(names)) == len(gpu_catalog.ids()) + 1
    for name in names:
        assert knowledge.gpu_info(name)["name"] == name
    cpu = knowledge.gpu_info("cpu")
    assert cpu["compute_capability"] == 0.0 and cpu["memory_gib"] is None and cpu["id"] is None
    h100 = knowledge.gpu_info("H100-SXM-80GB")
    assert h100["name"] == "H100" and h100["compute_capability"] == 9.0
    # the decision engine and the memory calculator see the same memory for a GPU
    assert h100["memory_gib"] == memory.gpu_memory_gib("H100") == memory.gpu_memory_gib("H100-SXM-80GB")
    assert knowledge.gpu_info(None) is None and knowledge.gpu_info("") is None


def test_unknown_names_say_what_to_do():
    with pytest.raises(CourseError, match=r"workload\.gpu_type: unknown GPU 'Voodoo2'.*H100-SXM-80GB \(H100\).*CPU"):
        knowledge.gpu_info("Voodoo2")
    with pytest.raises(CourseError, match=r"unknown GPU 'cpu'.*assets/gpus\.yaml"):
        memory.calculate("llama-3-70b", "cpu")   # the calculator takes gpu=None for the CPU engine
    assert memory.calculate("llama-3-70b", "H100", tp=8).kv_cache_tokens == \
        memory.calculate("llama-3-70b", "H100-SXM-80GB", tp=8).kv_cache_tokens


def test_schema_rejects_an_entry_without_compute_capability_or_aliases():
    data = copy.deepcopy(knowledge.load("gpus"))
    del data["gpus"]["T4"]["compute_capability"]
    with pytest.raises(CourseError, match=r"gpus\.yaml, field gpus/T4"):
        knowledge.validate("gpus", data)
    data = copy.deepcopy(knowledge.load("gpus"))
    data["gpus"]["T4"]["aliases"] = []
    with pytest.raises(CourseError, match=r"gpus/T4/aliases"):
        knowledge.validate("gpus", data)
