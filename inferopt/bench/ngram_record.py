"""Measure n-gram speculative decoding on the live engine once and store the result with its provenance.

Chapter 03 quotes an acceptance rate and a tokens-per-step figure; it reads them from the file this
writes (``assets/results/ngram-spec-cpu.json``) instead of typing them, and prints where they came
from. Re-measure on your machine (needs the engine lock while it runs, ~1-2 min)::

    python -m inferopt.bench.ngram_record                      # rewrites the stored file
    python -m inferopt.bench.ngram_record --out /tmp/mine.json # keeps the stored one

Counters come from vLLM's own /metrics: ``vllm:spec_decode_num_drafts_total`` (verification steps
that carried a draft), ``..._num_draft_tokens_total`` and ``..._num_accepted_tokens_total``.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from datetime import datetime, timezone
from pathlib import Path

from inferopt.paths import ASSETS

STORED = ASSETS / "results" / "ngram-spec-cpu.json"
SPEC = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
COUNTERS = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total")


def _cpu() -> dict:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": platform.processor(), "avx512f": None, "amx": None}
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "")
    flags = set(text.split())
    return {"model": model, "avx512f": "avx512f" in flags, "amx": "amx_tile" in flags}


def measure(*, n: int = 2, output_tokens: int = 96, seed: int = 0) -> dict:
    import torch
    import vllm

    from inferopt.bench import experiments
    from inferopt.serving.engine import VLLMServer

    args = ["--speculative-config", json.dumps(SPEC)]
    with VLLMServer(max_model_len=2048, kv_cache_gib=1.0, extra_args=args, quiet=True) as srv:
        before = experiments.scrape(srv)
        out = experiments.spec_run(srv, concurrency=1, n=n, output_tokens=output_tokens, seed=seed, progress=False)
        after = experiments.scrape(srv)
        command = srv.command()
    c = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in COUNTERS}
    s = out["summary"]
    drafts, draft_tokens, accepted = (c[k] for k in COUNTERS)
    return {
        "what": "n-gram speculative decoding, repetitive code prompts (experiments.code_prompt), concurrency 1, "
                "temperature 0, ignore_eos",
        "measured_at_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "how": "python -m inferopt.bench.ngram_record",
        "versions": {"vllm": vllm.__version__, "torch": torch.__version__, "python": platform.python_version()},
        "cpu": _cpu(),
        "engine_command": ["python"] + [a if not a.startswith("/") else "<model dir>" for a in command[1:]],
        "speculative_config": SPEC,
        "requests": s["completed"],
        "output_tokens": s["output_tokens"],
        "tpot_p50_ms": s["tpot_p50_ms"],
        "counters": c,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "tokens_per_step": (accepted + drafts) / drafts if drafts else None,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.bench.ngram_record", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=STORED)
    a = ap.parse_args(argv)
    rec = measure()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
