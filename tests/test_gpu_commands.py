"""Every GPU launch command the course builds parses with vLLM 0.32's own parser, on CPU, and carries no
CPU-only flag (serving/gpu_commands.py). vLLM's parser ships in the CPU wheel (same Python source)."""
import json
import math

import pytest

from inferopt.errors import CourseError
from inferopt.serving import gpu_commands as G
from inferopt.serving.engine import VLLMServer
from inferopt.serving.gpu_share import engine_share

GiB = 1 << 30


@pytest.fixture(scope="module")
def parser():
    return G.vllm_parser()


def parse(parser, argv):
    p, validate = parser
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        raise AssertionError(f"vLLM's parser refused {argv}") from exc
    validate(args)
    return args


def test_the_scan_finds_the_chapters_engines():
    where = [w for w, _ in G.notebook_configurations()]
    for nb in ("00-start-here", "02b-decision-tree-live", "05-end-to-end", "05b-load-test", "06-monitoring",
               "06b-scale-out", "lab3-live-vllm", "lab4-benchmark"):
        assert any(nb in w for w in where), nb


# Notebook engines that still pass a CPU-only value onto a GPU, each with who fixes it (a listed file that no
# longer leaks fails the test below, so the list cannot go stale).
KNOWN_LEAKS = {
    "solutions/lab2-memory-calculator.md": "dtype='float32' typed in the live cell (b-labs: the calculator's "
                                           "dtype from the engine, float32 only on the CPU engine)",
}


@pytest.mark.parametrize("where,kw", G.notebook_configurations(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_notebook_engine_parses_on_the_gpu(parser, where, kw):
    share = engine_share(3 if "06b" in where else 1, free_bytes=23 * GiB, total_bytes=24 * GiB,
                         max_model_len=kw.get("max_model_len", 2048), kv_cache_gib=kw.get("kv_cache_gib"))
    argv = G.gpu_command(kw, utilization=share.gpu_memory_utilization)
    args = parse(parser, argv)
    leaks = G.cpu_leaks(argv)
    known = where.split(":")[0] in KNOWN_LEAKS
    assert bool(leaks) == known, (where, leaks, "update KNOWN_LEAKS" if known else "a CPU-only flag on the GPU")
    srv = VLLMServer(kind="gpu", **kw)
    assert not G.cpu_leaks([], srv.env)
    assert args.max_model_len == kw.get("max_model_len", 2048)
    assert args.gpu_memory_utilization == pytest.approx(share.gpu_memory_utilization)
    assert args.enforce_eager is False and args.dtype == kw.get("dtype", "auto")   # GPU defaults: CUDA graphs, bf16
    if kw.get("kv_cache_gib") is not None:
        assert args.kv_cache_memory_bytes == int(kw["kv_cache_gib"] * GiB)
    assert args.model == srv.model and args.served_model_name == [srv.served_name]


def test_the_cpu_engine_command_is_what_the_leak_check_catches(parser):
    """The check is not blind: the CPU engine's own command has the CPU-only flags."""
    cpu = VLLMServer(kind="cpu", cpu_cores=[0]).command()
    argv = cpu[cpu.index("vllm.entrypoints.openai.api_server") + 1:]
    parse(parser, argv)
    assert G.cpu_leaks(argv) == ["--enforce-eager", "--dtype float32"]
    assert G.cpu_leaks([], VLLMServer(kind="cpu", cpu_cores=[0]).env) == ["VLLM_CPU_OMP_THREADS_BIND"]
    assert G.cpu_leaks(["--dtype=float32"]) == ["--dtype=float32"]


def test_a_wrong_flag_or_value_is_refused_by_the_parser(parser):
    with pytest.raises(AssertionError, match="refused"):
        parse(parser, G.gpu_command({"extra_args": ["--max-num-batched-tokenz", "2048"]}))
    with pytest.raises(AssertionError, match="refused"):
        parse(parser, G.gpu_command({"extra_args": ["--kv-cache-dtype", "int3"]}))


@pytest.mark.parametrize("tech,flags", G.technique_flags(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_technique_flag_parses_on_a_gpu_engine(parser, tech, flags):
    args = parse(parser, G.gpu_command({"extra_args": flags}))
    if "--speculative-config" in flags:
        assert isinstance(args.speculative_config, dict)


SIZED = [  # decision.py _size_action's flags, and the tuning loop's
    ["--max-num-batched-tokens", "512"], ["--max-num-seqs", "32"], ["--gpu-memory-utilization", "0.95"],
    ["--kv-cache-memory-bytes", str(3 * 16 * 2 * 30 * 3 * 64 * 2)],
    ["--speculative-config", json.dumps({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "num_speculative_tokens": 4})],
]


@pytest.mark.parametrize("flags", SIZED, ids=lambda f: f[0])
def test_sized_actions_parse(parser, flags):
    parse(parser, G.gpu_command({"extra_args": flags}))


def test_the_planners_launch_commands_parse(parser):
    from inferopt.planning.planner import make_plan, scenario_names

    for name in scenario_names():
        cmd = make_plan(name).command
        argv = cmd.module_argv[cmd.module_argv.index("vllm.entrypoints.openai.api_server") + 1:]
        parse(parser, argv)
        assert not G.cpu_leaks(argv)


def test_the_share_flag_is_what_vllm_reads(parser):
    share = engine_share(3, free_bytes=22 * GiB, total_bytes=24 * GiB, max_model_len=2048, kv_cache_gib=0.5)
    args = parse(parser, G.gpu_command({"kv_cache_gib": 0.5}, utilization=share.gpu_memory_utilization))
    assert math.ceil(24 * GiB * args.gpu_memory_utilization) * 3 <= 22 * GiB
    with pytest.raises(CourseError):
        VLLMServer(kind="gpu", gpu_memory_utilization=0)
