"""`make book` builds the static HTML edition offline from the stored outputs, with every page and figure."""
from __future__ import annotations

import json
import shutil

import pytest

from inferopt import book
from inferopt.course_map import course_map


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return book.build(tmp_path_factory.mktemp("book"))


def test_book_builds_with_every_page_and_figure(built):
    assert book.check_book(built) == []
    assert [p["source"] for p in built["pages"]] == [r["path"] for r in course_map()]
    stored = 0
    for p in built["pages"]:
        nb = json.loads((book.REPO_ROOT / p["source"]).read_text(encoding="utf-8"))
        stored += sum(1 for c in nb["cells"] for o in c.get("outputs", []) if book.PLOTLY_MIME in o.get("data", {}))
    assert stored == sum(p["figures"] for p in built["pages"]) > 0
    for p in built["pages"]:                          # nothing on a page loads from the network
        text = (book.Path(built["html"]) / p["page"]).read_text(encoding="utf-8")
        assert "cdn.plot.ly" not in text and "googleapis" not in text, p["page"]


def test_check_book_notices_a_missing_page_and_a_missing_figure(built, tmp_path):
    html = tmp_path / "html"
    shutil.copytree(built["html"], html)
    manifest = {**built, "html": str(html)}
    victim = next(p for p in manifest["pages"] if p["figures"])
    page = html / victim["page"]
    page.write_text(page.read_text(encoding="utf-8").replace(f'class="{book.FIG_CLASS}"', 'class="x"', 1))
    other = next(p for p in manifest["pages"] if p is not victim)
    (html / other["page"]).unlink()
    problems = book.check_book(manifest)
    assert any(victim["page"] in p and "figures stored" in p for p in problems), problems
    assert any(other["page"] in p and "page missing" in p for p in problems), problems
