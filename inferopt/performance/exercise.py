"""Name the binding limit from the model's figures before the tool names it (chapter 02's exercise 4).

:func:`show` prints what the model measured about an operating point (queue, running set, KV use, each
kernel's share of the step) without its ``binding_limit``; :func:`check_limit` compares the learner's
answer with the model's own ``binding_limit`` and answers with a hint that points at the figure to read.
"""
from __future__ import annotations

from inferopt.errors import CourseError
from inferopt.performance.predict import LIMITS, Prediction

HINTS = {
    "max_num_seqs": "compare the running set with --max-num-seqs, and the queue with the KV cache's use",
    "kv_cache": "look at the KV cache's use and the preemptions",
    "frontend": "look at the share of the time the engine waits for the API server (frontend_wait)",
    "weights_bandwidth": "which kernel takes the largest share of the step, and is it bound by bytes or FLOPs?",
    "kv_bandwidth": "which kernel takes the largest share of the step: the linear layers or attention?",
    "compute": "which kernel takes the largest share of the step, and is it bound by bytes or FLOPs?",
    "interconnect": "look at the all-reduce's share of the step",
    "step_overhead": "look at the fixed per-step cost's share (overhead)",
}


def show(p: Prediction) -> str:
    """The figures a learner reads, without the answer."""
    shares = ", ".join(f"{k} {v:.0%}" for k, v in sorted(p.step_shares.items(), key=lambda kv: -kv[1]))
    return (f"TTFT P95 {p.ttft_p95_ms:,.0f} ms, TPOT P95 {p.tpot_p95_ms:.1f} ms; {p.queue_len:.1f} requests waiting, "
            f"{p.running:.1f} running (--max-num-seqs {p.max_num_seqs}); KV cache {p.kv_usage:.0%} used "
            f"(max {p.kv_usage_max:.0%}), {p.preemptions} preemptions; step time: {shares}")


def check_limit(p: Prediction, answer) -> str:
    """``answer`` (one of :data:`LIMITS`) against the model's binding limit; a wrong one raises with a hint."""
    if answer is None:
        return f"write your answer first: one of {', '.join(LIMITS)}"
    if answer not in LIMITS:
        raise CourseError(f"{answer!r} is not a limit the model names; answer one of {', '.join(LIMITS)}")
    if answer != p.binding_limit:
        raise CourseError(f"not {answer}: {HINTS[p.binding_limit]}")
    return f"right: {p.binding_limit} binds ({p.why})"
