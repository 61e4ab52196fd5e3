"""The monitoring knowledge as data: the three-layer metrics catalog of seed §6.1
(``assets/monitoring/metrics_catalog.yaml``) and the alert templates of §6.2
(``assets/monitoring/alerts.yaml``), each read by :mod:`inferopt.assets`, which checks it against
its JSON schema in the same folder.

Also :func:`promql_metric_names`, which lists the series names a PromQL expression reads, so
tests can check every name in rules and dashboards against the live engine's ``/metrics``.
"""
from __future__ import annotations

import re
from functools import lru_cache

from inferopt import assets
from inferopt.errors import CourseError

# PromQL words that look like identifiers but are not series names
_PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
    "offset", "inf", "nan", "le", "sum", "avg", "max", "min", "count", "rate", "increase",
    "histogram_quantile", "changes", "abs", "topk", "bottomk", "quantile", "stddev", "irate",
    "delta", "deriv", "resets", "clamp_min", "clamp_max", "vector", "scalar", "time",
}


def validate(data, schema_name: str) -> None:
    """Check ``data`` against ``assets/monitoring/<schema_name>.schema.json``; CourseError if not."""
    name = f"monitoring/{schema_name}.yaml"
    assets.validate(data, assets.schema(name), f"assets/{name}", f"assets/monitoring/{schema_name}.schema.json")


@lru_cache(maxsize=1)
def load_catalog() -> dict:
    """The metrics catalog, schema-checked, with every metric's source declared under ``sources``."""
    data = assets.load("monitoring/metrics_catalog.yaml")
    for layer in data["layers"]:
        for m in layer["metrics"]:
            if m["source"] not in data["sources"]:
                raise CourseError(f"metrics_catalog.yaml: metric {m['id']} names source {m['source']!r}, "
                                  f"which is not under sources ({sorted(data['sources'])}).")
            missing = set(_base_names(promql_metric_names(m["promql"]))) - {m["metric"]} - catalog_names_raw(data)
            if missing:
                raise CourseError(f"metrics_catalog.yaml: metric {m['id']}'s promql reads {sorted(missing)}, "
                                  "which the catalog does not list.")
    return data


def catalog_names_raw(data: dict) -> set:
    return {m["metric"] for layer in data["layers"] for m in layer["metrics"]}


def metrics(layer: str | None = None, source: str | None = None) -> list:
    """Catalog rows (dicts with layer added), optionally only one layer / source."""
    out = []
    for lay in load_catalog()["layers"]:
        if layer and lay["id"] != layer:
            continue
        for m in lay["metrics"]:
            if source and m["source"] != source:
                continue
            out.append(dict(m, layer=lay["id"], layer_zh=lay["zh"]))
    return out


def promql_metric_names(expr: str) -> set:
    """Series names an expression reads, e.g. {'vllm:time_to_first_token_seconds_bucket'}.

    A light scanner (no full PromQL parser): drops strings, label matchers {..}, ranges [..]
    and grouping lists (..) after by/on/without/ignoring/group_left/group_right, then keeps the
    identifiers that are not functions (followed by '('), keywords or numbers."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", s):
        word = m.group(0)
        rest = s[m.end():].lstrip()
        if rest.startswith("("):
            continue
        if word.lower() in _PROMQL_WORDS:
            continue
        # number exponents like 1e9 are not names
        if re.fullmatch(r"e\d*", word):
            continue
        names.add(word)
    return names


_SUFFIXES = ("_bucket", "_count", "_sum")


def _base_names(names) -> set:
    """Series names with histogram suffixes removed ('x_bucket' -> 'x')."""
    out = set()
    for n in names:
        for suf in _SUFFIXES:
            if n.endswith(suf):
                n = n[: -len(suf)]
                break
        out.add(n)
    return out


def base_name(series: str) -> str:
    """Histogram family name of a series name ('x_bucket' -> 'x'); other names unchanged."""
    return next(iter(_base_names([series])))
