"""vLLM's rules at run time: every command the course emits or sizes is asked of the installed vLLM.

``plan``, ``memory``, ``predict`` and ``diagnose`` (and the widgets) call :func:`check_command` on the launch
command they print or size. It never imports vLLM here: the question goes to the oracle's worker process
(:mod:`inferopt.vllm_oracle.client`, vLLM's own ``EngineArgs.create_engine_config`` on the target GPU), whose
answers are kept on disk (.cache/vllm_oracle/, keyed by the command, the GPU, the installed vLLM and the model's
config.json) and in this process (``functools.lru_cache``): the first question of a command costs the worker's
vLLM import (~20 s), every later one milliseconds.

The answer, a :class:`Verdict`, says either vLLM's refusal in one line ("vLLM 0.32 refuses: SchedulerConfig: ...",
shown first) or the values vLLM resolved for the flags the command left out (the token budget derived from the
GPU and the context, the sequence cap capped at the token budget, the dtype ``auto`` picks, ...).

Precision is a flag on some checkpoints and another checkpoint on others (:func:`precision_flags`): FP8 weights
from a BF16 checkpoint need ``--quantization fp8`` (vLLM quantizes at load time, vllm/model_executor/layers/
quantization/fp8.py Fp8Config); INT4 AWQ/GPTQ and INT8 W8A8 need a checkpoint made by a quantizer (vLLM reads
their scales from the checkpoint: ``--quantization awq_marlin`` on a BF16 checkpoint is refused, "VllmConfig: Cannot
find the config file for awq_marlin").

``INFEROPT_ORACLE=off`` skips the question (the answer says it was skipped; nothing is claimed).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from inferopt.errors import CourseError

ORACLE_ENV = "INFEROPT_ORACLE"

# vLLM's resolved value -> the flag that sets it, and where vLLM takes it from when the flag is left out
_ARG_UTILS = "vllm/engine/arg_utils.py"
FLAGS = {
    "max_model_len": ("--max-model-len", "the model's config.json (ModelConfig: the derived max_model_len)"),
    "dtype": ("--dtype", "the checkpoint's torch_dtype where the GPU runs it (vllm/config/model.py "
                         "_resolve_auto_dtype)"),
    "kv_cache_dtype": ("--kv-cache-dtype", "the model dtype (CacheConfig cache_dtype auto)"),
    "block_size": ("--block-size", "the platform's default (CacheConfig, check_and_update_config)"),
    "gpu_memory_utilization": ("--gpu-memory-utilization", "CacheConfig's default"),
    "max_num_batched_tokens": ("--max-num-batched-tokens", "the default for this GPU (get_batch_defaults), at most "
                               f"max_num_seqs x max_model_len ({_ARG_UTILS} "
                               "_set_default_max_num_seqs_and_batched_tokens_args)"),
    "max_num_seqs": ("--max-num-seqs", "the default for this GPU (get_batch_defaults), capped at the token budget: "
                     f"min(default, max_num_batched_tokens) ({_ARG_UTILS} "
                     "_set_default_max_num_seqs_and_batched_tokens_args)"),
    "enable_chunked_prefill": ("--enable-chunked-prefill", "on by default in vLLM 0.32 (SchedulerConfig)"),
    "enable_prefix_caching": ("--enable-prefix-caching", "on by default in vLLM 0.32 (CacheConfig)"),
    "quantization": ("--quantization", "the checkpoint's quantization_config (ModelConfig._verify_quantization)"),
}
_ALSO = {"--enable-chunked-prefill": ("--no-enable-chunked-prefill",),
         "--enable-prefix-caching": ("--no-enable-prefix-caching",),
         "--tensor-parallel-size": ("-tp",), "--pipeline-parallel-size": ("-pp",)}


def _given(argv: tuple, flag: str) -> bool:
    names = (flag, *_ALSO.get(flag, ()))
    return any(a in names or a.split("=", 1)[0] in names for a in argv)


@dataclass(frozen=True)
class Verdict:
    """vLLM's answer on one command: ``ok`` True (accepted), False (refused) or None (not asked / no answer)."""

    argv: tuple
    gpu: str | None
    ok: bool | None
    refusal: str | None = None
    resolved: dict = field(default_factory=dict)
    note: str | None = None            # why vLLM gave no answer (oracle off, no config.json shipped, ...)

    @property
    def left_out(self) -> dict:
        """flag -> (value vLLM resolved, where it comes from) for the flags the command does not set."""
        out = {}
        for key, (flag, how) in FLAGS.items():
            if key in self.resolved and not _given(self.argv, flag):
                val = self.resolved[key]
                if key == "quantization" and val is None:
                    continue           # unquantized: nothing resolved (an aliased checkpoint's config may be its base's)
                if key == "max_num_seqs" and val == self.resolved.get("max_num_batched_tokens"):
                    how += "; the cap binds: it equals the token budget"
                out[flag] = (val, how)
        return out

    def refusal_line(self) -> str:
        from inferopt.vllm_oracle.engine_config import VLLM_VERSION

        return f"vLLM {VLLM_VERSION} refuses: `{self.refusal}`"        # vLLM's own words, quoted as it wrote them

    def lines(self) -> list[str]:
        """What the CLI prints: the refusal in one line, or the values vLLM resolved where a flag was left out."""
        from inferopt.i18n import localize
        from inferopt.vllm_oracle.engine_config import VLLM_VERSION

        where = self.gpu or "the CPU platform"
        if self.ok is False:
            return [localize(self.refusal_line())]
        if self.ok is None:
            return [localize(f"vLLM {VLLM_VERSION}'s own check not run: {self.note}")]
        out = [localize(f"vLLM {VLLM_VERSION} accepts this command on {where} (EngineArgs.create_engine_config); "
                        "it resolves what the command leaves out:")]
        for flag, (val, how) in self.left_out.items():
            out.append(f"  {flag} {_show(val)}: {localize(how)}")
        return out

    def as_dict(self) -> dict:
        return {"ok": self.ok, "refusal": self.refusal_line() if self.ok is False else None,
                "gpu": self.gpu, "command": list(self.argv), "resolved": self.resolved,
                "left_out": {f: v for f, (v, _) in self.left_out.items()}, "note": self.note}

    def require(self) -> Verdict:
        """Raise vLLM's refusal as the one line (CourseError) the CLI prints; else return self."""
        if self.ok is False:
            raise CourseError(self.refusal_line())
        return self


def _show(val) -> str:
    if isinstance(val, bool):
        return "on" if val else "off"
    return "none" if val is None else str(val)


def _argv(cmd) -> tuple:
    import shlex

    return tuple(shlex.split(cmd) if isinstance(cmd, str) else (str(a) for a in cmd))


def check_command(argv, checkpoint: str | None = None, gpu: str | None = "H100", count: int | None = None) -> Verdict:
    """vLLM's verdict on a launch command (``vllm serve MODEL ...``, argv list or shell text) on ``gpu`` (a catalog
    GPU; None or 'cpu': vLLM's CPU platform). ``checkpoint``: the checkpoint the command is for, when it differs
    from the model the argv names. ``count``: GPUs on the target (default: 8, or TP x PP when more)."""
    from inferopt.vllm_oracle.engine_config import split_command

    args = _argv(argv)
    if checkpoint is not None:
        flags = split_command(args)[1:]
        args = ("vllm", "serve", str(checkpoint), *flags)
    gpu = None if gpu is None or str(gpu).lower() == "cpu" else str(gpu)
    return _check(args, gpu, count)


def check_commands(argvs: list, gpu: str | None = "H100", count: int | None = None) -> list[Verdict]:
    """:func:`check_command` for several commands on one GPU, asked of one worker in one batch."""
    gpu = None if gpu is None or str(gpu).lower() == "cpu" else str(gpu)
    keys = [(_argv(a), gpu, count) for a in argvs]
    todo = [k for k in dict.fromkeys(keys) if k not in _KNOWN]
    for k, v in zip(todo, _ask(todo), strict=True):
        _KNOWN[k] = v
    return [_KNOWN[k] for k in keys]


_KNOWN: dict = {}          # this process's answers (the disk cache of client.py keeps them across processes)


def _check(argv: tuple, gpu: str | None, count: int | None) -> Verdict:
    return check_commands([argv], gpu, count)[0]


def _ask(keys: list) -> list[Verdict]:
    if not keys:
        return []
    if os.environ.get(ORACLE_ENV, "").lower() == "off":
        return [Verdict(a, g, None, note=f"skipped ({ORACLE_ENV}=off)") for a, g, _ in keys]
    from inferopt.vllm_oracle import client
    from inferopt.vllm_oracle.engine_config import config_path, split_command

    out: dict = {}
    ask = []
    for k in keys:
        argv, gpu, count = k
        try:
            model, *flags = split_command(argv)
            config_path(model)
        except CourseError as exc:
            out[k] = Verdict(argv, gpu, None, note=str(exc))
            continue
        if count is None:
            count = max(8, _int_flag(flags, "--tensor-parallel-size", "-tp")
                        * _int_flag(flags, "--pipeline-parallel-size", "-pp"))
        ask.append((k, count))
    for count in sorted({c for _, c in ask}):
        batch = [k for k, c in ask if c == count]
        try:
            got = client.check_pairs([(list(k[0]), k[1]) for k in batch], count=count)
        except CourseError as exc:
            got = [{"ok": None, "error": str(exc)}] * len(batch)
        for k, v in zip(batch, got, strict=True):
            argv, gpu, _ = k
            if v.get("ok") is None:
                out[k] = Verdict(argv, gpu, None, note=v.get("needs_device") or v.get("error") or "no answer")
            else:
                out[k] = Verdict(argv, gpu, bool(v["ok"]), v.get("refusal"), dict(v.get("resolved") or {}))
    return [out[k] for k in keys]


def _int_flag(flags, *names) -> int:
    for i, a in enumerate(flags):
        if a in names and i + 1 < len(flags):
            try:
                return int(flags[i + 1])
            except ValueError:
                return 1
        if "=" in a and a.split("=", 1)[0] in names:
            try:
                return int(a.split("=", 1)[1])
            except ValueError:
                return 1
    return 1


# ----------------------------------------------------------------------- precision: a flag or a checkpoint
_SIXTEEN = ("bf16", "fp16", "fp32")
_CHECKPOINT_KIND = {
    "int4": "an INT4 weight-only checkpoint made by AWQ or GPTQ (its config.json's quantization_config: quant_method "
            "awq or gptq, bits 4; e.g. hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4 for Llama-3.1-8B-Instruct)",
    "int8": "an INT8 W8A8 checkpoint made by a quantizer (llm-compressor: quantization_config quant_method "
            "compressed-tensors, e.g. neuralmagic/...-quantized.w8a8)",
}

_CHECKPOINT_SHORT = {"int4": "an AWQ or GPTQ INT4 checkpoint of this model",
                     "int8": "an INT8 W8A8 checkpoint of this model"}


def checkpoint_format(checkpoint: str) -> str | None:
    """The weight format a checkpoint is stored in ('bf16', 'fp8', 'int4', ...), from its shipped config.json's
    quantization_config (as vLLM's ModelConfig reads it) or the model index's ``serving_checkpoint_format``;
    None when the course has no config.json for it."""
    from inferopt.planning import model_specs

    key = str(checkpoint).lower()
    for name, m in model_specs.model_index().items():
        if key == str(m.get("serving_checkpoint", "")).lower() and m.get("serving_checkpoint_format"):
            return m["serving_checkpoint_format"]
        if key in (name.lower(), str(m.get("hf_id", "")).lower()):
            return _format_of(name)
    try:
        return _format_of(checkpoint)
    except CourseError:
        return None


def _format_of(name: str) -> str:
    from inferopt.planning.model_specs import load_spec

    spec = load_spec(name)
    if spec.quant_weight_format:
        return spec.quant_weight_format
    return "fp16" if spec.torch_dtype == "float16" else "bf16"      # unquantized (precision_flags treats them alike)


def serve_argv(model: str, weights, flag_values) -> tuple[list[str], list[str]]:
    """(``vllm serve`` argv, notes) for a course model id (or a checkpoint) with the precision as vLLM needs it for
    the checkpoint (:func:`precision_flags`; a refusal becomes a note) and each ``(flag, value, default)`` whose
    value is given and differs from the default (floats written with ``:g``)."""
    from inferopt.planning.model_specs import model_index

    m = model_index().get(model)
    checkpoint = m["hf_id"] if m else str(model)
    argv, notes = ["vllm", "serve", checkpoint], []
    try:
        argv += precision_flags(checkpoint, weights)
    except CourseError as exc:
        notes.append(f"--weights {weights}: {exc}")
    for flag, value, default in flag_values:
        if value is not None and value != default:
            argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return argv, notes


def precision_flags(checkpoint: str, weight_format: str) -> list[str]:
    """The flags that serve ``checkpoint`` with ``weight_format`` weights, or a CourseError naming the checkpoint
    to get when vLLM has no flag for it (INT4 AWQ/GPTQ and INT8 W8A8 are checkpoints, not flags)."""
    have = checkpoint_format(checkpoint)
    want = str(weight_format)
    if want == "auto" or have is None or want == have or (want in _SIXTEEN and have in _SIXTEEN):
        return []
    if have in _SIXTEEN and want == "fp8":
        # vLLM quantizes the BF16 weights to FP8 as it loads them (Fp8Config, dynamic activation scales)
        return ["--quantization", "fp8"]
    if have in _SIXTEEN and want in _CHECKPOINT_KIND:
        raise CourseError(f"{want.upper()} weights are another checkpoint, not a flag: vLLM reads their scales from "
                          f"the checkpoint, and {checkpoint} is stored as {have.upper()} (--quantization awq_marlin on "
                          f"it is refused: 'Cannot find the config file for awq_marlin'); serve {_CHECKPOINT_KIND[want]}")
    raise CourseError(f"{checkpoint} is stored as {have.upper()}; vLLM serves a checkpoint in its stored format and "
                      f"cannot turn it into {want.upper()} weights: use its own weight format, or another checkpoint "
                      "of the same model stored in that precision")


def checkpoint_change(model: str | None, weight_format: str) -> dict | None:
    """A precision change that is another checkpoint, not a flag (INT4 AWQ/GPTQ, INT8 W8A8): {"weight_format",
    "kind" (what to get), "checkpoint" (the catalog's checkpoint of ``model`` stored that way, an HF id, or None
    when assets/models/index.yaml has none: its ``quantized_checkpoint_of``)}; None for a format vLLM reaches
    with a flag or none. vLLM reads such a checkpoint's quantization from its config.json: no --quantization."""
    want = str(weight_format)
    if want not in _CHECKPOINT_KIND:
        return None
    from inferopt.planning.model_specs import model_index

    idx = model_index()
    key = str(model or "").lower()
    base = next((n for n, m in idx.items() if key in (n.lower(), str(m.get("hf_id", "")).lower())), None)
    found = next((m["hf_id"] for n, m in idx.items()
                  if base and m.get("quantized_checkpoint_of") == base and _format_of(n) == want), None)
    return {"weight_format": want, "kind": _CHECKPOINT_KIND[want], "checkpoint": found}


def checkpoint_text(ck: dict) -> str:
    """The change in words: "serve hugging-quants/...-AWQ-INT4 (an INT4 ... checkpoint ...)"."""
    if ck.get("checkpoint"):
        return (f"serve {ck['checkpoint']}, {_CHECKPOINT_SHORT[ck['weight_format']]} (vLLM reads the method "
                "from its config.json; no --quantization flag)")
    return f"serve {_CHECKPOINT_SHORT[ck['weight_format']]}; no --quantization flag"


# ----------------------------------------------------------------------- a deployment's command and its changes
def deployment_command(dep: dict) -> tuple[list[str], str | None]:
    """(``vllm serve`` argv, gpu) for a deployment of the course's fields (diagnose's DEPLOYMENT_FIELDS: model, gpu,
    tp, weight_format, kv_dtype, dtype, max_model_len, gpu_memory_utilization, max_num_batched_tokens, max_num_seqs)."""
    from inferopt.planning.model_specs import model_index

    m = model_index().get(str(dep["model"]))
    checkpoint = m["hf_id"] if m else str(dep["model"])
    argv = ["vllm", "serve", checkpoint]
    argv += precision_flags(checkpoint, dep.get("weight_format") or "auto")
    for key, flag, default in (("tp", "--tensor-parallel-size", 1), ("dtype", "--dtype", None),
                               ("kv_dtype", "--kv-cache-dtype", "auto"), ("max_model_len", "--max-model-len", None),
                               ("gpu_memory_utilization", "--gpu-memory-utilization", None),
                               ("max_num_batched_tokens", "--max-num-batched-tokens", None),
                               ("max_num_seqs", "--max-num-seqs", None),
                               ("kv_cache_memory_bytes", "--kv-cache-memory-bytes", None)):
        v = dep.get(key)
        if v is not None and v != default:
            argv += [flag, f"{v:g}" if isinstance(v, float) else str(v)]
    gpu = dep.get("gpu")
    return argv, None if gpu is None or str(gpu).lower() == "cpu" else str(gpu)


def check_changes(dep: dict | None, changes: list) -> dict | None:
    """vLLM's verdict on the deployment's command and on it with each change's flags added (``diagnose``: its
    changes and its memory candidates, each a dict with ``id``, ``flags_add`` and, for a precision that is another
    checkpoint, ``checkpoint`` (:func:`checkpoint_change`: that change is checked on the command serving that
    checkpoint, not the deployment's), one batch: None without a deployment naming a model.
    {"command", "verdict", "changes": {id: verdict}} (Verdict.as_dict)."""
    if not dep or not dep.get("model"):
        return None
    try:
        base, gpu = deployment_command(dep)
    except CourseError as exc:
        return {"command": None, "verdict": {"ok": None, "note": str(exc)}, "changes": {}}
    todo = [(c["id"], _on_checkpoint(base, c.get("checkpoint"), c["flags_add"])) for c in changes
            if c.get("flags_add") or c.get("checkpoint")]
    asked = [(cid, argv) for cid, argv in todo if argv is not None]
    got = check_commands([base, *(a for _, a in asked)], gpu)
    out = {"command": base, "verdict": got[0].as_dict(), "changes": {}}
    answers = dict(zip([cid for cid, _ in asked], got[1:], strict=True))
    for c in changes:
        cid, ck = c["id"], c.get("checkpoint")
        if cid not in dict(todo):
            continue
        if cid not in answers:          # another checkpoint the catalog does not ship: nothing to ask vLLM
            out["changes"][cid] = {"ok": None, "refusal": None, "gpu": gpu, "command": None, "resolved": {},
                                   "left_out": {}, "checkpoint": ck,
                                   "note": f"{ck['kind']}: the course ships no such checkpoint of "
                                           f"{base[2]}; vLLM checks the one you get when you serve it"}
            continue
        argv = dict(asked)[cid]
        out["changes"][cid] = answers[cid].as_dict()
        if ck:
            out["changes"][cid]["checkpoint"] = ck
        need = checkpoint_needed(argv[2], argv)
        if need:
            out["changes"][cid]["needs_checkpoint"] = need
    return out


def _on_checkpoint(base: list, ck: dict | None, flags_add) -> list | None:
    """The deployment's command with a change applied: its flags added, and for a change that is another
    checkpoint, that checkpoint served in place of the deployment's (its --quantization dropped: vLLM reads the
    method from the checkpoint); None when the catalog ships no such checkpoint to check."""
    if not ck:
        return [*base, *map(str, flags_add or [])]
    if not ck.get("checkpoint"):
        return None
    keep, skip = [], False
    for a in base[3:]:
        if skip:
            skip = False
        elif a == "--quantization":
            skip = True
        elif not a.startswith("--quantization="):
            keep.append(a)
    flags = [*keep, *map(str, flags_add or [])]
    return ["vllm", "serve", ck["checkpoint"], *flags]


def checkpoint_needed(checkpoint: str, argv) -> str | None:
    """The kind of checkpoint a command's ``--quantization`` asks for when it is a checkpoint, not a flag, for
    ``checkpoint`` (an AWQ/GPTQ method on a BF16 checkpoint: vLLM reads the INT4 scales from the checkpoint)."""
    args = list(_argv(argv))
    method = next((args[i + 1] for i, a in enumerate(args[:-1]) if a == "--quantization"), None)
    if method is None or not any(method.startswith(m) for m in ("awq", "gptq", "compressed-tensors")):
        return None
    want = "int8" if method == "compressed-tensors" else "int4"
    if checkpoint_format(checkpoint) in (want, None):
        return None
    return _CHECKPOINT_KIND[want]


def check_diagnosis(dep: dict | None, d) -> dict | None:
    """:func:`check_changes` on everything a Diagnosis emits: its changes and its memory candidates."""
    emitted = list(d.changes) + [{"id": f"memory {c['id']}", "flags_add": c["flags"], "checkpoint": c.get("checkpoint")}
                                 for c in (d.memory or {}).get("candidates", [])
                                 if c.get("flags") or c.get("checkpoint")]
    return check_changes(dep, emitted)


def change_lines(checked: dict | None) -> list[str]:
    """diagnose's text: vLLM's refusal of the deployment first, then each change vLLM refuses, in one line each."""
    from inferopt.i18n import localize

    if not checked:
        return []
    v = checked["verdict"]
    if v.get("ok") is False:
        return [localize(f"the deployment's command {' '.join(checked['command'])}: {v['refusal']}")]
    out = [localize(f"{cid}: {cv['refusal']}; it is another checkpoint, not a flag: serve {cv['needs_checkpoint']}")
           if cv.get("needs_checkpoint") else f"{cid}: {localize(cv['refusal'])}"
           for cid, cv in checked["changes"].items() if cv.get("ok") is False]
    n = sum(cv.get("ok") is True for cv in checked["changes"].values())
    if v.get("ok") is None:
        return [localize(f"vLLM's own check not run on the deployment: {v.get('note')}")]
    return [localize(f"vLLM checked the deployment's command and {len(checked['changes'])} change(s): {n} accepted"),
            *out]


# ----------------------------------------------------------------------- a request against the context it is served in
def check_request(input_tokens, output_tokens, max_model_len: int, where: str, what: str = "--input-tokens") -> None:
    """One CourseError when a request does not fit the context vLLM serves: a prompt longer than max_model_len is
    refused (vllm/renderers/params.py ``_token_len_check``: "This model's maximum context length is ..."), a prompt
    plus output longer than it has its output cut (vllm/entrypoints/serve/utils/api_utils.py ``get_max_tokens``),
    so what is sized or predicted for it is not what runs."""
    if input_tokens is None:
        return
    if input_tokens > max_model_len:
        raise CourseError(f"{what} {input_tokens:,} is longer than the context of {max_model_len:,} tokens ({where}); "
                          "vLLM refuses such a prompt (vllm/renderers/params.py _token_len_check): shorten the prompt, "
                          "raise --max-model-len up to the model's maximum, or serve a longer-context model")
    total = input_tokens + (output_tokens or 0)
    if total > max_model_len:
        raise CourseError(f"input + output = {total:,} tokens is longer than the context of {max_model_len:,} tokens "
                          f"({where}); vLLM cuts each output to {max_model_len - input_tokens:,} tokens "
                          "(vllm/entrypoints/serve/utils/api_utils.py get_max_tokens): give the output length the "
                          "requests can have, or raise --max-model-len")


# ----------------------------------------------------------------------- KV sizing of sliding-window / hybrid models
def kv_sizing(config: str, kv_cache_bytes: int, *, tp: int = 1, pp: int = 1, block_size: int = 16,
              kv_dtype: str = "bfloat16", max_model_len: int | None = None,
              max_num_batched_tokens: int | None = None) -> dict:
    """vLLM's own KV-cache groups, blocks and concurrency for a model config (kv_specs.sizing: get_kv_cache_groups,
    get_kv_cache_config_from_groups, get_kv_cache_capacity in vllm/v1/core/kv_cache_utils.py), asked of the oracle's
    CPU worker (cached on disk with the config's text). A CourseError when it cannot answer."""
    import hashlib
    from pathlib import Path

    from inferopt.vllm_oracle import client

    if os.environ.get(ORACLE_ENV, "").lower() == "off":
        raise CourseError(f"sliding-window KV sizing asks the installed vLLM, which is switched off ({ORACLE_ENV}=off); "
                          "unset it")
    if not Path(str(config)).is_file():
        raise CourseError(f"{config}: vLLM sizes a sliding-window model from its config.json; give the model as a "
                          "shipped name or a path to its config.json")
    text = Path(config).read_text(encoding="utf-8")
    layout = {"kv_cache_bytes": int(kv_cache_bytes), "tp": tp, "pp": pp, "block_size": block_size,
              "kv_dtype": kv_dtype, "max_model_len": max_model_len, "max_num_batched_tokens": max_num_batched_tokens}
    job = {"op": "kv_sizing", "config": str(config), "layout": layout,
           "config_sha": hashlib.sha256(text.encode()).hexdigest()}
    got = client.run_jobs([job], "cpu")[0]
    if not got.get("ok"):
        raise CourseError(f"vLLM's KV-cache sizing failed for {config}: {got.get('error') or got}; read the KV size "
                          "from the engine's start-up log instead")
    return got["sizing"]
