"""Helpers of the browser tests (tests/test_browser.py): the course's JupyterLab as a managed
process, headless Debian Chromium driven by Playwright, and the checks of what a learner sees.

- ``CourseLab``: the command ``make lab`` runs (printed by ``make lab-command``: same app, same
  settings from ``jupyter/``) on a free loopback port with a random token, in its own process
  group, with a fresh user-settings and workspaces folder (a first-time learner).
- ``launch_browser``: /usr/bin/chromium (apt package ``chromium``; nothing is downloaded), headless,
  1280 x 800, fresh profile, no network besides the lab.
- ``NotebookPage``: open a notebook, clear its outputs, run all cells (or the non-live ones) with
  JupyterLab's own menus, wait, and check the page: ``problems()`` lists what a learner would find
  wrong (error outputs, widgets that failed or still load, plotly traces not drawn, decision-tree
  nodes or labels missing, inputs or labels clipped at 1280 px).
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import requests
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from inferopt.paths import REPO_ROOT
from inferopt.serving.managed_process import ManagedProcess, free_port, log_tail

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1280, "height": 800}
SCREENSHOTS = REPO_ROOT / "results" / "screenshots"

# A code cell is live when it starts or talks to an engine or Prometheus; cells that read a name a
# live cell bound are live too (they need its results). The browser runs the other cells.
LIVE_CALL = re.compile(r"\b(VLLMServer|PrometheusServer)\s*\(")


# How long the lab's server waits for a new kernel's first answer (jupyter_server's default: 60 s). When the
# browser test ran in the niced lane beside a timed lane that filled both cores, a kernel's imports got ~5 % of
# a core, and a CI run (2026-12-03) had the server give up on a kernel after 60 s ("Kernel never reached an
# 'alive' state"), leaving the page with no kernel. The test now runs in the timed lane (tests/conftest.py,
# FOREGROUND); this wait stays for a loaded machine. It changes no check, only how long the server waits.
KERNEL_INFO_TIMEOUT_S = 600


class ServerAPI:
    """What a Jupyter server's REST API tells about its kernels, for any lab that has ``api(method, path)``
    (``CourseLab`` here, a learner's JupyterLab behind the hub in tests/test_room_hub.py)."""

    def kernel_state(self, path: str) -> str | None:
        """The server's word on the kernel of the notebook at ``path``: 'idle', 'busy', 'starting', ...,
        or None when no session of that notebook has a kernel."""
        try:
            for sess in self.api("GET", "/api/sessions").json():
                if sess.get("path") == path and sess.get("kernel"):
                    return sess["kernel"].get("execution_state")
        except (requests.RequestException, ValueError):
            return "unknown"
        return None

    def shutdown_kernels(self) -> None:
        """Shut every kernel down (they live in their own process groups, not in the lab's)."""
        try:
            for k in self.api("GET", "/api/kernels").json():
                self.api("DELETE", f"/api/kernels/{k['id']}")
        except requests.RequestException:
            pass


class CourseLab(ServerAPI, ManagedProcess):
    """JupyterLab exactly as ``make lab`` starts it, on a free port with a token."""

    ready_timeout_s = 120.0
    # what the lab serves: a copy, so that nothing the browser does (clear, run, autosave) can
    # write to the repository's notebooks; the kernels import this checkout's inferopt
    served = ("chapters", "solutions", "zh", "jupytext.toml")

    def __init__(self, workdir: Path, edition: str = "en", env: dict | None = None):
        self.workdir = Path(workdir)
        self.edition = edition      # "zh": ``make lab EDITION=zh`` (JupyterLab's own menus in Chinese)
        self.extra_env = dict(env or {})    # e.g. a workshop room's INFEROPT_ENGINE_URL, set before ``make lab``
        self.root = self.workdir / "course"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "jupyterlab.log"

    def command(self) -> tuple[list[str], dict]:
        """``make lab-command``'s line split into (argv, environment)."""
        line = subprocess.run(
            ["make", "--no-print-directory", "-s", "lab-command", f"LAB_PORT={self.port}",
             f"LAB_OPTS=--no-browser --IdentityProvider.token={self.token} "
             f"--MappingKernelManager.kernel_info_timeout={KERNEL_INFO_TIMEOUT_S}",
             *([f"EDITION={self.edition}"] if self.edition != "en" else [])],
            cwd=REPO_ROOT, check=True, capture_output=True, text=True).stdout.strip()
        argv = shlex.split(line)
        env = dict(os.environ)
        while argv and re.match(r"^[A-Z_]+=", argv[0]):
            key, value = argv.pop(0).split("=", 1)
            env[key] = value
        # the kernels import this checkout's inferopt; a first-time learner's settings and workspace
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
        env["JUPYTERLAB_SETTINGS_DIR"] = str(self.workdir / "user-settings")
        env["JUPYTERLAB_WORKSPACES_DIR"] = str(self.workdir / "workspaces")
        env.update(self.extra_env)
        return argv, env

    def start(self) -> CourseLab:
        argv, env = self.command()
        self.root.mkdir(parents=True, exist_ok=True)
        for name in self.served:
            src = REPO_ROOT / name
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, self.root / name)
        # one modification time for every copied file: jupytext refuses to open a notebook whose
        # .ipynb is newer than its .md twin (as after `nbtools run` of a notebook whose text did
        # not change); a fresh clone has no such order either
        now = time.time()
        for f in self.root.rglob("*"):
            os.utime(f, (now, now))
        self._spawn(argv, self.log_path, cwd=self.root, env=env)
        deadline = time.monotonic() + self.ready_timeout_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited (code {self.proc.returncode}):\n{log_tail(self.log_path)}")
            try:
                if self.api("GET", "/api/status").status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"JupyterLab did not answer in {self.ready_timeout_s:.0f} s:\n"
                                   f"{log_tail(self.log_path)}")
            time.sleep(0.3)

    def label(self, text: str) -> str:
        """A JupyterLab menu label as this lab shows it: English, or the official language pack's translation
        (jupyterlab-language-pack-zh-CN, the package `make lab EDITION=zh` switches to)."""
        if self.edition == "en":
            return text
        return _menu_catalog(self.edition).get(text, text)

    def api(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, self.base_url + path, timeout=10,
                                headers={"Authorization": f"token {self.token}"}, **kw)

    def url(self, path: str) -> str:
        """The notebook alone in a reset workspace (no tab of an earlier test comes back)."""
        return f"{self.base_url}/lab/tree/{path}?reset&token={self.token}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.shutdown_kernels()
        self._terminate()


_CATALOGS: dict = {}


def _menu_catalog(edition: str) -> dict:
    """JupyterLab's own strings in the language pack of an edition: English label -> translated label."""
    if edition not in _CATALOGS:
        import jupyterlab_language_pack_zh_CN as pack  # the one non-English edition the course has

        raw = json.loads((Path(pack.__file__).parent / "locale" / "zh_CN" / "LC_MESSAGES" / "jupyterlab.json")
                         .read_text(encoding="utf-8"))
        _CATALOGS[edition] = {k: v[0] for k, v in raw.items() if isinstance(v, list) and v and v[0]}
    return _CATALOGS[edition]


def launch_browser(playwright, workdir: Path):
    """Headless Debian Chromium with a fresh profile; one 1280 x 800 page."""
    profile = tempfile.mkdtemp(prefix="chromium-", dir=workdir)
    ctx = playwright.chromium.launch_persistent_context(
        profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)
    ctx.set_default_timeout(30_000)
    return ctx


def live_code_cells(nb_path: Path) -> set:
    """Indices (among code cells) of the cells that are live or need a live cell's results."""
    nb = json.loads(Path(nb_path).read_text())
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    live, live_names = set(), set()
    for i, src in enumerate(code):
        clean = "\n".join(ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!")))
        tree = ast.parse(clean)
        loads = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        stores = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
        stores |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                   for a in n.names}
        if LIVE_CALL.search(clean) or (loads - stores) & live_names:
            live.add(i)
            live_names |= stores
        else:
            live_names -= stores  # rebound by a cell that runs
    return live


# --- what the page shows -----------------------------------------------------------------------

JS_PROBLEMS = r"""
({treeLabels}) => {
  const out = [];
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null);
  if (!panel) return ['no notebook panel'];
  const scroller = panel.querySelector('.jp-WindowedPanel-outer') || panel.querySelector('.jp-Notebook');
  const box = scroller.getBoundingClientRect();
  const right = box.left + scroller.clientWidth;   // without the vertical scrollbar
  const cells = [...panel.querySelectorAll('.jp-CodeCell')];
  cells.forEach((cell, ci) => {
    const where = `code cell ${ci + 1}`;
    for (const o of cell.querySelectorAll('.jp-OutputArea-output')) {
      const mime = o.dataset.mimeType || '';
      const txt = o.innerText || '';
      if (mime === 'application/vnd.jupyter.stderr' && /Traceback|Error\b|Exception/.test(txt))
        out.push(`${where}: error output: ${txt.trim().split('\n').slice(-1)[0].slice(0, 200)}`);
      if (/Error displaying widget/.test(txt)) out.push(`${where}: "Error displaying widget": ${txt.trim().slice(0, 200)}`);
      // (a widget's output element carries no mime type: it is told by its text)
      if (/^\s*Loading widget/.test(txt)) out.push(`${where}: widget still "Loading widget..."`);
      // a widget or a figure wider than the notebook: cut or scrolled sideways (a wide plain
      // table or text output may scroll: it is not checked here)
      if (o.querySelector('.jupyter-widgets, .js-plotly-plot') && o.scrollWidth > o.clientWidth + 2)
        out.push(`${where}: output ${o.scrollWidth}px wide in a ${o.clientWidth}px notebook (scrolls sideways)`);
    }
    // inputs and their labels fit the notebook and are not cut
    for (const el of cell.querySelectorAll('.jp-OutputArea-output .jupyter-widgets input, ' +
        '.jp-OutputArea-output .jupyter-widgets select, .jp-OutputArea-output .jupyter-widgets textarea, ' +
        '.jp-OutputArea-output .jupyter-widgets button, .jp-OutputArea-output .jupyter-widgets label')) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      const name = (el.innerText || el.value || el.getAttribute('title') || el.tagName).trim().slice(0, 60);
      if (r.right > right + 1 || r.left < box.left - 1) {
        const span = `${Math.round(r.left)}..${Math.round(r.right)} px, notebook ends at ${Math.round(right)} px`;
        out.push(`${where}: ${el.tagName.toLowerCase()} "${name}" outside the notebook (${span})`);
      }
      let clip = el.parentElement;
      while (clip && !clip.classList.contains('jp-OutputArea-output')) {
        const cr = clip.getBoundingClientRect();
        const st = getComputedStyle(clip);
        if (st.overflowX !== 'visible' && (r.right > cr.right + 1 || r.left < cr.left - 1)) {
          const over = `${Math.round(r.right)} > ${Math.round(cr.right)} px`;
          out.push(`${where}: ${el.tagName.toLowerCase()} "${name}" clipped by its box (${over})`);
          break;
        }
        clip = clip.parentElement;
      }
      if (el.tagName === 'LABEL' && el.scrollWidth > el.clientWidth + 1)
        out.push(`${where}: label "${name}" cut (${el.scrollWidth}px of text in ${el.clientWidth}px)`);
    }
    // plotly: every visible trace drawn, its markers and its texts
    for (const gd of cell.querySelectorAll('.js-plotly-plot')) {
      const full = gd._fullData || [];
      const title = ((gd._fullLayout || {}).title || {}).text || '(untitled)';
      const label = `${where}: figure "${title.slice(0, 50)}"`;
      const gr = gd.getBoundingClientRect();
      if (gr.right > right + 1) out.push(`${label} ends at ${Math.round(gr.right)} px, past the notebook (${Math.round(right)} px)`);
      const drawn = new Map();
      for (const g of gd.querySelectorAll('g.trace, g.hm')) {
        const d = g.__data__ && g.__data__[0] && g.__data__[0].trace;
        if (d) drawn.set(d.uid, g);
      }
      if (!full.length) out.push(`${label}: no traces`);
      for (const tr of full) {
        if (tr.visible !== true) continue;
        const g = drawn.get(tr.uid);
        if (!g) { out.push(`${label}: trace ${tr.index} (${tr.type}) not drawn`); continue; }
        if (tr.type === 'scatter') {
          const n = (tr.x || []).filter((v, i) => v !== null && (tr.y || [])[i] !== null).length;
          if ((tr.mode || '').includes('markers')) {
            const pts = g.querySelectorAll('path.point').length;
            if (pts !== n) out.push(`${label}: trace ${tr.index} draws ${pts} of ${n} markers`);
          }
          if ((tr.mode || '').includes('text')) {
            const want = (Array.isArray(tr.text) ? tr.text : []).filter(t => t !== '' && t != null).length;
            const got = [...g.querySelectorAll('g.textpoint text')].filter(t => t.textContent.trim()).length;
            if (got !== want) out.push(`${label}: trace ${tr.index} draws ${got} of ${want} text labels`);
          }
        }
      }
      if (/^Decision tree/.test(title)) {
        const shown = new Set([...gd.querySelectorAll('g.textpoint text')].map(t => t.textContent.trim()));
        const missing = treeLabels.filter(l => !shown.has(l));
        if (missing.length) out.push(`${label}: node labels not drawn: ${missing.join(', ')}`);
        let nodes = 0;
        for (const tr of full) if ((tr.mode || '').includes('markers')) nodes += (tr.x || []).length;
        if (nodes !== treeLabels.length) out.push(`${label}: ${nodes} node markers for ${treeLabels.length} nodes`);
      }
    }
  });
  return out;
}
"""

JS_TREE_HOT = r"""
([hot, cellIndex]) => {
  // labels of the decision-tree nodes drawn in the highlight colour (the diagnosis's path)
  const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null);
  const cell = panel.querySelectorAll('.jp-CodeCell')[cellIndex];
  const res = [];
  for (const gd of cell.querySelectorAll('.js-plotly-plot')) {
    for (const g of gd.querySelectorAll('g.trace')) {
      const pts = [...g.querySelectorAll('path.point')];
      const txt = [...g.querySelectorAll('g.textpoint text')];
      if (!pts.length || pts.length !== txt.length) continue;
      pts.forEach((p, i) => {
        const fill = getComputedStyle(p).fill.replace(/\s/g, '');
        if (fill === hot) res.push(txt[i].textContent.trim());
      });
    }
  }
  return res.sort();
}
"""


def tree_labels() -> list:
    """The node labels the decision tree must draw (one per node)."""
    from inferopt.widgets.decision_widget import _layout_nodes

    nodes, _, _ = _layout_nodes()
    return list(nodes)


# the visible notebook's panel, its code cells, and the text of code cell k's input prompt ('[ ]', '[*]', '[3]')
_JS_PROMPTS = """const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null);
    const cells = panel.querySelectorAll('.jp-CodeCell');
    const prompt = (k) => (cells[k].querySelector('.jp-InputPrompt') || {}).textContent || '';"""


class NotebookPage:
    """One notebook open in JupyterLab, driven through its menus. Cells are named by their index
    among the notebook's code cells (``code`` below), the same in the file and on the page."""

    def __init__(self, page, lab: CourseLab, path: str):
        self.page, self.lab, self.path = page, lab, path
        nb = json.loads((lab.root / path).read_text())
        self.code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]

    # -- opening and running ------------------------------------------------------------------
    def open(self, kernel_timeout_s: float = KERNEL_INFO_TIMEOUT_S) -> NotebookPage:
        """Open the notebook and wait until its kernel is up: the server reports it idle and the page shows it.

        On a starved CPU JupyterLab sometimes loses the kernel it is starting: it starts one, shuts it down
        within a second to start another (seen in the lab's log, 2026-12-03), and the page can end with
        "No Kernel". A learner then reloads the page; so does this, at most twice, with a screenshot of
        the page as it was. A notebook whose kernel never comes up still fails here, saying so."""
        p = self.page
        deadline = time.monotonic() + kernel_timeout_s
        for attempt in range(3):
            p.goto(self.lab.url(self.path))
            p.wait_for_function(
                "(n) => { const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null);"
                " return panel && panel.querySelectorAll('.jp-CodeCell').length === n; }",
                arg=len(self.code), timeout=120_000)
            state = self._wait_kernel(deadline)
            if state == "idle":
                break
            if time.monotonic() >= deadline or attempt == 2:
                self.screenshot(f"{Path(self.path).stem}-no-kernel")
                raise AssertionError(f"{self.path}: its kernel did not come up in {kernel_timeout_s:.0f} s "
                                     f"(server says {state!r}, {attempt + 1} page load(s))")
            self.screenshot(f"{Path(self.path).stem}-kernel-lost-{attempt + 1}")
        self.wait_kernel_idle(120)
        assert p.locator("#filebrowser").is_visible(), "the file browser should be open (the learner's layout)"
        return self

    def _wait_kernel(self, deadline: float, lost_after_s: float = 30) -> str | None:
        """Poll the server until this notebook's kernel is idle, has been missing (or dead) for
        ``lost_after_s``, or ``deadline`` passes; return the last state read."""
        lost_since = state = None
        while time.monotonic() < deadline:
            state = self.lab.kernel_state(self.path)
            if state == "idle":
                return state
            if state is None or state == "dead":       # no kernel for this notebook (any more)
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since > lost_after_s:
                    return state
            else:
                lost_since = None
            time.sleep(0.5)
        return state

    def menu(self, top: str, item: str | re.Pattern) -> None:
        """``top`` and a string ``item`` are English labels, shown in the lab's edition."""
        click_menu(self.page, self.lab.label(top), item if isinstance(item, re.Pattern) else self.lab.label(item))

    def wait_kernel_idle(self, timeout_s: float) -> None:
        self.page.locator(".jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(
            timeout=timeout_s * 1000)

    def cell(self, k: int):
        """The k-th code cell on the page."""
        return self.page.locator(".jp-NotebookPanel:visible .jp-CodeCell").nth(k)

    def text_of(self, k: int, part: str = "") -> str:
        """What a learner reads in code cell k (``part``: a CSS selector inside it, e.g. its output
        area). JupyterLab skips rendering cells far off screen (CSS content-visibility), and the
        rendered text (innerText) of a skipped cell reads empty: this reads the text content."""
        cell = self.cell(k)
        cell.scroll_into_view_if_needed()
        if not part:
            return cell.text_content() or ""
        return "\n".join(cell.locator(part).all_text_contents())

    def run(self, skip_code_cells: set = frozenset(), timeout_s: float = 300, by_cell: bool = False) -> list:
        """Clear outputs, then run all cells (Run > Run All Cells) or, when some code cells are
        skipped, each range of the others (click its first cell, shift-click its last, Run > Run
        Selected Cells; ``by_cell``: one cell at a time). Returns the code cells that ran."""
        self.menu("Edit", "Clear Outputs of All Cells")
        ran = [k for k in range(len(self.code)) if k not in skip_code_cells]
        if not skip_code_cells and not by_cell:
            self._run_menu("Run All Cells", ran)
        else:
            ranges = []
            for k in ran:
                if ranges and ranges[-1][1] == k - 1 and not by_cell:
                    ranges[-1][1] = k
                else:
                    ranges.append([k, k])
            for a, b in ranges:
                self.cell(a).locator(".jp-InputPrompt").click()
                if b > a:
                    self.cell(b).locator(".jp-InputPrompt").click(modifiers=["Shift"])
                self._run_menu(re.compile("^" + re.escape(self.lab.label("Run Selected Cell"))), list(range(a, b + 1)))
                self.wait_ran(list(range(a, b + 1)), timeout_s)
        self.wait_ran(ran, timeout_s)
        self.wait_kernel_idle(timeout_s)
        # widgets render once their messages arrive: wait until each widget output shows its widget
        # or its error (one that stays "Loading" is reported by problems())
        try:
            self.page.wait_for_function(
                "() => ![...document.querySelectorAll('.jp-OutputArea-output')]"
                ".some(o => /^\\s*Loading widget/.test(o.innerText))",
                timeout=20_000)
        except PlaywrightTimeout:
            pass
        self.wait_drawn()
        self.page.wait_for_timeout(800)
        return ran

    def _run_menu(self, item: str | re.Pattern, cells: list) -> None:
        """Run > ``item``; when none of ``cells`` started in 20 s the click was lost (seen on loaded machines,
        for Run All and for Run Selected): a learner clicks again, with a screenshot of the page as it was.
        A notebook that cannot run still fails in wait_ran."""
        self.menu("Run", item)
        if not self.started(cells, 20):
            self.screenshot(f"{Path(self.path).stem}-run-click-lost")
            self.menu("Run", item)

    def started(self, cells: list, timeout_s: float) -> bool:
        """Whether any of these code cells shows it ran or runs ('[*]' or '[n]') within timeout_s."""
        try:
            self.page.wait_for_function(
                "(ks) => {" + _JS_PROMPTS + r"return ks.some(k => /\[(\*|\d+)\]/.test(prompt(k))); }",
                arg=cells, timeout=timeout_s * 1000)
            return True
        except PlaywrightTimeout:
            return False

    def wait_ran(self, cells: list, timeout_s: float) -> None:
        """Wait until each of these code cells shows an execution count (not '*', not empty)."""
        self.page.wait_for_function(
            "(ks) => {" + _JS_PROMPTS + r"""
                 const failed = panel.querySelector('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
                 if (failed && /Traceback|Error/.test(failed.innerText)) return true;  // Run All stops there
                 return ks.every(k => /\[\d+\]/.test(prompt(k))); }""",
            arg=cells, timeout=timeout_s * 1000)

    # -- looking ---------------------------------------------------------------------------------
    def wait_drawn(self, timeout_s: float = 120) -> None:
        """Wait until every output shows something and every plotly figure has its traces. Widgets and figures
        draw after their output arrives, later on a loaded machine: CI runs caught chapter 02's figure with no
        traces yet, and the broken-widgets page with a widget's output still empty; with the browser starved
        (its lane niced beside three busy sessions, 2026-12-03) the Chinese chapter 02's figure took over 20 s.
        What never draws is still reported by problems(), after this wait."""
        try:
            self.page.wait_for_function(
                "() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                ".every(o => o.childElementCount > 0 || o.innerText.trim())"
                " && [...document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot')]"
                ".every(gd => (gd._fullData || []).length > 0)",
                timeout=timeout_s * 1000)
        except PlaywrightTimeout:
            pass

    def problems(self) -> list:
        """Everything a learner would find wrong on this page (see JS_PROBLEMS), once it has drawn."""
        self.wait_drawn()
        return self.page.evaluate(JS_PROBLEMS, {"treeLabels": tree_labels()})

    def hot_nodes(self, k: int) -> list:
        """Labels of the decision-tree nodes drawn highlighted in code cell k."""
        from inferopt.widgets.decision_widget import HOT

        r, g, b = (int(HOT[i:i + 2], 16) for i in (1, 3, 5))
        return self.page.evaluate(JS_TREE_HOT, [f"rgb({r},{g},{b})", k])

    def rich_outputs(self) -> list:
        """Code cells showing a widget or a figure."""
        return self.page.evaluate(
            "() => { const panel = [...document.querySelectorAll('.jp-NotebookPanel')].find(p => p.offsetParent !== null);"
            " return [...panel.querySelectorAll('.jp-CodeCell')].map((c, k) => c.querySelector("
            "'.jp-OutputArea-output .jupyter-widgets, .jp-OutputArea-output .js-plotly-plot') ? k : -1)"
            ".filter(k => k >= 0); }")

    def screenshot(self, name: str, k: int | None = None) -> Path:
        """A 1280 x 800 screenshot (scrolled to code cell k's output) under results/screenshots/."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        if k is not None:
            out = self.cell(k).locator(".jp-OutputArea").first
            out.evaluate("el => el.scrollIntoView({block: 'start'})")
            self.page.wait_for_timeout(300)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def code_cell_with(self, text: str) -> int:
        """Index of the first code cell whose source contains ``text``."""
        for k, src in enumerate(self.code):
            if text in src:
                return k
        raise AssertionError(f"{self.path}: no code cell contains {text!r}")

    def close(self) -> None:
        """Close the notebook's tab and shut its kernel down (File > Close and Shut Down)."""
        close_notebook(self.page, self.lab)


def click_menu(page, top: str, item) -> None:
    """Click ``top`` in JupyterLab's menu bar, then the item (a label or a regex)."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")).click()
    pat = item if isinstance(item, re.Pattern) else re.compile(f"^{re.escape(item)}$")
    page.locator(".lm-Menu-itemLabel", has_text=pat).first.click()


def close_notebook(page, lab: CourseLab) -> None:
    """Shut the kernels down (REST) and close the page without saving: the lab serves a copy."""
    lab.shutdown_kernels()
    page.close()
