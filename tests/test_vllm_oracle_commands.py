"""Every command the course emits goes through the installed vLLM (inferopt/vllm_oracle): the planner's
launch commands, the techniques' flags, diagnose's changes and the memory calculator's candidates for
deployments on several GPUs, the pitfalls' avoid_flags, the sized actions and the notebooks' engines
(as serving/gpu_commands builds them). vLLM's parser and EngineArgs.create_engine_config run on the
target GPU (target_platform); a command vLLM refuses fails here with vLLM's own message. Every command states
the --dtype of its GPU (what vLLM's --dtype auto resolves to there, asked of the oracle), and a T4 command never
has bfloat16 or an FP8 KV cache (serving/gpu_commands.dtype_problems, shown to reject both)."""
import inspect
import json

import pytest

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import diagnose
from inferopt.planning import hardware
from inferopt.planning.planner import load_scenario, make_plan, scenario_names
from inferopt.serving import gpu_commands as G
from inferopt.vllm_oracle import client
from inferopt.vllm_oracle.engine_config import split_command

BASE = "vllm serve llama-3.1-8b --max-model-len 8192"
# the INT4 changes are "serve an AWQ checkpoint": --quantization awq_marlin on the BF16 checkpoint is refused
# (VllmConfig: Cannot find the config file for awq_marlin), so they are checked on the AWQ checkpoint
AWQ = "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"


def _base_for(flags: list, gpu: str) -> list:
    """The command a set of flags is served with on ``gpu``, its --dtype from the one place the course decides it
    (hardware.model_dtype, for the checkpoint's saved dtype: the AWQ checkpoint is float16)."""
    if "awq_marlin" in flags or "awq" in flags:
        return [*f"vllm serve {AWQ} --max-model-len 8192".split(), "--dtype", hardware.model_dtype(gpu, "float16")]
    return [*BASE.split(), "--dtype", hardware.model_dtype(gpu)]


def _emitted() -> list:
    """(where, argv, gpu) for every command the course emits."""
    out = []
    for name in scenario_names():
        req = load_scenario(name)["requirements"]
        cmd = make_plan(name).command.module_argv
        out.append((f"plan {name}", cmd, req["gpu"]))
    for tech, flags in G.technique_flags():
        out.append((f"technique {tech}", [*_base_for(flags, "H100"), *flags], "H100"))
    for p in knowledge.load("pitfalls")["pitfalls"]:
        # "<bf16 draft>" names a draft of the target's tokenizer; Llama-3.1-8B's config stands in for it (vLLM
        # checks the vocabularies match: SmolLM2's 49152 against Llama's 128256 is refused)
        flags = [f.replace("<bf16 draft>", "llama-3.1-8b") for f in p["avoid_flags"]]
        out.append((f"pitfall {p['id']}", [*_base_for(flags, "H100"), *flags], "H100"))
    for gpu in ("H100", "A100", "L4", "T4", "V100"):
        for case in ({"oom": True}, {"ttft_p95_ms": 2000, "tpot_p95_ms": 80, "preemptions": 5, "queue_len": 4}):
            d = diagnose(case, {"ttft_p95_ms": 500, "tpot_p95_ms": 50},
                         {"prompt_tokens": 3000, "output_tokens": 200, "concurrency": 64, "num_gpus": 2},
                         None, {"model": "llama-3.1-8b", "gpu": gpu, "max_model_len": 8192})
            for c in d.changes:
                if c["flags_add"]:
                    out.append((f"diagnose {gpu} {c['id']}", [*_base_for(c["flags_add"], gpu), *c["flags_add"]], gpu))
            for c in (d.memory or {}).get("candidates", []):
                out.append((f"memory {gpu} {c['id']}", [*_base_for(c["flags"], gpu), *c["flags"]], gpu))
    for where, kw in G.notebook_configurations():
        for gpu in ("L4", "T4"):
            out.append((f"notebook {gpu} {where}", G.gpu_command(kw, gpu=gpu), gpu))
    return out


EMITTED = _emitted()
CHECKPOINTS = {AWQ: {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                             "zero_point": True, "version": "gemm"}, "torch_dtype": "float16"}}


@pytest.fixture(scope="module")
def verdicts():
    pairs = [(argv, gpu) for _, argv, gpu in EMITTED]
    return client.check_pairs(pairs)


def test_the_collection_covers_every_kind():
    kinds = {w.split()[0] for w, _, _ in EMITTED}
    assert kinds == {"plan", "technique", "pitfall", "diagnose", "memory", "notebook"}
    assert len(EMITTED) > 40
    t4 = {w.split()[0] for w, _, g in EMITTED if g == "T4"}
    assert t4 == {"diagnose", "memory", "notebook"}, t4     # the T4 commands the course builds


def _without_dtype(argv: list) -> list:
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--dtype":
            skip = True
        elif not a.startswith("--dtype="):
            out.append(a)
    return out


@pytest.fixture(scope="module")
def parse():
    """vLLM 0.32's own server parser over a command (any of the course's three forms)."""
    p, validate = G.vllm_parser()

    def run(argv):
        m, *flags = split_command(argv)
        args = p.parse_args(["--model", m, *flags])
        validate(args)
        return args
    return run


@pytest.fixture(scope="module")
def auto_verdicts():
    """The oracle on each command with its --dtype taken out: the dtype vLLM's --dtype auto resolves to there."""
    return client.check_pairs([(_without_dtype(argv), gpu) for _, argv, gpu in EMITTED])


# Notebook engines that type a dtype of their own (a CPU value) and so do not run their GPU's, with who fixes it;
# a listed file that no longer does fails below.
KNOWN_DTYPE = {"solutions/lab2-memory-calculator.md": "dtype='float32' typed in the live cell (b-labs)"}


@pytest.mark.parametrize("i", range(len(EMITTED)), ids=[w for w, _, _ in EMITTED])
def test_every_command_states_the_dtype_its_gpu_runs(parse, verdicts, auto_verdicts, i):
    where, argv, gpu = EMITTED[i]
    args = parse(argv)
    auto = (auto_verdicts[i].get("resolved") or {}).get("dtype")
    problems = G.dtype_problems(args.dtype, args.kv_cache_dtype, gpu, auto)
    known = where.startswith("notebook") and where.split()[2].split(":")[0] in KNOWN_DTYPE
    assert bool(problems) == known, (where, gpu, problems, "update KNOWN_DTYPE" if known else " ".join(argv))
    if where in KNOWN or known:
        return
    assert auto is not None, f"{where}: the oracle could not resolve vLLM's auto dtype: {auto_verdicts[i]}"
    assert verdicts[i]["resolved"]["dtype"] == args.dtype      # vLLM runs the dtype the command states
    if gpu == "T4":
        assert args.dtype == "float16" and "bfloat16" not in argv and not str(args.kv_cache_dtype).startswith("fp8")


def test_the_dtype_check_rejects_what_a_gpu_command_must_not_be(parse, auto_verdicts):
    """The check is not blind: a command without --dtype, a T4 command with bfloat16 or an FP8 KV cache, and a
    dtype other than vLLM's auto choice are each named."""
    i_plan = next(i for i, (w, _, _) in enumerate(EMITTED) if w.startswith("plan"))
    i_t4 = next(i for i, (w, _, g) in enumerate(EMITTED) if w.startswith("notebook T4") and w.split()[2].split(":")[0]
                not in KNOWN_DTYPE)
    plan, t4 = EMITTED[i_plan][1], EMITTED[i_t4][1]
    assert auto_verdicts[i_t4]["resolved"]["dtype"] == "float16"            # vLLM itself: no bfloat16 on a T4
    bare = parse(_without_dtype(plan))
    assert bare.dtype == "auto"
    assert G.dtype_problems(bare.dtype, bare.kv_cache_dtype, "H100", "bfloat16")[0].startswith("no --dtype")
    bf16 = parse([*_without_dtype(t4), "--dtype", "bfloat16"])
    got = G.dtype_problems(bf16.dtype, bf16.kv_cache_dtype, "T4", "float16")
    assert any("no bfloat16" in g for g in got) and any("auto runs float16" in g for g in got), got
    fp8 = parse([*t4, "--kv-cache-dtype", "fp8"])
    got = G.dtype_problems(fp8.dtype, fp8.kv_cache_dtype, "T4", "float16")
    assert got and "--kv-cache-dtype fp8 on T4" in got[0] and "\n" not in got[0], got
    half = parse([*_without_dtype(plan), "--dtype", "float16"])                # runs, but not what the GPU picks
    assert G.dtype_problems(half.dtype, half.kv_cache_dtype, "H100", "bfloat16") == [
        "--dtype float16: vLLM's --dtype auto runs bfloat16 here"]


def test_the_one_dtype_rule_is_what_vllm_resolves_on_every_catalog_gpu():
    """hardware.model_dtype against the generated table's dtype_auto (vLLM's _resolve_auto_dtype called under
    each GPU, tests/test_hardware_table.py) for a bfloat16 checkpoint."""
    rows = hardware.table()["attention"]
    assert len(rows) >= 10
    for gid, row in rows.items():
        assert hardware.model_dtype(gid) == row["dtype_auto"], gid


def test_every_quantization_method_takes_the_dtype_the_course_states():
    """vLLM refuses a --dtype its quantization config does not list (config/vllm.py: _get_quantization_config,
    get_supported_act_dtypes): the dtype the course states, for either 16-bit checkpoint, is in every method's
    list on every GPU where the method runs."""
    from vllm.model_executor.layers.quantization import get_quantization_config

    methods = {r["flags"][1]: rid for rid, r in hardware.table()["quantization"].items()}
    methods["awq"] = methods["awq_marlin"]
    for method, rid in methods.items():
        q = get_quantization_config(method)
        f = q.get_supported_act_dtypes       # a classmethod, or (CompressedTensorsConfig) a plain function of cls
        acts = {str(d).removeprefix("torch.") for d in (f() if inspect.ismethod(f) else f(q))}
        for gid in hardware.table()["attention"]:
            if hardware.supports(gid, rid):
                for saved in ("bfloat16", "float16", "float32"):
                    assert hardware.model_dtype(gid, saved) in acts, (method, gid, saved, acts)


# Commands vLLM refuses (or the oracle cannot decide) today, each with vLLM's reason and who fixes it. A listed
# command that vLLM accepts fails below, so the list cannot go stale.
KNOWN = {
    "technique pd_disaggregation (enable)": ("num_stages", "oracle limitation: the KV-connector config reaches a "
                                             "stubbed CUDA extension on this CPU build (target_platform.NOT_RUN)"),
}


@pytest.mark.parametrize("i", range(len(EMITTED)), ids=[w for w, _, _ in EMITTED])
def test_vllm_accepts_every_command_the_course_emits(verdicts, i):
    where, argv, gpu = EMITTED[i]
    v = verdicts[i]
    if where in KNOWN:
        assert v.get("ok") is not True and KNOWN[where][0] in (v.get("refusal") or v.get("error") or ""), \
            f"{where}: vLLM now accepts it (or refuses for another reason): update KNOWN ({v})"
        return
    assert v.get("ok") is not False, f"{where} on {gpu}: vLLM 0.32 refuses: {v.get('refusal')}\n  {' '.join(argv)}"
    assert v.get("ok") is True, f"{where} on {gpu}: the oracle could not decide: {v}"


def test_the_old_recommendations_are_refused():
    """The test is not blind: what the course said before is refused with vLLM's message."""
    old = [([*BASE.split(), "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                                  "disable_by_batch_size": 8})], "H100"),
           ([*BASE.split(), "--kv-cache-dtype", "fp8"], "T4"),
           ([*BASE.split(), "--quantization", "awq_marlin"], "H100"),
           ([*BASE.split(), "--quantization", "compressed-tensors"], "H100"),     # W8A8 as a flag (techniques.yaml)
           ([*BASE.split(), "--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 4,
                                                                  "num_speculative_tokens_per_batch_size": [[2, 8, 4]]})],
            "H100")]
    got = client.check_pairs(old)
    assert "disable_by_batch_size: Unexpected keyword argument" in got[0]["refusal"]
    assert got[1]["ok"] is True   # FP8 KV on a T4 passes the config stage: the refusal is in the attention
    # backend's constructor, which the generated hardware table holds (tests/test_hardware_table.py)
    assert "Cannot find the config file for awq_marlin" in got[2]["refusal"]
    assert "CompressedTensorsConfig.__init__() missing" in got[3]["refusal"]
    assert "first batch-size range must start at 1" in got[4]["refusal"]
