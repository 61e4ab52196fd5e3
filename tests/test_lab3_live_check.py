"""Lab 3's live check (labcheck.lab3.check_live) without an engine: a stream is played at a given pace, its
pieces handed to the learner's on_token as the engine helper does, and the check is fed the learner's t0, stamps
and figures with the helper's answer. It passes the worked way on a fast and a slow stream, with a slow health
check before sending (the 50 ms that failed a loaded CI machine), and rejects a t0 taken after the call or long
before it, stamps taken after the stream, and figures that do not follow from the stamps; no message gives a
number to type in."""
import time

import pytest

from inferopt.labcheck import _references as _ref
from inferopt.labcheck import lab3
from inferopt.labcheck.verdicts import CheckFailed


def play(on_token, *, pre_send_s: float, ttft_s: float, gap_s: float, n: int = 6) -> dict:
    """What VLLMServer.stream_chat returns, with on_token called per piece as it is (no engine: sleeps)."""
    called = time.perf_counter()
    time.sleep(pre_send_s)                       # the helper's health check and request set-up
    sent = time.perf_counter()
    time.sleep(ttft_s)
    first = time.perf_counter()
    for i in range(n):
        if i:
            time.sleep(gap_s)
        on_token(f"piece{i} ")
    e2e = time.perf_counter() - sent
    return {"text": "", "ttft_s": first - sent, "e2e_s": e2e, "output_tokens": n, "called_at": called,
            "sent_at": sent, "first_token_at": first}


def learner(stamps):
    return lambda piece: stamps.append(time.perf_counter())


def ns_for(t0, stamps, answer, **over):
    ttft_ms, tpot_ms = _ref.ref_live_stats(t0, stamps, answer["output_tokens"])
    return {"t0": t0, "stamps": stamps, "ttft_ms": ttft_ms, "tpot_ms": tpot_ms, **over}


@pytest.mark.parametrize("pre_send_s,ttft_s,gap_s", [(0.0, 0.05, 0.02), (0.12, 0.3, 0.03)])
def test_the_worked_way_passes_at_any_pace(pre_send_s, ttft_s, gap_s):
    stamps = []
    t0 = time.perf_counter()
    answer = play(learner(stamps), pre_send_s=pre_send_s, ttft_s=ttft_s, gap_s=gap_s)
    lab3.check_live(ns_for(t0, stamps, answer), answer)


def test_a_t0_after_the_call_or_long_before_it_is_rejected():
    stamps = []
    answer = play(learner(stamps), pre_send_s=0.0, ttft_s=0.02, gap_s=0.005)
    with pytest.raises(CheckFailed, match="later than the call"):
        lab3.check_live(ns_for(answer["sent_at"], stamps, answer), answer)     # t0 taken inside, after the call
    stamps = []
    t0 = time.perf_counter()
    time.sleep(0.1)                                                          # a t0 from an earlier cell
    answer = play(learner(stamps), pre_send_s=0.0, ttft_s=0.02, gap_s=0.005)
    with pytest.raises(CheckFailed, match="longer than the whole wait") as e:
        lab3.check_live(ns_for(t0, stamps, answer), answer)
    assert "on the line before the call" in str(e.value)


def test_stamps_taken_after_the_stream_are_rejected():
    pieces = []
    t0 = time.perf_counter()
    answer = play(pieces.append, pre_send_s=0.0, ttft_s=0.02, gap_s=0.01)
    time.sleep(0.02)
    stamps = [time.perf_counter() + i * 1e-4 for i in range(len(pieces))]   # stamped in a loop afterwards
    with pytest.raises(CheckFailed, match="more than one piece's time"):
        lab3.check_live(ns_for(t0, stamps, answer), answer)
    early = [t0 - 0.001] + stamps[1:]
    with pytest.raises(CheckFailed, match="earlier than the first piece"):
        lab3.check_live(ns_for(t0, early, answer), answer)


def test_figures_must_follow_from_the_stamps():
    stamps = []
    t0 = time.perf_counter()
    answer = play(learner(stamps), pre_send_s=0.0, ttft_s=0.02, gap_s=0.005)
    ns = ns_for(t0, stamps, answer)
    with pytest.raises(CheckFailed, match="do not follow from your stamps"):
        lab3.check_live({**ns, "tpot_ms": ns["tpot_ms"] * answer["output_tokens"] / (answer["output_tokens"] - 1)},
                        answer)                                           # n instead of n - 1 gaps
    with pytest.raises(CheckFailed, match="fewer than two pieces"):
        lab3.check_live({**ns, "stamps": stamps[:1]}, answer)
