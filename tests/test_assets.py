"""The one asset loader: every file under assets/ loads and passes its schema; a broken file is
named with its field (or line); results are cached; no other module opens assets/ itself."""
from __future__ import annotations

import ast
import shutil

import pytest
import yaml

from inferopt import assets
from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError
from inferopt.paths import ASSETS, REPO_ROOT

DATA_FILES = sorted(str(p.relative_to(ASSETS)) for p in ASSETS.rglob("*")
                    if p.suffix in assets.DATA_SUFFIXES and not p.name.endswith(".schema.json"))


@pytest.fixture
def tmp_assets(tmp_path, monkeypatch):
    """A copy of assets/ the loader reads instead of the real one (the caches are emptied around it)."""
    root = tmp_path / "assets"
    shutil.copytree(ASSETS, root)
    monkeypatch.setattr(assets, "ASSETS", root)
    monkeypatch.setattr(assets, "SCHEMAS", root / "schemas")
    knowledge.reload()
    yield root
    monkeypatch.undo()
    knowledge.reload()


def _edit_yaml(path, change):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


@pytest.mark.parametrize("name", DATA_FILES)
def test_every_data_file_loads(name):
    data = assets.load(name)
    assert data, name
    if assets.schema_path(name) is not None:      # load() checked it; the check is real:
        with pytest.raises(CourseError, match=rf"assets/{name}, field"):
            assets.validate({"not": "this file"} if isinstance(data, dict) else {}, assets.schema(name),
                            f"assets/{name}")


def test_schemas_found_beside_the_file_and_in_schemas():
    assert assets.schema_path("pitfalls.yaml") == ASSETS / "schemas" / "pitfalls.schema.json"
    assert assets.schema_path("monitoring/alerts.yaml") == ASSETS / "monitoring" / "alerts.schema.json"
    assert assets.schema_path("models/index.yaml") is None
    with_schema = [n for n in DATA_FILES if assets.schema_path(n)]
    assert len(with_schema) >= 10, with_schema


def test_a_broken_field_names_the_file_and_the_field(tmp_assets):
    _edit_yaml(tmp_assets / "pitfalls.yaml", lambda d: d["pitfalls"][2].pop("advice"))
    with pytest.raises(CourseError, match=r"^assets/pitfalls\.yaml, field pitfalls/2: 'advice' is a required "
                                          r"property; fix the file \(schema: .*pitfalls\.schema\.json\)$"):
        knowledge.load("pitfalls")          # the public function the notebooks call


def test_a_broken_field_in_a_schema_beside_the_file(tmp_assets):
    _edit_yaml(tmp_assets / "monitoring" / "alerts.yaml", lambda d: d["alerts"][0].update(severity="page-all"))
    from inferopt.monitoring import alerts

    with pytest.raises(CourseError, match=r"assets/monitoring/alerts\.yaml, field alerts/0/severity"):
        alerts.load_spec()


def test_a_schema_kept_in_code(tmp_assets):
    _edit_yaml(tmp_assets / "metric_glossary.yaml", lambda d: d["metrics"][1].pop("guidellm"))
    from inferopt.bench import glossary

    with pytest.raises(CourseError, match=r"assets/metric_glossary\.yaml, field metrics/1: 'guidellm' is a "
                                          r"required property.*inferopt\.bench\.glossary\.SCHEMA"):
        glossary.glossary()


def test_bad_yaml_names_the_file_and_the_line(tmp_assets):
    p = tmp_assets / "techniques.yaml"
    p.write_text(p.read_text(encoding="utf-8") + "broken: [1, 2\n", encoding="utf-8")
    with pytest.raises(CourseError,
                       match=r"assets/techniques\.yaml is not valid YAML \(line \d+, column \d+: .*fix the file"):
        knowledge.techniques()


def test_bad_json_names_the_file_and_the_line(tmp_assets):
    (tmp_assets / "models" / "llama-3-70b.json").write_text('{"hidden_size": 8192,\n  oops}\n')
    from inferopt.planning import model_specs

    with pytest.raises(CourseError, match=r"llama-3-70b\.json is not valid JSON \(line 2, column 3"):
        model_specs.load_spec("llama-3-70b")


def test_a_missing_file_says_how_to_restore_it(tmp_assets):
    (tmp_assets / "gpus.yaml").unlink()
    from inferopt.planning import gpu_catalog

    with pytest.raises(CourseError, match=r"assets/gpus\.yaml is missing; restore it from git"):
        gpu_catalog.ids()


def test_loaded_once_then_cached_until_cleared(tmp_assets):
    first = assets.load("tradeoffs.yaml")
    assert assets.load("tradeoffs.yaml") is first
    _edit_yaml(tmp_assets / "tradeoffs.yaml", lambda d: d["rows"][0].update(name="Edited"))
    assert assets.load("tradeoffs.yaml") is first          # cached: no re-read
    knowledge.reload()
    assert assets.load("tradeoffs.yaml")["rows"][0]["name"] == "Edited"


def test_a_long_value_is_summarised_in_the_message(tmp_assets):
    _edit_yaml(tmp_assets / "tradeoffs.yaml", lambda d: d["rows"].pop())
    with pytest.raises(CourseError, match=r"^assets/tradeoffs\.yaml, field rows: a list of 7 item\(s\) is too short; "
                                          r"fix the file \(schema: .*\)$"):
        knowledge.load("tradeoffs")


def test_load_file_outside_assets_rereads_an_edited_file(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("a: 1\n")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    assert assets.load_file(p, schema) == {"a": 1}
    p.write_text("a: two\n")
    with pytest.raises(CourseError,
                       match=r"s\.yaml, field a: 'two' is not of type 'integer'; fix the file \(schema: S\)"):
        assets.load_file(p, schema, "S")
    with pytest.raises(CourseError, match="no such file"):
        assets.load_file(tmp_path / "absent.yaml")


# modules allowed to name the assets folder, and why (reading goes through inferopt.assets)
NAMES_ASSETS_FOLDER = {
    "inferopt/paths.py": "defines it",
    "inferopt/assets.py": "the loader",
    "inferopt/monitoring/dashboard.py": "`dashboard --write` writes the stored dashboard",
    "inferopt/bench/ngram_record.py": "writes the stored n-gram spec-decode result that chapter 03 reads",
    "inferopt/labcheck/remote.py": "copies the whole folder into a graded submission's package copy (reads none of it)",
}


def test_no_module_but_the_loader_reads_assets():
    offenders = []
    for f in sorted((REPO_ROOT / "inferopt").rglob("*.py")):
        rel = str(f.relative_to(REPO_ROOT))
        if rel in NAMES_ASSETS_FOLDER:
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            name = getattr(node, "id", None) or getattr(node, "attr", None)
            if name == "ASSETS" or (isinstance(node, ast.alias) and node.name == "ASSETS"):
                offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, f"read assets/ through inferopt.assets, not ASSETS: {offenders}"
