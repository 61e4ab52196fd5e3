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
(position i accepted in α^i of the drafts under the model) is what would test that.
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
