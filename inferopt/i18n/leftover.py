"""English left untranslated in text the Chinese edition shows (a widget, a check's hint, a CLI line).

``english_runs(text)``: every run of ``MIN_WORDS`` or more English words in ``text`` once what a Chinese line
keeps in English is taken out: HTML tags and entities, inline code (`` `x` ``), URLs, paths, command-line flags,
identifiers (``snake_case``, ``dotted.names``, ``kebab-case``), model and GPU names (``llama-3-70b``,
``H100-SXM-80GB``), numbers with their units, and a short list of terms the course writes in English in both
editions (``KV``, ``TTFT``, ``GiB``, ``vLLM``, ...). A Chinese sentence holds at most a term or two of English
between its characters; four English words in a row are a sentence nobody translated.
"""
from __future__ import annotations

import html
import re

MIN_WORDS = 4
_TAG = re.compile(r"<[^>]*>")
_CODE = re.compile(r"``[^`]*``|`[^`]*`")
_QUOTED = re.compile(r"'[^'\s]*'|\"[^\"\s]*\"")          # a quoted value: 'fp8', "B2"
_URL = re.compile(r"\b(?:https?|file)://\S+|\bwww\.\S+")
_PATH = re.compile(r"(?<!\w)(?:\.{0,2}/)?[\w.-]+(?:/[\w.*-]+)+/?|\S+\.(?:ipynb|md|py|yaml|json|jsonl|csv|txt)\b")
_FLAG = re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*(?:=\S+)?")
_IDENT = re.compile(r"\b\w*(?:_\w*|\.\w+)+\b|\b[\w]+(?:-[\w]+)+\b|\b\w*\d\w*\b")
_CAPS = re.compile(r"\b[A-Z](?:[A-Z]+s?)?\b")             # acronyms (KV, TTFT, GPUs), branch letters (C -> A)
# terms both editions write in English (product and format names, units)
KEPT = {"vllm", "gib", "gb", "mib", "ms", "s", "tok", "tokens", "token", "x", "nvidia", "amd", "cuda", "rocm",
        "python", "jupyter", "plotly", "lora", "marlin", "awq", "gptq", "fp", "int", "aiperf", "prometheus",
        "grafana", "kubernetes", "helm", "llama", "qwen", "mistral", "mixtral", "deepseek", "hopper", "ampere",
        "blackwell", "ada", "transformers", "pytorch", "torch", "triton", "flashinfer", "flashattention", "eagle",
        "medusa", "ngram", "numpy", "pandas", "yes", "no", "true", "false", "none", "ok", "p", "e", "g", "i", "vs"}
_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")
_BREAK = re.compile(r"[^\x00-\x7f]+|[|\n]")            # a Chinese character (or a line break) ends a run


def _strip(text: str) -> str:
    text = html.unescape(_TAG.sub(" ", text))
    for rx in (_CODE, _URL, _PATH, _FLAG, _QUOTED, _IDENT, _CAPS):
        text = rx.sub(" ", text)
    return text


def english_runs(text: str, min_words: int = MIN_WORDS) -> list[str]:
    """The runs of ``min_words``+ English words (kept terms not counted) left in ``text``."""
    out = []
    for chunk in _BREAK.split(_strip(str(text))):
        words = _WORD.findall(chunk)
        if sum(w.lower() not in KEPT for w in words) >= min_words:
            out.append(" ".join(words))
    return out
