"""What code cells print, display and draw, in the edition's language: one translation for the stored zh outputs and
for a learner who re-runs a cell in the Chinese edition.

The course's code prints English (its checks and the English notebooks' nbval compare it). The Chinese form of a
printed line is found in the runtime catalog (``locale/zh_CN/LC_MESSAGES/inferopt.po``): a line equal to an entry,
or matching an entry's template (``{name}`` placeholders match the run's values, which are carried over unchanged
into the Chinese template), else the asset phrases and fragment templates inside it (``prose.prose``).

- ``translate_text(text)``: a printed or displayed text, line by line (a markdown table cell by cell, an HTML
  fragment text node by text node); what vLLM and the libraries it loads print themselves (``is_library_line``)
  is left as they print it.
- ``translate_figure(fig)``: a plotly figure's JSON with its titles, axis titles, annotations, legend and trace
  names, hover templates, tick and node labels translated.
- ``translate_outputs(cell)``: every output of a stored code cell (stream, markdown, HTML, plain text, figure).
  ``inferopt.i18n.build`` passes the English run's outputs through it, so the stored zh notebooks show what a
  learner re-running the cell in the Chinese edition sees: the same templates, filled with the same run's values.
- ``install_kernel_hooks()``: in an IPython kernel of the Chinese edition, ``print`` output (line by line),
  ``display(Markdown(...))``/``display(HTML(...))`` and plotly figures (``figure_precision``'s renderer) pass
  through the same functions; ``import inferopt`` installs them when ``edition()`` is ``zh``.
- ``english_left(nb)``: every English sentence (``leftover.english_runs``: 4+ English words in a row; in a
  figure's titles, axes and labels, 2+) left in a stored notebook's outputs and figures, with its place;
  ``count(paths)``: the English words a learner meets in them (``python -m inferopt.i18n outputs-count``).
"""
from __future__ import annotations

import copy
import html
import io
import json
import re
from pathlib import Path

from inferopt import i18n
from inferopt.i18n.leftover import MIN_WORDS, english_runs

PLOTLY_MIME = "application/vnd.plotly.v1+json"
# an English sentence: MIN_WORDS English words in a row; in a figure (titles, axes, legends: short labels), two
FIGURE_WORDS = 2
# Lines vLLM (or a library it loads) prints itself, kept as printed: its logger's lines ("INFO 12-06 06:00:01
# [loader.py:42] ...", also prefixed "(EngineCore_DP0 pid=123)"), a library's bracketed warning ("[transformers]
# ..."), and a Python traceback's lines.
_LIBRARY = re.compile(
    r"^\s*(?:\([\w.-]+ pid=\d+\)\s*)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+\d\d:\d\d:\d\d"
    r"|^\s*\[(?:transformers|torch|vllm|huggingface_hub|tokenizers)\]"
    r"|^Traceback \(most recent call last\)|^\s+File \"[^\"]+\", line \d+|^\w*(?:Error|Exception|Warning): ")
_PROMQL = re.compile(r"[\w:]+\{[^{}]*=[^{}]*\}|\b(?:histogram_quantile|increase|rate|changes|sum by|sum)\s*\(")
_HTML_CODE = re.compile(r"<code[^>]*>.*?</code>", re.S)
_ALERT_TEMPLATE = re.compile(r"\{\{\s*\$(?:labels|value)\b")     # a Prometheus rule's annotation: the learner's config
_JSON_MEMBER = re.compile(r'^\s*"[\w-]+": ')
_COMMAND = re.compile(r"^\s*(?:\$ |(?:CUDA_VISIBLE_DEVICES=\S+ )?(?:vllm|hf|huggingface-cli|kubectl|helm|promtool|make|"
                      r"pip|python|docker) )")
# a Python object's repr, what Jupyter stores for a widget whose state is not saved: TechniqueTable(symptom=...)
_REPR = re.compile(r"^\w+\(\w+=.*[)…]$", re.S)
_ALIGN = re.compile(r"(?<=\S) {2,}(?=\S)")
_TAG = re.compile(r"(<[^<>]*>)")
_FIGURE_TEXT_KEYS = {"text", "name", "title", "hovertemplate", "texttemplate", "ticktext", "labels"}
_SKIP_KEYS = {"template", "x", "y", "z", "customdata", "ids", "parents", "values", "meta", "font", "marker", "line"}


def is_library_line(line: str) -> bool:
    """A line vLLM or a library it loads printed itself (its logger, a bracketed warning, a traceback)."""
    return bool(_LIBRARY.search(line))


def _language() -> str | None:
    return i18n.LANGUAGE.get(i18n.edition())


def translate_line(line: str) -> str:
    """One printed line in the edition's language (its indentation kept); English edition: unchanged."""
    from inferopt.i18n.prose import prose

    if not _language() or not line.strip() or is_library_line(line):
        return line
    body = line.lstrip(" ")
    indent = line[: len(line) - len(body)]
    trail = body[len(body.rstrip()):]
    body = body.rstrip()
    whole = _whole(body)
    if whole is not None:                                                          # the line is an entry
        return indent + whole + trail
    if body.startswith("|") and body.endswith("|") and body.count("|") >= 3:      # a markdown table row
        cells = body[1:-1].split("|")
        return indent + "|" + "|".join(_cell(c) for c in cells) + "|" + trail
    if "<" in body and ">" in body:                                                # an HTML fragment
        parts = _TAG.split(body)                                                   # text, tag, text, ...
        return indent + "".join(p if i % 2 else _cell(html.unescape(p)) for i, p in enumerate(parts)) + trail
    if body.endswith("…"):                                                          # a text cut to fit a figure
        cut = _cut(body)
        if cut is not None:
            return indent + cut + trail
    if len(_ALIGN.split(body)) > 1:                                                # columns aligned by spaces
        parts = re.split(r"((?<=\S) {2,}(?=\S))", body)                           # text, spaces, text, ...
        out = []
        for i, part in enumerate(parts):
            if i % 2:
                out.append(part)
                continue
            done = _cell(part)                          # padded to the column's width, so the columns stay aligned
            out.append(done + " " * max(0, i18n.columns(part) - i18n.columns(done)) if i + 1 < len(parts) else done)
        return indent + "".join(out) + trail
    return indent + prose(body) + trail


def _cut(body: str) -> str | None:
    """A catalog text cut with an ellipsis to fit a figure (``The KV cache takes most of the memory (long…``): the
    one entry it begins, translated and cut to the same terminal width; None if no single entry begins so."""
    from inferopt.i18n.prose import catalog as asset_catalog

    lang = _language()
    head = body[:-1]
    found = {zh for table in (asset_catalog(lang), i18n.catalog(lang)) for en, zh in table.items()
             if en.startswith(head) and len(en) > len(head)}
    if len(found) != 1:
        return None
    zh, width, out = found.pop(), i18n.columns(body), ""
    if i18n.columns(zh) <= width:
        return zh
    for ch in zh:
        if i18n.columns(out + ch) + 1 > width:
            break
        out += ch
    return out + "…"


def _cell(text: str) -> str:
    from inferopt.i18n.prose import prose

    core = text.strip()
    if not core or not re.search(r"[A-Za-z]", core):
        return text
    left = text[: len(text) - len(text.lstrip())]
    right = text[len(text.rstrip()):]
    whole = _whole(core)
    if whole is None and core.endswith("…"):
        whole = _cut(core)
    return left + (prose(core) if whole is None else whole) + right


def _whole(body: str) -> str | None:
    """The runtime catalog's entry or whole-line template for ``body`` (its values carried over), else None.
    Tried before the asset phrases and fragment templates, so that a phrase inside the line never spoils the
    template's match."""
    from inferopt.i18n.prose import prose

    lang = _language()
    table = i18n.catalog(lang)
    # a column-aligned line as printed, then with its alignment runs of spaces as one (its entry is written so)
    for text in dict.fromkeys((body, _ALIGN.sub(" ", body))):
        if text in table:
            return table[text]
        for whole, _frag, msgstr in i18n._templates(lang):
            m = whole.fullmatch(text)
            if m and all(i18n._balanced(v) for v in m.groupdict().values()):
                return i18n.fill_template(msgstr, {k: prose(v) for k, v in m.groupdict().items()})
    return None


def translate_text(text: str) -> str:
    """A printed or displayed text, line by line, in the edition's language."""
    if not _language() or not text:
        return text
    return "\n".join(translate_line(line) for line in text.split("\n"))


def _figure_strings(node, key: str = ""):
    """(container, key) of every learner-facing string in a plotly figure's JSON."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in _SKIP_KEYS:
                continue
            if isinstance(v, str) and k in _FIGURE_TEXT_KEYS:
                yield node, k
            elif isinstance(v, list) and k in _FIGURE_TEXT_KEYS and all(isinstance(x, str) for x in v):
                for i in range(len(v)):
                    yield v, i
            else:
                yield from _figure_strings(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from _figure_strings(v, key)


def _hover(text: str) -> str:
    """A hover template: the words between its %{...} fields and tags translated, the fields kept."""
    parts = re.split(r"(%\{[^}]*\}|<[^>]*>)", text)
    return "".join(p if i % 2 else translate_line(p) if re.search(r"[A-Za-z]{2}", p) else p
                   for i, p in enumerate(parts))


def translate_figure(fig: dict) -> dict:
    """A copy of a plotly figure's JSON with its learner-facing text in the edition's language."""
    if not _language():
        return fig
    fig = copy.deepcopy(fig)
    for container, key in _figure_strings(fig):
        value = container[key]
        if not re.search(r"[A-Za-z]{2}", value):
            continue
        container[key] = _hover(value) if "%{" in value else translate_text(value)
    return fig


def _joined(v):
    return "".join(v) if isinstance(v, list) else v


def translate_outputs(cell: dict) -> dict:
    """A stored code cell with every output translated (in place; returns the cell)."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            out["text"] = translate_text(_joined(out.get("text", "")))
        data = out.get("data", {})
        for mime in ("text/markdown", "text/html", "text/plain"):
            if mime in data:
                data[mime] = translate_text(_joined(data[mime]))
        if PLOTLY_MIME in data:
            data[PLOTLY_MIME] = translate_figure(data[PLOTLY_MIME])
    return cell


# ------------------------------------------------------------------ what a learner still meets in English
def output_texts(nb: dict):
    """(place, text) of every learner-facing text in a notebook's stored outputs (library lines left out)."""
    for i, cell in enumerate(nb.get("cells", [])):
        for j, out in enumerate(cell.get("outputs", [])):
            texts = []
            if out.get("output_type") == "stream":
                texts.append(("stream", _joined(out.get("text", ""))))
            data = out.get("data", {})
            for mime in ("text/markdown", "text/html"):
                if mime in data:
                    texts.append((mime, _joined(data[mime])))
            plain = _joined(data.get("text/plain", ""))
            if plain and not ({"text/markdown", "text/html", PLOTLY_MIME} & set(data)) and not _REPR.match(plain):
                texts.append(("text/plain", plain))
            if PLOTLY_MIME in data:
                for container, key in _figure_strings(data[PLOTLY_MIME]):
                    texts.append(("figure", re.sub(r"%\{[^}]*\}", " ", container[key])))
            for kind, text in texts:
                for k, line in enumerate(text.split("\n")):
                    if line.strip() and not is_library_line(line):
                        yield f"cell {i} output {j} {kind} line {k}", line


def _code_removed(line: str) -> str:
    """A line with the code both editions print as it is taken out, like inline code in prose: HTML ``<code>``;
    a table cell (or line) holding PromQL (a metric selector such as ``vllm:num_requests_waiting{job="vllm"}``,
    a ``histogram_quantile(``/``sum by (``/``increase(`` call); a shell command line (``$ promtool ...``,
    ``vllm serve ...``; a ``# comment`` after it is read); a JSON member (``"verdict": "..."``); a line of an alert
    rule's annotation, templated on ``{{ $labels.… }}`` (the rule as written, which its test matches word for word)."""
    line = _HTML_CODE.sub(" ", line)
    if _JSON_MEMBER.match(line) or _ALERT_TEMPLATE.search(line):
        return ""
    command = _COMMAND.match(line)
    if command:
        return line[command.end():].partition(" # ")[2]
    parts = line.split("|")
    return "|".join(" " if _PROMQL.search(p) else p for p in parts)


def english_left(nb: dict) -> list[tuple[str, str]]:
    """(place, English run) of every English sentence left in a stored notebook's outputs and figures."""
    return [(place, run) for place, line in output_texts(nb)
            for run in english_runs(_code_removed(line), FIGURE_WORDS if " figure " in place else MIN_WORDS)]


def count(paths) -> dict[str, dict[str, int]]:
    """{notebook: {"runs": English sentences, "words": their words}} over the stored outputs of ``paths``."""
    out = {}
    for p in paths:
        left = english_left(json.loads(Path(p).read_text(encoding="utf-8")))
        out[str(p)] = {"runs": len(left), "words": sum(len(r.split()) for _p, r in left)}
    return out


_NUMBER = re.compile(r"(?<![A-Za-z_\d.])x?\d+(?:,\d{3})*(?:\.\d+)?")


def _numbered(text: str) -> str:
    """``text`` with its n-th number as ``{vn}``."""
    count = iter(range(1, 10_000))
    return _NUMBER.sub(lambda _m: f"{{v{next(count)}}}", text)


def missing_templates(english: dict, chinese: dict) -> dict[str, str]:
    """{English template: its first place} for every line of ``english`` (an English notebook) whose form in
    ``chinese`` (its built zh notebook) still holds an English sentence: the line with its alignment spaces as one
    and each number a ``{vN}`` placeholder, ready to be a catalog entry (write its Chinese with the same names)."""
    zh = dict(output_texts(chinese))
    out: dict[str, str] = {}
    for place, line in output_texts(english):
        if place in zh and english_runs(_code_removed(zh[place]), FIGURE_WORDS if " figure " in place else MIN_WORDS):
            body = line if " figure " in place else _ALIGN.sub(" ", line.strip())
            out.setdefault(_numbered(body), place)
    return out


# ------------------------------------------------------------------ a learner's kernel in the Chinese edition
class LocalizingStream(io.TextIOBase):
    """``sys.stdout`` of a Chinese kernel: complete lines pass through ``translate_text`` (a line without its newline
    waits for it, for ``flush`` or for the end of the cell; a carriage-return progress line goes out as written)."""

    def __init__(self, inner):
        self._inner = inner
        self._buf = ""

    def write(self, s: str) -> int:
        self._buf += s
        if "\n" in self._buf:
            head, _, self._buf = self._buf.rpartition("\n")
            self._inner.write(translate_text(head) + "\n")
        if "\r" in self._buf:
            self._inner.write(self._buf)
            self._buf = ""
        return len(s)

    def flush(self) -> None:
        if self._buf:
            self._inner.write(translate_text(self._buf))
            self._buf = ""
        self._inner.flush()

    def __getattr__(self, name):
        return getattr(self._inner, name)


def install_kernel_hooks(shell=None) -> bool:
    """In an IPython kernel of the Chinese edition: printed lines, displayed markdown/HTML and plotly figures in
    Chinese through the catalog's templates. Returns whether it installed them (idempotent)."""
    import sys

    if not _language():
        return False
    if shell is None:
        ip_mod = sys.modules.get("IPython")
        shell = ip_mod.get_ipython() if ip_mod else None
    if shell is None or getattr(shell, "_inferopt_zh_hooks", False):
        return False
    from IPython.display import HTML, Markdown

    stream = sys.stdout if isinstance(sys.stdout, LocalizingStream) else LocalizingStream(sys.stdout)
    sys.stdout = stream
    shell.events.register("post_execute", stream.flush)
    formatters = shell.display_formatter.formatters
    formatters["text/markdown"].for_type(Markdown, lambda obj: translate_text(obj.data))
    formatters["text/html"].for_type(HTML, lambda obj: translate_text(obj.data))
    shell._inferopt_zh_hooks = True
    return True
