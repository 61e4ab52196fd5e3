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


# ---------------------------------------------------------------- issue 48: rules from the code path that runs
def _refused(old: dict, computed: dict) -> str:
    """The drift check's verdict on a table: the diff between it and what vLLM answers ('' = accepted)."""
    import difflib

    regenerated = hardware_table.merge(old, computed)
    return "".join(difflib.unified_diff(hardware_table.dump(old).splitlines(True),
                                        hardware_table.dump(regenerated).splitlines(True)))


def _stored() -> dict:
    return copy.deepcopy(yaml.safe_load(assets.text("hardware_rules.yaml")))


def test_gptq_floor_is_the_layer_check_not_the_config_gate(computed):
    """Gate vs check: AutoGPTQConfig.get_min_capability() says 60, but every GPTQ linear layer is built through
    AutoGPTQLinearMethod, whose verify_marlin_supported refuses below 7.5. The old entry (6.0, read from the gate,
    "non-Marlin fallback") is refused by the drift check."""
    q = computed["quantization"]["gptq"]
    assert "returns 60" in q["source"][0]["says"]                       # the gate says 6.0 ...
    assert q["min_capability"] == 7.5                                    # ... the layers build from 7.5
    v100 = computed["int4_kernels"]["V100-SXM2-32GB"]
    assert v100["gptq"] is None and "Marlin does not support" in v100["gptq_refusal"]
    assert computed["int4_kernels"]["T4"]["gptq"] == "MarlinLinearKernel"
    old = _stored()
    old["quantization"]["gptq"]["min_capability"] = 6.0
    old["quantization"]["gptq"]["source"] = old["quantization"]["gptq"]["source"][:1]
    d = _refused(old, computed)
    assert "-    min_capability: 6.0" in d and "+    min_capability: 7.5" in d
    assert _refused(_stored(), computed) == ""                           # the stored table is accepted
    assert not hardware.supports("V100", "gptq") and hardware.supports("T4", "gptq")


def test_hopper_fp8_kv_is_not_determinable_on_the_cpu_build(computed):
    """On Hopper FLASH_ATTN (first in vLLM's priorities) takes an FP8 KV cache only with FA3, which the CPU build's
    FlashAttention package cannot say (no compiled extension): asked both ways the answer differs, so the row says
    "not determinable on the CPU build" and names no backend. The old entry (FLASHINFER, what the stub made vLLM
    fall back to) is refused. Where the extension does not decide (Ampere, Ada: FA2 takes no FP8 KV), the answer
    stays vLLM's."""
    hopper = {g: r for g, r in computed["attention"].items() if r["compute_capability"] == 9.0}
    assert hopper
    for r in hopper.values():
        assert r["fp8"] is None and "fp8_refusal" not in r
        assert r["fp8_not_determinable"].startswith("not determinable on the CPU build: ")
        assert "FLASH_ATTN" in r["fp8_not_determinable"]
        assert r["flash_attn_version"] is None and "flash_attn_version_not_determinable" in r
    assert computed["attention"]["A100-SXM-80GB"]["fp8"] == "FLASHINFER"
    assert computed["attention"]["L4"]["fp8"] == "FLASHINFER"
    assert computed["attention"]["T4"]["fp8"] is None and computed["attention"]["T4"]["fp8_refusal"]
    assert "flash_attn_extension" in computed["not_determinable"]
    old = _stored()
    row = old["attention"]["H100-SXM-80GB"]
    row["fp8"] = "FLASHINFER"
    for k in ("fp8_not_determinable", "flash_attn_version", "flash_attn_version_not_determinable"):
        row.pop(k, None)
    d = _refused(old, computed)
    assert "-    fp8: FLASHINFER" in d and "+    fp8: null" in d
    assert hardware.fp8_kv_backend("H100").startswith("not determinable on the CPU build")
    assert hardware.fp8_kv_refusal("H100") is None and hardware.supports("H100", "fp8_kv")


def test_a_substitute_in_place_of_not_determinable_fails_the_schema():
    """The schema holds a not-determinable field to its words: a backend name there (a substitute) is refused."""
    from inferopt.errors import CourseError

    old = _stored()
    old["attention"]["H100-SXM-80GB"]["fp8_not_determinable"] = "FLASHINFER"
    with pytest.raises(CourseError, match="fp8_not_determinable"):
        assets.validate(old, assets.schema("hardware_rules.yaml"), "assets/hardware_rules.yaml")


def test_the_int4_kernel_is_vllms_choice_per_generation(computed):
    """vLLM's choose_mp_linear_kernel, reached by building llama-3.1-8b's linear layers under each GPU: Machete on
    Hopper (tried before Marlin; it needs capability 9.0 exactly), Marlin on Turing, Ampere, Ada and Blackwell, nothing
    on Volta (the AWQ config's gate, the GPTQ layer's Marlin check). The old naming (Marlin on an H100) is refused."""
    k = computed["int4_kernels"]
    for gid, r in k.items():
        for rid in ("gptq", "int4_marlin"):
            want = (None if r["compute_capability"] < 7.5 else
                    "MacheteLinearKernel" if r["compute_capability"] == 9.0 else "MarlinLinearKernel")
            assert r[rid] == want, (gid, rid, r)
    assert "Minimum capability: 75" in k["V100-SXM2-32GB"]["int4_marlin_refusal"]
    old = _stored()
    old["int4_kernels"]["H100-SXM-80GB"]["int4_marlin"] = "MarlinLinearKernel"
    d = _refused(old, computed)
    assert "-    int4_marlin: MarlinLinearKernel" in d and "+    int4_marlin: MacheteLinearKernel" in d
    old = _stored()
    del old["int4_kernels"]
    assert "+int4_kernels:" in _refused(old, computed)
    assert hardware.int4_kernel("H100", "gptq") == "MacheteLinearKernel"
    assert hardware.int4_kernel("B200") == "MarlinLinearKernel" and hardware.int4_kernel("V100") is None


def test_the_cited_gpu_code_path_is_in_the_installed_vllm():
    """What a not-determinable row cites for the GPU (cited, not called) names functions the installed vLLM has."""
    import ast
    from pathlib import Path

    import vllm

    root = Path(vllm.__file__).parent
    cited = yaml.safe_load(assets.text("hardware_rules.yaml"))["not_determinable"]["flash_attn_extension"]["cited"]
    for file, fn in (("vllm_flash_attn/flash_attn_interface.py", "_is_fa3_supported"),
                     ("v1/attention/backends/fa_utils.py", "get_flash_attn_version"),
                     ("v1/attention/backends/fa_utils.py", "flash_attn_supports_kv_cache_dtype"),
                     ("platforms/cuda.py", "_get_backend_priorities")):
        assert fn in cited and file in cited
        names = {n.name for n in ast.walk(ast.parse((root / file).read_text())) if isinstance(n, ast.FunctionDef)}
        assert fn in names, f"{fn} not in vllm/{file}"
