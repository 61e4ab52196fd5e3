"""GPU memory shares (serving/gpu_share.py): computed by the memory calculator, refused in one line."""
import math

import pytest

from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog
from inferopt.planning.memory import calculate
from inferopt.serving import gpu_share
from inferopt.serving.engine import VLLMServer
from inferopt.serving.gpu_share import describe_split, engine_share, section_engines

GiB = 1 << 30


def card(gpu_id):
    """(free, total) bytes of an empty card of the catalog: its reported total, 0.4 GiB for the driver."""
    total = int(gpu_catalog.entry(gpu_id)["memory_mib_reported"]) << 20
    return total - int(0.4 * GiB), total


def vllm_request_memory_ok(free, total, util):
    """vllm/v1/worker/utils.py: request_memory refuses when free < ceil(total x util)."""
    return free >= math.ceil(total * util)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_engine_of_a_section_passes_vllms_free_memory_check(n):
    free, total = card("RTX-4090")
    s = engine_share(n, free_bytes=free, total_bytes=total, max_model_len=2048, kv_cache_gib=1.0)
    assert s.need_gib <= s.share_gib
    # engines start one after another, each booking its share: every one finds its share free
    for k in range(n):
        assert vllm_request_memory_ok(free - k * math.ceil(total * s.gpu_memory_utilization), total,
                                      s.gpu_memory_utilization), k
    # and a restart of one engine while the others hold theirs also starts
    assert vllm_request_memory_ok(free - (n - 1) * math.ceil(total * s.gpu_memory_utilization), total,
                                  s.gpu_memory_utilization)
    assert s.flags() == ["--gpu-memory-utilization", f"{s.gpu_memory_utilization:.3f}"]


def test_the_default_utilization_would_not_start_a_second_engine():
    """Why the shares exist: at vLLM's 0.92 the second engine fails request_memory."""
    free, total = card("RTX-4090")
    assert not vllm_request_memory_ok(free - math.ceil(total * 0.92), total, 0.92)
    two = engine_share(2, free_bytes=free, total_bytes=total, kv_cache_gib=1.0)
    assert two.gpu_memory_utilization < 0.5


def test_need_is_the_calculators_weights_buffer_and_kv():
    free, total = card("H100-SXM-80GB")
    s = engine_share(1, free_bytes=free, total_bytes=total, model="llama-3.1-8b", max_model_len=8192)
    r = calculate("llama-3.1-8b", None, max_model_len=8192, kv_cache_memory_bytes=1 << 40, block_size=16)
    kv_one_request = (r.blocks_per_request + 1) * r.bytes_per_block / GiB     # + vLLM's null block
    assert s.need_gib == pytest.approx(r.weights_gib_per_gpu + s.runtime_buffer_gib + kv_one_request)
    assert not s.kv_gib_explicit


def test_three_7b_engines_on_a_24gb_card_are_refused_in_one_line():
    free, total = card("RTX-4090")
    with pytest.raises(CourseError) as e:
        engine_share(3, free_bytes=free, total_bytes=total, model="qwen2.5-7b-instruct", max_model_len=2048)
    msg = str(e.value)
    assert "\n" not in msg and "3 engine(s)" in msg and "at most 1" in msg
    # one such engine fits the same card
    assert engine_share(1, free_bytes=free, total_bytes=total, model="qwen2.5-7b-instruct", max_model_len=2048)


def test_a_busy_gpu_is_refused_and_bad_arguments_too():
    free, total = card("RTX-4090")
    with pytest.raises(CourseError, match="cannot share"):
        engine_share(1, free_bytes=int(2 * GiB), total_bytes=total)       # another program holds the card
    for bad in (0, -1, 1.5, None):
        with pytest.raises(CourseError, match="engines="):
            engine_share(bad, free_bytes=free, total_bytes=total)
    with pytest.raises(CourseError, match="free"):
        engine_share(1, free_bytes=total + 1, total_bytes=total)
    with pytest.raises(CourseError, match="kv_cache_gib"):
        engine_share(1, free_bytes=free, total_bytes=total, kv_cache_gib=0)


def test_describe_split_states_the_share_and_the_rule():
    free, total = card("L4")
    s = engine_share(3, free_bytes=free, total_bytes=total, max_model_len=128, kv_cache_gib=0.25)
    text = describe_split(s)
    assert f"{s.gpu_memory_utilization:.3f}" in text and "request_memory" in text and "3 engine" in text
    assert f"{s.need_gib:.2f}" in text and "\n" not in text


def test_a_section_gives_every_gpu_engine_the_same_share(monkeypatch):
    free, total = card("RTX-4090")
    calls = []

    def fake_memory_info(device=0):       # the probe is the GPU; what it says is the input under test
        calls.append(device)
        return free - len(calls) * int(3 * GiB), total   # free shrinks as engines start
    monkeypatch.setattr("inferopt.serving.gpu.memory_info", fake_memory_info)
    with section_engines(3):
        servers = [VLLMServer(kind="gpu", max_model_len=128, kv_cache_gib=0.25) for _ in range(3)]
        shares = [srv.assign_gpu_share() for srv in servers]
    assert len(calls) == 1                                 # computed once, before any engine booked memory
    assert all(s is shares[0] for s in shares) and shares[0].engines == 3
    for srv in servers:
        cmd = srv.command()
        assert cmd[cmd.index("--gpu-memory-utilization") + 1] == f"{shares[0].gpu_memory_utilization:.3f}"
    alone = VLLMServer(kind="gpu", max_model_len=128, kv_cache_gib=0.25).assign_gpu_share()
    assert alone.engines == 1 and alone.gpu_memory_utilization > shares[0].gpu_memory_utilization
    fixed = VLLMServer(kind="gpu", max_model_len=128, gpu_memory_utilization=0.3)
    assert fixed.assign_gpu_share() is None and "0.300" in fixed.command()
    assert "--gpu-memory-utilization" not in VLLMServer(kind="cpu").command()   # the CPU engine has no share
    with pytest.raises(CourseError, match="gpu_memory_utilization"):
        VLLMServer(kind="gpu", gpu_memory_utilization=1.5)


def test_no_gpu_no_share(monkeypatch):
    monkeypatch.setattr("inferopt.serving.gpu.memory_info", lambda device=0: None)
    with pytest.raises(CourseError, match="no GPU answered"):
        gpu_share.engines_share(2)
