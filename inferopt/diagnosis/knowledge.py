"""The chapter's knowledge as data: load and check the YAML files in ``assets/``.

Files (each has a JSON schema in ``assets/schemas/<name>.schema.json``):
- ``techniques.yaml``        the 13 techniques of §1 (what each solves and costs, module, vLLM
                             0.32 flags, hardware needs, symptoms treated);
- ``gpus.yaml``              the GPU catalog (memory, TFLOP/s, bandwidth, compute capability,
                             aliases), looked up through :mod:`inferopt.planning.gpu_catalog`;
- ``decision_tree.yaml``     §2: thresholds, the baseline step, branches A-D and sub-conditions;
- ``pitfalls.yaml``          §3: the 5 combination pitfalls, each a detection rule + advice;
- ``optimization_order.yaml``§4: OOM -> TTFT -> TPOT/throughput -> tail, with reasons;
- ``tradeoffs.yaml``         §7.1: 8 rows of "gives up / buys" and their axis scores;
- ``knowledge_map.yaml``     §7: the four modules and the cross-cutting performance analysis;
- ``learning_path.yaml``     §8: learning path and the 7-item self-check.

``load(name)`` answers the parsed file (read and schema-checked by :mod:`inferopt.assets`)
after checking the cross-references between files (every technique id used anywhere exists, every threshold named
in a clause exists). Results are cached; ``reload()`` drops the cache after an instructor edits
a file. Bad data raises :class:`~inferopt.errors.CourseError` naming the file and the field.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from inferopt import assets
from inferopt.errors import CourseError
from inferopt.planning import gpu_catalog

NAMES = ("techniques", "decision_tree", "pitfalls", "optimization_order", "tradeoffs",
         "knowledge_map", "learning_path", "gpus")
COST_ORDER = {"low": 0, "medium": 1, "high": 2}


def schema(name: str) -> dict:
    """The JSON schema of ``assets/<name>.yaml`` (``assets/schemas/<name>.schema.json``)."""
    return assets.schema(f"{name}.yaml")


def validate(name: str, data) -> None:
    """Raise CourseError if ``data`` does not match the schema of ``assets/<name>.yaml``."""
    assets.validate(data, schema(name), f"assets/{name}.yaml", f"assets/schemas/{name}.schema.json")


@cache
def _load_checked(name: str):
    if name not in NAMES:
        raise CourseError(f"unknown knowledge file {name!r}; choose one of {', '.join(NAMES)}")
    data = assets.load(f"{name}.yaml")
    if name == "techniques":
        data = _with_capabilities(data)
    return data


def _with_capabilities(data: dict) -> dict:
    """techniques.yaml with each hardware need's min_compute_capability filled in from the one
    hardware table (assets/hardware_rules.yaml via inferopt.planning.hardware); 0.0 without a rule."""
    import copy

    from inferopt.planning import hardware

    data = copy.deepcopy(data)
    for need in data["hardware_needs"].values():
        need["min_compute_capability"] = hardware.min_capability(need["rule"]) if need.get("rule") else 0.0
    return data


def load(name: str):
    """The parsed, schema-checked ``assets/<name>.yaml`` (cached; cross-references checked once)."""
    data = _load_checked(name)
    _check_cross_references()
    return data


def reload() -> None:
    """Forget cached files (call after editing assets/)."""
    _load_checked.cache_clear()
    _check_cross_references.cache_clear()
    technique_index.cache_clear()
    from inferopt.planning import hardware

    hardware.table.cache_clear()
    hardware.rules.cache_clear()
    assets.clear_cache()
    gpu_catalog.forget()


@dataclass(frozen=True)
class Technique:
    """One row of the technique map (§1)."""
    id: str
    name: str
    name_zh: str
    solves: str
    cost: str
    cost_level: str
    cost_axes: tuple
    module: str
    symptoms: tuple
    default_on: bool
    enable_flags: tuple
    disable_flags: tuple
    flag_note: str
    hardware: str
    checkpoint: str | None = None      # a weight format that is another checkpoint, not a flag (int4: AWQ/GPTQ)


@cache
def technique_index() -> dict:
    """{technique id: Technique} in the order of techniques.yaml."""
    out = {}
    for t in _load_checked("techniques")["techniques"]:
        v = t["vllm"]
        out[t["id"]] = Technique(t["id"], t["name"], t["name_zh"], t["solves"], t["cost"], t["cost_level"],
                                 tuple(t["cost_axes"]), t["module"], tuple(t["symptoms"]), v["default_on"],
                                 tuple(v["enable"]), tuple(v["disable"]), v["note"], t["hardware"],
                                 v.get("checkpoint"))
    return out


def techniques() -> list:
    """The 13 techniques (list of Technique, in file order)."""
    load("techniques")
    return list(technique_index().values())


def technique_ids() -> list:
    return list(technique_index())


def check_technique_ids(ids, field: str = "techniques_on") -> list:
    """Return ``ids`` as a list; raise CourseError naming ``field`` for an unknown id."""
    if isinstance(ids, str):
        ids = [s for s in (x.strip() for x in ids.split(",")) if s]
    known = technique_index()
    out = []
    for i in ids or []:
        if i not in known:
            raise CourseError(f"{field}: unknown technique {i!r}; known ids: {', '.join(known)}")
        out.append(i)
    return out


def filter_techniques(symptom: str | None = None, max_cost: str | None = None) -> list:
    """Techniques that treat ``symptom`` (None = all) and cost at most ``max_cost`` (low/medium/high)."""
    names = _load_checked("techniques")["symptom_names"]
    if symptom not in (None, "", "all") and symptom not in names:
        raise CourseError(f"symptom: unknown {symptom!r}; choose one of {', '.join(names)}")
    if max_cost not in (None, "", "all") and max_cost not in COST_ORDER:
        raise CourseError(f"max_cost: unknown {max_cost!r}; choose low, medium or high")
    out = []
    for t in techniques():
        if symptom not in (None, "", "all") and symptom not in t.symptoms:
            continue
        if max_cost not in (None, "", "all") and COST_ORDER[t.cost_level] > COST_ORDER[max_cost]:
            continue
        out.append(t)
    return out


def gpu_info(gpu_type: str | None) -> dict | None:
    """The decision engine's GPU class for ``gpu_type`` (a short name such as H100, a catalog id of
    assets/gpus.yaml, or CPU; case-insensitive), None if not given.

    Answers name (the class name), id, arch, compute_capability and memory_gib (GiB as the driver
    reports it); see :func:`inferopt.planning.gpu_catalog.gpu_class`.
    """
    return gpu_catalog.gpu_class(gpu_type, field="workload.gpu_type")


@cache
def _check_cross_references() -> bool:
    ids = set(technique_index())
    tree = _load_checked("decision_tree")
    thresholds = tree["thresholds"]
    symptoms = set(_load_checked("techniques")["symptom_names"])

    def check_clauses(cond, where):
        for c in (cond or {}).get("clauses", []):
            if isinstance(c["value"], str) and c["value"] not in thresholds:
                raise CourseError(f"{where}: threshold {c['value']!r} is not defined under thresholds "
                                  "in assets/decision_tree.yaml")

    for b in tree["branches"]:
        if b["symptom"] not in symptoms:
            raise CourseError(f"assets/decision_tree.yaml branch {b['id']}: unknown symptom {b['symptom']!r}")
        for c in b["conditions"]:
            where = f"assets/decision_tree.yaml condition {c['id']}"
            check_clauses(c["when"], where)
            for t in c["techniques"]:
                if t["id"] not in ids:
                    raise CourseError(f"{where}: unknown technique {t['id']!r}; use an id from assets/techniques.yaml")
                check_clauses(t.get("when"), where)
            for a in c["actions"]:
                check_clauses(a.get("when"), where)
    for p in _load_checked("pitfalls")["pitfalls"]:
        for t in p["all_of"] + p["any_of"]:
            if t not in ids:
                raise CourseError(f"assets/pitfalls.yaml {p['id']}: unknown technique {t!r}")
        check_clauses(p["when"], f"assets/pitfalls.yaml {p['id']}")
    order = _load_checked("optimization_order")
    if sorted(s["branch"] for s in order["steps"]) != sorted(b["id"] for b in tree["branches"]):
        raise CourseError("assets/optimization_order.yaml: steps must name each branch A-D of the decision tree once")
    for s in order["steps"]:
        for t in s["techniques"]:
            if t not in ids:
                raise CourseError(f"assets/optimization_order.yaml step {s['step']}: unknown technique {t!r}")
    pit_ids = {p["id"] for p in _load_checked("pitfalls")["pitfalls"]}
    for item in _load_checked("learning_path")["self_check"]:
        for q in item.get("questions", []):
            for t in q["choices"] + q["techniques_on"]:
                if t not in ids:
                    raise CourseError(f"assets/learning_path.yaml {item['id']}/{q['id']}: unknown technique {t!r}")
        for o in item.get("options", []):
            if isinstance(o, dict) and o.get("pitfall") not in (None, *pit_ids):
                raise CourseError(f"assets/learning_path.yaml {item['id']}: unknown pitfall {o['pitfall']!r}")
            if isinstance(o, str) and o not in ids:
                raise CourseError(f"assets/learning_path.yaml {item['id']}: unknown technique {o!r}")
    return True
