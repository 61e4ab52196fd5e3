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
