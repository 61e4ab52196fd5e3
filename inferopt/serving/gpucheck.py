"""`make gpu-check`: what only a GPU can say, measured in one script of at most 10 minutes on one GPU.

Part 1 (needs vLLM's GPU build, ``vllm==0.32.0``):
  1. the default model with an explicit KV size: the engine's own KV tokens and blocks
     (``VLLMServer.facts``) against the memory calculator's ``engine_prediction``;
  2. chapter 06b's three engines at once with the course's memory shares (``gpu_share.section_engines(3)``);
  3. chapter 05b executed on the GPU, its outputs stored as a GPU record.
Part 2 (PyTorch alone):
  1. ``torch.cuda.mem_get_info`` total against the GPU catalog's total (``assets/gpus.yaml``);
  2. the activation peak of a forward pass of a Llama-3.1-8B-shaped model (bf16, random weights,
     transformers) at the token budgets 2048 and 8192 vLLM uses (``engine/arg_utils.py:
     get_batch_defaults``). Only ``layers`` decoder layers are built (default 2): in an inference forward
     pass the activations of one layer are freed before the next, so the peak is that of one layer plus
     the embeddings; measuring at 1 and 2 layers shows the per-layer growth, which the record states;
  3. decode-step time against batch size for the same shape (one new token per sequence over a context
     of ``decode_context`` tokens), per layer, and scaled to the model's 32 layers: the roofline's
     memory-bound flat part and where it turns compute-bound;
  4. the roofs the performance model scales by its efficiencies (``assets/performance/profiles.yaml``):
     the memory bandwidth a device-to-device copy reaches, and the bf16 (and FP8, where ``torch._scaled_mm``
     runs) matrix-multiply rate at the shape of Llama-3.1-8B's MLP up-projection for token counts from one
     decode row to a full prefill budget, each as a share of the catalog's datasheet figure;
  5. the weight stream of one decode step: every linear layer of Llama-3.1-8B's 32 decoder layers (bf16,
     attention itself left out) run in order for a batch of new tokens, captured in a CUDA graph as vLLM
     runs decode, so launch overhead is gone: the bandwidth a decode step's weights are read at, per batch.

Every result goes to ``assets/results/gpu/<part>-<gpu>-<date>.json`` with the GPU, driver, torch and vLLM
versions and the date. ``--dry-run`` runs part 2 on the CPU with tiny shapes (no GPU) and part 1 as the
commands it would start; it writes to ``--out`` (default ``<cache>/gpu-check-dry``), never to assets/.

Command: ``python -m inferopt gpu-check [--dry-run] [--part 1|2] [--out DIR]``.
"""
from __future__ import annotations

import datetime as _dt
import json
import platform
import re
import shutil
import statistics
import subprocess
import time
from functools import partial
from pathlib import Path

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT, cache_dir

GiB = 1 << 30
RECORD_DIR = REPO_ROOT / "assets" / "results" / "gpu"
TOKEN_BUDGETS = (2048, 8192)        # vLLM 0.32 get_batch_defaults: A100 and smaller / H100, H200
DECODE_BATCHES = (1, 8, 32, 64, 128, 256)
TINY = {"hidden_size": 64, "intermediate_size": 96, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 500}


# ---------------------------------------------------------------- where and when
def machine_record() -> dict:
    """GPU name, driver, torch/CUDA/vLLM versions, date (UTC)."""
    from inferopt.serving.engine import installed_engine
    from inferopt.serving.gpu import driver_version, gpus

    driver = driver_version()
    try:
        import torch

        tv, cuda = torch.__version__, torch.version.cuda
    except ImportError:
        tv = cuda = None
    eng = installed_engine()
    return {"gpu": (gpus() or [{"name": None}])[0]["name"], "driver": driver, "torch": tv, "cuda": cuda,
            "vllm": eng["version"], "vllm_distribution": eng["distribution"], "python": platform.python_version(),
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}


def _slug(text) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", str(text or "cpu")).strip("-")


def store(part: str, record: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    m = record["machine"]
    path = out / f"{part}-{_slug(m['gpu'])}-{m['date'][:10]}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


# ---------------------------------------------------------------- part 2: PyTorch alone
def _llama_config(layers: int, dry_run: bool):
    from transformers import LlamaConfig

    from inferopt.planning.model_specs import load_spec

    s = load_spec("llama-3.1-8b")
    shape = TINY if dry_run else {"hidden_size": s.hidden_size, "intermediate_size": s.intermediate_size,
                                  "num_attention_heads": s.num_attention_heads,
                                  "num_key_value_heads": s.num_kv_heads, "vocab_size": s.vocab_size}
    return LlamaConfig(num_hidden_layers=layers, max_position_embeddings=16384, **shape), s.num_layers


def _build(layers: int, dry_run: bool, device: str, dtype):
    import torch
    from transformers import LlamaForCausalLM

    cfg, full_layers = _llama_config(layers, dry_run)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype).eval()
    return model, cfg, full_layers


def memory_total(dry_run: bool) -> dict:
    from inferopt.planning import gpu_catalog
    from inferopt.serving.gpu import gpus, memory_info
    from inferopt.serving.gpu_flags import catalog_id

    if dry_run:
        return {"skipped_in_dry_run": "no GPU: torch.cuda.mem_get_info needs one"}
    free, total = memory_info()
    name = gpus()[0]["name"] if gpus() else None
    out = {"gpu_name": name, "mem_get_info_total_gib": total / GiB, "mem_get_info_free_gib": free / GiB}
    gid = catalog_id(name) if name else None             # nvidia-smi's name ('NVIDIA H100 80GB HBM3') -> catalog id
    if gid:
        cat = gpu_catalog.entry(gid)
        out |= {"catalog_id": gid, "catalog_total_gib": cat["memory_mib_reported"] / 1024,
                "difference_gib": cat["memory_mib_reported"] / 1024 - total / GiB}
    else:
        out |= {"catalog_id": None, "catalog_note": f"{name!r} is not in assets/gpus.yaml"}
    return out


def activation_peaks(dry_run: bool, budgets=TOKEN_BUDGETS, layer_counts=(1, 2)) -> dict:
    """Peak memory above the weights during one forward pass of ``budget`` tokens (bf16; CPU: float32, no peak)."""
    import torch

    device = "cpu" if dry_run else "cuda"
    dtype = torch.float32 if dry_run else torch.bfloat16
    budgets = (16, 64) if dry_run else budgets
    rows = []
    for layers in layer_counts:
        model, cfg, full_layers = _build(layers, dry_run, device, dtype)
        for t in budgets:
            ids = torch.randint(0, cfg.vocab_size, (1, t), device=device)
            if not dry_run:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                base = torch.cuda.memory_allocated()
            with torch.inference_mode():
                model(input_ids=ids, logits_to_keep=1, use_cache=False)   # vLLM computes logits for the last token
            peak = None
            if not dry_run:
                torch.cuda.synchronize()
                peak = (torch.cuda.max_memory_allocated() - base) / GiB
            rows.append({"layers": layers, "tokens": t, "activation_peak_gib": peak})
        del model
        if not dry_run:
            torch.cuda.empty_cache()
    per_layer = {}
    for t in budgets:
        a = [r["activation_peak_gib"] for r in rows if r["tokens"] == t]
        if None not in a and len(a) >= 2:
            per_layer[str(t)] = a[-1] - a[-2]
    return {"model_shape": "llama-3.1-8b" if not dry_run else "tiny (dry run)", "dtype": str(dtype).split(".")[-1],
            "rows": rows, "growth_per_layer_gib": per_layer, "full_model_layers": full_layers,
            "note": "peak above the weights, logits for the last token only; the full model's peak is the "
                    "measured one plus growth_per_layer x (full_model_layers - layers measured)"}


def decode_steps(dry_run: bool, batches=DECODE_BATCHES, context: int = 512, layers: int = 2, repeats: int = 10) -> dict:
    """Median time of one decode step (one token per sequence, ``context`` tokens of KV) per batch size."""
    import torch
    from transformers import DynamicCache

    device = "cpu" if dry_run else "cuda"
    dtype = torch.float32 if dry_run else torch.bfloat16
    batches, context, repeats = ((1, 4), 8, 3) if dry_run else (batches, context, repeats)
    model, cfg, full_layers = _build(layers, dry_run, device, dtype)
    rows = []
    for b in batches:
        with torch.inference_mode():
            cache = DynamicCache()
            model(input_ids=torch.randint(0, cfg.vocab_size, (b, context), device=device), past_key_values=cache,
                  use_cache=True, logits_to_keep=1)
            step = torch.randint(0, cfg.vocab_size, (b, 1), device=device)
            times = []
            for _ in range(repeats + 2):
                cache.crop(context)
                if not dry_run:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                model(input_ids=step, past_key_values=cache, use_cache=True, logits_to_keep=1)
                if not dry_run:
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        ms = statistics.median(times[2:]) * 1000
        rows.append({"batch": b, "step_ms_measured_layers": ms,
                     "step_ms_per_layer": ms / layers, "step_ms_full_model_estimate": ms / layers * full_layers})
    del model
    return {"layers_measured": layers, "full_model_layers": full_layers, "context_tokens": context,
            "dtype": str(dtype).split(".")[-1], "rows": rows,
            "note": "per-layer time x the model's layers; embeddings and LM head are counted once in the measured "
                    "layers' time, so the full-model estimate is a slight over-estimate"}


def _median_ms(fn, repeats: int, sync) -> float:
    fn()
    sync()                                   # one warm-up (kernel choice, allocator)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


GEMM_TOKENS = (1, 16, 64, 256, 1024, 4096, 8192)


def roofs(dry_run: bool, tokens=GEMM_TOKENS, copy_gib: float = 4.0, repeats: int = 20) -> dict:
    """Measured memory bandwidth and matrix-multiply rate against the catalog's datasheet roofs."""
    import torch

    from inferopt.planning import gpu_catalog
    from inferopt.planning.model_specs import load_spec
    from inferopt.serving.gpu import gpus
    from inferopt.serving.gpu_flags import catalog_id

    device = "cpu" if dry_run else "cuda"
    sync = (lambda: None) if dry_run else torch.cuda.synchronize
    s = load_spec("llama-3.1-8b")
    k, n = (64, 96) if dry_run else (s.hidden_size, s.intermediate_size)
    tokens, copy_gib, repeats = ((1, 16), 1 / 1024, 3) if dry_run else (tokens, copy_gib, repeats)
    gid = None if dry_run else catalog_id((gpus() or [{"name": ""}])[0]["name"])
    cat = gpu_catalog.entry(gid) if gid else None
    elems = int(copy_gib * GiB) // 2
    src = torch.empty(elems, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    ms = _median_ms(lambda d=dst, s=src: d.copy_(s), repeats, sync)
    moved = 2 * src.numel() * src.element_size()             # read once, written once
    copy = {"bytes_moved": moved, "ms": ms, "gb_s": moved / ms / 1e6}
    src = dst = None                                          # free the copy's buffers
    if cat:
        copy["share_of_datasheet"] = copy["gb_s"] / cat["memory_bandwidth_gb_s"]
    w = torch.randn(k, n, dtype=torch.bfloat16 if not dry_run else torch.float32, device=device)
    rows = []
    for t in tokens:
        x = torch.randn(t, k, dtype=w.dtype, device=device)
        ms = _median_ms(lambda x=x: x @ w, repeats, sync)
        flops, moved = 2 * t * k * n, (t * k + k * n + t * n) * w.element_size()
        row = {"dtype": str(w.dtype).split(".")[-1], "tokens": t, "k": k, "n": n, "ms": ms,
               "tflops": flops / ms / 1e9, "gb_s": moved / ms / 1e6}
        if cat:
            row["share_of_datasheet_flops"] = row["tflops"] / cat["bf16_dense_tflops"]
            row["share_of_datasheet_bandwidth"] = row["gb_s"] / cat["memory_bandwidth_gb_s"]
        rows.append(row)
    fp8 = None
    if not dry_run and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        try:
            w8 = w.to(torch.float8_e4m3fn).t().contiguous().t()          # column-major, as _scaled_mm wants
            one = torch.ones((), device=device)
            fp8 = []
            for t in tokens:
                x8 = torch.randn(t, k, device=device).to(torch.float8_e4m3fn)
                ms = _median_ms(lambda x8=x8: torch._scaled_mm(x8, w8, scale_a=one, scale_b=one,
                                                         out_dtype=torch.bfloat16), repeats, sync)
                r = {"dtype": "float8_e4m3fn", "tokens": t, "k": k, "n": n, "ms": ms,
                     "tflops": 2 * t * k * n / ms / 1e9, "gb_s": (t * k + k * n) / ms / 1e6}
                if cat and cat.get("fp8_dense_tflops"):
                    r["share_of_datasheet_flops"] = r["tflops"] / cat["fp8_dense_tflops"]
                    r["share_of_datasheet_bandwidth"] = r["gb_s"] / cat["memory_bandwidth_gb_s"]
                fp8.append(r)
        except (RuntimeError, TypeError) as exc:
            fp8 = {"not_run": str(exc).splitlines()[0][:200]}
    return {"copy": copy, "gemm": rows, "gemm_fp8": fp8,
            "datasheet": {k2: cat[k2] for k2 in ("bf16_dense_tflops", "fp8_dense_tflops", "memory_bandwidth_gb_s")}
            if cat else None,
            "note": "median of repeats after one warm-up; GEMM bytes = activations + weights + output once each"}


def weight_stream(dry_run: bool, batches=DECODE_BATCHES, repeats: int = 20) -> dict:
    """One decode step's linear layers (all layers of the model, CUDA graph): bandwidth at which weights stream."""
    import torch

    from inferopt.planning.model_specs import load_spec

    s = load_spec("llama-3.1-8b")
    device = "cpu" if dry_run else "cuda"
    dtype = torch.float32 if dry_run else torch.bfloat16
    h, inter, kv = (64, 96, 32) if dry_run else (s.hidden_size, s.intermediate_size, s.num_kv_heads * s.head_dim)
    layers, batches, repeats = (2, (1, 4), 3) if dry_run else (s.num_layers, batches, repeats)
    shapes = [(h, h + 2 * kv), (h, h), (h, 2 * inter), (inter, h)]     # qkv, o, gate+up, down (vLLM's fused layout)
    weights = [[torch.randn(a, b, dtype=dtype, device=device) * 0.01 for a, b in shapes] for _ in range(layers)]
    wbytes = sum(w.numel() * w.element_size() for layer in weights for w in layer)

    def step(x):
        for qkv, o, gate_up, down in weights:
            x = x + (x @ qkv)[:, :h] @ o                      # attention's projections (attention itself left out)
            x = x + (x @ gate_up)[:, :inter] @ down           # the MLP's projections
        return x

    sync = (lambda: None) if dry_run else torch.cuda.synchronize
    rows = []
    for b in batches:
        x = torch.randn(b, h, dtype=dtype, device=device) * 0.01
        if dry_run:
            run = partial(step, x)
        else:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                step(x)                                      # warm-up on a side stream, as graph capture needs
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step(x)
            run = graph.replay
        ms = _median_ms(run, repeats, sync)
        rows.append({"batch": b, "ms": ms, "gb_s": wbytes / ms / 1e6})
    return {"model_shape": "llama-3.1-8b" if not dry_run else "tiny (dry run)", "layers": layers,
            "weight_bytes": wbytes, "cuda_graph": not dry_run, "rows": rows,
            "note": "linear layers only, in order, one token per sequence; bandwidth = weight bytes / step time"}


def part2(dry_run: bool) -> dict:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as exc:
        raise CourseError(f"part 2 needs PyTorch and transformers ({exc}): install requirements-gpu.txt") from None
    if not dry_run:
        import torch

        if not torch.cuda.is_available():
            raise CourseError("part 2 needs a CUDA GPU that PyTorch sees (torch.cuda.is_available() is False); "
                              "on a CPU use --dry-run")
    t0 = time.monotonic()
    out = {"memory_total": memory_total(dry_run), "activation_peaks": activation_peaks(dry_run),
           "decode_steps": decode_steps(dry_run), "roofs": roofs(dry_run),
           "weight_stream": weight_stream(dry_run)}
    out["seconds"] = time.monotonic() - t0
    return out


# ---------------------------------------------------------------- part 1: vLLM's GPU build
def part1_plan() -> dict:
    """What part 1 starts (the commands, with the shares computed for an empty H100 from the catalog)."""
    from inferopt.planning import gpu_catalog
    from inferopt.serving.engine import SERVER_MODULE, VLLMServer
    from inferopt.serving.gpu_share import engine_share

    total = gpu_catalog.entry("H100-SXM-80GB")["memory_mib_reported"] << 20
    one = engine_share(1, free_bytes=total - GiB, total_bytes=total, kv_cache_gib=1.0)
    three = engine_share(3, free_bytes=total - GiB, total_bytes=total, kv_cache_gib=0.5)

    def argv(srv):
        c = srv.command()
        return c[c.index(SERVER_MODULE) + 1:]
    return {"explicit_kv": argv(VLLMServer(kind="gpu", kv_cache_gib=1.0, gpu="H100-SXM-80GB",
                                           gpu_memory_utilization=one.gpu_memory_utilization)),
            "cluster_06b": [argv(VLLMServer(kind="gpu", kv_cache_gib=0.5, extra_args=["--enable-scale-out"],
                                            gpu="H100-SXM-80GB",
                                            gpu_memory_utilization=three.gpu_memory_utilization))] * 3,
            "share_06b": three.as_dict(), "notebook": "chapters/05b-load-test.ipynb",
            "note": "shares for an empty H100-SXM-80GB from the catalog; the real run computes them from free memory"}


def part1(out_dir: Path) -> dict:
    from inferopt.planning.memory import engine_prediction
    from inferopt.serving.engine import VLLMServer, installed_engine
    from inferopt.serving.gpu_share import section_engines

    if installed_engine()["distribution"] != "vllm":
        raise CourseError("part 1 needs vLLM's GPU build (vllm==0.32.0): make setup INFEROPT_ENGINE=gpu; "
                          "run --part 2 for the PyTorch-only checks")
    res = {}
    with VLLMServer(kind="gpu", kv_cache_gib=1.0, quiet=True) as srv:
        pred = engine_prediction(srv)
        f = srv.facts
        res["explicit_kv"] = {"facts": f.as_dict(), "share": srv.gpu_share.as_dict() if srv.gpu_share else None,
                              "predicted_kv_tokens": pred.kv_cache_tokens, "predicted_blocks": pred.num_blocks,
                              "engine_kv_tokens": f.kv_cache_tokens, "engine_blocks": f.num_blocks,
                              "agree": (f.kv_cache_tokens, f.num_blocks) == (pred.kv_cache_tokens, pred.num_blocks)}
    with section_engines(3):
        servers = [VLLMServer(kind="gpu", kv_cache_gib=0.5, quiet=True, extra_args=["--enable-scale-out"])
                   for _ in range(3)]
        try:
            for s in servers:
                s.start()
            res["cluster_06b"] = {"started": len(servers), "share": servers[0].gpu_share.as_dict(),
                                  "answers": [s.chat("What is the capital of France?", max_tokens=8) for s in servers]}
        finally:
            for s in servers:
                s.stop()
    import sys

    nb = REPO_ROOT / "chapters" / "05b-load-test.ipynb"
    done = subprocess.run([sys.executable, "-m", "inferopt.nbtools", "run", str(nb)], cwd=REPO_ROOT)
    if done.returncode != 0:
        raise CourseError(f"chapter 05b failed on the GPU (exit {done.returncode}); its output above says where")
    dest = out_dir / f"05b-load-test-{_slug(machine_record()['gpu'])}.ipynb"
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(nb, dest)
    subprocess.run(["git", "checkout", "--", str(nb)], cwd=REPO_ROOT, capture_output=True)   # keep the CPU outputs
    res["notebook_05b"] = str(dest.relative_to(REPO_ROOT) if dest.is_relative_to(REPO_ROOT) else dest)
    return res


def run(parts=("1", "2"), dry_run: bool = False, out: Path | None = None) -> list[Path]:
    out = Path(out) if out else (cache_dir() / "gpu-check-dry" if dry_run else RECORD_DIR)
    written = []
    for part in parts:
        t0 = time.monotonic()
        if part == "2":
            body = part2(dry_run)
        else:
            body = {"plan": part1_plan()} if dry_run else part1(out)
        record = {"machine": machine_record(), "dry_run": dry_run, "part": int(part), "result": body,
                  "seconds": time.monotonic() - t0}
        written.append(store(f"part{part}" + ("-dry-run" if dry_run else ""), record, out))
    return written


def add_subcommand(sub) -> None:
    p = sub.add_parser("gpu-check", help="the GPU check (part 1: vLLM's GPU build; part 2: PyTorch alone)")
    p.add_argument("--dry-run", action="store_true", help="on a CPU: tiny shapes, part 1 as the commands it would run")
    p.add_argument("--part", choices=["1", "2"], action="append", help="run only this part (default: both)")
    p.add_argument("--out", default=None, help="folder for the records (default assets/results/gpu/)")

    def _run(a) -> int:
        for path in run(tuple(a.part or ("1", "2")), a.dry_run, a.out):
            print(f"wrote {path}")
            print(json.dumps(json.loads(path.read_text())["result"], indent=1)[:4000])
        return 0

    p.set_defaults(func=_run)
