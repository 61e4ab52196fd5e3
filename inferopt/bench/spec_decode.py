"""Speculative decoding arithmetic: vLLM's acceptance ratio, the per-position α, tokens per step.

Leviathan et al. (2023, "Fast Inference from Transformers via Speculative Decoding",
arXiv 2211.17192, §3.1) model each of the ``k`` draft tokens as accepted with the same
probability α, independently, until the first rejection. One verification step then yields

    E[tokens per step] = (1 − α^(k+1)) / (1 − α)          (the accepted prefix + one target token)

vLLM's counters (``vllm:spec_decode_num_accepted_tokens_total`` /
``vllm:spec_decode_num_draft_tokens_total``, vLLM 0.32 ``v1/spec_decode/metrics.py``) give a
different quantity: the share of *all drafted positions* that were accepted. Position ``i``
(1-based) is accepted only when positions 1..i all are, with probability α^i, so

    accepted / draft_tokens = (α + α² + … + α^k) / k = α (1 − α^k) / (k (1 − α))

which is smaller than α. Putting that ratio in for α undercounts the tokens per step; solving
the line above for α (``alpha_from_ratio``) gives the quantity the formula wants. Under that
model ``1 + k · ratio`` equals the expected tokens per step exactly, so the measured
``(accepted + drafts) / drafts`` (vLLM's own "mean acceptance length", ``SpecDecodingLogging.log``
in the same file) is reproduced by construction: the check shows which number is α, not that
acceptance is i.i.d. The per-position counter ``vllm:spec_decode_num_accepted_tokens_per_pos``
(label ``position`` 0 .. k-1; position i+1 accepted in α^(i+1) of the drafts under the model) is what tests
it: :func:`read_per_position` reads it, and :func:`cut_tokens_per_step` gives what the same drafts yield cut
to k' < k positions (a draft's position i counts only if all before it were accepted, so cutting a draft
keeps its first k' outcomes). That figure comes from the counters, not from α: set beside
``tokens_per_step(alpha, k')`` it checks the one-α model where it would be used, to extrapolate to
another k (the n-gram drafter's positions are not independent, so the two can differ).
"""
from __future__ import annotations

from dataclasses import dataclass

from inferopt.errors import CourseError


def _check(alpha: float, k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise CourseError(f"k={k!r} draft tokens: pass a whole number >= 1 (vLLM's num_speculative_tokens)")
    if not 0 <= alpha <= 1:
        raise CourseError(f"alpha={alpha!r}: an acceptance probability lies between 0 and 1")


def tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens one verification step yields: (1 − α^(k+1)) / (1 − α) (k+1 at α = 1)."""
    _check(alpha, k)
    if alpha == 1:
        return float(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def acceptance_ratio(alpha: float, k: int) -> float:
    """vLLM's accepted / draft_tokens for per-position acceptance α: α(1 − α^k) / (k(1 − α))."""
    _check(alpha, k)
    if alpha == 1:
        return 1.0
    return alpha * (1 - alpha ** k) / (k * (1 - alpha))


def alpha_from_ratio(ratio: float, k: int, *, tol: float = 1e-12) -> float:
    """The per-position α whose ``acceptance_ratio(α, k)`` equals the measured ``ratio``.

    ``acceptance_ratio`` rises strictly from 0 to 1 on [0, 1], so bisection finds the one root.
    """
    _check(0.0, k)
    if not 0 <= ratio <= 1:
        raise CourseError(f"acceptance ratio {ratio!r}: accepted / draft tokens lies between 0 and 1; "
                          "check that the counters are vLLM's spec_decode totals")
    if ratio in (0, 1):
        return float(ratio)
    lo, hi = 0.0, 1.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if acceptance_ratio(mid, k) < ratio:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class SpecDecodeReading:
    """What vLLM's three spec-decode counters say, and the α they imply."""

    k: int
    drafts: float
    draft_tokens: float
    accepted: float
    ratio: float                 # accepted / draft_tokens (vLLM's "acceptance rate")
    alpha: float                 # per-position acceptance solved from ratio
    measured_tokens_per_step: float  # (accepted + drafts) / drafts
    model_tokens_per_step: float     # tokens_per_step(alpha, k)
    ratio_as_alpha_tokens_per_step: float  # the mistake: tokens_per_step(ratio, k)


def read_counters(counters: dict, k: int) -> SpecDecodeReading:
    """Read vLLM's ``vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total`` counters."""
    names = {part: f"vllm:spec_decode_num_{part}_total" for part in ("drafts", "draft_tokens", "accepted_tokens")}
    missing = [n for n in names.values() if n not in counters]
    if missing:
        raise CourseError(f"spec-decode counters missing: {', '.join(missing)}; was the engine started "
                          "with --speculative-config, and did any request run?")
    drafts, draft_tokens, accepted = (float(counters[names[p]]) for p in ("drafts", "draft_tokens", "accepted_tokens"))
    _check(0.0, k)
    if drafts <= 0 or draft_tokens != k * drafts or not 0 <= accepted <= draft_tokens:
        raise CourseError(f"spec-decode counters do not fit k={k}: {drafts:.0f} drafts, {draft_tokens:.0f} draft "
                          f"tokens, {accepted:.0f} accepted (expected draft tokens = k x drafts > 0 and "
                          "0 <= accepted <= draft tokens)")
    ratio = accepted / draft_tokens
    alpha = alpha_from_ratio(ratio, k)
    return SpecDecodeReading(k=k, drafts=drafts, draft_tokens=draft_tokens, accepted=accepted, ratio=ratio,
                             alpha=alpha, measured_tokens_per_step=(accepted + drafts) / drafts,
                             model_tokens_per_step=tokens_per_step(alpha, k),
                             ratio_as_alpha_tokens_per_step=tokens_per_step(ratio, k))


PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


@dataclass(frozen=True)
class PerPosition:
    """vLLM's per-position acceptance: position i (1-based) accepted in ``rates[i-1]`` of the drafts."""

    k: int
    drafts: float
    accepted_per_pos: tuple          # the counter's increase at position 0 .. k-1
    rates: tuple                     # accepted_per_pos / drafts: P(position i accepted)
    conditional: tuple               # P(position i accepted | i-1 accepted): one α would make these equal
    alpha: float                     # the one α the total ratio implies (alpha_from_ratio)


def read_per_position(accepted_per_pos, drafts: float, accepted: float, k: int) -> PerPosition:
    """Check and read the per-position counters of one run against the run's totals.

    The counter must have k positions, sum to the accepted total (both count each accepted draft token once,
    ``SpecDecodingStats.observe_draft``) and never rise with the position (position i is accepted only after
    i-1 is); anything else is a misread counter, a CourseError."""
    _check(0.0, k)
    acc = tuple(float(a) for a in accepted_per_pos)
    if len(acc) != k:
        raise CourseError(f"{PER_POS}: {len(acc)} positions for k={k}; was the engine started with "
                          "num_speculative_tokens = k, and were positions 0 .. k-1 read?")
    if drafts <= 0 or abs(sum(acc) - accepted) > 1e-6 * max(1.0, accepted):
        raise CourseError(f"{PER_POS}: positions sum to {sum(acc):.0f}, the accepted total is {accepted:.0f} "
                          f"({drafts:.0f} drafts); read both from the same two scrapes")
    if any(b > a + 1e-9 for a, b in zip(acc, acc[1:], strict=False)) or acc[0] > drafts:
        raise CourseError(f"{PER_POS}: {list(acc)} rises with the position or exceeds {drafts:.0f} drafts; a position "
                          "is accepted only after every one before it")
    rates = tuple(a / drafts for a in acc)
    cond = tuple(rates[0] if i == 0 else (rates[i] / rates[i - 1] if rates[i - 1] else float("nan"))
                 for i in range(k))
    return PerPosition(k=k, drafts=float(drafts), accepted_per_pos=acc, rates=rates, conditional=cond,
                       alpha=alpha_from_ratio(accepted / (k * drafts), k))


def cut_tokens_per_step(pp: PerPosition, k_cut: int) -> float:
    """Tokens per verification step that the measured drafts give when cut to their first ``k_cut`` positions:
    1 + the acceptance rates of positions 1 .. k_cut (from the counters; no α involved)."""
    if not isinstance(k_cut, int) or isinstance(k_cut, bool) or not 1 <= k_cut <= pp.k:
        raise CourseError(f"k_cut={k_cut!r}: cut the drafts to 1 .. {pp.k} positions (the run drafted {pp.k})")
    return 1 + sum(pp.rates[:k_cut])
