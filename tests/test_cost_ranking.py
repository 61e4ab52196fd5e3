"""Ranking by cost (issue 19): assets/cost_ranking.yaml covers every technique and action, the
labels reach the CLI, bad input gets one line, and diagnosis stays fast with the re-checks."""
import statistics
import time

import pytest

from inferopt.diagnosis import cost, knowledge
from inferopt.diagnosis.decision import diagnose, format_text
from inferopt.errors import CourseError


def test_every_technique_and_tree_action_has_a_cost_kind():
    assert set(cost.table()["techniques"]) == set(knowledge.technique_ids())
    tree_actions = {a["id"] for b in knowledge.load("decision_tree")["branches"] for c in b["conditions"]
                    for a in c["actions"]}
    assert tree_actions <= set(cost.table()["actions"])
    with pytest.raises(CourseError, match="no cost kind"):
        cost.kind_of("teleport", "action")


def test_sort_order_free_accuracy_hardware():
    keys = [cost.sort_key(k, 0) for k in ("free", "accuracy", "hardware")]
    assert keys == sorted(keys)
    assert cost.sort_key("free", 3, weak=True) > cost.sort_key("accuracy", 0)
    assert cost.sort_key("free", 0, "start_tp") < cost.sort_key("free", -9, "anything")


def test_memory_change_reads_flags():
    assert cost.memory_change(["--tensor-parallel-size", "4", "--kv-cache-dtype", "fp8"]) == {"tp": 4, "kv_dtype": "fp8"}
    assert cost.memory_change(["--quantization", "awq_marlin"]) == {"weight_format": "int4"}
    assert cost.memory_change(["--max-num-seqs", "8"]) == {}


def test_cli_shows_labels_and_refuses_bad_input_in_one_line(capsys):
    from inferopt.__main__ import main

    rc = main(["diagnose", "--oom", "--model-weights-gib", "14", "--gpu-type", "T4", "--slo-ttft-p95-ms", "800"])
    out = capsys.readouterr().out
    assert rc == 0 and "try fp8 [costs accuracy: quantization]" in out
    for args in (["--ttft-p95-ms", "900", "--ttft-p99-ms", "600"],
                 ["--oom", "--gpu-type", "H100", "--model", "llama-3.1-8b", "--gpu", "A100"]):
        try:
            rc = main(["diagnose", *args])
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err.strip()
        assert rc == 2 and err.startswith("error:") and "\n" not in err, err


def test_format_text_labels_each_item():
    d = diagnose({"oom": True}, {"ttft_p95_ms": 500}, {"model_weights_gib": 140, "gpu_type": "H100", "num_gpus": 8})
    text = format_text(d)
    assert "try tensor_parallel [free: configuration]" in text and "try fp8 [costs accuracy: quantization]" in text


CASES = [
    dict(metrics={"oom": True}, slos={}, workload={"prompt_tokens": 16000, "concurrency": 64, "num_gpus": 1},
         deployment={"model": "llama-3.1-8b", "gpu": "H100"}),
    dict(metrics={}, slos={"ttft_p95_ms": 500}, workload={"prompt_tokens": 2000, "output_tokens": 500, "num_gpus": 2},
         deployment={"model": "llama-3.1-8b", "gpu": "L4", "max_model_len": 10000}),
    dict(metrics={"ttft_p95_ms": 4000}, slos={"ttft_p95_ms": 1500},
         workload={"prompt_tokens": 16000, "gpu_type": "A100", "num_gpus": 2}),
]


def test_diagnosis_stays_under_5_ms_with_the_calculator_rechecks():
    for case in CASES:
        diagnose(**case)
        medians = []
        for _ in range(3):  # the best of three rounds: a shared machine's load spikes are not the engine's cost
            times = []
            for _ in range(60):
                t0 = time.perf_counter()
                diagnose(**case)
                times.append(time.perf_counter() - t0)
            medians.append(statistics.median(times) * 1000)
        assert min(medians) < 5, (case, medians)
