"""The decision tree as a picture and as a widget.

- ``tree_figure(diagnosis=None)`` (pure): a plotly picture of the §2 tree (baseline -> branches in
  the §4 order -> sub-conditions -> techniques) with the diagnosis's path highlighted.
- ``diagnosis_html(diagnosis)`` (pure): recommendations with reasons, conflicts, flag diff.
- ``DecisionWidget``: the learner sets symptoms and traits (or loads a benchmark file) and sees
  the path, recommendations, conflicts and the flag diff; bad input shows the CourseError
  message inside the widget.
"""
from __future__ import annotations

import shlex

import ipywidgets as W

from inferopt.diagnosis import knowledge
from inferopt.diagnosis.decision import Diagnosis, diagnose
from inferopt.errors import CourseError
from inferopt.i18n import tr
from inferopt.i18n.prose import prose
from inferopt.planning import gpu_catalog
from inferopt.widgets._common import error_html, esc
from inferopt.widgets.deployment_inputs import DeploymentInputs

GREY, HOT, OK_COLOR = "#b0b7bf", "#d35400", "#1e8449"


def _layout_nodes():
    """Node ids, labels and (x, y) positions: x = depth, conditions stacked top to bottom."""
    tree = knowledge.load("decision_tree")
    order = [s["branch"] for s in knowledge.load("optimization_order")["steps"]]
    branches = sorted(tree["branches"], key=lambda b: order.index(b["id"]))
    nodes, edges, leaves = {}, [], {}
    y = 0
    for b in branches:
        ys = []
        for c in b["conditions"]:
            nodes[c["id"]] = (2, -y, f"{c['id']}: {prose(c['title'])}")
            edges.append((b["id"], c["id"]))
            leaves[c["id"]] = [t["id"] for t in c["techniques"]] + [a["id"] for a in c["actions"]]
            ys.append(-y)
            y += 1
        nodes[b["id"]] = (1, sum(ys) / len(ys), prose(b["title"]))
        edges.append(("baseline", b["id"]))
    nodes["baseline"] = (0, sum(n[1] for k, n in nodes.items() if k in {b["id"] for b in branches}) / len(branches),
                         prose(tree["baseline"]["title"]))
    return nodes, edges, leaves


def _width(ch: str) -> int:
    return 2 if ord(ch) >= 0x2E80 else 1   # a CJK character takes two Latin columns


def _short(text: str, n: int = 34) -> str:
    """``text`` cut to ``n`` Latin columns (a Chinese character counts two) with an ellipsis."""
    if sum(map(_width, text)) <= n:
        return text
    out, used = "", 1
    for ch in text:
        if used + _width(ch) > n:
            break
        out, used = out + ch, used + _width(ch)
    return out + "…"


def tree_figure(diagnosis: Diagnosis | None = None):
    """Plotly figure of the decision tree; the diagnosis's path and recommendations in orange."""
    import plotly.graph_objects as go

    nodes, edges, leaves = _layout_nodes()
    path = set(diagnosis.path) if diagnosis else set()
    recommended = set(diagnosis.techniques) if diagnosis else set()
    actions = {a["id"] for a in diagnosis.actions} if diagnosis else set()
    on = {a["id"] for a in diagnosis.already_on} if diagnosis else set()
    fig = go.Figure()
    for hot in (False, True):
        xs, ys = [], []
        for a, b in edges:
            if (a in path and b in path) == hot:
                xs += [nodes[a][0], nodes[b][0], None]
                ys += [nodes[a][1], nodes[b][1], None]
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", hoverinfo="skip", showlegend=False,
                                 line={"color": HOT if hot else GREY, "width": 4 if hot else 1.5}))
    ids = list(nodes)
    fig.add_trace(go.Scatter(
        x=[nodes[i][0] for i in ids], y=[nodes[i][1] for i in ids], mode="markers+text",
        text=[i if i != "baseline" else "baseline" for i in ids], textposition="top center",
        hovertext=[nodes[i][2] for i in ids], hoverinfo="text", showlegend=False,
        marker={"size": [22 if i in path else 14 for i in ids],
                "color": [HOT if i in path else GREY for i in ids], "line": {"width": 1, "color": "#555"}}))
    # leaf text: techniques / actions of each sub-condition
    lx, ly, lt = [], [], []
    for cid, items in leaves.items():
        parts = []
        for t in items:
            if t in recommended or t in actions:
                parts.append(f"<b>{t}</b>")
            elif t in on:
                parts.append(f"{t} (on)")
            else:
                parts.append(t)
        lx.append(2.08)
        ly.append(nodes[cid][1])
        # two short lines (condition, then its fixes) so the text fits a notebook ~800 px wide
        lt.append(_short(nodes[cid][2].split(": ", 1)[1], 44) + "<br>→ " + ", ".join(parts))
    fig.add_trace(go.Scatter(x=lx, y=ly, mode="text", text=lt, textposition="middle right", cliponaxis=False,
                             hoverinfo="skip", showlegend=False, textfont={"size": 11}))
    title = tr("Decision tree (§2), branches in the §4 order")
    if diagnosis and diagnosis.branch:
        title += tr(": worst metric {metric}, branch {branch}", metric=diagnosis.worst_metric, branch=diagnosis.branch)
    elif diagnosis:
        title += tr(": all SLOs met")
    # no fixed width: the figure takes the notebook's width (a laptop with the file browser open)
    fig.update_layout(title={"text": title, "font": {"size": 14}}, height=460,
                      margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      xaxis={"visible": False, "range": [-0.2, 4.6]}, yaxis={"visible": False},
                      plot_bgcolor="white")
    return fig


def diagnosis_html(d: Diagnosis) -> str:
    """HTML of a diagnosis: worst metric, branch, recommendations with reasons, conflicts, flag diff."""
    if d.branch is None:
        parts = [f'<p style="color:{OK_COLOR}"><b>{esc(prose(d.next_step))}</b></p>']
    else:
        parts = [f"<p><b>{tr('Worst metric:')}</b> {esc(d.worst_metric)} &nbsp; <b>{tr('Branch:')}</b> "
                 f"{esc(prose(d.branch_title))} &nbsp; <b>{tr('Path:')}</b> {esc(' → '.join(d.path))}</p>"]
        if len(d.order) > 1:
            parts.append(f"<p>{tr('Also failing, fix later in this order:')} {esc(', '.join(d.order[1:]))}</p>")
        if d.recommendations:
            rows = "".join(f"<li><b>{esc(prose(r['name']))}</b> — {esc(prose(r['reason']))}<br><code>"
                           f"{esc(shlex.join(r['flags_add'])) or tr('(no flag)')}</code></li>" for r in d.recommendations)
            parts.append(f"<p><b>{tr('Try (cheapest first):')}</b></p><ol>{rows}</ol>")
        for a in d.actions:
            flags = f" <code>{esc(shlex.join(a['flags_add']))}</code>" if a["flags_add"] else ""
            parts.append(f"<p>{tr('Tune:') if flags else tr('Investigate:')} {esc(prose(a['text']))}{flags}</p>")
        for a in d.already_on:
            parts.append(f"<p>{tr('Already on:')} {esc(a['id'])}</p>")
        for s in d.skipped:
            parts.append(f"<p>{tr('Not here:')} {esc(s['id'])} — {esc(prose(s['reason']))}</p>")
    for c in d.conflicts:
        parts.append(f'<p style="color:#922b21"><b>{tr("Conflict")} ({esc(c["severity"])}), §{esc(c["section"])} '
                     f'{esc(prose(c["title"]))}:</b> {esc(prose(c["advice"]))}</p>')
    if d.flags or d.flags_remove:
        diff = "".join(f"- {esc(f)}\n" for f in d.flags_remove) + (f"+ {esc(shlex.join(d.flags))}\n" if d.flags else "")
        parts.append(f"<p><b>{tr('Flag diff of the next change')}</b> {tr('(one at a time):')}</p><pre>{diff}</pre>")
    if d.branch is not None:
        parts.append(f"<p><b>{tr('Next:')}</b> {esc(prose(d.next_step))}</p>")
    return "\n".join(parts)


class DecisionWidget(W.VBox):
    """Symptoms and traits in, path + recommendations + conflicts + flag diff out.

    ``widget.diagnosis`` is the last Diagnosis (None after bad input, with ``widget.error_text``
    set); ``widget.set_inputs(metrics=..., slos=..., workload=..., techniques_on=...)`` sets fields
    from dicts; ``widget.load_file(path)`` reads a benchmark result into the baseline fields.
    """

    METRICS = [("ttft_p95_ms", "TTFT P95 ms", 1800.0), ("tpot_p95_ms", "TPOT P95 ms", 30.0),
               ("ttft_p99_ms", "TTFT P99 ms", 0.0), ("tpot_p99_ms", "TPOT P99 ms", 0.0),
               ("gpu_util", "GPU util 0-1", 0.8), ("queue_len", "queue length", 0.0),
               ("preemptions", "preemptions", 0.0)]
    SLOS = [("ttft_p95_ms", "SLO TTFT P95", 500.0), ("tpot_p95_ms", "SLO TPOT P95", 50.0),
            ("ttft_p99_ms", "SLO TTFT P99", 0.0), ("tpot_p99_ms", "SLO TPOT P99", 0.0)]
    WORKLOAD = [("prompt_tokens", "prompt tokens", 800.0), ("output_tokens", "output tokens", 150.0),
                ("shared_prefix_frac", "shared prefix 0-1", 0.7), ("concurrency", "concurrency", 32.0),
                ("model_weights_gib", "weights GiB", 0.0), ("num_gpus", "GPUs", 1.0),
                ("lora_adapters", "LoRA adapters", 0.0)]

    def __init__(self):
        st = {"description_width": "120px"}
        lay = W.Layout(width="230px")
        self.metric_w = {k: W.FloatText(value=v, description=tr(d), style=st, layout=lay) for k, d, v in self.METRICS}
        self.oom_w = W.Checkbox(value=False, description="OOM")
        self.slo_w = {k: W.FloatText(value=v, description=tr(d), style=st, layout=lay) for k, d, v in self.SLOS}
        self.work_w = {k: W.FloatText(value=v, description=tr(d), style=st, layout=lay) for k, d, v in self.WORKLOAD}
        self.gpu_w = W.Dropdown(options=["(unknown)"] + gpu_catalog.class_names(),
                                value="(unknown)", description="GPU", style=st, layout=lay)
        self.on_w = W.SelectMultiple(options=knowledge.technique_ids(), value=(), rows=7,
                                     layout=W.Layout(width="230px"))  # the column's title names it
        self.file_w = W.Text(value="", placeholder="results/....jsonl or profile_export_aiperf.json",
                             description=tr("baseline file"), style=st)
        self.load_w = W.Button(description=tr("Load metrics"))
        self.error_w = W.HTML(value="")
        self.result_w = W.HTML(value="")
        self.plot_w = None  # a plotly FigureWidget, made by the first refresh, then updated in place
        self.diagnosis = None
        self.error_text = None
        self._hold = False
        for w in [*self.metric_w.values(), *self.slo_w.values(), *self.work_w.values(),
                  self.oom_w, self.gpu_w, self.on_w]:
            w.observe(lambda _change: self.refresh(), names="value")
        self.load_w.on_click(lambda _b: self.load_file(self.file_w.value))
        self.deployment_w = DeploymentInputs(on_change=self.refresh)  # the deployment, a separate group
        # vLLM's own verdict on the deployment's command and on every change the diagnosis emits, asked on demand
        # (vllm_oracle.runtime.check_diagnosis: the first question imports vLLM in a worker, later ones are cached)
        self.vllm_button = W.Button(description=tr("check with vLLM"), layout=W.Layout(width="160px"))
        self.vllm_w = W.HTML(value="")
        self.vllm_button.on_click(lambda _b: self.check_with_vllm())
        # four columns that wrap onto a second row when the notebook is narrow (a laptop with the
        # file browser open): each keeps its natural width, none is squeezed or cut

        def col(ws, title):
            return W.VBox([W.HTML(f"<b>{title}</b>"), *ws],
                          layout=W.Layout(flex="0 0 auto", margin="0 12px 8px 0"))

        self.refresh()
        if self.plot_w is None:
            self._draw(None)
        super().__init__(children=[
            W.HBox([col([*self.metric_w.values(), self.oom_w], tr("Baseline")),
                    col(self.slo_w.values(), tr("SLOs (0 = none)")),
                    col([*self.work_w.values(), self.gpu_w], tr("Workload (0 = unknown)")),
                    col([self.on_w], tr("Techniques already on"))], layout=W.Layout(flex_flow="row wrap")),
            W.HBox([self.file_w, self.load_w]), self.error_w, self.plot_w, self.result_w])
        self.children = (*self.children, self.deployment_w, self.vllm_button, self.vllm_w)

    def check_with_vllm(self) -> dict | None:
        """vLLM's verdicts on the commands this diagnosis emits for the deployment (one line each), shown below."""
        from html import escape

        from inferopt.i18n import localize
        from inferopt.vllm_oracle.runtime import change_lines, check_diagnosis

        dep = self.deployment_w.value()
        if self.diagnosis is None or dep is None:
            self.vllm_w.value = error_html(localize("choose the deployment's model (and GPU) below, then check its "
                                                    "commands with vLLM"))
            return None
        checked = check_diagnosis(dep, self.diagnosis)
        self.vllm_w.value = "<pre>" + escape("\n".join(change_lines(checked))) + "</pre>"
        return checked

    # the inputs as the engine's dicts (0 in an optional field = not given)
    def inputs(self) -> dict:
        opt_metrics = {"ttft_p99_ms", "tpot_p99_ms", "gpu_util", "queue_len", "preemptions"}
        metrics = {k: w.value for k, w in self.metric_w.items() if not (k in opt_metrics and w.value == 0)}
        metrics["oom"] = self.oom_w.value
        if self.oom_w.value:
            metrics = {k: v for k, v in metrics.items() if not (k in ("ttft_p95_ms", "tpot_p95_ms") and v == 0)}
        slos = {k: w.value for k, w in self.slo_w.items() if not (k.endswith("p99_ms") and w.value == 0)}
        workload = {k: w.value for k, w in self.work_w.items() if w.value != 0 or k == "lora_adapters"}
        workload.setdefault("num_gpus", 1)
        if self.gpu_w.value != "(unknown)":
            workload["gpu_type"] = self.gpu_w.value
        return {"metrics": metrics, "slos": slos, "workload": workload, "techniques_on": list(self.on_w.value),
                "deployment": self.deployment_w.value() if hasattr(self, "deployment_w") else None}

    def set_inputs(self, metrics=None, slos=None, workload=None, techniques_on=None) -> DecisionWidget:
        """Set inputs from dicts (fields not named keep their value; the widget updates once)."""
        self._hold = True
        try:
            for k, v in (metrics or {}).items():
                if k == "oom":
                    self.oom_w.value = bool(v)
                elif k in self.metric_w:
                    self.metric_w[k].value = float(v)
            for k, v in (slos or {}).items():
                if k in self.slo_w:
                    self.slo_w[k].value = float(v)
            for k, v in (workload or {}).items():
                if k == "gpu_type":
                    self.gpu_w.value = v
                elif k in self.work_w:
                    self.work_w[k].value = float(v)
            if techniques_on is not None:
                self.on_w.value = tuple(techniques_on)
        finally:
            self._hold = False
        self.refresh()
        return self

    def load_file(self, path: str) -> None:
        """Read metrics from a benchmark file into the baseline fields (errors shown in the widget)."""
        from inferopt.bench.results import load_baseline

        try:
            metrics = load_baseline(path.strip())
        except CourseError as exc:
            self._show_error(str(exc))
            return
        self.set_inputs(metrics={k: v for k, v in metrics.items() if k in self.metric_w})

    def _show_error(self, msg: str) -> None:
        self.error_text = msg
        self.diagnosis = None
        self.error_w.value = error_html(msg)
        self.result_w.value = ""

    def refresh(self) -> None:
        """Run the engine on the current inputs and redraw (errors shown inside the widget)."""
        if self._hold:
            return
        if hasattr(self, "vllm_w"):
            self.vllm_w.value = ""         # the verdicts were for the inputs before this change
        try:
            d = diagnose(**self.inputs())
        except CourseError as exc:
            self._show_error(str(exc))
            return
        self.error_text, self.diagnosis = None, d
        self.error_w.value = ""
        self.result_w.value = diagnosis_html(d)
        self.deployment_w.show(d)
        self._draw(d)

    def _draw(self, d: Diagnosis | None) -> None:
        """Draw the tree for ``d``: the first time as a new FigureWidget with the diagnosis in it,
        then in place, sending only what changed (colours, sizes, the hot path, texts, title).
        (A FigureWidget updated before its first display inside this VBox reached the browser with
        its node and label traces empty: the learner saw the edges only.)"""
        import plotly.graph_objects as go

        new = tree_figure(d)
        if self.plot_w is None:
            self.plot_w = go.FigureWidget(new)
            return
        with self.plot_w.batch_update():
            for old_trace, new_trace in zip(self.plot_w.data, new.data, strict=True):
                before, after = old_trace.to_plotly_json(), new_trace.to_plotly_json()
                changed = {k: v for k, v in after.items() if k != "uid" and before.get(k) != v}
                if changed:
                    old_trace.update(changed)
            self.plot_w.layout.title = new.layout.title

    def __repr__(self) -> str:
        if self.error_text:
            return f"DecisionWidget(error={self.error_text!r})"
        d = self.diagnosis
        return (f"DecisionWidget(branch={d.branch}, worst={d.worst_metric}, techniques={d.techniques}, "
                f"conflicts={[c['id'] for c in d.conflicts]})")
