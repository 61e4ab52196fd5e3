"""Deployment planner: §5.2 reproduced and corrected, Little's law, the launch command parsed by
vLLM 0.32's own argument parser (both forms, on CPU), scenario schema, CLI."""
import json
import subprocess
import sys

import pytest
import yaml

from inferopt.errors import CourseError
from inferopt.paths import ASSETS, REPO_ROOT
from inferopt.planning import planner


@pytest.fixture(scope="module")
def plan():
    return planner.make_plan("llama3-70b-chat")


def test_every_scenario_matches_schema():
    names = planner.scenario_names()
    assert "llama3-70b-chat" in names
    for n in names:
        planner.load_scenario(n)


def test_schema_rejects_bad_scenario(tmp_path):
    data = yaml.safe_load((ASSETS / "scenarios" / "llama3-70b-chat.yaml").read_text())
    data["requirements"]["qps"] = -3
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(CourseError, match="requirements/qps"):
        planner.load_scenario(p)


def test_seed_5_2_reproduced_and_corrected(plan):
    checks = {c["quantity"]: c for c in plan.seed_check}
    assert checks["weights per GPU"]["verdict"] == "agrees"          # 9.08 GB vs the seed's 8.75 GB
    assert checks["KV per GPU"]["verdict"] == "agrees"
    per_req = checks["KV per 4096-token request"]
    assert per_req["verdict"] == "differs" and per_req["computed"] == 0.671
    conc = checks["max concurrency at 4096 tokens"]
    assert conc["verdict"] == "differs" and conc["computed"] > 3.5 * conc["seed"]
    assert any("671,088,640 B" in line for line in plan.errata)


def test_littles_law(plan):
    ll = plan.littles_law
    assert ll.latency_s == pytest.approx(0.5 + 149 * 0.05)
    assert ll.in_flight == pytest.approx(50 * 7.95)
    assert ll.fits is False and ll.max_num_seqs == 200       # the seed's 200 is too few at the SLO limits
    assert ll.tpot_cap_ms == pytest.approx((200 / 50 - 0.5) / 149 * 1000)
    assert ll.kv_concurrency > ll.in_flight                   # memory is not the limit
    ok = planner.littles_law(50, 200, 20, 150, 200)
    assert ok.fits is True


def test_capacity_and_canary(plan):
    assert (plan.capacity.instances, plan.capacity.gpus) == (6, 48)
    assert plan.availability.meets_target is True
    assert [s.traffic_fraction for s in plan.canary] == [0.05, 0.5, 1.0]


def test_tp_larger_than_budget_rejected():
    sc = planner.load_scenario()
    sc["plan"]["tensor_parallel_size"] = 16
    with pytest.raises(CourseError, match="more GPUs"):
        planner.make_plan(sc)


@pytest.fixture(scope="module")
def vllm_parsers():
    """vLLM 0.32's own parsers for `python -m vllm.entrypoints.openai.api_server` and `vllm serve`."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    module_parser = make_arg_parser(FlexibleArgumentParser())
    top = FlexibleArgumentParser()
    sub = top.add_subparsers(dest="subparser")
    ServeSubcommand().subparser_init(sub)
    return module_parser, top, validate_parsed_serve_args


def _check(args, model):
    assert args.tensor_parallel_size == 8
    assert args.kv_cache_dtype == "fp8"
    assert args.enable_prefix_caching is True and args.enable_chunked_prefill is True
    assert args.max_num_batched_tokens == 8192 and args.max_num_seqs == 200
    assert args.gpu_memory_utilization == 0.9 and args.port == 8000
    assert args.dtype == "bfloat16"      # the plan's H100 has bfloat16 (hardware table: platform.bf16_dtype)


def test_generated_flags_parse_with_vllm(plan, vllm_parsers):
    module_parser, top, validate = vllm_parsers
    argv = plan.command.module_argv
    assert argv[:3] == ["python", "-m", "vllm.entrypoints.openai.api_server"]
    a = module_parser.parse_args(argv[3:])
    validate(a)
    assert a.model == "neuralmagic/Meta-Llama-3-70B-Instruct-FP8"
    _check(a, a.model)
    s = plan.command.serve_argv
    assert s[:2] == ["vllm", "serve"]
    b = top.parse_args(s[1:])
    validate(b)
    assert b.subparser == "serve" and b.model_tag == "neuralmagic/Meta-Llama-3-70B-Instruct-FP8"
    _check(b, b.model_tag)


def test_switch_off_flags_parse(vllm_parsers):
    module_parser, _, _ = vllm_parsers
    cmd = planner.launch_command("m", gpu="L4", prefix_caching=False, chunked_prefill=False, max_model_len=4096)
    a = module_parser.parse_args(cmd.module_argv[3:])
    assert a.enable_prefix_caching is False and a.enable_chunked_prefill is False and a.max_model_len == 4096


@pytest.mark.parametrize(("gpu", "checkpoint", "dtype"), [
    ("T4", "bfloat16", "float16"), ("V100", "bfloat16", "float16"), ("T4", "float32", "float16"),
    ("L4", "bfloat16", "bfloat16"), ("H100", "bfloat16", "bfloat16"), ("A100", "float32", "bfloat16"),
    ("H100", "float16", "float16"),     # an AWQ checkpoint saved in float16: vLLM's auto keeps it where the GPU runs it
])
def test_every_launch_command_states_the_dtype_its_gpu_runs(vllm_parsers, gpu, checkpoint, dtype):
    module_parser, top, validate = vllm_parsers
    cmd = planner.launch_command("m", gpu=gpu, checkpoint_dtype=checkpoint)
    a = module_parser.parse_args(cmd.module_argv[3:])
    validate(a)
    assert a.dtype == dtype
    assert cmd.serve_argv.count("--dtype") == 1 and top.parse_args(cmd.serve_argv[1:]).dtype == dtype


def test_a_launch_command_needs_a_gpu_it_can_state_a_dtype_for():
    for bad, why in (("CPU", "--dtype"), ("GTX-1080", "unknown GPU")):
        with pytest.raises(CourseError, match=why) as e:
            planner.launch_command("m", gpu=bad)
        assert "\n" not in str(e.value)
    with pytest.raises(TypeError):
        planner.launch_command("m")      # no GPU, no command: the dtype is the GPU's


def test_shell_text_is_the_same_command(plan):
    import shlex
    assert shlex.split(plan.command.serve_shell.replace("\\\n", " ")) == plan.command.serve_argv
    assert shlex.split(plan.command.module_shell.replace("\\\n", " ")) == plan.command.module_argv


def test_cli_plan_json():
    out = subprocess.run([sys.executable, "-m", "inferopt", "plan", "llama3-70b-chat", "--json"],
                         capture_output=True, text=True, cwd=REPO_ROOT, check=True).stdout
    d = json.loads(out)
    assert d["kv_bytes_per_token"] == 163_840 and d["instances"] == 6 and d["gpus"] == 48
    assert d["max_num_seqs_enough"] is False
