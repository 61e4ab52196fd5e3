""""Will vLLM start?" - the memory calculator's verdict against the live CPU engine.

Three engine starts, all at once (run under `flock /tmp/inferopt-engine.lock`), SmolLM2-135M in float32,
max_model_len 2048, 128-token blocks of 46,080 B/token x 128 = 5,898,240 B:
  50,000,000 B  -> 8 blocks: refused, vLLM estimates a maximum model length of 896 (7 usable x 128)
  94,371,840 B  -> 16 blocks: refused (one is the null block), estimate 1920
  100,270,080 B -> 17 blocks: just fits (16 blocks for one 2048-token request + the null block)
The refusals are ValueErrors in vLLM's own words; the project's error must quote that sentence
(not "Engine core initialization failed") and add the calculator's advice.
"""
import re

import pytest
from kv_agreement import assert_kv_agrees

from inferopt.errors import CourseError
from inferopt.planning.memory import CPU_BLOCK_SIZE, GiB, start_verdict
from inferopt.serving.engine import VLLMServer, root_cause
from inferopt.serving.managed_process import start_together

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


REFUSED, FITS = (50_000_000, 94_371_840), 100_270_080


@pytest.fixture(scope="module")
def started():
    """The three budgets started at once (start-up is mostly imports: ~45 s together, ~100 s one
    after another); {budget: (its VLLMServer, the server again or the CourseError its start raised)}."""
    servers = {b: VLLMServer(max_model_len=2048, kv_cache_gib=b / GiB, quiet=True) for b in (*REFUSED, FITS)}
    outcomes = start_together(*servers.values(), return_exceptions=True)
    try:
        yield {b: (servers[b], out) for b, out in zip(servers, outcomes, strict=True)}
    finally:
        for srv in servers.values():
            srv.stop()


@pytest.mark.engine
@pytest.mark.parametrize("nbytes", REFUSED)
def test_engine_refuses_what_the_calculator_refuses_with_the_same_estimate(started, nbytes):
    v = verdict(nbytes)
    assert not v.will_start
    srv, exc = started[nbytes]
    assert isinstance(exc, CourseError), f"the engine started with {nbytes:,} B: {exc!r}"
    assert srv.proc is None or srv.proc.poll() is not None          # nothing left running
    msg = str(exc)
    m = re.search(r"estimated maximum model length is (\d+)", msg)
    assert m, msg
    assert int(m.group(1)) == v.max_model_len_estimate, (m.group(1), v.max_model_len_estimate)
    assert msg.startswith("vLLM refused to start: ValueError:") and "Engine core initialization failed" not in msg
    assert f"at most {v.max_model_len_estimate}" in msg  # the calculator's advice rides along


@pytest.mark.engine
def test_engine_starts_with_the_budget_that_just_fits(started):
    v = verdict(FITS)
    assert v.will_start
    srv, out = started[FITS]
    assert out is srv and srv.proc is not None, out
    assert srv.kv_cache_tokens == v.result.kv_cache_tokens
    assert_kv_agrees(srv, FITS / GiB, 2048, "float32")   # and its concurrency (tests/test_memory_engine_agreement.py)
