"""Topology (issue 19): TP inside a node, PP across nodes, replicas for throughput; the planner and
`plan --k8s` follow it, and `plan` writes every flag it sized memory on."""
import copy

import pytest

from inferopt.diagnosis.decision import diagnose
from inferopt.errors import CourseError
from inferopt.planning import k8s, topology
from inferopt.planning.planner import load_scenario, make_plan


def test_layout_keeps_tp_inside_a_node():
    t = topology.layout(16, gpus_per_node=8)
    assert (t.tp, t.pp, t.gpus) == (8, 2, 16) and t.flags() == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    assert topology.layout(3, gpus_per_node=8).flags() == ["--tensor-parallel-size", "4"]
    assert topology.layout(2, gpus_per_node=8, replicas=4).gpus == 8
    with pytest.raises(CourseError, match="needs 32 GPUs but 16"):
        topology.layout(16, gpus_per_node=8, replicas=2, total_gpus=16)


def test_diagnose_never_puts_tp_across_nodes():
    d = diagnose({"oom": True}, {}, {"model_weights_gib": 700, "gpu_type": "H100", "num_gpus": 16, "gpus_per_node": 8})
    assert d.flags == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    one_node = diagnose({"oom": True}, {}, {"model_weights_gib": 700, "gpu_type": "H100", "num_gpus": 16})
    assert one_node.flags == ["--tensor-parallel-size", "16"]   # 16 GPUs said to be in one node


def test_plan_writes_every_flag_it_sized_memory_on():
    p = make_plan("llama3-70b-chat")
    f = p.command.flags
    assert f[f.index("--max-model-len") + 1] == str(p.memory.max_model_len)
    assert f[f.index("--kv-cache-dtype") + 1] == "fp8" and f[f.index("--tensor-parallel-size") + 1] == "8"
    objs = k8s.manifests(p)
    args = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-engine"))
    args = args["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--max-model-len" in args and "--kv-cache-dtype" in args


def test_plan_refuses_tp_across_nodes_and_sizes_pp():
    sc = copy.deepcopy(load_scenario("llama3-70b-chat"))
    sc["requirements"].update(gpus=16, gpus_per_node=8)
    sc["plan"]["tensor_parallel_size"] = 16
    with pytest.raises(CourseError, match="spans nodes.*pipeline_parallel_size: 2"):
        make_plan(sc)
    sc["plan"].update(tensor_parallel_size=8, pipeline_parallel_size=2)
    p = make_plan(sc)
    f = p.command.flags
    assert f[:2] == ["--dtype", "bfloat16"]                       # the H100's dtype leads (planner.launch_command)
    assert f[2:6] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "2"]
    with pytest.raises(CourseError, match="LeaderWorkerSet"):
        k8s.manifests(p)


def test_busy_gpu_without_queue_gets_replicas_not_a_spec_question():
    d = diagnose({"throughput_tok_s": 1500, "gpu_util": 0.98, "queue_len": 0}, {"throughput_tok_s": 3000},
                 {"concurrency": 64, "num_gpus": 4, "gpu_type": "H100"})
    assert d.changes[0]["id"] == "add_replicas" and "2 replicas" in d.next_step
    assert "B4" not in [u["id"] for u in d.undecided]      # speculation is off: no acceptance rate to ask for
    d1 = diagnose({"throughput_tok_s": 1500, "gpu_util": 0.98, "queue_len": 0}, {"throughput_tok_s": 3000},
                  {"concurrency": 64, "num_gpus": 1, "gpu_type": "H100"})
    assert d1.changes[0]["id"] == "buy_replicas" and d1.changes[0]["cost_kind"] == "hardware"


def test_plan_cli_takes_gpus_per_node(capsys):
    from inferopt.__main__ import main

    rc = main(["plan", "--gpus-per-node", "4"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "TP=4 within each node x PP=2" in err and "\n" not in err
    assert main(["plan", "--gpus-per-node", "8", "--json"]) == 0
    assert "--max-model-len" in capsys.readouterr().out
