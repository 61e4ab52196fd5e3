"""The metric-name map across load generators (assets/metric_glossary.yaml), checked and rendered."""
from __future__ import annotations

import functools

import yaml

from inferopt.errors import CourseError
from inferopt.paths import asset

COLUMNS = ("ours", "name", "definition", "vllm_bench_serve", "aiperf_genai_perf", "guidellm")


@functools.lru_cache(maxsize=1)
def glossary() -> tuple[dict, ...]:
    """Rows of the glossary; every row has every column (CourseError naming the row otherwise)."""
    data = yaml.safe_load(asset("metric_glossary.yaml").read_text(encoding="utf-8"))
    rows = data.get("metrics") if isinstance(data, dict) else None
    if not rows:
        raise CourseError("assets/metric_glossary.yaml needs a non-empty 'metrics' list")
    for i, row in enumerate(rows):
        missing = [c for c in COLUMNS if not isinstance(row.get(c), str) or not row[c].strip()]
        extra = sorted(set(row) - set(COLUMNS))
        if missing or extra:
            raise CourseError(f"assets/metric_glossary.yaml row {i} ({row.get('ours')}): missing {missing}, "
                              f"unknown {extra}; each row needs exactly {list(COLUMNS)}")
    return tuple(rows)


def markdown() -> str:
    """The glossary as a Markdown table for a notebook."""
    head = ["metric", "definition", "ours", "`vllm bench serve`", "genai-perf / aiperf", "guidellm"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in glossary():
        lines.append(f"| {r['name']} | {r['definition']} | `{r['ours']}` | {r['vllm_bench_serve']} | "
                     f"{r['aiperf_genai_perf']} | {r['guidellm']} |")
    return "\n".join(lines)
