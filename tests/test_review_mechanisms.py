"""The expert review of 2026-12-01 (issue 48): each kind of finding held at the mechanism that produced it.

Each check is a predicate over the course's data (assets, the installed vLLM, the stored outputs); each test
applies it to today's data (it holds) and to the old text or value the review found (it is rejected), so no
check here can pass on everything. docs/review-status-2026-12-01.md maps the findings to these tests.
"""
from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path

import pytest
import yaml

from inferopt import assets
from inferopt.diagnosis import knowledge

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------------- vLLM's own code (findings 3, 20, 29)
@pytest.fixture(scope="module")
def vllm_parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm-serve"))


def quantization_note_problems(note: str, method: str) -> list[str]:
    """What a technique's note says wrongly about ``--quantization method``: vLLM maps several method names to
    one config class (``method_to_config``); the note must name that class and claim no difference between
    the names that share it."""
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config

    cls = get_quantization_config(method)
    aliases = sorted(m for m in QUANTIZATION_METHODS if get_quantization_config(m) is cls)
    problems = []
    if len(aliases) > 1 and cls.__name__ not in note:
        problems.append(f"names no config class ({method} loads {cls.__name__}, as do {', '.join(aliases)})")
    for alias in aliases:
        if re.search(rf"\b(plain )?{re.escape(alias)}\b[^.;]*\bdoes not\b", note):
            problems.append(f"says {alias} behaves differently, but vLLM maps it to {cls.__name__} too")
    return problems


def test_a_quantization_note_follows_vllms_method_map():
    checked = 0
    for t in knowledge.techniques():
        if "--quantization" in t.enable_flags:
            method = t.enable_flags[t.enable_flags.index("--quantization") + 1]
            note = knowledge.load("techniques")["techniques"][[x.id for x in knowledge.techniques()].index(t.id)]
            assert not quantization_note_problems(note["vllm"]["note"], method), (t.id, method)
            checked += 1
    assert checked >= 1      # FP8; INT4 and W8A8 are checkpoints now (a quantized model, not a flag)
    old = "Needs an AWQ checkpoint; awq_marlin runs it with the Marlin kernels (plain awq does not)."
    found = quantization_note_problems(old, "awq_marlin")
    assert found[0].startswith("names no config class") and any(x.startswith("says awq behaves") for x in found)


def resolved_default(dest: str, parser_default):
    """The value vLLM uses when a flag is not given: the parser's default, or, where the parser leaves None for
    the config to fill, the config class's ``DEFAULT_<DEST>`` (e.g. CacheConfig.DEFAULT_BLOCK_SIZE)."""
    if parser_default is not None:
        return parser_default
    import vllm.config as cfg

    for name in dir(cfg):
        cls = getattr(cfg, name)
        if isinstance(cls, type) and hasattr(cls, f"DEFAULT_{dest.upper()}"):
            return getattr(cls, f"DEFAULT_{dest.upper()}")
    return None


def avoid_flag_problems(parser, flags: list[str]) -> list[str]:
    """An avoid-flag that sets vLLM's own default avoids nothing."""
    base = vars(parser.parse_args(["--model", "m"]))
    got = vars(parser.parse_args(["--model", "m", *flags]))
    changed = {k for k in got if got[k] != base.get(k)}
    return [f"--{k.replace('_', '-')} {got[k]} is vLLM's default" for k in sorted(changed)
            if got[k] == resolved_default(k, base.get(k))]


def test_no_avoid_flag_is_vllms_default(vllm_parser):
    for p in knowledge.load("pitfalls")["pitfalls"]:
        assert not avoid_flag_problems(vllm_parser, p["avoid_flags"]), p["id"]
    assert avoid_flag_problems(vllm_parser, ["--block-size", "16"]) == ["--block-size 16 is vLLM's default"]


def test_no_pitfall_says_vllm_forks_or_copies_kv_pages():
    """vLLM 0.32 reserves lookahead slots and overwrites rejected drafts (allocate_slots); its one copy-on-write
    is for a partial prefix-cache hit. Held to the installed source, then to the text."""
    from vllm.v1.core.kv_cache_manager import KVCacheManager

    assert "num_lookahead_tokens" in inspect.signature(KVCacheManager.allocate_slots).parameters
    texts = [p["why"] + " " + p["advice"] for p in knowledge.load("pitfalls")["pitfalls"]]
    texts += [o["label"] for sec in assets.load("learning_path.yaml")["self_check"]
              for o in sec.get("options", []) if isinstance(o, dict) and "label" in o]    # the self-check's options
    fork = re.compile(r"must fork|fork/copy|fork or copy pages")
    assert not any(fork.search(t) for t in texts)
    assert fork.search("so the KV page manager must fork/copy and roll back pages")


def test_the_int4_pitfall_fires_at_any_batch_and_says_why():
    """Finding 4: a non-Marlin INT4 kernel may lose at every batch (vllm#2268: slower than FP16 at 1, 2, 4 and 8),
    so the rule makes no batch 1-2 exception and its text does not claim one, nor that the original says the
    opposite (chapter 03: the original's conclusion holds, for a wider reason)."""
    from inferopt.diagnosis.decision import conflicts_for

    assert assets.load("decision_tree.yaml")["thresholds"]["int4_plain_batch_max"] == 0
    other = {"int4_kernel": "other"}
    for batch in (1, 2, 64):
        assert [c["id"] for c in conflicts_for(["int4_awq_marlin"], {**other, "concurrency": batch})] == \
            ["int4_no_marlin_large_batch"], batch
    pit = next(p for p in knowledge.load("pitfalls")["pitfalls"] if p["id"] == "int4_no_marlin_large_batch")
    old = re.compile(r"only at batch 1-2|says the opposite|beyond batch 1-2")
    assert not old.search(pit["why"] + pit["title"]) and "2268" in pit["why"]
    assert old.search("Earlier INT4 kernels reach their ~4x decode speed-up only at batch 1-2")


def disable_note_problems(technique: dict) -> list[str]:
    """A default-on technique whose 'off' flag vLLM warns about must quote the warning in its note."""
    from vllm.engine.arg_utils import EngineArgs

    src = inspect.getsource(EngineArgs._set_default_chunked_prefill_and_prefix_caching_args)
    out = []
    for m in re.finditer(r'"(This model does not officially support disabling ([a-z ]+)\. )"', src):
        feature = m.group(2).replace(" ", "-")
        if f"--no-enable-{feature}" in technique["vllm"]["disable"] and m.group(1).strip() not in technique["vllm"]["note"]:
            out.append(f"--no-enable-{feature}: vLLM warns '{m.group(1).strip()}'")
    return out


def test_a_disable_flag_vllm_warns_about_carries_the_warning():
    techs = {t["id"]: t for t in knowledge.load("techniques")["techniques"]}
    assert all(not disable_note_problems(t) for t in techs.values())
    old = copy.deepcopy(techs["chunked_prefill"])
    old["vllm"]["note"] = ("On by default in vLLM 0.32; --max-num-batched-tokens is the per-step token budget "
                           "(smaller = smoother decode, slower long prefill).")
    assert disable_note_problems(old)


# ----------------------------------------------------------------------------- pitfall evidence (findings 3, 31)
CITATION = re.compile(r"arXiv|https?://|vllm/|\.py\b|#\d+|get_min_capability")


def test_every_pitfall_cites_its_evidence_or_says_it_is_a_heuristic():
    for p in knowledge.load("pitfalls")["pitfalls"]:
        text = p["why"] + " " + p["advice"]
        assert CITATION.search(text) or "heuristic" in text, p["id"]
    old_31 = ("A quantized DRAFT model loses much of its acceptance rate: small models suffer more from quantization, "
              "and every rejected draft token is wasted work. Quantize the target model, keep the draft model in "
              "FP16/BF16.")
    assert not (CITATION.search(old_31) or "heuristic" in old_31)


def gpu_advice_problems(text: str, rule_id: str) -> list[str]:
    """A GPU named in advice about a technique where the hardware table says the technique does not load
    there must be named with that fact, not with a way to use it."""
    from inferopt.planning import gpu_catalog, hardware

    out = []
    for name in gpu_catalog.class_names():
        for sentence in re.split(r"(?<=[.;:])\s", text):
            if re.search(rf"\b{re.escape(name)}\b", sentence) and hardware.supports(name, rule_id) is False:
                if not re.search(r"not load|not available|not run", sentence):
                    out.append(f"{name}: {sentence}")
    return out


def test_int4_advice_names_a_gpu_only_with_what_vllm_does_there():
    p = {x["id"]: x for x in knowledge.load("pitfalls")["pitfalls"]}["int4_no_marlin_large_batch"]
    assert not gpu_advice_problems(p["advice"] + " " + p["why"], "int4_marlin")
    old = ("Use the Marlin kernels (--quantization awq_marlin); on older GPUs (V100) INT4 pays only at one or two "
           "requests in flight: keep FP16 weights for a busy server, or pick another quantization.")
    assert gpu_advice_problems(old, "int4_marlin")


# ----------------------------------------------------------------------------- the decision tree (7, 8, 18, 19, 33)
def _tree():
    return copy.deepcopy(knowledge.load("decision_tree"))


def _cond(tree, cid):
    return next(c for b in tree["branches"] for c in b["conditions"] if c["id"] == cid)


def kv_bound_problems(tree) -> list[str]:
    """B1 (decode bound by reading the KV cache): each technique must cut the bytes the course's roofline counts
    for decode attention, and no action may be an attention-backend switch (every backend reads each request's
    K and V once per step)."""
    from inferopt.planning import roofline

    cuts = {"kv_cache_quant": {"kv_bytes_per_value": 1}}     # FP8 KV: 1 byte per value instead of 2
    base = roofline.decode_step("llama-3-70b", 16, 8000).bytes_moved
    out = []
    b1 = _cond(tree, "B1")
    for t in b1["techniques"]:
        kw = cuts.get(t["id"])
        if kw is None or roofline.decode_step("llama-3-70b", 16, 8000, **kw).bytes_moved >= base:
            out.append(f"{t['id']} moves no fewer KV bytes")
    out += [f"action {a['id']} switches the attention backend" for a in b1["actions"]
            if "--attention-backend" in a.get("text", "") or "--attention-backend" in a.get("flags", [])]
    return out


def test_B1_recommends_only_what_cuts_the_kv_bytes():
    assert not kv_bound_problems(_tree())
    old = _tree()
    _cond(old, "B1")["techniques"] = [{"id": "flash_attention"}, {"id": "kv_cache_quant"}]
    _cond(old, "B1")["actions"] = [{"id": "flashinfer", "text": "FlashInfer is the other fused attention backend "
                                    "(--attention-backend FLASHINFER)"}]
    assert len(kv_bound_problems(old)) == 2


NVML_MEANING = "share of time any kernel runs"


def utilization_problems(tree) -> list[str]:
    """NVML's GPU utilization is the share of time any kernel runs. A sub-condition that gates on it must say so
    where it names its deciding measurement, and the under-fed test (B3) must not rest on it at all."""
    out = []
    for b in tree["branches"]:
        for c in b["conditions"]:
            if any(cl["fact"] == "gpu_util" for cl in c["when"]["clauses"]):
                if NVML_MEANING not in c["decided_by"]:
                    out.append(f"{c['id']} gates on gpu_util without its meaning")
                if "not fed" in c["title"] or "under-fed" in c["title"]:
                    out.append(f"{c['id']} decides under-fed on gpu_util")
    return out


def test_gpu_utilization_gates_carry_its_meaning_and_do_not_decide_under_fed():
    assert not utilization_problems(_tree())
    old = _tree()
    _cond(old, "A3")["decided_by"] = "GPU utilization (--gpu-util, e.g. from DCGM or nvidia-smi)"
    _cond(old, "B3")["when"]["clauses"] = [{"fact": "gpu_util", "op": "<", "value": "low_gpu_util"},
                                           {"fact": "concurrency", "op": ">", "value": "small_batch_max"}]
    assert len(utilization_problems(old)) == 2


def drafter_problems(tree) -> list[str]:
    """A sub-condition that recommends speculative decoding, whose default flags draft by n-gram, must say for
    which workloads n-gram pays, when no draft model is given."""
    ngram = '"method": "ngram"' in " ".join(knowledge.technique_index()["speculative_decoding"].enable_flags)
    out = []
    for b in tree["branches"]:
        for c in b["conditions"]:
            if ngram and any(t["id"] == "speculative_decoding" for t in c["techniques"]):
                ok = any(any(cl["fact"] == "has_draft_model" for cl in (a.get("when") or {}).get("clauses", []))
                         and "repeat" in a["text"] and "B4" in a["text"] for a in c["actions"])
                if not ok:
                    out.append(f"{c['id']} drafts by n-gram with no workload condition")
    return out


def test_the_ngram_drafter_comes_with_its_workload_condition():
    assert not drafter_problems(_tree())
    old = _tree()
    _cond(old, "B2")["actions"] = []
    assert drafter_problems(old) == ["B2 drafts by n-gram with no workload condition"]


def comment_figure_problems(text: str) -> list[str]:
    """A comment that types a figure a chapter 'measured' must carry the figure that chapter's stored run prints."""
    from inferopt.stored_outputs import output_texts

    out = []
    for m in re.finditer(r"chapter (\w+) measured[^.]*?\bx(\d+\.\d+)", text):
        nb = next(ROOT.glob(f"chapters/{m.group(1)}-*.ipynb"))
        stored = "\n".join(output_texts(nb))
        if not re.search(rf"(x|= ){re.escape(m.group(2))}\b", stored):
            out.append(f"chapter {m.group(1)} measured x{m.group(2)}: not in its stored outputs")
    return out


def test_a_measured_figure_in_an_asset_comment_is_the_stored_one():
    for name in ("decision_tree", "techniques", "pitfalls", "gpus"):
        assert not comment_figure_problems((ROOT / "assets" / f"{name}.yaml").read_text()), name
    old = ("# prompt's own TTFT does not fall: chapter 02b measured it x1.07 worse with a 256-token budget\n"
           "# than with 2048.")
    assert comment_figure_problems(old)


LEVEL = re.compile(r"TPOT stays level|stays\s+level\s+while|nearly\s+free\s+until\s+the\s+ridge")


def test_no_text_says_batching_leaves_tpot_level():
    """The per-kernel roofline (chapter 01's cell) puts the step of a batch of 256 far above the step of one,
    with the linear layers still under their ridge: batching is not free for each request's TPOT."""
    from inferopt.planning import roofline

    h100 = roofline.device_roof("H100")
    one, many = (roofline.step_roofline("llama-3-70b", h100, decode_batch=b, context_tokens=875, tp=8)
                 for b in (1, 256))
    assert many.kernel("linear").bound == "memory" and many.time_s > 1.5 * one.time_s
    for path in ("assets/decision_tree.yaml", "assets/techniques.yaml", "chapters/01-technique-map.md",
                 "chapters/03-combination-pitfalls.md", "chapters/07-knowledge-map-and-tradeoffs.md"):
        assert not LEVEL.search((ROOT / path).read_text()), path
    assert LEVEL.search("each step carries more requests, so a request's TPOT stays level while decode is memory bound")


# ----------------------------------------------------------------------------- runtime memory (finding 11)
def test_an_unverified_runtime_estimate_does_not_refute_the_original():
    from inferopt.planning.planner import make_plan

    plan = make_plan("llama3-70b-chat")
    row = next(r for r in plan.seed_check if r["quantity"] == "runtime buffer")
    rt = plan.memory.runtime
    assert rt["unverified"] and rt["total_low_gib"] < rt["total_gib"] < rt["total_high_gib"]
    assert row["verdict"].startswith("unverified") and row["verdict"] != "differs"
    assert row["low"] <= row["seed"] <= row["high"]          # the original's 5 GB lies inside the range
    # the old verdict compared the point estimate alone: it called the original wrong on an unverified figure
    old = "agrees" if abs(row["computed"] - row["seed"]) <= 0.1 * row["seed"] else "differs"
    assert old == "differs"


# ----------------------------------------------------------------------------- trade-offs (finding 30)
def tradeoff_problems(tradeoffs: dict) -> list[str]:
    """A trade-off row that is a technique scores -1 on each of the four quadrants (the original's compute,
    communication, memory, accuracy: the first four axes) its cost_axes name."""
    techs = knowledge.technique_index()
    axes = {a["id"] for a in tradeoffs["axes"][:4]}
    out = []
    for r in tradeoffs["rows"]:
        if r["id"] in techs:
            for ax in set(techs[r["id"]].cost_axes) & axes:
                if r["scores"].get(ax) != -1:
                    out.append(f"{r['id']} spends {ax} (techniques.yaml) but does not score it")
    return out


def test_the_tradeoff_table_scores_what_each_technique_spends():
    trade = knowledge.load("tradeoffs")
    assert not tradeoff_problems(trade)
    old = copy.deepcopy(trade)
    next(r for r in old["rows"] if r["id"] == "speculative_decoding")["scores"] = {"compute": -1, "latency": 1}
    assert tradeoff_problems(old) == ["speculative_decoding spends memory (techniques.yaml) but does not score it"]
    assert "memory" in knowledge.technique_index()["speculative_decoding"].cost_axes


def test_the_yaml_files_parse():     # the comments above are read as text; the data must still load
    for name in ("decision_tree", "techniques", "pitfalls", "tradeoffs"):
        assert yaml.safe_load((ROOT / "assets" / f"{name}.yaml").read_text())
