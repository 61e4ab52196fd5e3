""""Will vLLM start?" - the memory calculator's verdict against the live CPU engine.

Three engine starts (run under `flock /tmp/inferopt-engine.lock`; measured 248 s), SmolLM2-135M in float32,
max_model_len 2048, 128-token blocks of 46,080 B/token x 128 = 5,898,240 B:
  50,000,000 B  -> 8 blocks: refused, vLLM estimates a maximum model length of 896 (7 usable x 128)
  94,371,840 B  -> 16 blocks: refused (one is the null block), estimate 1920
  100,270,080 B -> 17 blocks: just fits (16 blocks for one 2048-token request + the null block)
The refusals are ValueErrors in vLLM's own words; the project's error must quote that sentence
(not "Engine core initialization failed") and add the calculator's advice.
"""
import re

import pytest

from inferopt.errors import CourseError
from inferopt.planning.memory import CPU_BLOCK_SIZE, GiB, start_verdict
from inferopt.serving.engine import VLLMServer, root_cause

MODEL = "smollm2-135m-instruct"


def verdict(nbytes: int):
    return start_verdict(MODEL, None, weight_format="fp32", dtype="float32", max_model_len=2048,
                         kv_cache_memory_bytes=nbytes, block_size=CPU_BLOCK_SIZE)


def test_root_cause_picks_vllms_sentence_not_the_wrapper():
    log = ("ERROR [core.py:708] ValueError: To serve at least one request with the model's max seq len (2048), "
           "(0.09 GiB KV cache is needed, which is larger than the available KV cache memory (0.05 GiB). Based on "
           "the available memory, the estimated maximum model length is 896. Try increasing\n"
           "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    assert root_cause(log).startswith("ValueError: To serve at least one request")
    assert root_cause("RuntimeError: Engine core initialization failed. See root cause above.") is None
    assert root_cause("all good") is None


def test_verdicts_without_an_engine():
    assert (verdict(50_000_000).will_start, verdict(50_000_000).max_model_len_estimate) == (False, 896)
    assert (verdict(94_371_840).will_start, verdict(94_371_840).max_model_len_estimate) == (False, 1920)
    assert verdict(100_270_080).will_start and verdict(100_270_080).result.num_blocks == 17


@pytest.mark.engine
@pytest.mark.parametrize("nbytes", [50_000_000, 94_371_840])
def test_engine_refuses_what_the_calculator_refuses_with_the_same_estimate(nbytes):
    v = verdict(nbytes)
    assert not v.will_start
    srv = VLLMServer(max_model_len=2048, kv_cache_gib=nbytes / GiB, quiet=True)
    with pytest.raises(CourseError) as exc:
        srv.start()
    msg = str(exc.value)
    m = re.search(r"estimated maximum model length is (\d+)", msg)
    assert m, msg
    assert int(m.group(1)) == v.max_model_len_estimate, (m.group(1), v.max_model_len_estimate)
    assert msg.startswith("vLLM refused to start: ValueError:") and "Engine core initialization failed" not in msg
    assert f"at most {v.max_model_len_estimate}" in msg  # the calculator's advice rides along
    assert srv.proc is None or srv.proc.poll() is not None


@pytest.mark.engine
def test_engine_starts_with_the_budget_that_just_fits():
    v = verdict(100_270_080)
    assert v.will_start
    with VLLMServer(max_model_len=2048, kv_cache_gib=100_270_080 / GiB, quiet=True) as srv:
        assert srv.kv_cache_tokens == v.result.kv_cache_tokens
