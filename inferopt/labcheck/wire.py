"""What travels between the grading checker and the process that runs a submission: data only.

JSON with a few tags, never pickle: the checker decodes what the submission's process sends, and
decoding must not run code the submission chose. Numbers (numpy's too), strings, None, lists,
tuples, dicts, sets, NaN/inf, the course's SLO and a plotly figure cross; any other object
arrives as an ``Opaque`` that names its type (so a check can say "got Foo").
"""
from __future__ import annotations

import json
import math
import numbers

MAX_BYTES = 8_000_000


class Opaque:
    """A value of a type the wire does not carry: only its type's name comes across."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def _float(v: float):
    if math.isnan(v):
        return {"~": "nan"}
    if math.isinf(v):
        return {"~": "inf" if v > 0 else "-inf"}
    return float(v)


def encode(v, depth: int = 0):
    if depth > 40:
        return {"~": "opaque", "t": "deeply nested value"}
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _float(float(v))
    if isinstance(v, list):
        return [encode(x, depth + 1) for x in v]
    if isinstance(v, tuple):
        return {"~": "tuple", "v": [encode(x, depth + 1) for x in v]}
    if isinstance(v, (set, frozenset)):
        return {"~": "set", "v": [encode(x, depth + 1) for x in v]}
    if isinstance(v, dict):
        return {"~": "dict", "v": [[encode(k, depth + 1), encode(x, depth + 1)] for k, x in v.items()]}
    kind = type(v)
    if kind.__name__ == "SLO" and kind.__module__.startswith("inferopt"):
        return {"~": "SLO", "v": {k: encode(getattr(v, k), depth + 1) for k in v.__dataclass_fields__}}
    if kind.__module__.startswith("plotly") and hasattr(v, "to_json"):
        return {"~": "figure", "v": v.to_json()}
    return {"~": "opaque", "t": f"{kind.__module__}.{kind.__qualname__}"}


def decode(v):
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    tag = v.get("~")
    if tag == "nan":
        return float("nan")
    if tag in ("inf", "-inf"):
        return float(tag)
    if tag == "tuple":
        return tuple(decode(x) for x in v["v"])
    if tag == "set":
        return {decode(x) for x in v["v"]}
    if tag == "dict":
        out = {}
        for k, x in v["v"]:
            k = decode(k)
            out[k if not isinstance(k, (list, dict, set)) else repr(k)] = decode(x)
        return out
    if tag == "SLO":
        from inferopt.slo import SLO

        return SLO(**{k: decode(x) for k, x in v["v"].items()})
    if tag == "figure":
        import plotly.io as pio

        return pio.from_json(str(v["v"]), skip_invalid=True)
    return Opaque(str(v.get("t", "object")))


def dumps(obj) -> str:
    text = json.dumps(obj, allow_nan=False)
    if len(text) > MAX_BYTES:
        raise ValueError(f"a value of {len(text):,} bytes is too large to check")
    return text


def loads(text: str):
    if len(text) > MAX_BYTES:
        raise ValueError("a reply too large to check")
    return json.loads(text)


def assign(ns: dict, name: str, value) -> None:
    """Bind ``name`` in ``ns`` to a decoded value, in place where the old value is a list or dict of the same
    kind (so references the learner's code holds see the new data): one rule for both sides of the wire."""
    old = ns.get(name)
    if isinstance(old, list) and isinstance(value, list):
        old[:] = value
    elif isinstance(old, dict) and isinstance(value, dict):
        old.clear()
        old.update(value)
    else:
        ns[name] = value
