"""Which model an engine serves, and where its tokenizer and architecture come from.

One answer for the engine, the load generator and the memory calculator, so that none of them
assumes SmolLM2 when another model is served:

- :func:`served_model` resolves what the engine will load: an explicit ``model`` argument, else
  ``INFEROPT_MODEL`` (GPU engine), else the prepared default model (``make setup`` prepares it on CPU and GPU
  set-ups alike: it needs no hub). A folder must exist; anything else is a Hugging Face hub id.
- :func:`served_name` is the name the OpenAI API shows: ``SmolLM2-135M-Instruct`` for the default
  model, the folder's name for a folder, the id itself for a hub id (vLLM's own default).
- :func:`config_source` is what :func:`inferopt.planning.model_specs.load_spec` reads: the shipped
  spec when the id is one of ``assets/models/index.yaml``'s ``hf_id``, the folder's ``config.json``,
  or the hub cache's copy of it; else a one-line error.
- :func:`tokenizer_source` is the folder or id ``transformers.AutoTokenizer`` loads.
"""
from __future__ import annotations

import os
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.serving.gpu import engine_kind
from inferopt.serving.model_prep import MODEL_NAME, default_model_dir

DEFAULT_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
DEFAULT_SPEC = "smollm2-135m-instruct"


def served_model(model=None, kind: str | None = None) -> str:
    """The folder or hub id an engine of ``kind`` serves (see module docstring); the default model's folder
    otherwise. ``INFEROPT_MODEL`` counts for the GPU engine (the CPU engine serves the prepared default
    model unless a model is given)."""
    if model is None and (kind or engine_kind()) == "gpu":
        model = (os.environ.get("INFEROPT_MODEL") or "").strip() or None
    chosen = model
    if chosen is None or str(chosen) == DEFAULT_HUB_ID:
        return str(default_model_dir())
    p = Path(str(chosen)).expanduser()
    if p.exists():
        return str(p.resolve())
    if str(chosen).startswith((".", "/", "~")) or str(chosen).count("/") != 1:
        raise CourseError(f"model {str(chosen)!r} is neither an existing folder nor a Hugging Face id "
                          "(owner/name): check the path, or unset INFEROPT_MODEL for the default model")
    return str(chosen)


def is_default(model: str) -> bool:
    return Path(model).expanduser().resolve() == default_model_dir().resolve() if Path(model).expanduser().exists() \
        else str(model) in (DEFAULT_HUB_ID, str(default_model_dir()))


def served_name(model: str) -> str:
    """The model name clients send: the default model's name, a folder's name, or the hub id."""
    if is_default(model):
        return MODEL_NAME
    p = Path(model).expanduser()
    return p.name if p.exists() else str(model)


def tokenizer_source(model=None, kind: str | None = None) -> str:
    """The folder or hub id whose tokenizer the served model uses."""
    return served_model(model, kind)


def config_source(model) -> str:
    """What the memory calculator's ``load_spec`` reads for ``model`` (a folder, a hub id or a shipped name)."""
    from inferopt.planning.model_specs import model_index

    m = str(model)
    if m in model_index():
        return m
    if is_default(m):
        return DEFAULT_SPEC
    for name, entry in model_index().items():
        if entry.get("hf_id") == m:
            return name
    p = Path(m).expanduser()
    if p.is_dir():
        if (p / "config.json").is_file():
            return str(p / "config.json")
        raise CourseError(f"{m} holds no config.json: give the model's folder (config.json beside the weights)")
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(m, "config.json")
    except Exception:
        cached = None
    if isinstance(cached, str) and Path(cached).is_file():
        return cached
    raise CourseError(f"no config.json for {m!r} on this machine: start the engine once (it downloads the model) "
                      "or pass a folder; the calculator reads the architecture from config.json")
