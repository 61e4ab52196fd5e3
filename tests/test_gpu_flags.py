"""The GPU engine's flags per GPU generation (serving/gpu_flags.py), through the path the chapters' GPU commands
take (VLLMServer(kind='gpu', gpu=...).command(), gpu_commands.gpu_command) and parsed by vLLM 0.32's own parser:
a T4 command never has bfloat16 or an FP8 KV cache; the start line says what was chosen and why."""
import copy

import pytest

from inferopt.errors import CourseError
from inferopt.planning import hardware
from inferopt.serving import gpu_commands as G
from inferopt.serving import gpu_flags
from inferopt.serving.engine import VLLMServer

BF16_GPUS = ["L4", "A10", "A100-SXM-80GB", "H100-SXM-80GB", "H200", "B200"]
FP8_KV = [(t, f) for t, f in G.technique_flags() if "--kv-cache-dtype" in f and any(x.startswith("fp8") for x in f)]


@pytest.fixture(scope="module")
def parser():
    p, validate = G.vllm_parser()

    def parse(argv):
        args = p.parse_args(argv)
        validate(args)
        return args
    return parse


def _value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv else None


@pytest.mark.parametrize("where,kw", G.notebook_configurations(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_notebook_engine_on_a_t4_runs_float16(parser, where, kw):
    kw = {k: v for k, v in kw.items() if k != "dtype"}       # the CPU labs type float32: the GPU picks its own
    argv = G.gpu_command(kw, gpu="T4")
    assert _value(argv, "--dtype") == "float16" and "bfloat16" not in argv, where
    assert not (_value(argv, "--kv-cache-dtype") or "").startswith("fp8"), where
    assert parser(argv).dtype == "float16"
    for gpu in BF16_GPUS:
        assert _value(G.gpu_command(kw, gpu=gpu), "--dtype") == "bfloat16", (where, gpu)


def test_an_fp8_kv_cache_is_refused_for_a_t4_and_kept_where_it_runs(parser):
    assert FP8_KV, "techniques.yaml names an FP8 KV cache flag"
    for tech, flags in FP8_KV:
        with pytest.raises(CourseError, match="--kv-cache-dtype") as e:
            G.gpu_command({"extra_args": flags}, gpu="T4")
        assert "\n" not in str(e.value) and "T4" in str(e.value), tech
        argv = G.gpu_command({"extra_args": flags}, gpu="H100-SXM-80GB")
        assert _value(argv, "--kv-cache-dtype").startswith("fp8") and parser(argv).dtype == "bfloat16"


def test_quantization_follows_the_table():
    # FP8 weights on a T4 run weight-only (FP8 Marlin from the table's fp8_w8a16 rule); Marlin INT4 too
    for q in (["--quantization", "fp8"], ["--quantization", "awq_marlin"]):
        assert _value(G.gpu_command({"extra_args": q}, gpu="T4"), "--quantization") == q[1]
    with pytest.raises(CourseError, match="awq_marlin"):
        gpu_flags.for_gpu("V100", extra_args=["--quantization", "awq_marlin"])


def test_an_explicit_dtype_is_kept_or_refused():
    assert VLLMServer(kind="gpu", gpu="T4", dtype="half").gpu_flags().dtype == "float16"
    assert VLLMServer(kind="gpu", gpu="H100", dtype="float16").gpu_flags().dtype == "float16"
    with pytest.raises(CourseError, match="bfloat16 on T4") as e:
        VLLMServer(kind="gpu", gpu="T4", dtype="bfloat16").command()
    assert "dtype='float16'" in str(e.value) and "\n" not in str(e.value)
    for bad in ("CPU", "GTX-1080", None.__class__.__name__):
        with pytest.raises(CourseError):
            gpu_flags.for_gpu(bad)


def test_the_start_line_says_what_and_why():
    t4 = VLLMServer(kind="gpu", gpu="T4").start_line()
    assert "T4" in t4 and "float16" in t4 and "no bfloat16" in t4 and "\n" not in t4
    assert "vllm/platforms/cuda.py: CudaPlatformBase.check_if_supports_dtype" in t4   # the generated rule's source
    h100 = VLLMServer(kind="gpu", gpu="H100").start_line()
    assert "bfloat16" in h100 and "has it" in h100
    reasons = gpu_flags.for_gpu("T4").reasons
    assert any("vllm/" in r or "assets/gpus.yaml" in r for r in reasons)   # where the answer was read
    assert VLLMServer(kind="cpu").start_line().startswith("CPU engine: dtype float32")


def test_the_choice_comes_from_the_hardware_table(monkeypatch):
    """A wrong table gives other answers: the flags are read from assets/hardware_rules.yaml, not typed here."""
    t = copy.deepcopy(hardware.table())
    wrong = {"min_capability": 7.0, "flags": ["--dtype", "bfloat16"],
             "source": [{"file": "platforms/cuda.py", "function": "planted", "says": "a wrong floor"}]}
    t["platform"]["bf16_dtype"] = wrong                          # the generated rule (hardware_table.py)
    t["kv_cache"]["fp8_kv"] = dict(t["kv_cache"]["fp8_kv"], min_capability=7.0)
    monkeypatch.setattr(hardware, "table", lambda: t)
    assert gpu_flags.for_gpu("T4").dtype == "bfloat16"            # what the test above would catch
    assert _value(G.gpu_command({}, gpu=7.5), "--dtype") == "bfloat16"
    argv = G.gpu_command({"extra_args": ["--kv-cache-dtype", "fp8"]}, gpu="T4")   # a wrong table lets FP8 KV through
    assert _value(argv, "--kv-cache-dtype") == "fp8"


def test_without_the_bf16_rule_the_catalog_answers(monkeypatch):
    t = copy.deepcopy(hardware.table())
    for section in t.values():
        if isinstance(section, dict):
            section.pop("bf16_dtype", None)
    monkeypatch.setattr(hardware, "table", lambda: t)
    assert gpu_flags.for_gpu("T4").dtype == "float16" and gpu_flags.for_gpu("A10").dtype == "bfloat16"
    assert "assets/gpus.yaml" in gpu_flags.for_gpu("T4").line
    with pytest.raises(CourseError, match="cannot say which --dtype") as e:   # a bare capability: nothing answers,
        gpu_flags.for_gpu(7.5)                                                  # so no command without a dtype
    assert "\n" not in str(e.value)


def _fake_nvidia_smi(tmp_path, monkeypatch, query: str, cuda: str = "12.4"):
    """An nvidia-smi on PATH that answers the install probe's query (name, driver, compute_cap) like this GPU."""
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\ncase \"$*\" in\n  *compute_cap*) printf '%s\\n' "
                   f"'{query}' ;;\n  *) echo '| NVIDIA-SMI x  Driver Version: x  CUDA Version: {cuda} |' ;;\nesac\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")


def test_the_chapters_own_call_on_a_t4_machine_runs_float16(parser, tmp_path, monkeypatch):
    """The chapters name no GPU (VLLMServer(**ENGINE_KW)): on a GPU machine the engine asks nvidia-smi, the path
    every notebook takes. With a T4 answering, every notebook engine's command has --dtype float16 and vLLM's parser
    reads it so; with an H100, bfloat16."""
    configs = G.notebook_configurations()
    _fake_nvidia_smi(tmp_path, monkeypatch, "Tesla T4, 550.54.15, 7.5")
    for where, kw in configs:
        kw = {k: v for k, v in kw.items() if k != "dtype"}
        srv = VLLMServer(kind="gpu", gpu_memory_utilization=0.3, **kw)
        assert srv.gpu is None, where                       # no GPU named: the probe decides
        argv = srv.command()
        assert _value(argv, "--dtype") == "float16" and "bfloat16" not in argv, where
        assert not (_value(argv, "--kv-cache-dtype") or "").startswith("fp8"), where
        assert "no bfloat16" in srv.start_line()
    assert parser(G.gpu_command(configs[0][1])).dtype == "float16"
    _fake_nvidia_smi(tmp_path, monkeypatch, "NVIDIA H100 80GB HBM3, 580.159.04, 9.0", "13.0")
    assert _value(VLLMServer(kind="gpu", gpu_memory_utilization=0.3).command(), "--dtype") == "bfloat16"


def test_the_planners_commands_run_on_their_gpu():
    """plan's launch commands carry no KV dtype or quantization their GPU cannot run (the table's rules), and an
    FP8 KV plan moved to a T4 is refused in one line."""
    from inferopt.planning.planner import make_plan, scenario_names

    for name in scenario_names():
        plan = make_plan(name)
        gpu = plan.scenario["requirements"]["gpu"]
        gpu_flags.for_gpu(gpu, extra_args=plan.command.flags)          # raises for a flag the GPU cannot run
        if "fp8" in plan.command.flags:
            with pytest.raises(CourseError, match="--kv-cache-dtype fp8 on T4"):
                gpu_flags.for_gpu("T4", extra_args=plan.command.flags)
