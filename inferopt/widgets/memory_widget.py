"""The memory calculator as a picture and as a widget.

- ``memory_figure(result)`` (pure): a plotly stacked bar per GPU (weights / KV cache / runtime
  buffer / free), in GiB, for a :class:`~inferopt.planning.memory.MemoryResult`.
- ``bars_html(result)`` / ``readout_html(result)`` (pure): the same bars as HTML and the
  concurrency readout, used inside the widget (plain HTML: nothing to install, updates at once).
- ``runtime_html(result, alt)`` (pure): the runtime memory's parts (vLLM 0.32's accounting,
  estimated: activation peak of the token budget, logits, non-torch, CUDA graphs) beside the
  original chapter's flat 5 GB assumption (``alt``, its StartVerdict).
- ``MemoryWidget``: model, weight format, KV dtype, TP, GPU, utilization, context length, runtime
  model (vLLM 0.32's, or the original chapter's flat 5 GB), token budget and the workload's lengths
  -> bars and readout, recomputed as each control moves (one evaluation takes a few milliseconds).
  Bad input (TP that does not divide the heads, weights that do not fit) shows the CourseError
  message inside the widget.
"""
from __future__ import annotations

import ipywidgets as W

from inferopt.errors import CourseError
from inferopt.i18n import localize, tr
from inferopt.planning.memory import (
    KV_DTYPES,
    WEIGHT_FORMATS,
    MemoryResult,
    StartVerdict,
    gpu_names,
    runtime_parts,
    start_verdict,
)
from inferopt.planning.model_specs import model_names
from inferopt.widgets._common import error_html, esc

COLORS = {"weights": "#2e86c1", "KV cache": "#28b463", "runtime buffer": "#f39c12", "free": "#d5d8dc"}


def segments_gib(r: MemoryResult) -> dict:
    """GiB per GPU of each part of the bar: weights, KV cache (allocated blocks), buffer, free."""
    if r.gpu_memory_gib is None:
        raise CourseError("the bars need a GPU (the CPU engine has no fixed device memory).")
    return {"weights": r.weights_gib_per_gpu, "KV cache": r.kv_gib_allocated_per_gpu,
            "runtime buffer": r.runtime_buffer_gib or 0.0, "free": max(0.0, r.free_gib_per_gpu or 0.0)}


def memory_figure(r: MemoryResult, title: str | None = None):
    """Plotly stacked bar per GPU (GiB). All GPUs of a TP group hold the same amounts."""
    import plotly.graph_objects as go

    seg = segments_gib(r)
    gpus = [f"GPU {i}" for i in range(r.tp)]
    fig = go.Figure()
    for name, val in seg.items():
        fig.add_trace(go.Bar(name=tr(name), x=gpus, y=[round(val, 3)] * r.tp, marker_color=COLORS[name],
                             text=[f"{val:.1f}"] * r.tp, textposition="inside"))
    fig.update_layout(barmode="stack", yaxis_title=tr("GiB per GPU"), height=360,
                      title=title or tr("{model} on {tp}x {gpu}: {weights} weights, {kv} KV, utilization {util}",
                                        model=r.model, tp=r.tp, gpu=r.gpu, weights=r.weight_format, kv=r.kv_dtype,
                                        util=r.gpu_memory_utilization),
                      legend={"orientation": "h", "y": -0.15})
    fig.add_hline(y=r.gpu_memory_gib * r.gpu_memory_utilization, line_dash="dot",
                  annotation_text=tr("utilization limit {util}", util=r.gpu_memory_utilization))
    return fig


def bars_html(r: MemoryResult, max_bars: int = 8) -> str:
    """One horizontal stacked bar per GPU (HTML), widths proportional to the GPU's memory."""
    seg = segments_gib(r)
    total = r.gpu_memory_gib
    rows = []
    for i in range(min(r.tp, max_bars)):
        parts = "".join(
            f'<div title="{esc(k)}: {v:.2f} GiB" style="width:{100 * v / total:.3f}%;background:{COLORS[k]};'
            f'height:18px;display:inline-block"></div>' for k, v in seg.items() if v > 0)
        rows.append(f'<div style="display:flex;align-items:center;margin:2px 0">'
                    f'<span style="width:55px;font-size:12px">GPU {i}</span>'
                    f'<div style="display:flex;width:520px;border:1px solid #888">{parts}</div></div>')
    legend = " ".join(f'<span style="background:{COLORS[k]};padding:0 6px">&nbsp;</span> {esc(tr(k))} {v:.2f} GiB'
                      for k, v in seg.items())
    return "".join(rows) + f'<div style="font-size:12px;margin-top:4px">{legend} {tr("(of {total} GiB)", total=f"{total:.2f}")}</div>'


def readout_html(r: MemoryResult) -> str:
    """KV per token, blocks, KV cache size and the two concurrency figures."""
    lines = [
        tr("KV per token: <b>{whole} B</b> whole model, {per_gpu} B per GPU ({heads} KV head(s) per GPU)",
           whole=f"{r.kv_bytes_per_token:,}", per_gpu=f"{r.kv_bytes_per_token_per_gpu:,}", heads=r.kv_heads_per_gpu),
        tr("KV budget per GPU: {gib} GiB = {blocks} blocks of {size} tokens", gib=f"{r.kv_budget_gib_per_gpu:.2f}",
           blocks=f"{r.num_blocks:,}", size=r.block_size),
        tr("KV cache size: <b>{tokens} tokens</b>; maximum concurrency at {length} tokens: <b>{conc}x</b>",
           tokens=f"{r.kv_cache_tokens:,}", length=f"{r.max_model_len:,}", conc=f"{r.max_concurrency:.2f}"),
    ]
    if r.workload_tokens:
        lines.append(tr("at the workload's {tokens} tokens per request: <b>{n}</b> requests at once",
                        tokens=f"{r.workload_tokens:,}", n=f"{r.max_concurrency_workload:.1f}"))
    lines += [f'<span style="color:#b9770e">{esc(tr("warning: {w}", w=localize(w)))}</span>' for w in r.warnings]
    return "<br>".join(lines)


def runtime_html(r: MemoryResult, alt: StartVerdict | None = None) -> str:
    """The runtime memory's parts, and the original chapter's flat 5 GB assumption beside them."""
    rt = r.runtime or {}
    if rt.get("mode") == "model":
        rows = "".join(f"<li>{esc(localize(name))}: <b>{gib:.2f} GiB</b> <i>({esc(localize(how))})</i></li>"
                       for name, gib, how in runtime_parts(rt))
        head = tr("Runtime memory per GPU: <b>{gib} GiB</b>, estimated with vLLM {version}'s accounting "
                  "({source}: {total} GiB):", gib=f"{r.runtime_buffer_gib:.2f}", version=esc(rt["vllm_version"]),
                  source=esc(localize(r.gpu_total_source or "")), total=f"{r.gpu_memory_gib:.2f}")
        head += f"<ul style='margin:2px 0'>{rows}</ul>"
    else:
        head = tr("Runtime buffer per GPU: <b>{gib} GiB</b>, flat ({mode}).", gib=f"{r.runtime_buffer_gib:.2f}",
                  mode=esc(rt.get("mode", "")))
    if alt is None:
        return head
    if rt.get("mode") == "model":
        label = tr("The original chapter's flat 5 GB buffer (its stated assumption), same plan")
    else:
        label = tr("vLLM 0.32's runtime model (estimated), same plan")
    if alt.will_start and alt.result is not None:
        a = alt.result
        other = tr("{label}: KV budget {gib} GiB, {tokens} tokens ({diff} against this one).", label=label,
                   gib=f"{a.kv_budget_gib_per_gpu:.2f}", tokens=f"{a.kv_cache_tokens:,}",
                   diff=f"{a.kv_cache_tokens - r.kv_cache_tokens:+,}")
    else:
        est = (tr(" (estimated maximum model length {n})", n=f"{alt.max_model_len_estimate:,}")
               if alt.max_model_len_estimate else "")
        other = tr("{label}: vLLM would not start{est}.", label=label, est=est)
    return head + f"<div>{esc(other)}</div>"


class MemoryWidget(W.VBox):
    """Controls -> per-GPU bars and concurrency readout. ``widget.result`` is the last MemoryResult
    (None after bad input, with ``widget.error_text`` set); ``widget.set(**values)`` moves controls."""

    RUNTIMES = [("vLLM 0.32 runtime model (estimated)", "model"), ("original chapter: flat 5 GB", "original-5gb")]

    def __init__(self, model="llama-3-70b", gpu="H100-SXM-80GB", tp=8, weight_format="fp8", kv_dtype="fp8",
                 gpu_memory_utilization=0.9, max_model_len=8192, runtime="model", max_num_batched_tokens=0,
                 input_tokens=800, output_tokens=150, runtime_buffer_gib=None):
        """``runtime``: 'model' (default) or 'original-5gb'; ``max_num_batched_tokens`` 0 = vLLM's default
        for the GPU; ``runtime_buffer_gib`` (kept for older callers): a flat buffer instead of either."""
        self.flat_buffer_gib = runtime_buffer_gib
        st = {"description_width": "130px"}
        lay = W.Layout(width="330px")
        self.controls = {
            "model": W.Dropdown(options=model_names(), value=model, description=tr("model"), style=st, layout=lay),
            "weight_format": W.Dropdown(options=list(WEIGHT_FORMATS), value=weight_format,
                                        description=tr("weight format"), style=st, layout=lay),
            "kv_dtype": W.Dropdown(options=KV_DTYPES, value=kv_dtype, description=tr("KV dtype"), style=st, layout=lay),
            "tp": W.Dropdown(options=[1, 2, 3, 4, 6, 8, 16], value=tp, description=tr("TP (GPUs)"), style=st, layout=lay),
            "gpu": W.Dropdown(options=gpu_names(), value=gpu, description="GPU", style=st, layout=lay),
            "gpu_memory_utilization": W.FloatSlider(value=gpu_memory_utilization, min=0.5, max=0.98, step=0.01,
                                                    description=tr("utilization"), style=st, layout=lay),
            "max_model_len": W.IntSlider(value=max_model_len, min=512, max=131072, step=512,
                                         description=tr("context length"), style=st, layout=lay),
            "runtime": W.Dropdown(options=self.RUNTIMES, value=runtime, description=tr("runtime memory"), style=st,
                                  layout=lay),
            "max_num_batched_tokens": W.IntText(value=max_num_batched_tokens, description=tr("token budget"),
                                                tooltip="--max-num-batched-tokens; 0 = vLLM 0.32's default",
                                                style=st, layout=lay),
            "input_tokens": W.IntText(value=input_tokens, description=tr("input tokens"), style=st, layout=lay),
            "output_tokens": W.IntText(value=output_tokens, description=tr("output tokens"), style=st, layout=lay),
        }
        self.error_w = W.HTML(value="")
        self.bars_w = W.HTML(value="")
        self.readout_w = W.HTML(value="")
        self.runtime_w = W.HTML(value="")
        # vLLM's own verdict on the command these controls describe (vllm_oracle.runtime), asked on demand: the first
        # question imports vLLM in a worker (~20 s), later ones are cached
        self.vllm_button = W.Button(description=tr("check with vLLM"), layout=W.Layout(width="160px"))
        self.vllm_w = W.HTML(value="")
        self.vllm_button.on_click(lambda _b: self.check_with_vllm())
        self.result: MemoryResult | None = None
        self.error_text: str | None = None
        for w in self.controls.values():
            w.observe(lambda _change: self.refresh(), names="value")
        names = list(self.controls)
        super().__init__(children=[
            W.HBox([W.VBox([self.controls[k] for k in names[:5]]), W.VBox([self.controls[k] for k in names[5:]])]),
            self.error_w, self.bars_w, self.readout_w, self.runtime_w, self.vllm_button, self.vllm_w])
        self.refresh()

    def command(self) -> list[str]:
        """The ``vllm serve`` command the controls describe (the precision as vLLM needs it for the checkpoint)."""
        from inferopt.vllm_oracle.runtime import deployment_command

        v = self.values()
        dep = {"model": v["model"], "gpu": v["gpu"], "tp": v["tp"], "weight_format": v["weight_format"],
               "kv_dtype": v["kv_dtype"], "max_model_len": v["max_model_len"],
               "gpu_memory_utilization": round(v["gpu_memory_utilization"], 4),
               "max_num_batched_tokens": v["max_num_batched_tokens"] or None}
        return deployment_command(dep)[0]

    def check_with_vllm(self):
        """vLLM's verdict on :meth:`command` (its refusal in one line, or what it resolves), shown below the bars."""
        from html import escape

        from inferopt.vllm_oracle.runtime import check_command

        try:
            verdict = check_command(self.command(), gpu=self.values()["gpu"])
        except CourseError as exc:           # a precision that is another checkpoint, not a flag
            self.vllm_w.value = error_html(localize(str(exc)))
            return None
        lines = [" ".join(verdict.argv), *verdict.lines()]
        self.vllm_w.value = "<pre>" + escape("\n".join(lines)) + "</pre>"
        return verdict

    def values(self) -> dict:
        return {k: w.value for k, w in self.controls.items()}

    def set(self, **values) -> MemoryWidget:
        """Move several controls, then recompute once."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise CourseError(f"unknown control(s) {sorted(unknown)}: use {sorted(self.controls)}.")
        for k, v in values.items():
            self.controls[k].unobserve_all("value")
            self.controls[k].value = v
            self.controls[k].observe(lambda _change: self.refresh(), names="value")
        self.refresh()
        return self

    def refresh(self) -> None:
        v = self.values()
        self.vllm_w.value = ""            # the verdict was for the controls before this change
        try:
            if v["max_num_batched_tokens"] < 0:
                raise CourseError("token budget must be a positive number of tokens, or 0 for vLLM's default.")
            kw = dict(tp=v["tp"], weight_format=v["weight_format"], kv_dtype=v["kv_dtype"],
                      gpu_memory_utilization=round(v["gpu_memory_utilization"], 4), max_model_len=v["max_model_len"],
                      input_tokens=v["input_tokens"], output_tokens=v["output_tokens"],
                      max_num_batched_tokens=v["max_num_batched_tokens"] or None)
            if self.flat_buffer_gib is not None:
                kw["runtime_buffer_gib"] = self.flat_buffer_gib
            verdict = start_verdict(v["model"], v["gpu"], runtime=v["runtime"], **kw)
            other = "original-5gb" if v["runtime"] == "model" else "model"
            self.alt_verdict = (start_verdict(v["model"], v["gpu"], runtime=other, **kw)
                                if self.flat_buffer_gib is None else None)
            self.verdict = verdict
            if not verdict.will_start:  # "will vLLM start?" is a verdict, shown as one
                est = (f" vLLM's estimated maximum model length: {verdict.max_model_len_estimate:,}."
                       if verdict.max_model_len_estimate else "")
                raise CourseError(f"vLLM will not start: {verdict.reason}{est}")
            r = verdict.result
        except CourseError as exc:
            self.result, self.error_text = None, str(exc)
            self.error_w.value = error_html(str(exc))
            self.bars_w.value = ""
            self.readout_w.value = ""
            self.runtime_w.value = ""
            return
        self.result, self.error_text = r, None
        self.error_w.value = ""
        self.bars_w.value = bars_html(r)
        self.readout_w.value = readout_html(r) + f"<p>{tr('<b>vLLM starts</b> with this plan.')}</p>"
        self.runtime_w.value = runtime_html(r, self.alt_verdict)

    def __repr__(self) -> str:
        if self.error_text:
            return f"MemoryWidget(error={self.error_text!r})"
        r = self.result
        return (f"MemoryWidget(model={r.model}, gpu={r.gpu}, tp={r.tp}, weights={r.weight_format}, "
                f"kv={r.kv_dtype}, weights_gib_per_gpu={r.weights_gib_per_gpu:.2f}, "
                f"kv_cache_tokens={r.kv_cache_tokens:,}, max_concurrency={r.max_concurrency:.2f}x "
                f"at {r.max_model_len:,} tokens)")
