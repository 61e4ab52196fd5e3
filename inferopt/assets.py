"""The one loader for everything under ``assets/``: read by name, check against a schema, cache.

    from inferopt import assets
    assets.load("pitfalls.yaml")                 # parsed, checked against assets/schemas/pitfalls.schema.json
    assets.load("monitoring/alerts.yaml")        # checked against assets/monitoring/alerts.schema.json
    assets.load("models/index.yaml")            # no schema file: parsed only
    assets.text("monitoring/vllm-0.32-metrics-sample.txt")
    assets.load_file(user_path, schema=SCHEMA)   # a file outside assets/ (a learner's scenario)

Names are paths relative to ``assets/`` with their extension (``.yaml``, ``.yml`` or ``.json``).
The schema of ``assets/<dir>/<stem>.<ext>`` is, in this order: the ``schema=`` dict a caller
passes (a module that keeps its schema in code), ``assets/<dir>/<stem>.schema.json`` beside the
file, or ``assets/schemas/<stem>.schema.json``; a file with none of these is only parsed.

Every problem raises :class:`~inferopt.errors.CourseError` naming the file and, for a schema
failure, the field: ``assets/pitfalls.yaml, field pitfalls/2: 'advice' is a required property;
fix the file (schema: assets/schemas/pitfalls.schema.json)``. Parsed files are cached (the same
object is returned each time: do not modify it; ``copy.deepcopy`` it first); :func:`clear_cache`
forgets them after an instructor edits a file. Files outside ``assets/`` are cached per path and
modification time, so an edited file is read again.

Only this module opens files under ``assets/`` for reading; modules with more checks than a
schema can express (cross-references between files) run them on what :func:`load` answers.
"""
from __future__ import annotations

import json
import sys
from functools import cache, lru_cache
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import ASSETS, REPO_ROOT

SCHEMAS = ASSETS / "schemas"
DATA_SUFFIXES = (".yaml", ".yml", ".json")


def path(name: str) -> Path:
    """The path of ``assets/<name>``; CourseError saying how to restore it when it is absent."""
    p = ASSETS / name
    if not p.is_file():
        raise CourseError(f"assets/{name} is missing; restore it from git (git checkout -- assets/{name})")
    return p


def names(folder: str, suffix: str = ".yaml") -> list[str]:
    """Names (relative to ``assets/``) of the files with ``suffix`` in ``assets/<folder>``, sorted."""
    return sorted(f"{folder}/{p.name}" for p in (ASSETS / folder).glob(f"*{suffix}")
                  if not p.name.endswith(".schema.json"))


def label(p: Path) -> str:
    """How messages name a file: relative to the repository when it is inside it."""
    p = Path(p)
    try:
        return str(p.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(p)


def schema_path(name: str) -> Path | None:
    """The schema file of ``assets/<name>`` (beside it, else in ``assets/schemas/``), or None."""
    p = ASSETS / name
    stem = p.name.split(".")[0]
    for cand in (p.parent / f"{stem}.schema.json", SCHEMAS / f"{stem}.schema.json"):
        if cand.is_file() and cand != p:
            return cand
    return None


@cache
def _schema_file(p: Path) -> dict:
    return _parse(p)


def schema(name: str) -> dict | None:
    """The JSON schema that :func:`load` checks ``assets/<name>`` against (None if it has none)."""
    sp = schema_path(name)
    return _schema_file(sp) if sp else None


def text(name: str) -> str:
    """The text of ``assets/<name>`` (for files that are not data: samples, stored outputs)."""
    return _text(path(name))


def _text(p: Path) -> str:
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CourseError(f"{label(p)} is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                          "save it as UTF-8") from None
    except OSError as exc:
        raise CourseError(f"{label(p)} cannot be read ({exc.strerror}); check the path and its permissions") from None


def _parse(p: Path):
    """Parse a YAML or JSON file; CourseError naming the file and the line when it is malformed."""
    raw = _text(p)
    if p.suffix == ".json":
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CourseError(f"{label(p)} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                              "fix the file") from None
    import yaml

    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CourseError(f"{label(p)} is not valid YAML ({where}{problem}); fix the file") from None


def validate(data, schema: dict, where: str, schema_label: str = "") -> None:
    """Check ``data`` against ``schema``; CourseError ``<where>, field <a/b/c>: <what>; fix the file``.

    ``where`` names the file (``assets/gpus.yaml``), ``schema_label`` the schema (shown in the message)."""
    if "jsonschema" not in sys.modules:
        # jsonschema imports rfc3987_syntax where it is installed, for its "iri" format checker, and that
        # builds a Lark parser at import: ~0.7 s in every process. Validation here checks no formats.
        sys.modules.setdefault("rfc3987_syntax", None)
    import jsonschema

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    errors = sorted(cls(schema).iter_errors(data), key=lambda e: [str(x) for x in e.absolute_path])
    if errors:
        e = errors[0]
        field = "/".join(str(x) for x in e.absolute_path) or "(top level)"
        hint = f" (schema: {schema_label})" if schema_label else ""
        raise CourseError(f"{where}, field {field}: {_short_message(e)}; fix the file{hint}")


def _short_message(e) -> str:
    """jsonschema's message with a long value (a whole list or mapping) replaced by a summary."""
    msg, shown = e.message, repr(e.instance)
    if len(shown) <= 80 or shown not in msg:
        return msg
    if isinstance(e.instance, list):
        summary = f"a list of {len(e.instance)} item(s)"
    elif isinstance(e.instance, dict):
        keys = ", ".join(map(str, list(e.instance)[:5]))
        summary = f"a mapping with {len(e.instance)} key(s) ({keys}{', ...' if len(e.instance) > 5 else ''})"
    else:
        summary = shown[:60] + "..."
    return msg.replace(shown, summary)


@cache
def _load_asset(name: str, schema_key, schema_label: str):
    p = path(name)
    if p.suffix not in DATA_SUFFIXES:
        raise CourseError(f"assets/{name} is not a data file ({', '.join(DATA_SUFFIXES)}); read it with assets.text()")
    data = _parse(p)
    if schema_key is not None:
        validate(data, json.loads(schema_key), f"assets/{name}", schema_label)
    else:
        sp = schema_path(name)
        if sp is not None:
            validate(data, _schema_file(sp), f"assets/{name}", label(sp))
    return data


def _key(schema: dict | None):
    return None if schema is None else json.dumps(schema, sort_keys=True)


def load(name: str, schema: dict | None = None, schema_label: str = ""):
    """``assets/<name>`` parsed and checked against its schema (cached; see the module docstring).

    ``schema``: a schema kept in code, used instead of a schema file; ``schema_label`` names it in
    messages (e.g. ``"inferopt.planning.planner.SCENARIO_SCHEMA"``)."""
    return _load_asset(name, _key(schema), schema_label)


def load_file(file, schema: dict | None = None, schema_label: str = ""):
    """Any YAML/JSON file (e.g. a learner's scenario), parsed and checked against ``schema`` if given;
    cached per path and modification time. CourseError when the file is missing."""
    p = Path(file).expanduser()
    if not p.is_file():
        raise CourseError(f"{label(p)}: no such file; check the path")
    return _load_path(str(p.resolve()), p.stat().st_mtime_ns, _key(schema), schema_label)


@lru_cache(maxsize=64)
def _load_path(p: str, _mtime: int, schema_key, schema_label: str):
    path_ = Path(p)
    data = _parse(path_)
    if schema_key is not None:
        validate(data, json.loads(schema_key), label(path_), schema_label)
    return data


def clear_cache() -> None:
    """Forget every parsed file and schema (call after editing assets/)."""
    _load_asset.cache_clear()
    _load_path.cache_clear()
    _schema_file.cache_clear()
