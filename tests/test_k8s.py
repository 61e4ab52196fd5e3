"""Kubernetes manifests from the planner: the 6-instance, 48-GPU plan validates offline against
the Kubernetes API schemas (kubernetes-validate) and against the plan; mutations that break the
GPU request, the PodDisruptionBudget, the probes or the schema are rejected. No cluster needed."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from inferopt.__main__ import main
from inferopt.errors import CourseError
from inferopt.planning import hardware, k8s
from inferopt.planning.planner import make_plan


@pytest.fixture(scope="module")
def plan():
    return make_plan("llama3-70b-chat")


@pytest.fixture(scope="module")
def objs(plan):
    return k8s.manifests(plan, canary_weight=5)


def _find(objs, kind, name):
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def _engine_pods(objs):
    return [o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"].startswith("vllm-engine-")]


def test_six_instance_plan_validates(plan, objs):
    assert k8s.validate(objs, plan) == len(objs)
    engines = _engine_pods(objs)
    assert sum(d["spec"]["replicas"] for d in engines) == plan.capacity.instances == 6
    gpus = sum(d["spec"]["replicas"] * d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
               [k8s.GPU_RESOURCE] for d in engines)
    assert gpus == plan.capacity.gpus == 48
    pdb = _find(objs, "PodDisruptionBudget", "vllm-engine")
    assert pdb["spec"]["minAvailable"] == 5          # 4 for the load + 1 surge; the sixth is the N+1 spare
    args = _find(objs, "Deployment", "vllm-engine-stable")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "neuralmagic/Meta-Llama-3-70B-Instruct-FP8"
    assert args[args.index("--tensor-parallel-size") + 1] == "8" and "--kv-cache-dtype" in args


def test_drop_gpu_request_fails(plan, objs):
    bad = copy.deepcopy(objs)
    res = _find(bad, "Deployment", "vllm-engine-canary")["spec"]["template"]["spec"]["containers"][0]["resources"]
    del res["requests"][k8s.GPU_RESOURCE]
    with pytest.raises(CourseError, match="requests nvidia.com/gpu is None"):
        k8s.validate(bad, plan)


@pytest.mark.parametrize("min_available", [6, 4])
def test_pdb_that_blocks_drains_or_loses_n_plus_one_fails(plan, objs, min_available):
    bad = copy.deepcopy(objs)
    _find(bad, "PodDisruptionBudget", "vllm-engine")["spec"]["minAvailable"] = min_available
    with pytest.raises(CourseError, match="minAvailable"):
        k8s.validate(bad, plan)


def test_pdb_selecting_nothing_fails(plan, objs):
    bad = copy.deepcopy(objs)
    _find(bad, "PodDisruptionBudget", "vllm-engine")["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = "x"
    with pytest.raises(CourseError, match="selector does not select"):
        k8s.validate(bad, plan)


def test_schema_rejects_typo_and_wrong_type(plan, objs):
    bad = copy.deepcopy(objs)
    pdb = _find(bad, "PodDisruptionBudget", "vllm-engine")
    pdb["spec"]["minAvailabel"] = pdb["spec"].pop("minAvailable")        # a typo: strict schema check
    with pytest.raises(CourseError, match="PodDisruptionBudget/vllm-engine"):
        k8s.validate(bad, plan)
    bad = copy.deepcopy(objs)
    _find(bad, "Deployment", "vllm-engine-stable")["spec"]["replicas"] = "five"
    with pytest.raises(CourseError, match=r"spec\.replicas"):
        k8s.validate(bad, plan)


def test_probe_and_flags_and_scrape_annotations_checked(plan, objs):
    bad = copy.deepcopy(objs)
    c = _find(bad, "Deployment", "vllm-engine-stable")["spec"]["template"]["spec"]["containers"][0]
    c["readinessProbe"]["httpGet"]["path"] = "/"
    with pytest.raises(CourseError, match="readinessProbe"):
        k8s.validate(bad, plan)
    bad = copy.deepcopy(objs)
    c = _find(bad, "Deployment", "vllm-engine-stable")["spec"]["template"]["spec"]["containers"][0]
    c["args"].remove("--enable-prefix-caching")
    with pytest.raises(CourseError, match="--enable-prefix-caching"):
        k8s.validate(bad, plan)
    for flag, wrong in (("--dtype", "float16"), ("--kv-cache-dtype", "auto")):   # a value other than the plan's
        bad = copy.deepcopy(objs)
        a = _find(bad, "Deployment", "vllm-engine-canary")["spec"]["template"]["spec"]["containers"][0]["args"]
        a[a.index(flag) + 1] = wrong
        with pytest.raises(CourseError, match=f"runs {flag} {wrong}, the plan's command {flag} "):
            k8s.validate(bad, plan)
    bad = copy.deepcopy(objs)
    del _find(bad, "Deployment", "vllm-engine-canary")["spec"]["template"]["metadata"]["annotations"]
    with pytest.raises(CourseError, match="prometheus.io/scrape"):
        k8s.validate(bad, plan)


@pytest.mark.parametrize(("weight", "canary", "conf"), [
    (5, 1, ["weight=95", "weight=5"]), (50, 3, ["weight=50", "weight=50"]), (100, 6, ["canary:8000 weight=100"])])
def test_canary_split(plan, weight, canary, conf):
    objs = k8s.manifests(plan, canary_weight=weight)
    assert _find(objs, "Deployment", "vllm-engine-canary")["spec"]["replicas"] == canary
    text = _find(objs, "ConfigMap", "llm-gateway")["data"]["default.conf"]
    assert all(c in text for c in conf)
    assert k8s.validate(objs, plan)


def test_bad_inputs(plan):
    with pytest.raises(CourseError, match="outside 0-100"):
        k8s.manifests(plan, canary_weight=101)
    with pytest.raises(CourseError, match="N\\+1"):
        k8s.manifests(plan, instances=5)


def test_router_args_parse_with_vllm_routers_parser(objs):
    from vllm_router.launch_router import parse_router_args

    args = _find(objs, "Deployment", "vllm-router-stable")["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = parse_router_args(args)
    assert parsed.service_discovery and parsed.policy == "cache_aware"
    assert parsed.selector == {"app.kubernetes.io/name": "vllm-engine", "app.kubernetes.io/part-of": "inferopt",
                               "inferopt/track": "stable"}


def test_engine_args_parse_with_vllms_parser(objs):
    """The container runs `vllm serve MODEL FLAGS...`: parse it with vLLM 0.32's own serve parser."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    c = _find(objs, "Deployment", "vllm-engine-stable")["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["vllm", "serve"]
    top = FlexibleArgumentParser()
    ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    ns = top.parse_args(["serve", *c["args"]])
    assert ns.model_tag == c["args"][0] and ns.tensor_parallel_size == 8 and ns.kv_cache_dtype == "fp8"
    assert ns.dtype == "bfloat16" == hardware.model_dtype("H100-SXM-80GB")   # the plan's GPU's dtype, stated
    assert (ns.host, ns.port, ns.max_num_seqs, ns.enable_prefix_caching) == ("0.0.0.0", 8000, 200, True)


def test_cli_writes_files_that_revalidate(tmp_path, plan, capsys):
    out = tmp_path / "k8s"
    assert main(["plan", "--k8s", str(out), "--canary-weight", "50", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["instances"] == 6
    objs = k8s.load_dir(out)
    assert k8s.validate(objs, plan) == len(objs) == 14
    assert "&id" not in (out / "04-deployment-vllm-engine-stable.yaml").read_text()
    assert (out / "Dockerfile.router").read_text().count("vllm-router==0.1.17") == 1
    assert main(["plan", "--k8s", str(tmp_path / "bad"), "--instances", "5"]) == 2
    assert "N+1" in capsys.readouterr().err
    assert yaml.safe_load((out / "11-configmap-llm-gateway.yaml").read_text())["data"]["default.conf"].count("weight=50") == 2


# ---------------------------------------------------------------- chapter 05's shipped plan (what 06b deploys)
@pytest.fixture(scope="module")
def shipped(plan):
    from inferopt.performance import capacity_check

    s = capacity_check.ship(plan, capacity_check.check(plan, sensitivity=False))
    return s, capacity_check.shipped_plan(plan, s)


def test_shipped_plan_manifests_run_the_shipped_commands(shipped):
    s, sp = shipped
    objs = k8s.manifests(sp, canary_weight=5)
    assert k8s.validate(objs, sp) == len(objs)
    engines = _engine_pods(objs)
    pods = sum(d["spec"]["replicas"] for d in engines)
    assert k8s.replicas_per_instance(sp) == s.layout.replicas == 4 and k8s.gpus_per_pod(sp) == s.layout.tp == 2
    assert pods == s.fleet.instances * s.layout.replicas == 40
    gpus = sum(d["spec"]["replicas"] * d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
               [k8s.GPU_RESOURCE] for d in engines)
    assert gpus == s.fleet.gpus == 80
    assert _find(objs, "PodDisruptionBudget", "vllm-engine")["spec"]["minAvailable"] == 9 * 4   # N = 8 + 1 surge
    for d in engines:                   # every flag of chapter 05's printed commands, with its value
        args = d["spec"]["template"]["spec"]["containers"][0]["args"]
        for cmd in s.commands:
            words = cmd.split()[3:]     # CUDA_VISIBLE_DEVICES=... vllm serve MODEL
            assert args[0] == words[0]
            flags = words[1:]
            for i, f in enumerate(flags):
                if f.startswith("--") and f != "--port":
                    assert f in args
                    if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
                        assert args[args.index(f) + 1] == flags[i + 1], f


def test_manifests_of_another_plan_are_rejected(plan, shipped):
    _, sp = shipped
    with pytest.raises(CourseError, match="nvidia.com/gpu is 8, the plan's command holds 2"):
        k8s.validate(k8s.manifests(plan), sp)        # the original TP=8 plan's pods against the shipped plan
    with pytest.raises(CourseError, match="nvidia.com/gpu is 2, the plan's command holds 8"):
        k8s.validate(k8s.manifests(sp), plan)


def test_shipped_plan_n_plus_one_counts_pods_of_whole_instances(shipped):
    _, sp = shipped
    objs = k8s.manifests(sp)
    bad = copy.deepcopy(objs)
    _find(bad, "Deployment", "vllm-engine-stable")["spec"]["replicas"] -= 1     # 39 pods: one instance short of N+1
    with pytest.raises(CourseError, match="39 engine pods .4 per instance. cannot survive losing one instance"):
        k8s.validate(bad, sp)
    bad = copy.deepcopy(objs)
    _find(bad, "PodDisruptionBudget", "vllm-engine")["spec"]["minAvailable"] = 9   # instances, not pods
    with pytest.raises(CourseError, match="minAvailable is 9: N\\+1 keeps the 36 engine pods"):
        k8s.validate(bad, sp)


def test_command_that_does_not_divide_the_instance_is_rejected(shipped):
    import dataclasses

    from inferopt.planning.planner import launch_command

    _, sp = shipped
    odd = dataclasses.replace(sp, command=launch_command("m", gpu="H100-SXM-80GB", tensor_parallel_size=3))
    with pytest.raises(CourseError, match="holds 3 GPUs, which does not divide an instance of 8"):
        k8s.manifests(odd)
