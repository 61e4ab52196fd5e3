"""The metric-name map across load generators (assets/metric_glossary.yaml), checked and rendered."""
from __future__ import annotations

from inferopt import assets

COLUMNS = ("ours", "name", "definition", "vllm_bench_serve", "aiperf_genai_perf", "guidellm")
SCHEMA = {
    "type": "object", "required": ["metrics"],
    "properties": {"metrics": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": list(COLUMNS), "additionalProperties": False,
        "properties": {c: {"type": "string", "pattern": r"\S"} for c in COLUMNS}}}},
}


def glossary() -> tuple[dict, ...]:
    """Rows of the glossary; every row has every column (CourseError naming the row and field otherwise)."""
    return tuple(assets.load("metric_glossary.yaml", SCHEMA, "inferopt.bench.glossary.SCHEMA")["metrics"])


def markdown() -> str:
    """The glossary as a Markdown table for a notebook."""
    head = ["metric", "definition", "ours", "`vllm bench serve`", "genai-perf / aiperf", "guidellm"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in glossary():
        lines.append(f"| {r['name']} | {r['definition']} | `{r['ours']}` | {r['vllm_bench_serve']} | "
                     f"{r['aiperf_genai_perf']} | {r['guidellm']} |")
    return "\n".join(lines)
