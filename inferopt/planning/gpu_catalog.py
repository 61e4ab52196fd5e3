"""The one GPU table: ``assets/gpus.yaml``, loaded, checked and looked up by name or alias.

Every module that needs a GPU's figures reads them here: the memory calculator and the planner
(memory, TFLOP/s, bandwidth, FP8/BF16 support) and the decision engine (architecture and compute
capability, which decide FP8 tensor cores and the Marlin INT4 kernels).

- :func:`catalog` answers the schema-checked table, catalog id -> entry (cached).
- :func:`resolve` answers the catalog id for a catalog id or an alias (``"H100"``,
  ``"h100-sxm-80gb"``, ``"RTX 4090"``); names match case-insensitively, ignoring spaces, ``-``
  and ``_``. An unknown name raises :class:`~inferopt.errors.CourseError` listing the known ones.
- :func:`entry` answers one entry (a copy, with its ``id``).
- :func:`class_names` and :func:`gpu_class` are the decision engine's view: one short class name
  per GPU (its first alias) plus the ``CPU`` pseudo-class, with ``arch``, ``compute_capability``
  and ``memory_gib``.

Units: ``memory_gib`` here is what the driver reports (``memory_mib_reported`` / 1024, GiB =
2^30 B), the same figure :func:`inferopt.planning.memory.gpu_memory_gib` uses; the datasheet figure stays
in the entry as ``memory_gb``.
"""
from __future__ import annotations

import copy
from functools import lru_cache

from inferopt import assets
from inferopt.errors import CourseError

CPU = "CPU"
# The CPU backend is no GPU, so it is not in the catalog; the decision engine still accepts it as a
# class: compute capability 0 (no FP8 tensor cores, no Marlin) and no GPU memory (None = unknown).
CPU_CLASS = {"name": CPU, "id": None, "arch": "cpu", "compute_capability": 0.0, "memory_gib": None}


def _norm(name) -> str:
    return "".join(ch for ch in str(name) if ch not in " -_").upper()


def catalog() -> dict:
    """The GPU catalog of ``assets/gpus.yaml``: catalog id -> fields, checked against its schema
    (``assets/schemas/gpus.schema.json``) by :func:`inferopt.assets.load`."""
    return assets.load("gpus.yaml")["gpus"]


def forget() -> None:
    """Drop the cached catalog (``inferopt.diagnosis.knowledge.reload()`` calls it after assets/ are edited)."""
    assets.clear_cache()
    _index.cache_clear()


def ids() -> list[str]:
    """Catalog ids in file order (newest architecture first)."""
    return list(catalog())


@lru_cache(maxsize=1)
def _index() -> dict:
    """Normalised id or alias -> catalog id; a name claimed by two entries is a data error."""
    index = {}
    for gid, g in catalog().items():
        for name in [gid, *g.get("aliases", [])]:
            key = _norm(name)
            if index.get(key, gid) != gid:
                raise CourseError(f"assets/gpus.yaml: the name {name!r} is used by both {index[key]} and {gid}; "
                                  "give each GPU its own aliases")
            index[key] = gid
    return index


def resolve(name: str, field: str = "gpu", also: str = "") -> str:
    """The catalog id for a catalog id or alias; CourseError naming ``field`` if it is unknown
    (``also`` names further accepted choices in that message, e.g. ``"CPU"``)."""
    gid = _index().get(_norm(name)) if name not in (None, "") else None
    if gid is None:
        known = ", ".join([f"{gid} ({', '.join(g['aliases'])})" for gid, g in catalog().items()]
                          + ([also] if also else []))
        raise CourseError(f"{field}: unknown GPU {name!r}; known (id, then aliases): {known}. "
                          "Use one of these, or add the GPU to assets/gpus.yaml.")
    return gid


def entry(name: str, field: str = "gpu") -> dict:
    """One catalog entry (a copy) for a catalog id or alias, with its catalog ``id`` added."""
    gid = resolve(name, field)
    return dict(copy.deepcopy(catalog()[gid]), id=gid)


def memory_gib(name: str) -> float:
    """Total memory of one GPU in GiB (2^30 B), as nvidia-smi reports it (MiB / 1024)."""
    return catalog()[resolve(name)]["memory_mib_reported"] / 1024


def class_name(gid: str) -> str:
    """The short class name the decision engine shows for a catalog id: its first alias."""
    g = catalog()[gid]
    return g["aliases"][0] if g.get("aliases") else gid


def class_names() -> list[str]:
    """The GPU classes the decision engine offers (its widget's dropdown): one per GPU, then CPU."""
    return [class_name(gid) for gid in catalog()] + [CPU]


def gpu_class(name: str | None, field: str = "workload.gpu_type") -> dict | None:
    """The decision engine's view of a GPU (None if ``name`` is None or empty).

    Answers ``{"name": class name, "id": catalog id, "arch", "compute_capability",
    "memory_gib"}``; ``CPU`` gives the pseudo-class :data:`CPU_CLASS`.
    """
    if name in (None, ""):
        return None
    if _norm(name) == CPU:
        return dict(CPU_CLASS)
    gid = resolve(name, field, also=CPU)
    g = catalog()[gid]
    return {"name": class_name(gid), "id": gid, "arch": g["arch"],
            "compute_capability": g["compute_capability"], "memory_gib": g["memory_mib_reported"] / 1024}
