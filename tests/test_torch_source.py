"""`make setup` on a machine with PyPI only: where torch==2.13.0+cpu comes from (inferopt/serving/torch_source.py).

Each case runs the real pip (this venv's) with this machine's pip configuration switched off (``PIP_CONFIG_FILE``
= /dev/null, no ``PIP_*`` variables), against throwaway PEP 503 indexes served over HTTP on 127.0.0.1: a "PyPI"
(pip's configured index, ``PIP_INDEX_URL``) and a "PyTorch CPU index" (``INFEROPT_TORCH_INDEX_URL``), each holding
tiny real wheels named as torch's are.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from inferopt.errors import CourseError
from inferopt.paths import REPO_ROOT
from inferopt.serving import torch_source

LOCK_PIN = "2.13.0+cpu"


def _wheel(folder: Path, version: str, tag: str = "py3-none-any") -> str:
    """A minimal valid wheel of a package named torch (METADATA, WHEEL, RECORD; no code)."""
    name = f"torch-{version}-{tag}.whl"
    info = f"torch-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(t.encode())}" for p, t in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(folder / name, "w") as z:
        for p, t in files.items():
            z.writestr(p, t)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


def _index(root: Path, versions: list[tuple[str, str]]) -> Path:
    """A PEP 503 simple index under root: simple/torch/index.html linking to files/<wheels>."""
    (root / "files").mkdir(parents=True)
    (root / "simple" / "torch").mkdir(parents=True)
    links = []
    for version, tag in versions:
        name = _wheel(root / "files", version, tag)
        links.append(f'<a href="../../files/{name.replace("+", "%2B")}">{name}</a>')
    (root / "simple" / "torch" / "index.html").write_text("<html><body>" + "".join(links) + "</body></html>")
    return root


class _Server:
    """A loopback HTTP server for one folder (the stdlib's SimpleHTTPRequestHandler), stopped on exit."""

    def __init__(self, folder: Path):
        self.requests: list[str] = []
        quiet = type("Quiet", (_QuietHandler,), {"requests": self.requests})
        handler = functools.partial(quiet, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    requests: list[str]                          # one list per server (_Server)

    def log_message(self, fmt, *args):          # the test's output stays pytest's; the paths asked are kept
        self.requests.append(self.path)


def _pypi_only_env(pypi: str, torch_index: str, timeout: float = 2.0, **extra) -> dict:
    """This process's environment as a PyPI-only laptop has it: no pip configuration file, no PIP_* variables,
    pip's index = the fake PyPI; the PyTorch index and the timeout set through the module's variables."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_") and "PROXY" not in k.upper()}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=pypi, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_CACHE_DIR="1", NO_PROXY="127.0.0.1", INFEROPT_TORCH_INDEX_URL=torch_index,
               INFEROPT_TORCH_INDEX_TIMEOUT=str(timeout), **extra)
    return env


def _run(env: dict) -> subprocess.CompletedProcess:
    """The command `make setup` runs, from the repository root, with this venv's Python."""
    return subprocess.run([sys.executable, "-m", "inferopt.serving.torch_source", "requirements-cpu.txt"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)


def _download(env: dict, options: list[str], dest: Path) -> subprocess.CompletedProcess:
    """What the torch part of `make setup` does with those options, without installing: pip fetches the lock's torch."""
    return subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "--dest", str(dest),
                           *options, f"torch=={LOCK_PIN}"], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture()
def pypi(tmp_path):
    """PyPI as it is: torch 2.13.0 without the +cpu build."""
    with _Server(_index(tmp_path / "pypi", [("2.13.0", "py3-none-any"), ("2.12.0", "py3-none-any")])) as s:
        yield s


@pytest.fixture()
def pytorch(tmp_path):
    """PyTorch's CPU index: the +cpu build."""
    with _Server(_index(tmp_path / "pytorch", [(LOCK_PIN, "py3-none-any"), ("2.12.0+cpu", "py3-none-any")])) as s:
        yield s


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/simple"     # nothing listens there once closed


def test_the_lock_pins_the_build_this_module_looks_for():
    assert torch_source.torch_pin(REPO_ROOT / "requirements-cpu.txt") == LOCK_PIN
    assert torch_source.TORCH_CPU_INDEX == "https://download.pytorch.org/whl/cpu"


def test_a_configured_index_with_the_cpu_build_needs_no_other(tmp_path, pytorch):
    """(a) pip's own index has torch+cpu (a local mirror, a wheel folder): nothing added, PyTorch's index unasked."""
    with _Server(_index(tmp_path / "mirror", [(LOCK_PIN, "py3-none-any")])) as mirror:
        env = _pypi_only_env(mirror.url, pytorch.url)
        out = _run(env)
        assert out.returncode == 0 and out.stdout == "\n", out.stderr
        assert mirror.requests == ["/simple/torch/"] and pytorch.requests == []     # PyTorch's index never asked
        assert _download(env, [], tmp_path / "dl").returncode == 0
    assert (tmp_path / "dl" / f"torch-{LOCK_PIN}-py3-none-any.whl").is_file()


def test_pypi_only_finds_the_cpu_build_on_pytorchs_index(tmp_path, pypi, pytorch):
    """(b) PyPI lacks torch+cpu, PyTorch's index has it: the option that makes pip find it, and pip finds it with it."""
    env = _pypi_only_env(pypi.url, pytorch.url)
    before = _download(env, [], tmp_path / "none")
    assert before.returncode != 0 and "No matching distribution found for torch==2.13.0+cpu" in before.stderr
    out = _run(env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["--extra-index-url", pytorch.url]
    assert pypi.requests and pytorch.requests == ["/simple/torch/"]
    assert out.stderr.strip() == f"torch: not in pip's configured indexes; from {pytorch.url}"
    assert _download(env, out.stdout.split(), tmp_path / "dl").returncode == 0
    assert (tmp_path / "dl" / f"torch-{LOCK_PIN}-py3-none-any.whl").is_file()


def test_a_users_extra_index_still_wins(tmp_path, pypi, pytorch):
    """PIP_EXTRA_INDEX_URL given (`make setup PIP_EXTRA_INDEX_URL=...`): found there, the default index not asked
    (here it is unreachable, and the answer still comes at once)."""
    env = _pypi_only_env(pypi.url, _closed_port_url(), PIP_EXTRA_INDEX_URL=pytorch.url)
    start = time.monotonic()
    out = _run(env)
    assert out.returncode == 0 and out.stdout == "\n", out.stderr
    assert time.monotonic() - start < 15


@pytest.mark.parametrize("kind", ["closed port", "silent server"])
def test_an_unreachable_pytorch_index_stops_in_one_line_within_seconds(pypi, kind):
    """(c) PyTorch's index cannot be reached (refused, or a server that accepts and never answers): one line that
    names it and what to do, no traceback, in bounded time (a 2 s timeout here; 10 s by default)."""
    silent = socket.socket()
    try:
        if kind == "silent server":
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)                     # the kernel completes the handshakes; nothing ever answers
            url = f"http://127.0.0.1:{silent.getsockname()[1]}/simple"
        else:
            url = _closed_port_url()
        start = time.monotonic()
        out = _run(_pypi_only_env(pypi.url, url, timeout=2.0))
        took = time.monotonic() - start
    finally:
        silent.close()
    assert out.returncode == 1 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    line = lines[0]
    assert line.startswith("error: torch==2.13.0+cpu") and f"{url} could not be reached" in line, line
    assert ("timed out after 2 s" in line) == (kind == "silent server"), line
    assert "PIP_EXTRA_INDEX_URL=" in line and "00b-gpu-and-hosted" in line
    assert took < 30, took


def test_a_reachable_index_without_the_build_for_this_python_is_named_as_such(tmp_path, pypi):
    """(d) the wrong case: PyTorch's index answers, but with other builds only (another version, another Python's
    wheel of this version): setup stops; reachability alone never counts as found."""
    other = [("2.12.0+cpu", "py3-none-any"), (LOCK_PIN, "cp27-cp27m-win32")]
    with _Server(_index(tmp_path / "wrong", other)) as wrong:
        out = _run(_pypi_only_env(pypi.url, wrong.url))
    assert out.returncode == 1 and out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"neither in pip's configured indexes nor in {wrong.url} for this Python" in out.stderr
    assert "could not be reached" not in out.stderr


def test_settings_and_a_lock_without_torch(tmp_path):
    assert torch_source.settings({}) == ("https://download.pytorch.org/whl/cpu", 10.0)
    assert torch_source.settings({"INFEROPT_TORCH_INDEX_URL": "http://x/simple",
                                  "INFEROPT_TORCH_INDEX_TIMEOUT": "3"}) == ("http://x/simple", 3.0)
    for bad in ("ten", "0"):
        with pytest.raises(CourseError, match="INFEROPT_TORCH_INDEX_TIMEOUT"):
            torch_source.settings({"INFEROPT_TORCH_INDEX_TIMEOUT": bad})
    lock = tmp_path / "lock.txt"
    lock.write_text("numpy==2.3.5\ntorchvision==0.28.0\n")              # torchvision is not torch
    with pytest.raises(CourseError, match="pins no torch"):
        torch_source.torch_pin(lock)
    out = subprocess.run([sys.executable, "-m", "inferopt.serving.torch_source", str(tmp_path / "missing.txt")],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("error: cannot read the lock") and "Traceback" not in out.stderr


def test_the_module_runs_before_the_course_is_installed(tmp_path):
    """`make setup` runs it with a fresh venv's Python: importing it loads the standard library only."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    code = ("import sys; import inferopt.serving.torch_source; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] not in sys.stdlib_module_names "
            "and not m.startswith('_') and m.split('.')[0] != 'inferopt'))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


def test_setup_asks_before_the_parallel_install_and_gives_the_index_to_torch_alone():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL")}
    out = subprocess.run(["make", "-n", "-B", "ENGINE=cpu", ".venv/.installed-cpu"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=60).stdout
    ask = "TORCH_SRC=$(.venv/bin/python -m inferopt.serving.torch_source requirements-cpu.txt) || exit 1"
    assert ask in out and out.index(ask) < out.index("--no-deps $OPTS -r \"$p\" &"), out
    assert '(/^torch==/ ? "torch" : "part" NR % 4)' in out
    assert '[ "$p" = "$PARTS/torch.txt" ] && OPTS=$TORCH_SRC' in out
    # the old advice to find the index by hand is gone from the failure text
    assert "If it could not find torch" not in out
