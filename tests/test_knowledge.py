"""The knowledge files in assets/: schemas, cross-references, the seed's facts, vLLM flag names."""
import copy
import json
import re
import shlex

import pytest

from inferopt.assets import load_file
from inferopt.diagnosis import knowledge
from inferopt.errors import CourseError
from inferopt.paths import ASSETS


@pytest.mark.parametrize("name", knowledge.NAMES)
def test_every_file_matches_its_schema(name):
    data = knowledge.load(name)
    knowledge.validate(name, data)  # raises on a mismatch


def test_schema_rejects_a_broken_technique():
    data = copy.deepcopy(knowledge.load("techniques"))
    del data["techniques"][0]["vllm"]
    with pytest.raises(CourseError, match=r"techniques\.yaml, field techniques/0"):
        knowledge.validate("techniques", data)
    data = copy.deepcopy(knowledge.load("techniques"))
    data["techniques"][0]["cost_level"] = "cheap"
    with pytest.raises(CourseError, match="cost_level"):
        knowledge.validate("techniques", data)


def test_schema_rejects_a_pitfall_without_advice():
    data = copy.deepcopy(knowledge.load("pitfalls"))
    del data["pitfalls"][2]["advice"]
    with pytest.raises(CourseError, match="advice"):
        knowledge.validate("pitfalls", data)


def test_the_13_techniques_of_section_1():
    ids = knowledge.technique_ids()
    assert ids == ["flash_attention", "paged_attention", "continuous_batching", "prefix_cache",
                   "chunked_prefill", "int4_awq_marlin", "w8a8_smoothquant", "kv_cache_quant", "fp8",
                   "speculative_decoding", "pd_disaggregation", "tensor_parallel", "torch_compile"]
    t = knowledge.technique_index()
    assert t["fp8"].hardware == "fp8"
    assert t["tensor_parallel"].module == "Module 3, chapter 4"
    assert t["flash_attention"].module == "Module 2, chapter 6"
    assert t["torch_compile"].module == "Module 2, chapter 7"
    assert t["speculative_decoding"].module == "Module 4, chapter 5"
    assert t["pd_disaggregation"].module == "Module 4, chapter 6"
    # vLLM 0.32: prefix caching and chunked prefill are on by default
    assert t["prefix_cache"].default_on and t["prefix_cache"].disable_flags == ("--no-enable-prefix-caching",)
    assert t["chunked_prefill"].default_on
    assert t["kv_cache_quant"].enable_flags == ("--kv-cache-dtype", "fp8")


def test_filter_by_symptom_and_cost():
    oom_cheap = [t.id for t in knowledge.filter_techniques("oom", "low")]
    assert oom_cheap == ["flash_attention", "paged_attention"]
    tail = [t.id for t in knowledge.filter_techniques("tail_latency")]
    assert tail == ["chunked_prefill", "pd_disaggregation"]
    assert len(knowledge.filter_techniques(None, "high")) == 13
    assert len(knowledge.filter_techniques("all", "all")) == 13
    with pytest.raises(CourseError, match="symptom"):
        knowledge.filter_techniques("slow")
    with pytest.raises(CourseError, match="max_cost"):
        knowledge.filter_techniques(None, "free")


def test_gpu_classes_decide_fp8_and_marlin():
    needs = knowledge.load("techniques")["hardware_needs"]

    def cc(g):
        return knowledge.gpu_info(g)["compute_capability"]

    assert cc("h100") >= needs["fp8"]["min_compute_capability"]
    assert cc("L40S") >= needs["fp8"]["min_compute_capability"]
    # vLLM 0.32 (assets/hardware_rules.yaml): FP8 weights and Marlin from 7.5 (T4), FP8 compute from 8.9
    assert cc("A100") < needs["fp8_compute"]["min_compute_capability"] <= cc("H200")
    assert cc("T4") >= needs["fp8"]["min_compute_capability"] > cc("V100")
    assert cc("T4") >= needs["marlin"]["min_compute_capability"] > cc("V100")
    with pytest.raises(CourseError, match="gpu_type"):
        knowledge.gpu_info("Voodoo2")


def test_decision_tree_has_the_four_branches_and_their_sub_conditions():
    tree = knowledge.load("decision_tree")
    got = {b["id"]: [c["id"] for c in b["conditions"]] for b in tree["branches"]}
    assert got == {"A": ["A1", "A2", "A3"], "B": ["B1", "B2", "B4", "B3"], "C": ["C2", "C1"], "D": ["D1", "D2"]}
    assert [m["id"] for m in tree["baseline"]["metrics"]] == ["ttft", "tpot", "throughput", "memory", "gpu_util"]


def test_order_and_pitfalls_and_tradeoffs_have_the_seed_counts():
    steps = knowledge.load("optimization_order")["steps"]
    assert [s["branch"] for s in steps] == ["C", "A", "B", "D"]
    assert [s["symptom"] for s in steps] == ["oom", "ttft_high", "tpot_high", "tail_latency"]
    assert all(s["reason"] for s in steps)
    assert [p["section"] for p in knowledge.load("pitfalls")["pitfalls"]] == ["3.1", "3.2", "3.3", "3.4", "3.5"]
    assert len(knowledge.load("tradeoffs")["rows"]) == 8
    assert len(knowledge.load("learning_path")["self_check"]) == 7
    assert [m["id"] for m in knowledge.load("knowledge_map")["modules"]] == ["m1", "m2", "m3", "m4", "perf"]


def test_every_tradeoff_row_gives_up_and_buys_something():
    axes = {a["id"] for a in knowledge.load("tradeoffs")["axes"]}
    for row in knowledge.load("tradeoffs")["rows"]:
        assert set(row["scores"]) <= axes, row["id"]
        assert -1 in row["scores"].values() and 1 in row["scores"].values(), row["id"]


def test_cross_reference_check_catches_an_unknown_technique(monkeypatch):
    real = knowledge._load_checked

    def fake(name):
        data = real(name)
        if name == "pitfalls":
            data = copy.deepcopy(data)
            data["pitfalls"][0]["all_of"] = ["warp_drive"]
        return data

    knowledge.reload()
    monkeypatch.setattr(knowledge, "_load_checked", fake)
    try:
        with pytest.raises(CourseError, match="warp_drive"):
            knowledge._check_cross_references.__wrapped__()
    finally:
        monkeypatch.undo()
        knowledge.reload()


# --------------------------------------------------------------- vLLM's own argument parser
@pytest.fixture(scope="module")
def vllm_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm-serve"))


def _parse(parser, flags):
    try:
        return parser.parse_args(["--model", "m"] + list(flags))
    except SystemExit:
        raise AssertionError(f"vLLM rejects {shlex.join(flags)}") from None


def test_every_technique_flag_parses_with_vllms_parser(vllm_parser):
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    for t in knowledge.techniques():
        for flags in (t.enable_flags, t.disable_flags):
            if not flags:
                continue
            ns = _parse(vllm_parser, flags)
            # vLLM does not check these two values at parse time: check them against its registries
            if "--quantization" in flags:
                assert ns.quantization in QUANTIZATION_METHODS, (t.id, ns.quantization)
            if "--attention-backend" in flags:
                assert ns.attention_backend in AttentionBackendEnum.__members__, (t.id, ns.attention_backend)


def test_every_sized_action_flag_parses(vllm_parser):
    """Each sized action of the tree, computed for a case that sizes it, parses with vLLM's parser;
    every pitfall's avoid_flags too."""
    from inferopt.diagnosis.decision import diagnose

    sized = {a["id"]: a["sized"] for b in knowledge.load("decision_tree")["branches"] for c in b["conditions"]
             for a in c["actions"] if a.get("sized")}
    assert set(sized) == {"more_kv_memory", "cap_concurrency", "spec_off", "raise_concurrency", "smaller_prefill_chunks"}
    slo = {"ttft_p95_ms": 500, "tpot_p95_ms": 50}
    cpu = {"model": "smollm2-135m-instruct", "gpu": "cpu", "kv_cache_memory_bytes": 100_270_080, "max_model_len": 2048}
    cases = {
        "more_kv_memory": ({"ttft_p95_ms": 900, "preemptions": 9}, {"prompt_tokens": 100, "output_tokens": 60,
                                                                    "concurrency": 12}, None, cpu),
        "cap_concurrency": ({"ttft_p95_ms": 900, "preemptions": 9}, {"prompt_tokens": 100, "output_tokens": 60,
                                                                     "concurrency": 12}, None, cpu),
        "spec_off": ({"ttft_p95_ms": 100, "tpot_p95_ms": 90, "spec_acceptance_rate": 0.1}, {"concurrency": 32},
                     ["speculative_decoding"], None),
        "raise_concurrency": ({"ttft_p95_ms": 100, "tpot_p95_ms": 90, "queue_len": 20}, {"concurrency": 64},
                              ["continuous_batching"], None),
        "smaller_prefill_chunks": ({"ttft_p95_ms": 100, "tpot_p95_ms": 30, "tpot_p99_ms": 900}, {"prompt_tokens": 1500},
                                   ["chunked_prefill"], {"gpu": "cpu"}),
    }
    for aid, (m, w, on, dep) in cases.items():
        d = diagnose(m, slo, w, on, dep)
        act = next(a for a in d.actions if a["id"] == aid)
        assert act["flags_add"] or act["flags_remove"], (aid, act)
        _parse(vllm_parser, act["flags_add"])
    for p in knowledge.load("pitfalls")["pitfalls"]:
        _parse(vllm_parser, p["avoid_flags"])


def test_parser_really_rejects_bad_flags(vllm_parser):
    """The check above can fail: vLLM's parser exits on a misspelled flag or a bad choice."""
    with pytest.raises(AssertionError):
        _parse(vllm_parser, ["--enable-prefix-cache"])
    with pytest.raises(AssertionError):
        _parse(vllm_parser, ["--kv-cache-dtype", "int3"])


def test_default_flags_mean_what_we_say(vllm_parser):
    on = _parse(vllm_parser, ["--enable-prefix-caching", "--enable-chunked-prefill"])
    off = _parse(vllm_parser, ["--no-enable-prefix-caching", "--no-enable-chunked-prefill"])
    assert on.enable_prefix_caching is True and off.enable_prefix_caching is False
    assert on.enable_chunked_prefill is True and off.enable_chunked_prefill is False
    spec_config = knowledge.technique_index()["speculative_decoding"].enable_flags[1]
    ns = _parse(vllm_parser, ["--speculative-config", spec_config])
    assert ns.speculative_config["method"] == "ngram"
    assert _parse(vllm_parser, ["--tensor-parallel-size", "8"]).tensor_parallel_size == 8


def test_engine_generated_flags_parse(vllm_parser):
    from inferopt.diagnosis.decision import diagnose

    cases = [
        dict(metrics={"oom": True}, slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50},
             workload={"model_weights_gib": 130, "gpu_type": "H100", "num_gpus": 8}, techniques_on=[]),
        dict(metrics={"ttft_p95_ms": 100, "tpot_p95_ms": 90}, slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50},
             workload={"concurrency": 1, "draft_model": "my-draft", "prompt_tokens": 5000}, techniques_on=[]),
        dict(metrics={"ttft_p95_ms": 2000, "tpot_p95_ms": 30}, slos={"ttft_p95_ms": 500, "tpot_p95_ms": 50},
             workload={"prompt_tokens": 5000, "shared_prefix_frac": 0.9, "gpu_type": "H100"}, techniques_on=[]),
    ]
    seen = set()
    for c in cases:
        d = diagnose(**c)
        assert d.flags, d.to_dict()
        _parse(vllm_parser, d.flags)
        for r in d.recommendations:
            ns = _parse(vllm_parser, r["flags_add"])
            seen.add(r["id"])
            if r["id"] == "tensor_parallel":
                # 130 GiB / 2 = 65 GiB > 0.8 x 0.9 x 80 GiB = 57.6 GiB; / 4 = 32.5 GiB fits
                assert ns.tensor_parallel_size == 4
            if r["id"] == "speculative_decoding":
                assert ns.speculative_config == {"model": "my-draft", "num_speculative_tokens": 4}
    assert {"tensor_parallel", "speculative_decoding", "fp8", "int4_awq_marlin"} <= seen


def _speculative_configs(node, where="assets"):
    """Every ``--speculative-config`` JSON the course's assets give a learner: the list item after the flag,
    or ``--speculative-config '{...}'`` inside a sentence."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _speculative_configs(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            if v == "--speculative-config" and i + 1 < len(node):
                yield where, node[i + 1]
            yield from _speculative_configs(v, f"{where}[{i}]")
    elif isinstance(node, str):
        for m in re.finditer(r"--speculative-config[ =]'(\{.*?\})'", node):
            yield where, m.group(1)


def _spec_config_refusal(cfg: dict):
    """What vLLM 0.32's own SpeculativeConfig says about ``cfg``: None when it accepts it. A config with a draft
    model is checked for its keys (building it would load the model); an ngram one is built by vLLM."""
    import dataclasses

    from vllm.config.speculative import SpeculativeConfig

    unknown = set(cfg) - {f.name for f in dataclasses.fields(SpeculativeConfig)}
    if unknown:
        return f"not a SpeculativeConfig field: {sorted(unknown)}"
    if cfg.get("method") == "ngram":
        try:
            SpeculativeConfig(**cfg)
        except Exception as e:
            return f"{type(e).__name__}: {e}"
    return None


def test_every_speculative_config_the_course_gives_is_one_vllm_accepts():
    """Ask vLLM, don't retype it: `vllm serve` parses --speculative-config as JSON and hands it to
    SpeculativeConfig, which refuses unknown keys (a V0 key such as disable_by_batch_size stops the start)."""
    files = sorted(p for p in ASSETS.rglob("*.yaml") if "schemas" not in p.parts)
    found = [(f"{p.relative_to(ASSETS)}{where.removeprefix('assets')}", json.loads(text))
             for p in files for where, text in _speculative_configs(load_file(p))]
    assert len(found) >= 3, found          # the technique's enable flag and two pitfalls' avoid_flags at least
    bad = [(where, refusal) for where, cfg in found if (refusal := _spec_config_refusal(cfg))]
    assert not bad, bad


def test_the_speculative_config_check_refuses_what_vllm_refuses():
    assert "disable_by_batch_size" in _spec_config_refusal({"method": "ngram", "num_speculative_tokens": 4,
                                                             "disable_by_batch_size": 4})
    assert _spec_config_refusal({"method": "ngram", "num_speculative_tokens": 0, "prompt_lookup_max": 4}) is not None
    assert _spec_config_refusal({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                 "num_speculative_tokens_per_batch_size": [[1, 8, 4], [9, 1024, 0]]}) is None
    assert list(_speculative_configs({"t": "serve with --speculative-config '{\"method\": \"ngram\"}' on"})) == \
        [("assets.t", '{"method": "ngram"}')]


_KEY_IN_PROSE = re.compile(r"(?<![\w/.-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/]|\.py)")


def _speculative_prose_keys(texts: dict):
    """Config-key-like names (snake_case, not a path) in every learner-visible asset string
    ({text: [where]}, as ``inferopt.i18n.prose.english`` lists them) that speaks of speculative decoding: what a
    learner would copy into --speculative-config."""
    for text, where in texts.items():
        if re.search("speculative", text, re.I):
            yield from ((where[0], m.group(0)) for m in _KEY_IN_PROSE.finditer(text))


def test_speculative_config_keys_named_in_prose_are_keys_vllm_has():
    """The advice may name a key in a sentence, not only in a command (the V0 disable_by_batch_size once
    stood there as advice); every such name must be a field of the installed SpeculativeConfig."""
    import dataclasses

    from vllm.config.speculative import SpeculativeConfig

    from inferopt.i18n import prose

    fields = {f.name for f in dataclasses.fields(SpeculativeConfig)}
    named = list(_speculative_prose_keys(prose.english()))
    assert any(key == "num_speculative_tokens_per_batch_size" for _, key in named), named   # it reads the advice
    assert not [(w, k) for w, k in named if k not in fields], sorted(fields)
    old_advice = {"at high concurrency switch speculative decoding off with disable_by_batch_size: 8 "
                  "(vllm/config/speculative.py)": ["pitfalls.yaml pitfalls/1/advice"]}
    assert [k for _, k in _speculative_prose_keys(old_advice) if k not in fields] == ["disable_by_batch_size"]
