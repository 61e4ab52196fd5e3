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
