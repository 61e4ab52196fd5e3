"""A launch command (or the course's deployment inputs) -> vLLM's own config objects, and vLLM's verdict.

Runs inside a worker process whose vLLM platform is set (:mod:`inferopt.vllm_oracle.target_platform`):
``vllm serve MODEL ARGS`` is parsed by vLLM 0.32's server parser (``make_arg_parser``; "auto" and -1
for ``--max-model-len``, JSON for ``--speculative-config`` as vLLM reads them), turned into
``EngineArgs.from_cli_args(...)`` and resolved with ``create_engine_config(UsageContext.OPENAI_API_SERVER)``,
the call ``vllm serve`` makes before it touches a GPU. The model is a temporary folder holding only
its ``config.json`` (a shipped one of assets/models, found by name or Hugging Face id, or a path), and
``skip_tokenizer_init=True``: no weights, no tokenizer, no network.

The answer (:func:`check`): ``{"ok": True, "resolved": {...}}`` with what vLLM derived (max_model_len,
quantization, dtype, KV dtype, block size, token budget, sequence cap, chunked prefill, prefix caching,
TP/PP), or ``{"ok": False, "refusal": "<config class>: <vLLM's message, one line>"}``; ``not_run``
names vLLM's checks that need the device (target_platform.NOT_RUN).
"""
from __future__ import annotations

import atexit
import json
import re
import shlex
import shutil
import tempfile
from functools import cache
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.planning import model_specs
from inferopt.vllm_oracle import target_platform

VLLM_VERSION = "0.32"


def _shipped_by_hf_id() -> dict:
    out = {}
    for name, m in model_specs.model_index().items():
        for key in (m.get("hf_id"), m.get("serving_checkpoint")):
            if key:
                out[key.lower()] = name
    return out


def config_path(model: str) -> Path:
    """The config.json for a shipped model name, a Hugging Face id of one, or a local path."""
    by_id = _shipped_by_hf_id()
    key = by_id.get(str(model).lower(), model)
    try:
        return model_specs.resolve_config_path(key)[1]
    except CourseError:
        raise CourseError(f"model {model!r}: no config.json shipped for it; add its config.json to assets/models "
                          "(and index.yaml), or give a path to one") from None


@cache
def model_folder(model: str, overrides: str = "") -> str:
    """A temporary folder holding only the model's config.json (``overrides``: JSON merged into it)."""
    cfg = json.loads(config_path(model).read_text(encoding="utf-8"))
    if overrides:
        cfg.update(json.loads(overrides))
    d = Path(tempfile.mkdtemp(prefix="inferopt-oracle-"))
    atexit.register(shutil.rmtree, d, True)     # cached for the process, removed when it ends
    (d / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return str(d)


def split_command(cmd) -> list[str]:
    """The argv after ``vllm serve`` / ``-m vllm.entrypoints.openai.api_server``, the model first."""
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(a) for a in cmd]
    for marker in ("serve", "vllm.entrypoints.openai.api_server"):
        if marker in argv:
            argv = argv[argv.index(marker) + 1:]
            break
    if "--model" in argv:
        i = argv.index("--model")
        argv = [argv[i + 1], *argv[:i], *argv[i + 2:]]
    if not argv or argv[0].startswith("-"):
        raise CourseError(f"{' '.join(argv)[:80]}: no model in the command; write `vllm serve MODEL ...`")
    return argv


@cache
def _parser():
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm-serve"))


def one_line(exc: BaseException) -> str:
    """vLLM's exception as one line: '<config class>: <message>' for its pydantic checks."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and hasattr(exc, "title"):
        first = exc.errors()[0]
        msg = re.sub(r"^(Value|Assertion) error, ", "", str(first.get("msg", "")))
        loc = ".".join(str(x) for x in first.get("loc", ()) if x != "__root__")
        text = f"{exc.title}: " + (f"{loc}: " if loc else "") + msg
    else:
        text = f"{type(exc).__name__}: {exc}"
    text = " ".join(text.split())
    return text[:400]


def _resolved(cfg) -> dict:
    mc, cc, sc, pc = cfg.model_config, cfg.cache_config, cfg.scheduler_config, cfg.parallel_config
    return {"max_model_len": mc.max_model_len, "quantization": mc.quantization, "dtype": str(mc.dtype).removeprefix("torch."),
            "kv_cache_dtype": cc.cache_dtype, "block_size": cc.block_size,
            "gpu_memory_utilization": cc.gpu_memory_utilization,
            "max_num_batched_tokens": sc.max_num_batched_tokens, "max_num_seqs": sc.max_num_seqs,
            "enable_chunked_prefill": sc.enable_chunked_prefill, "enable_prefix_caching": cc.enable_prefix_caching,
            "tensor_parallel_size": pc.tensor_parallel_size, "pipeline_parallel_size": pc.pipeline_parallel_size,
            "speculative": None if cfg.speculative_config is None else {
                "method": cfg.speculative_config.method,
                "num_speculative_tokens": cfg.speculative_config.num_speculative_tokens}}


def _local_draft(spec: dict) -> dict:
    """A speculative config whose draft model is shipped points at its config-only folder."""
    draft = spec.get("model")
    if isinstance(draft, str):
        try:
            config_path(draft)
        except CourseError:
            return spec
        return {**spec, "model": model_folder(draft)}
    return spec


def check(cmd, gpu: str | None = None, count: int = 8, config_overrides: dict | None = None) -> dict:
    """vLLM's verdict on a launch command for the catalog GPU ``gpu`` (None: this process's CPU platform)."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    argv = split_command(cmd)
    model = argv[0]
    folder = model_folder(model, json.dumps(config_overrides, sort_keys=True) if config_overrides else "")
    try:
        args = _parser().parse_args(["--model", folder, *argv[1:]])
    except SystemExit:
        return {"ok": False, "refusal": f"vLLM's argument parser refuses {' '.join(argv[1:])[:200]}",
                "stage": "parser"}
    args.skip_tokenizer_init = True
    if getattr(args, "speculative_config", None):
        args.speculative_config = _local_draft(args.speculative_config)
    if args.served_model_name is None:
        args.served_model_name = [model]
    ctx = target_platform.use(gpu, count) if gpu else _nothing()
    with ctx:
        try:
            eargs = EngineArgs.from_cli_args(args)
            cfg = eargs.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except target_platform.NeedsDevice as exc:
            return {"ok": None, "refusal": None, "needs_device": str(exc), "stage": "device"}
        except Exception as exc:  # vLLM's own refusal: a pydantic ValidationError, ValueError, ...
            return {"ok": False, "refusal": one_line(exc), "stage": "config"}
        sc = cfg.speculative_config
        if sc is not None and sc.num_speculative_tokens_per_batch_size is not None:
            # the scheduler's own check at start-up (v1/core/sched/scheduler.py builds this lookup)
            from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

            try:
                build_dynamic_sd_schedule_lookup(sc.num_speculative_tokens_per_batch_size,
                                                 cfg.scheduler_config.max_num_seqs, sc.num_speculative_tokens)
            except ValueError as exc:
                return {"ok": False, "refusal": f"Scheduler: {exc}", "stage": "scheduler"}
    return {"ok": True, "refusal": None, "resolved": _resolved(cfg)}


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def refusal_text(verdict: dict) -> str:
    """The course's one line for a refused command: "vLLM 0.32 refuses: ..."."""
    return f"vLLM {VLLM_VERSION} refuses: {verdict['refusal']}"
