"""Synthetic prompts: exact token counts with the course model's tokenizer, fresh text per seed."""
import pytest

from inferopt.bench.workload import Workload, build_requests, count_tokens
from inferopt.errors import CourseError


@pytest.mark.parametrize("n", [1, 17, 100, 1500])
def test_exact_token_counts(tok, n):
    reqs = build_requests(Workload(input_tokens=n, output_tokens=8, num_requests=3, seed=n), tok)
    assert [count_tokens(tok, r.prompt) for r in reqs] == [n, n, n]
    assert all(r.prompt_tokens == n and r.max_tokens == 8 for r in reqs)


def test_spread_stays_exact_and_in_range(tok):
    reqs = build_requests(Workload(input_tokens=200, num_requests=20, input_spread=0.25, seed=1), tok)
    counts = [count_tokens(tok, r.prompt) for r in reqs]
    assert counts == [r.prompt_tokens for r in reqs]
    assert min(counts) >= 150 and max(counts) <= 250 and len(set(counts)) > 5


def test_shared_prefix_is_shared_and_rest_is_fresh(tok):
    reqs = build_requests(Workload(input_tokens=300, num_requests=4, shared_prefix_tokens=250, seed=2), tok)
    prefixes = {tok(r.prompt).input_ids[:250].__repr__() for r in reqs}
    assert len(prefixes) == 1
    assert len({r.prompt for r in reqs}) == 4


def test_seeds_give_different_prompts(tok):
    a = build_requests(Workload(input_tokens=50, num_requests=2, seed=1), tok)
    b = build_requests(Workload(input_tokens=50, num_requests=2, seed=2), tok)
    again = build_requests(Workload(input_tokens=50, num_requests=2, seed=1), tok)
    assert a == again and not {r.prompt for r in a} & {r.prompt for r in b}


def test_bad_workloads_say_what_to_do():
    with pytest.raises(CourseError, match="shorter than the shortest prompt"):
        Workload(input_tokens=100, shared_prefix_tokens=100)
    with pytest.raises(CourseError, match="must be ≥ 1"):
        Workload(output_tokens=0)
    with pytest.raises(CourseError, match="fraction"):
        Workload(input_spread=1.5)
