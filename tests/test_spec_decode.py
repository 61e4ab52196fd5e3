"""inferopt.bench.spec_decode: the ratio vLLM reports is not Leviathan's α, and α is recoverable."""
import itertools
import json
import random

import pytest

from inferopt.bench.spec_decode import acceptance_ratio, alpha_from_ratio, read_counters, tokens_per_step
from inferopt.errors import CourseError
from inferopt.paths import ASSETS


def test_tokens_per_step_matches_the_sum_it_abbreviates():
    for alpha, k in itertools.product((0.0, 0.3, 0.6, 0.94, 0.99), (1, 2, 4, 8)):
        assert tokens_per_step(alpha, k) == pytest.approx(sum(alpha ** i for i in range(k + 1)))
    assert tokens_per_step(1.0, 4) == 5.0
    assert tokens_per_step(0.0, 4) == 1.0


def test_ratio_is_the_mean_of_alpha_powers_and_below_alpha():
    for alpha, k in itertools.product((0.2, 0.5, 0.851, 0.94), (2, 4, 8)):
        r = acceptance_ratio(alpha, k)
        assert r == pytest.approx(sum(alpha ** i for i in range(1, k + 1)) / k)
        assert r < alpha                      # the ratio undercounts α whenever k > 1
    assert acceptance_ratio(0.7, 1) == pytest.approx(0.7)   # k = 1: the two coincide


def test_ratio_matches_a_simulated_first_rejection_process():
    rng = random.Random(1)
    alpha, k, steps = 0.8, 4, 40_000
    accepted = 0
    for _ in range(steps):
        for _pos in range(k):
            if rng.random() >= alpha:
                break
            accepted += 1
    assert accepted / (k * steps) == pytest.approx(acceptance_ratio(alpha, k), abs=0.01)
    assert 1 + accepted / steps == pytest.approx(tokens_per_step(alpha, k), abs=0.03)


def test_alpha_from_ratio_inverts_acceptance_ratio():
    for alpha, k in itertools.product((0.05, 0.5, 0.9, 0.94, 0.999), (1, 3, 4, 8)):
        assert alpha_from_ratio(acceptance_ratio(alpha, k), k) == pytest.approx(alpha, abs=1e-9)
    assert alpha_from_ratio(0.0, 4) == 0.0 and alpha_from_ratio(1.0, 4) == 1.0


def test_stored_ngram_record_gives_alpha_094_and_reproduces_441():
    rec = json.loads((ASSETS / "results" / "ngram-spec-cpu.json").read_text())
    k = rec["speculative_config"]["num_speculative_tokens"]
    r = read_counters(rec["counters"], k)
    assert r.ratio == pytest.approx(0.851, abs=5e-4) and k == 4
    assert r.alpha == pytest.approx(0.94, abs=0.005)
    assert r.model_tokens_per_step == pytest.approx(r.measured_tokens_per_step, rel=1e-9)
    assert r.measured_tokens_per_step == pytest.approx(4.41, abs=0.005)
    # the mistake the chapter used to make: the ratio put in for α gives 3.72, not 4.41
    assert r.ratio_as_alpha_tokens_per_step == pytest.approx(3.72, abs=0.005)
    assert r.ratio_as_alpha_tokens_per_step < r.measured_tokens_per_step - 0.5


@pytest.mark.parametrize("bad", [
    lambda: tokens_per_step(1.2, 4), lambda: tokens_per_step(0.5, 0), lambda: acceptance_ratio(-0.1, 4),
    lambda: alpha_from_ratio(1.5, 4), lambda: alpha_from_ratio(0.5, 2.5),
    lambda: read_counters({}, 4),
    lambda: read_counters({"vllm:spec_decode_num_drafts_total": 10, "vllm:spec_decode_num_draft_tokens_total": 30,
                           "vllm:spec_decode_num_accepted_tokens_total": 5}, 4),
    lambda: read_counters({"vllm:spec_decode_num_drafts_total": 10, "vllm:spec_decode_num_draft_tokens_total": 40,
                           "vllm:spec_decode_num_accepted_tokens_total": 41}, 4),
])
def test_bad_input_is_one_course_error(bad):
    with pytest.raises(CourseError):
        bad()


def _drafts(outcomes, k):
    """Per-position accepted counts, and the totals, of drafts whose accepted-prefix lengths are ``outcomes``."""
    per_pos = [sum(1 for a in outcomes if a > i) for i in range(k)]
    return per_pos, float(len(outcomes)), float(sum(outcomes))


def _first_rejection(rng, alpha, k):
    a = 0
    while a < k and rng.random() < alpha:
        a += 1
    return a


def test_per_position_counters_test_the_one_alpha_model_and_can_reject_it():
    from inferopt.bench.spec_decode import cut_tokens_per_step, read_per_position
    rng, k = random.Random(3), 4
    # drafts that follow the one-alpha model: alpha from the total ratio predicts the drafts cut to 2 positions
    iid = [_first_rejection(rng, 0.7, k) for _ in range(20_000)]
    pp = read_per_position(*_drafts(iid, k), k)
    assert cut_tokens_per_step(pp, 2) == pytest.approx(tokens_per_step(pp.alpha, 2), rel=0.02)
    assert all(c == pytest.approx(0.7, abs=0.03) for c in pp.conditional)
    # all-or-nothing drafts (a repeated span is copied whole or not at all), same total ratio family:
    # the one-alpha prediction for k = 2 misses what the same drafts give, and the conditionals are not equal
    lumpy = [k if rng.random() < 0.5 else 0 for _ in range(20_000)]
    pp2 = read_per_position(*_drafts(lumpy, k), k)
    assert abs(cut_tokens_per_step(pp2, 2) / tokens_per_step(pp2.alpha, 2) - 1) > 0.1
    assert pp2.conditional[1] > 0.95 > 0.6 > pp2.conditional[0]
    # the full cut is the measured tokens per step (1 + accepted / drafts): the identity, kept apart
    assert cut_tokens_per_step(pp2, k) == pytest.approx(1 + sum(lumpy) / len(lumpy))


@pytest.mark.parametrize("bad", [
    ([5, 3, 1], 10.0, 9.0, 4),        # three positions for k = 4
    ([5, 3, 2, 1], 10.0, 12.0, 4),    # positions do not sum to the accepted total
    ([3, 5, 1, 0], 10.0, 9.0, 4),     # a later position accepted more often than an earlier one
    ([12, 0, 0, 0], 10.0, 12.0, 4),   # more accepted at position 1 than drafts
])
def test_a_misread_per_position_counter_is_one_course_error(bad):
    from inferopt.bench.spec_decode import read_per_position
    with pytest.raises(CourseError, match="per_pos"):
        read_per_position(*bad)


def test_per_position_counter_is_read_by_label():
    from inferopt.bench.experiments import parse_per_position
    text = ("# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.\n"
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
            + "".join(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="{i}"}} '
                      f"{v}\n" for i, v in enumerate((40.0, 31.0, 20.0, 9.0))))
    assert parse_per_position(text) == {0: 40.0, 1: 31.0, 2: 20.0, 3: 9.0}
