"""Coverage of what practitioners set (issue 19): every `vllm serve` flag of vLLM 0.32, read from
vLLM's own argument parser, is in tests/data/serve_flag_coverage.yaml: either a flag that changes
memory or speed (modelled by diagnose/memory/plan, or ignored on purpose, with why) or a flag of a
group that moves neither. A flag vLLM adds and the table does not list fails the test."""
from pathlib import Path

import pytest
import yaml

TABLE = yaml.safe_load((Path(__file__).parent / "data" / "serve_flag_coverage.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def parser_flags() -> set:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    p = make_arg_parser(FlexibleArgumentParser(prog="vllm-serve"))
    return {a.option_strings[0] for a in p._actions if a.option_strings and a.option_strings[0] != "-h"}


def listed() -> set:
    out = set(TABLE["flags"])
    for g in TABLE["no_memory_or_speed_effect"].values():
        out |= set(g["flags"])
    return out


def test_every_serve_flag_is_listed(parser_flags):
    missing = sorted(parser_flags - listed())
    assert not missing, f"vllm serve flags not in tests/data/serve_flag_coverage.yaml: {missing}"
    stale = sorted(listed() - parser_flags)
    assert not stale, f"listed flags vLLM 0.32 does not have: {stale}"


def test_each_memory_or_speed_flag_says_how_it_is_handled():
    for f, e in TABLE["flags"].items():
        assert e["status"] in ("modelled", "ignored"), f
        assert len(e["why"]) > 10, f
        if e["status"] == "modelled":
            assert set(e["by"].split(", ")) <= {"memory", "plan", "diagnose"}, f
    no_effect = [f for g in TABLE["no_memory_or_speed_effect"].values() for f in g["flags"]]
    assert not set(no_effect) & set(TABLE["flags"]) and len(no_effect) == len(set(no_effect))


def test_modelled_flags_are_the_ones_the_course_emits():
    """A flag marked modelled by plan/diagnose appears in what they emit (techniques, pitfalls, plan, sized actions)."""
    from inferopt.diagnosis import knowledge
    from inferopt.planning.planner import make_plan

    emitted = set(make_plan("llama3-70b-chat").command.flags)
    for t in knowledge.techniques():
        emitted |= {x for x in (*t.enable_flags, *t.disable_flags) if x.startswith("--")}
    for p in knowledge.load("pitfalls")["pitfalls"]:
        emitted |= {x for x in p["avoid_flags"] if x.startswith("--")}
    emitted |= {"--max-model-len", "--pipeline-parallel-size", "--kv-cache-memory-bytes", "--gpu-memory-utilization"}
    shorthand = {"--spec-method", "--spec-model", "--spec-tokens", "--block-size", "--dtype", "--enable-lora"}
    for f, e in TABLE["flags"].items():
        if e["status"] == "modelled" and f not in shorthand:
            assert f in emitted, f"{f} is marked modelled but the course never emits it"


def test_the_check_finds_an_unlisted_flag(parser_flags):
    assert parser_flags - (listed() - {"--max-num-seqs"}) == {"--max-num-seqs"}
