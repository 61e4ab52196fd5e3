"""assets/hardware_rules.yaml holds what the installed vLLM answers when it is CALLED on each catalog GPU
(inferopt/vllm_oracle/hardware_table.py: get_min_capability, the Marlin type query, the attention backend
selection and the backends' constructor checks, get_batch_defaults). A stored number that vLLM no longer
gives fails here with the diff; `python -m inferopt hardware-table` regenerates it."""
import copy

import pytest
import yaml

from inferopt import assets
from inferopt.planning import hardware
from inferopt.vllm_oracle import hardware_table


@pytest.fixture(scope="module")
def computed():
    return hardware_table.computed_from_vllm(use_cache=True)


def test_the_stored_table_is_what_the_installed_vllm_says(computed):
    stored = yaml.safe_load(assets.text("hardware_rules.yaml"))
    regenerated = hardware_table.merge(stored, computed)
    if regenerated != stored:
        import difflib

        diff = "".join(difflib.unified_diff(hardware_table.dump(stored).splitlines(True),
                                            hardware_table.dump(regenerated).splitlines(True), "stored", "vLLM"))
        pytest.fail("assets/hardware_rules.yaml disagrees with the installed vLLM; run `python -m inferopt "
                    "hardware-table`, read the diff, re-execute what it touches:\n" + diff)
    assert hardware_table.batch_rows_disagree(computed) == []


def test_what_vllm_decides_on_the_old_generations(computed):
    """The issue's cases: FP8 KV stops the engine on a T4 or a V100 (TritonAttentionImpl.__init__), holds
    from Ampere through FlashInfer; AWQ (awq = awq_marlin) needs 7.5; FP8 W8A8 8.9."""
    att = computed["attention"]
    assert att["T4"]["fp8"] is None and "requires SM89" in att["T4"]["fp8_refusal"]
    assert att["V100-SXM2-32GB"]["fp8"] is None and att["V100-SXM2-32GB"]["auto"] == "TRITON_ATTN"
    assert att["A100-SXM-80GB"]["fp8"] == "FLASHINFER" and att["A100-SXM-80GB"]["auto"] == "FLASH_ATTN"
    assert computed["kv_cache"]["fp8_kv"]["min_capability"] == 8.0
    assert computed["quantization"]["int4_marlin"]["min_capability"] == 7.5
    assert computed["quantization"]["fp8_w8a8"]["min_capability"] == 8.9
    assert hardware.supports("T4", "fp8_kv") is False and hardware.supports("A100", "fp8_kv") is True


def test_the_check_fails_on_a_stale_number_and_prints_it(computed):
    stale = yaml.safe_load(assets.text("hardware_rules.yaml"))
    stale = copy.deepcopy(stale)
    stale["kv_cache"]["fp8_kv"]["min_capability"] = 7.0      # the table before vLLM was asked
    regenerated = hardware_table.merge(stale, computed)
    assert regenerated != stale
    import difflib

    diff = "".join(difflib.unified_diff(hardware_table.dump(stale).splitlines(True),
                                        hardware_table.dump(regenerated).splitlines(True)))
    assert "-    min_capability: 7.0" in diff and "+    min_capability: 8.0" in diff
    bad = copy.deepcopy(computed)
    bad["batch_defaults"]["A100-SXM-80GB"] = [8192, 1024]     # the A100 exception forgotten
    assert hardware_table.batch_rows_disagree(bad) == ["A100-SXM-80GB: stored (2048, 256), vLLM (8192, 1024)"]


def test_the_platform_rules_are_vllms_and_torchs_answers(computed):
    """bfloat16 from vLLM's own dtype check per catalog GPU (8.0: T4 and V100 refused, and --dtype auto falls back to
    float16 there); the CUDA builds' floor from the installed torch's table of what its cu129/cu130 wheels are
    compiled for (7.5: the V100 and P100 stop)."""
    plat = computed["platform"]
    assert plat["bf16_dtype"]["min_capability"] == 8.0
    assert "Bfloat16 is only supported" in plat["bf16_dtype"]["source"][0]["says"]
    att = computed["attention"]
    assert att["T4"]["dtype_auto"] == att["V100-SXM2-32GB"]["dtype_auto"] == "float16"
    assert {r["dtype_auto"] for g, r in att.items() if r["compute_capability"] >= 8.0} == {"bfloat16"}
    assert plat["vllm_cuda"]["min_capability"] == 7.5
    assert plat["vllm_cuda"]["by_build"] == {"cu130": 7.5, "cu129": 7.5}
    assert "12.8" not in plat["vllm_cuda"]["source"][0]["says"].split("CUDA builds:")[1]   # no cu128 torch 2.13
    from inferopt.serving import gpu_flags

    assert gpu_flags.supports(7.5, "vllm_cuda") and not gpu_flags.supports(7.0, "vllm_cuda")
    assert not gpu_flags.supports(7.5, "bf16_dtype") and gpu_flags.supports(8.0, "bf16_dtype")


def test_every_platform_source_is_in_the_installed_code():
    import ast
    import importlib
    from pathlib import Path

    for rid, r in yaml.safe_load(assets.text("hardware_rules.yaml"))["platform"].items():
        for s in r["source"]:
            root = Path(importlib.import_module(s.get("package", "vllm")).__file__).parent
            tree = ast.parse((root / s["file"]).read_text())
            names = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            names |= {t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                      for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)}
            for part in s["function"].split("."):
                assert part in names, f"{rid}: {s['function']} not in {s.get('package', 'vllm')}/{s['file']}"


def test_a_build_torch_does_not_publish_is_refused(monkeypatch):
    """The floor is read per build of assets/gpu_builds.yaml: a cu128 build (none exists for torch 2.13) stops the
    generator with one line instead of a guessed floor; a CUDA 12.6 build would run a V100 (its list has 7.0) but
    not a B200 (no Blackwell code): one floor cannot state that, and the generator says so."""
    from inferopt.errors import CourseError

    real = assets.load

    def with_builds(builds):
        def load(name, *a, **k):
            got = real(name, *a, **k)
            return dict(got, builds=builds) if name == "gpu_builds.yaml" else got
        monkeypatch.setattr(assets, "load", load)

    caps = [70, 75, 80, 86, 89, 90, 100]
    with_builds({"cu128": {"cuda": "12.8"}})
    with pytest.raises(CourseError, match="publishes no such build") as e:
        hardware_table._cuda_floor(caps)
    assert "\n" not in str(e.value)
    with_builds({"cu126": {"cuda": "12.6"}})
    with pytest.raises(CourseError, match="not monotonic"):
        hardware_table._cuda_floor(caps)
    assert hardware_table._cuda_floor(caps[:-1])["by_build"] == {"cu126": 7.0}


def test_a_stale_platform_rule_shows_in_the_diff(computed):
    stale = copy.deepcopy(yaml.safe_load(assets.text("hardware_rules.yaml")))
    stale["platform"]["bf16_dtype"]["min_capability"] = 7.5          # a T4 would be told to run bfloat16
    del stale["platform"]["vllm_cuda"]["by_build"]
    regenerated = hardware_table.merge(stale, computed)
    assert regenerated["platform"]["bf16_dtype"]["min_capability"] == 8.0
    assert regenerated["platform"]["vllm_cuda"]["by_build"] == {"cu130": 7.5, "cu129": 7.5}
    assert regenerated["platform"]["vllm_cuda"]["cited"] == stale["platform"]["vllm_cuda"]["cited"]   # prose kept
