"""The deployment as input to the decision widget: model, GPU, TP, weight format, KV dtype,
max model len, --gpu-memory-utilization (a small input group, kept apart from the widget's layout).

``DeploymentInputs.value()`` is the decision engine's ``deployment`` dict (None when no model is
chosen); ``show(diagnosis)`` prints the memory calculator's answer: does vLLM start, what dominates,
and what each candidate change frees.
"""
from __future__ import annotations

import ipywidgets as W

from inferopt.i18n import localize, tr
from inferopt.planning import gpu_catalog
from inferopt.planning.memory import (
    DEFAULT_GPU_MEMORY_UTILIZATION,
    KV_DTYPES,
    WEIGHT_FORMATS,
)
from inferopt.planning.model_specs import model_names
from inferopt.widgets._common import esc

NONE = "(no deployment)"


class DeploymentInputs(W.VBox):
    """Deployment fields for the decision engine; ``on_change`` is called when one changes."""

    def __init__(self, on_change=None):
        st = {"description_width": "150px"}
        lay = W.Layout(width="290px", margin="0 12px 4px 0")
        self.model_w = W.Dropdown(options=[NONE, *model_names()], value=NONE, description="model", style=st, layout=lay)
        self.gpu_w = W.Dropdown(options=gpu_catalog.ids(), value=gpu_catalog.ids()[0], description="GPU", style=st,
                                layout=lay)
        self.tp_w = W.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="TP", style=st, layout=lay)
        self.weights_w = W.Dropdown(options=list(WEIGHT_FORMATS), value="bf16", description="weights", style=st,
                                    layout=lay)
        self.kv_w = W.Dropdown(options=KV_DTYPES, value="auto", description="KV dtype", style=st, layout=lay)
        self.len_w = W.IntText(value=0, description="max len (0: model's)", style=st, layout=lay)
        self.util_w = W.FloatText(value=DEFAULT_GPU_MEMORY_UTILIZATION, description="GPU memory util.",
                                  style=st, layout=lay)
        self.out_w = W.HTML(value="")
        fields = [self.model_w, self.gpu_w, self.tp_w, self.weights_w, self.kv_w, self.len_w, self.util_w]
        if on_change is not None:
            for w in fields:
                w.observe(lambda _c: on_change(), names="value")
        # the fields wrap onto as many rows as the notebook's width needs (a laptop with the file browser open)
        super().__init__(children=[W.HTML("<b>Deployment (memory calculator)</b>"),
                                   W.HBox(fields, layout=W.Layout(flex_flow="row wrap")), self.out_w])

    def value(self) -> dict | None:
        if self.model_w.value == NONE:
            return None
        d = {"model": self.model_w.value, "gpu": self.gpu_w.value, "tp": self.tp_w.value,
             "weight_format": self.weights_w.value, "kv_dtype": self.kv_w.value,
             "gpu_memory_utilization": self.util_w.value}
        if self.len_w.value:
            d["max_model_len"] = self.len_w.value
        return d

    def show(self, diagnosis) -> None:
        """The memory part of a diagnosis, or nothing without a deployment."""
        m = getattr(diagnosis, "memory", None)
        if not m:
            self.out_w.value = ""
            return
        start = (tr("vLLM starts") if m["will_start"]
                 else tr("vLLM will NOT start: {reason}", reason=esc(localize(m["start_reason"]))))
        rows = "".join(f"<li>{esc(localize(c['text']))} <code>{esc(' '.join(c['flags']))}</code></li>"
                       for c in m["candidates"])
        dom = tr(m["dominates"]) if m["dominates"] else tr("unknown (give prompt/output tokens and concurrency)")
        head = tr("{start}. Weights {w} GiB per GPU; dominates: {dom}", start=start, w=m["weights_gib_per_gpu"], dom=dom)
        self.out_w.value = (f"<p>{head}"
                            + (tr("; KV cache {n} tokens", n=f"{m['kv_cache_tokens']:,}") if m.get("kv_cache_tokens") else "")
                            + f".</p><ol>{rows}</ol>")
