"""Every launch command the course builds for a GPU, for checking against vLLM 0.32's own parser.

- :func:`notebook_configurations` reads the chapters' and labs' code cells (their MyST twins) and
  returns each ``VLLMServer(...)`` call's keyword arguments that are literals in the notebook
  (``**ENGINE_KW`` and ``extra_args=NAME`` resolved when the notebook assigns a literal to the name);
- :func:`technique_flags` lists the flags the knowledge base and the decision tree add
  (``techniques.yaml`` enable/disable flags; the sized actions' flags);
- :func:`gpu_command` is ``VLLMServer(kind='gpu', **kw).command()`` with a memory share, without the
  ``python -m`` prefix: what vLLM's parser reads; with ``gpu=`` (a catalog GPU) it carries that GPU's dtype;
- :func:`dtype_problems` names what is wrong with a GPU command's dtypes for its GPU: no ``--dtype``, another than
  the one vLLM's ``--dtype auto`` resolves to there, ``bfloat16`` on a GPU without it, an FP8 KV cache the GPU
  cannot hold (the hardware table's rules);
- :func:`cpu_leaks` names what must never reach a GPU engine: ``--enforce-eager`` (the CPU engine's
  eager mode: CUDA graphs are the GPU's speed), ``--dtype float32`` (the CPU engine's dtype), and
  ``VLLM_CPU_*`` environment variables.

The parser is ``vllm/entrypoints/launchers/cli_args.py: make_arg_parser`` over
``vllm/utils/argparse_utils.py: FlexibleArgumentParser`` (what ``python -m
vllm.entrypoints.openai.api_server`` builds in ``launchers/api_server/entry.py``), followed by
``validate_parsed_serve_args``; the CPU wheel ships the same file as the GPU one.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from inferopt.paths import REPO_ROOT as ROOT
from inferopt.planning.platform_defaults import CPU

CELL_RE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
CPU_ONLY_FLAGS = ("--enforce-eager",)
CPU_ONLY_VALUES = {"--dtype": (CPU.dtype, "float")}
CPU_ENV_PREFIX = "VLLM_CPU_"
_CTOR_KEYS = {"max_model_len", "kv_cache_gib", "dtype", "extra_args", "served_name", "gpu_memory_utilization",
              "engines"}


def notebook_sources() -> list[Path]:
    return sorted([*(ROOT / "chapters").glob("*.md"), *(ROOT / "solutions").glob("*.md")])


def notebook_code(path: Path) -> str:
    """A MyST notebook's code cells as one Python text, each line at its own line number in the file
    (markdown, cell metadata and ``%``/``!`` lines blank)."""
    text = Path(path).read_text()
    lines = [""] * (text.count("\n") + 1)
    for m in CELL_RE.finditer(text):
        first = text.count("\n", 0, m.start(1))
        cell = m.group(1).splitlines()
        skip = cell.index("---", 1) + 1 if cell[:1] == ["---"] and "---" in cell[1:] else 0   # cell metadata
        for i, ln in enumerate(cell):
            lines[first + i] = "" if i < skip or ln.lstrip().startswith(("%", "!", ":")) else ln
    return "\n".join(lines)


def _literal(node, names: dict):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        raise ValueError("not a literal") from None


def notebook_configurations(paths=None) -> list[tuple[str, dict]]:
    """(``file:line``, literal VLLMServer keyword arguments) for every VLLMServer call in the notebooks."""
    out = []
    for path in paths or notebook_sources():
        code = notebook_code(path)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        names = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    names[node.targets[0].id] = ast.literal_eval(node.value)
                except (ValueError, TypeError, SyntaxError):
                    pass
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "VLLMServer"):
                continue
            kw = {}
            for k in node.keywords:
                try:
                    value = _literal(k.value, names)
                except ValueError:
                    continue
                if k.arg is None and isinstance(value, dict):
                    kw.update({a: b for a, b in value.items() if a in _CTOR_KEYS})
                elif k.arg in _CTOR_KEYS:
                    kw[k.arg] = value
            out.append((f"{path.relative_to(ROOT)}:{node.lineno}", kw))
    return out


def technique_flags() -> list[tuple[str, list[str]]]:
    """(technique id, flags) for every enable/disable flag set in techniques.yaml."""
    from inferopt.diagnosis import knowledge

    out = []
    for t in knowledge.techniques():
        for which, flags in (("enable", t.enable_flags), ("disable", t.disable_flags)):
            if flags:
                out.append((f"{t.id} ({which})", list(flags)))
    return out


def gpu_command(kw: dict, model: str | None = None, utilization: float = 0.3, gpu=None) -> list[str]:
    """The vLLM arguments a GPU engine with these keyword arguments runs with (a share already given).
    ``gpu``: the GPU the command is for (catalog name or compute capability): it sets ``--dtype`` and refuses
    a KV dtype or quantization that GPU cannot run (serving/gpu_flags.py); None: this machine's GPU, if any."""
    from inferopt.serving.engine import SERVER_MODULE, VLLMServer

    kw = {"gpu_memory_utilization": utilization, **kw}
    if gpu is not None:
        kw["gpu"] = gpu
    srv = VLLMServer(model, kind="gpu", **kw)
    cmd = srv.command()
    return cmd[cmd.index(SERVER_MODULE) + 1:]


def cpu_leaks(argv: list[str], env: dict | None = None) -> list[str]:
    """What in a GPU launch belongs to the CPU engine only (empty: nothing)."""
    found = [f for f in argv if f in CPU_ONLY_FLAGS]
    for flag, bad in CPU_ONLY_VALUES.items():
        for i, a in enumerate(argv):
            if a == flag and i + 1 < len(argv) and argv[i + 1] in bad:
                found.append(f"{flag} {argv[i + 1]}")
            if a.startswith(flag + "=") and a.split("=", 1)[1] in bad:
                found.append(a)
    found += [k for k in (env or {}) if k.startswith(CPU_ENV_PREFIX)]
    return found


def dtype_problems(dtype: str, kv_cache_dtype: str, gpu, auto: str | None = None) -> list[str]:
    """What is wrong with a GPU launch command's ``--dtype`` / ``--kv-cache-dtype`` (as vLLM's parser read them) on
    ``gpu`` (a catalog name); empty: nothing. ``auto``: the dtype vLLM's ``--dtype auto`` resolves to for the same
    command on that GPU (the oracle's answer), which the stated dtype must be."""
    from inferopt.planning import hardware

    out = []
    if dtype in (None, "auto"):
        out.append("no --dtype: the command must state its GPU's model dtype")
    elif auto is not None and dtype != auto:
        out.append(f"--dtype {dtype}: vLLM's --dtype auto runs {auto} here")
    if dtype in ("bfloat16", "bf16") and not hardware.has_bf16(hardware.capability(gpu)):
        out.append(f"--dtype {dtype} on {gpu}: this GPU has no bfloat16 (the table's bf16_dtype rule)")
    if str(kv_cache_dtype).startswith("fp8") and not hardware.supports(gpu, "fp8_kv"):
        out.append(f"--kv-cache-dtype {kv_cache_dtype} on {gpu}: {hardware.fp8_kv_refusal(gpu) or 'no FP8 KV cache'}")
    return out


def vllm_parser():
    """vLLM 0.32's own server parser and its post-parse check (imports vLLM: ~25 s the first time)."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    return make_arg_parser(FlexibleArgumentParser(prog="vllm-serve")), validate_parsed_serve_args
