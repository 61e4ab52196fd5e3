"""Synthetic prompts with exact token counts, for load tests.

How exact counts are made: the tokenizer's vocabulary has thousands of tokens that are a space
plus a lower-case word (``' marine'``). A GPT-2-style pre-tokenizer splits text at those spaces,
so a string of *n* such words encodes to exactly *n* tokens (checked by ``count_tokens`` in the
tests). Every prompt is fresh random words from a seeded RNG: a repeated identical prompt would
hit vLLM's prefix cache and make later runs look faster than they are (the trap COURSE.md names).

A *shared prefix* (e.g. a customer-service system prompt) is the same random words at the start
of every prompt; the rest stays unique per request.
"""
from __future__ import annotations

import functools
import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from inferopt.errors import CourseError


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: the prompt text, its token count and the output length asked for."""
    prompt: str
    prompt_tokens: int
    max_tokens: int
    tag: str = ""


@dataclass(frozen=True)
class Workload:
    """A synthetic workload.

    input_tokens: mean prompt length in tokens (including the shared prefix).
    output_tokens: tokens each request generates (sent with ``ignore_eos`` so it is exact).
    num_requests: requests per run.
    shared_prefix_tokens: tokens at the start of every prompt that are identical across requests.
    input_spread: prompts are uniform in [mean·(1−spread), mean·(1+spread)]; 0 = all equal.
    seed: RNG seed; two workloads with different seeds share no prompt text.
    """
    input_tokens: int = 100
    output_tokens: int = 32
    num_requests: int = 16
    shared_prefix_tokens: int = 0
    input_spread: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.input_tokens < 1 or self.output_tokens < 1 or self.num_requests < 1:
            raise CourseError(f"workload {self}: input_tokens, output_tokens and num_requests must be ≥ 1")
        if not 0 <= self.input_spread < 1:
            raise CourseError(f"input_spread={self.input_spread}: give a fraction in [0, 1), e.g. 0.2")
        if not 0 <= self.shared_prefix_tokens < self.input_tokens * (1 - self.input_spread):
            raise CourseError(f"shared_prefix_tokens={self.shared_prefix_tokens} must be ≥ 0 and shorter than the "
                              f"shortest prompt ({self.input_tokens} tokens × (1 − spread {self.input_spread})); "
                              "raise input_tokens or shorten the prefix")

    def to_dict(self) -> dict:
        return asdict(self)


def load_tokenizer(path=None):
    """The served model's tokenizer (transformers AutoTokenizer), on CPU and GPU set-ups alike.

    ``path``: a model folder, a hub id, or a running ``VLLMServer`` (its model). Default: the model the
    engine serves (``inferopt.serving.served_model``): ``INFEROPT_MODEL`` on the GPU engine, else the
    prepared default model (``make setup`` prepares it on every engine)."""
    from inferopt.serving.model_prep import default_model_dir, require_model
    from inferopt.serving.served_model import tokenizer_source

    if path is not None and hasattr(path, "model") and not isinstance(path, str | Path):
        path = path.model
    path = tokenizer_source(None if path is None else str(path))
    if Path(path).expanduser().exists() and Path(path).expanduser().resolve() == default_model_dir().resolve():
        path = str(require_model())       # the default model: prepared, or one line saying how
    return _load_tokenizer(str(path))


@functools.lru_cache(maxsize=4)
def _load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as exc:
        raise CourseError(f"could not load a tokenizer from {path!r} ({str(exc).splitlines()[0][:200]}). Give the "
                          "model folder or hub id the server runs, or prepare the default model: make model") from None


@functools.lru_cache(maxsize=4)
def _word_pool(tokenizer) -> tuple[str, ...]:
    words = []
    for tok in tokenizer.get_vocab():
        text = tokenizer.convert_tokens_to_string([tok])
        if re.fullmatch(r" [a-z]{3,9}", text) and len(tokenizer(text, add_special_tokens=False).input_ids) == 1:
            words.append(text)
    if len(words) < 500:
        raise CourseError("this tokenizer has too few single-token ' word' entries to build exact-length "
                          "prompts; pass prompts yourself (RequestSpec) for this model")
    return tuple(sorted(words))


def count_tokens(tokenizer, text: str) -> int:
    """Tokens the server will count for a completions prompt (the tokenizer's default special tokens)."""
    return len(tokenizer(text).input_ids)


def random_text(tokenizer, n_tokens: int, rng: random.Random) -> str:
    """Random words that encode to exactly ``n_tokens`` tokens (without special tokens)."""
    pool = _word_pool(tokenizer)
    return "".join(rng.choice(pool) for _ in range(n_tokens))


def build_requests(workload: Workload, tokenizer, tag: str = "") -> list[RequestSpec]:
    """The requests of one run: fresh random prompts with exact token counts.

    The token count is checked against the tokenizer for the first prompt (and adjusted for any
    special tokens the tokenizer adds, e.g. a BOS token)."""
    rng = random.Random(f"workload-{workload.seed}")
    extra = count_tokens(tokenizer, "") if tokenizer is not None else 0
    prefix = random_text(tokenizer, workload.shared_prefix_tokens, random.Random(f"prefix-{workload.seed}"))
    out = []
    for _ in range(workload.num_requests):
        n = workload.input_tokens
        if workload.input_spread:
            lo = round(n * (1 - workload.input_spread))
            hi = round(n * (1 + workload.input_spread))
            n = rng.randint(lo, hi)
        body = random_text(tokenizer, n - workload.shared_prefix_tokens - extra, rng)
        out.append(RequestSpec(prefix + body, n, workload.output_tokens, tag))
    got = count_tokens(tokenizer, out[0].prompt)
    if got != out[0].prompt_tokens:
        raise CourseError(f"prompt built for {out[0].prompt_tokens} tokens encodes to {got}; this tokenizer "
                          "does not split at spaces, so exact-length prompts need another method")
    return out


def default_tokenizer_path() -> Path:
    from inferopt.serving.model_prep import default_model_dir

    return default_model_dir()
