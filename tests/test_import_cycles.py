"""No import circles inside ``inferopt/``: every module can be imported first, and each layer
depends only on the ones below it.

The walker reads every module with ``ast`` (no import runs), including imports inside functions
and ``if TYPE_CHECKING:`` blocks, resolves relative imports and ``from pkg import module``, and
adds an edge to each package whose ``__init__`` the import runs. A cycle fails the test and is
printed as ``a -> b -> a``. The walker is first shown to find cycles in a small package built in
``tmp_path``.
"""
from __future__ import annotations

import ast
from pathlib import Path

from inferopt.paths import REPO_ROOT


def module_files(root: Path, package: str) -> dict[str, Path]:
    """{dotted module name: file} for every .py under ``root`` (the package folder)."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([package, *parts])] = f
    return out


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """{module: modules of the same package it imports}, from every import statement in the file."""
    files = module_files(root, package)
    known = set(files)

    def is_package(mod):
        return files.get(mod, Path()).name == "__init__.py"

    def ancestors(mod):
        parts = mod.split(".")
        return {".".join(parts[:i]) for i in range(1, len(parts))}

    graph = {}
    for mod, f in files.items():
        targets = set()
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"), str(f))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_package(mod) else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                targets.add(src)
                targets |= {f"{src}.{a.name}" for a in node.names if f"{src}.{a.name}" in known}
        edges = set()
        for t in targets:
            while t and t not in known:      # `import pkg.mod.attr` -> pkg.mod
                t = t.rpartition(".")[0]
            if not t:
                continue
            # importing t runs the __init__ of each package above it
            edges |= {t} | ancestors(t)
        # ... except the packages above this module: they are already running when it is imported
        graph[mod] = edges - ancestors(mod) - {mod}
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a list a, b, ..., a) per strongly connected group of modules (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for v in sorted(graph):
        if v not in index:
            strong(v)

    cycles = []
    for group in groups:
        start = min(group)
        # shortest path back to start inside the group (breadth first)
        prev, frontier, found = {start: None}, [start], None
        while frontier and not found:
            nxt = []
            for v in frontier:
                for w in sorted(graph[v] & group):
                    if w == start:
                        found = v
                        break
                    if w not in prev:
                        prev[w] = v
                        nxt.append(w)
                if found:
                    break
            frontier = nxt
        path, v = [], found
        while v is not None:
            path.append(v)
            v = prev[v]
        cycles.append([*reversed(path), start])
    return cycles


def test_inferopt_has_no_import_cycle():
    graph = import_graph(REPO_ROOT / "inferopt", "inferopt")
    assert len(graph) > 40 and "inferopt.diagnosis.knowledge" in graph
    # the walker sees the edges the loader refactoring is about (one function-level import included)
    assert "inferopt.assets" in graph["inferopt.planning.gpu_catalog"]
    assert "inferopt.planning.gpu_catalog" in graph["inferopt.diagnosis.knowledge"]
    cycles = find_cycles(graph)
    assert not cycles, "import cycles in inferopt/:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _write(pkg: Path, files: dict) -> Path:
    for name, text in files.items():
        p = pkg / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return pkg


def test_the_walker_finds_a_cycle_through_a_function_level_import(tmp_path):
    pkg = _write(tmp_path / "toy", {
        "__init__.py": "",
        "a.py": "from toy.sub import b\n",
        "sub/__init__.py": "",
        "sub/b.py": "def f():\n    from .. import a   # inside a function, relative\n    return a\n",
        "c.py": "import toy.a\n",
    })
    graph = import_graph(pkg, "toy")
    assert graph["toy.a"] == {"toy.sub.b", "toy.sub"}
    assert graph["toy.sub.b"] == {"toy.a"}
    cycles = find_cycles(graph)
    assert cycles == [["toy.a", "toy.sub.b", "toy.a"]], cycles


def test_the_walker_finds_a_cycle_through_a_package_init(tmp_path):
    pkg = _write(tmp_path / "toy", {
        "__init__.py": "",
        "x/__init__.py": "from toy.x.impl import thing\n",
        "x/impl.py": "thing = 1\n",
        "y.py": "from toy.x.impl import thing\n",          # runs toy/x/__init__.py first
        "x/more.py": "",
    })
    assert find_cycles(import_graph(pkg, "toy")) == []
    (pkg / "x" / "impl.py").write_text("def g():\n    import toy.y\n")
    cycles = find_cycles(import_graph(pkg, "toy"))
    assert cycles and set(cycles[0]) >= {"toy.x.impl", "toy.y"}, cycles


def test_no_cycle_without_one(tmp_path):
    pkg = _write(tmp_path / "toy", {"__init__.py": "", "a.py": "import toy.b\n", "b.py": "import os\n"})
    assert find_cycles(import_graph(pkg, "toy")) == []


# ---------------------------------------------------------------- layers (CONTRIBUTING.md, "layer by layer")
LAYERS = ["base", "engines", "live parts", "views", "commands"]
# pure functions that live beside the live code they serve (no process, no network): engines
PURE_PARSERS = ("bench", "bench.metrics", "bench.results", "bench.spec_decode", "bench.stats", "monitoring",
                "monitoring.metrics_parse")
# pure readers of the stored notebooks (what their outputs say; which notebook quotes which run): engines
STORED_READERS = ("stored_outputs", "stored_quotes")


def layer_of(module: str) -> str:
    """The layer of an inferopt module, as CONTRIBUTING.md's table lists them."""
    name = module.removeprefix("inferopt").lstrip(".")
    leaf = name.rpartition(".")[2]
    if name in ("", "errors", "paths", "assets", "slo", "i18n", "i18n.prose", "i18n.outputs", "i18n.leftover",
                "figure_precision"):
        # i18n: the editions' string lookup (i18n.prose: the same for asset prose, reads assets/ and locale/ only;
        # i18n.outputs: the same for what a cell prints, displays and draws, with i18n.leftover's English detector);
        # figure_precision: the package's plotly renderer (imports nothing of ours but i18n.outputs)
        return "base"
    if name in PURE_PARSERS or name in STORED_READERS or name == "pacing":   # pacing: reads the notebooks' front matter
        return "engines"
    if leaf == "tuning":   # the live tuning loop: restarts engines
        return "live parts"
    if name.startswith(("planning", "diagnosis", "performance")) and leaf != "cli":
        return "engines"
    if name.startswith("vllm_oracle") and leaf != "cli":
        # vLLM's own rules asked at run time (issue 50): a function of the installed vLLM's config classes, answered
        # by a short-lived worker process and cached; no server, no network: engines call it to size and to check
        return "engines"
    if name.startswith(("serving", "bench", "monitoring")) and leaf not in ("plots", "cli"):
        return "live parts"
    if name.startswith("widgets") or leaf == "plots" or name in ("course_map", "nbtools", "primer", "reading"):
        return "views"
    return "commands"


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})" for m, targets in sorted(graph.items())
            for t in sorted(targets) if rank[layer_of(t)] > rank[layer_of(m)]]


def test_each_layer_imports_only_the_layers_below_it():
    graph = import_graph(REPO_ROOT / "inferopt", "inferopt")
    assert {layer_of(m) for m in graph} == set(LAYERS)
    assert layer_violations(graph) == [], "\n".join(layer_violations(graph))
    # the check fails on an engine that reaches up into the live engine
    bad = {**graph, "inferopt.planning.memory": graph["inferopt.planning.memory"] | {"inferopt.serving.engine"}}
    assert layer_violations(bad) == ["inferopt.planning.memory (engines) imports inferopt.serving.engine (live parts)"]
