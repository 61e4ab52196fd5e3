"""The metric-name glossary: complete rows, and our names are keys the summaries really have."""
from inferopt.bench.glossary import glossary, markdown
from inferopt.bench.metrics import SLO, RequestRecord, summarize


def test_every_row_names_a_summary_key():
    s = summarize([RequestRecord(0, 10, 5, 0.1, 0.5, itl_s=[0.1] * 4)], slo=SLO(ttft_ms=1000))
    for row in glossary():
        assert any(k == row["ours"] or k.startswith(row["ours"] + "_") for k in s), row["ours"]


def test_the_tpot_trap_is_spelled_out():
    rows = {r["ours"]: r for r in glossary()}
    assert rows["tpot"]["aiperf_genai_perf"].startswith("inter_token_latency")
    assert "NOT our TPOT" in rows["tpot"]["guidellm"]
    assert rows["itl"]["aiperf_genai_perf"].startswith("inter_chunk_latency")
    assert markdown().count("\n") == len(rows) + 1
