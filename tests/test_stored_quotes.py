"""A notebook that quotes another's stored outputs (chapters 01, 02, 04 quote 2b) records which run it
read, and a stale quote is named in milliseconds, before the minutes-long nbval of the reader
(inferopt/stored_quotes.py; fresh-clone CI at stop 36 found chapter 04's stale quote 54 minutes in)."""
import json
from pathlib import Path

from inferopt import nbtools
from inferopt import stored_quotes as q
from inferopt.paths import CHAPTERS

LIVE_2B = CHAPTERS / "02b-decision-tree-live.ipynb"


def _nb(cells, meta=None):
    return {"cells": cells, "metadata": meta or {}, "nbformat": 4, "nbformat_minor": 5}


def _code(src, text=""):
    return {"cell_type": "code", "source": src, "metadata": {}, "execution_count": 1,
            "outputs": [{"output_type": "stream", "name": "stdout", "text": text}] if text else []}


def _write(path: Path, nb: dict) -> Path:
    path.write_text(json.dumps(nb))
    return path


def test_the_course_has_no_stale_quote():
    assert q.stale() == []


def test_finds_the_readers_of_2b_from_their_code():
    assert {p.name for p in q.readers(LIVE_2B)} >= {"01-technique-map.ipynb", "02-decision-tree.ipynb",
                                                     "04-optimization-order.ipynb"}
    assert q.readers(CHAPTERS / "07-knowledge-map-and-tradeoffs.ipynb") == []


def test_run_order_puts_each_reader_after_its_source():
    reader = CHAPTERS / "04-optimization-order.ipynb"
    order = q.with_readers([reader, LIVE_2B])
    assert order.index(reader.resolve()) > order.index(LIVE_2B.resolve())
    assert len(order) == len(set(order))


def test_rejects_a_reader_without_a_record_and_one_from_an_older_run(tmp_path):
    src = _write(tmp_path / "src.ipynb", _nb([_code("print(1)", "TPOT P50 10.0 ms\n")]))
    reader = _nb([_code(f'stored_figure("{src}", r"TPOT P50 ([0-9.]+) ms", "the TPOT")')])
    no_record = _write(tmp_path / "a.ipynb", reader)
    assert "holds no record" in q.stale([no_record])[0]

    fresh = _write(tmp_path / "b.ipynb", q.record(reader, q.quoted_sources(reader)))
    assert q.stale([fresh]) == []

    _write(src, _nb([_code("print(1)", "TPOT P50 12.5 ms\n")]))      # the source re-executed: other outputs
    (line,) = q.stale([fresh])
    assert "older run" in line and "make run-notebooks NB=" in line


def test_the_record_survives_cleaning_and_a_plain_notebook_gets_none():
    reader = _nb([_code('output_texts("02b-decision-tree-live")')])
    kept = nbtools.clean(q.record(reader, q.quoted_sources(reader)))
    assert kept["metadata"][q.META_KEY]["quotes"] == {"chapters/02b-decision-tree-live.ipynb": q.fingerprint(LIVE_2B)}
    assert q.META_KEY not in q.record(_nb([_code("print(1)")]), [])["metadata"]


def test_a_zh_page_reads_the_english_runs_numbers(monkeypatch):
    """A notebook of zh/chapters quotes its sibling by a bare name, from its own folder: the numbers come from the
    English run (chapters/), whose outputs the zh copy only translates (its English patterns would not match)."""
    from inferopt.paths import REPO_ROOT
    from inferopt.stored_outputs import _path

    monkeypatch.chdir(REPO_ROOT / "zh" / "chapters")
    assert _path("02b-decision-tree-live.ipynb") == (REPO_ROOT / "chapters" / "02b-decision-tree-live.ipynb").resolve()
    assert _path("zh/chapters/02b-decision-tree-live.ipynb").parent.name == "chapters"   # a path with a folder: as given
    assert _path(REPO_ROOT / "zh" / "chapters" / "02b-decision-tree-live.ipynb").parts[-3] == "zh"
