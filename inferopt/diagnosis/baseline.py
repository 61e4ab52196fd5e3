"""Kept for old imports: the baseline importers live in :mod:`inferopt.bench.results` now (one importer
of aiperf / genai-perf / vllm bench / our own results, one unit policy)."""
from inferopt.bench.results import (  # noqa: F401
    DECISION_METRIC_KEYS,
    from_bench_records,
    from_profile_export,
    load_baseline,
)
