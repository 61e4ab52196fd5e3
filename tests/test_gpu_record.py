"""The GPU records of `make gpu-check` part 2 (assets/results/gpu/, measured on a real H100 by
inferopt/serving/gpucheck.py) hold the constants that the course states about that GPU:
- each record's shares are its own numbers over the catalog's datasheet figures (a record cannot drift from them);
- the catalog's `cuda_total_gib` (cited from vLLM logs) agrees with the measured cudaMemGetInfo total;
- the performance model's memory efficiency sits near the bandwidth a CUDA-graph decode step's weights streamed at;
- no stated range lets the model run faster than the GPU was measured to run (compute_efficiency's fast end).
Each check is shown to reject a wrong value."""
from __future__ import annotations

import copy
import json

import pytest

from inferopt.paths import REPO_ROOT
from inferopt.performance import capacity_check as cc
from inferopt.performance import profiles
from inferopt.planning import gpu_catalog

RECORDS = sorted((REPO_ROOT / "assets" / "results" / "gpu").glob("part2-*.json"))


def _records():
    out = []
    for p in RECORDS:
        rec = json.loads(p.read_text())
        assert rec["dry_run"] is False and rec["part"] == 2, p.name
        out.append((p.name, rec))
    return out


def test_a_real_gpu_record_is_stored():
    assert RECORDS, "no part-2 record in assets/results/gpu/ (run `make gpu-check GPU_CHECK_OPTS='--part 2'` on a GPU)"
    for name, rec in _records():
        assert rec["machine"]["gpu"] and rec["machine"]["torch"] and rec["machine"]["cuda"], name


def shares_consistent(rec) -> list[str]:
    """Where a record's stated share differs from its own numbers over the catalog (empty: consistent)."""
    r = rec["result"]
    cat = gpu_catalog.entry(r["memory_total"]["catalog_id"])
    bad = []
    if abs(r["roofs"]["copy"]["share_of_datasheet"] - r["roofs"]["copy"]["gb_s"] / cat["memory_bandwidth_gb_s"]) > 1e-9:
        bad.append("copy")
    for row in r["roofs"]["gemm"]:
        if abs(row["share_of_datasheet_flops"] - row["tflops"] / cat["bf16_dense_tflops"]) > 1e-9:
            bad.append(f"gemm {row['tokens']}")
        if abs(row["tflops"] - 2 * row["tokens"] * row["k"] * row["n"] / row["ms"] / 1e9) > 1e-6 * row["tflops"]:
            bad.append(f"gemm rate {row['tokens']}")
    return bad


def test_each_record_is_its_own_numbers_over_the_catalog():
    for name, rec in _records():
        assert shares_consistent(rec) == [], name
        wrong = copy.deepcopy(rec)
        wrong["result"]["roofs"]["gemm"][-1]["share_of_datasheet_flops"] *= 1.25      # a typed, rounded-up share
        assert shares_consistent(wrong) == ["gemm 8192"], name


def total_gap_gib(rec, catalog_total: float) -> float:
    return abs(catalog_total - rec["result"]["memory_total"]["mem_get_info_total_gib"])


def test_the_catalog_total_memory_is_what_the_gpu_reports():
    for name, rec in _records():
        cat = gpu_catalog.entry(rec["result"]["memory_total"]["catalog_id"])
        assert total_gap_gib(rec, cat["cuda_total_gib"]) < 0.1, name            # 79.22 cited vs 79.18 measured
        assert total_gap_gib(rec, cat["memory_gb"]) > 0.5, name                 # the marketing 80 GB is not it


def weight_stream_share(rec, batch: int = 1) -> float:
    r = rec["result"]
    cat = gpu_catalog.entry(r["memory_total"]["catalog_id"])
    row = next(x for x in r["weight_stream"]["rows"] if x["batch"] == batch)
    return row["gb_s"] / cat["memory_bandwidth_gb_s"]


def memory_efficiency_agrees(eff: float, measured: float) -> bool:
    """The model reads weights at eff x bandwidth; a decode step's linear layers streamed theirs at `measured`."""
    return abs(eff - measured) <= 0.1


def test_the_models_memory_efficiency_is_the_measured_weight_stream():
    eff = profiles.profile("gpu").efficiency["memory"]
    for name, rec in _records():
        measured = weight_stream_share(rec)
        assert rec["result"]["weight_stream"]["cuda_graph"] is True, name
        assert memory_efficiency_agrees(eff, measured), (name, eff, measured)
        assert not memory_efficiency_agrees(1.0, measured)          # the datasheet bandwidth is never reached
        assert not memory_efficiency_agrees(0.5, measured)          # nor is a decode step that slow


def best_gemm_share(rec) -> float:
    return max(row["share_of_datasheet_flops"] for row in rec["result"]["roofs"]["gemm"])


def fast_end_holds(fast: float, records) -> bool:
    """No stated range lets the model compute faster than a dense matrix multiply ran on a measured GPU."""
    return all(fast <= best_gemm_share(rec) + 1e-9 for _, rec in records)


def test_no_stated_range_runs_faster_than_the_measured_gpu():
    records = _records()
    fast = cc.stated_ranges()["compute_efficiency"]["fast"]
    assert fast_end_holds(fast, records)
    assert fast == pytest.approx(max(best_gemm_share(rec) for _, rec in records), abs=0.01)   # and it is that ceiling
    assert not fast_end_holds(1.0, records)                           # the datasheet peak, the range's old fast end
