"""Will this machine run the course? One line per check, before anything is installed.

    python3 inferopt/room/preflight.py [--room URL]      (any python3 >= 3.8; also: make preflight)

Standard library only, so it runs before the course's virtual environment exists. Each line reads
``ok|FAIL|warn <check>: <fact>; <what to do>``; the exit code is 1 when any line is FAIL.

The facts are gathered once (:func:`gather`: the interpreter, /proc/cpuinfo, /proc/meminfo, the disk,
the package indexes, promtool, the room's engine) into a plain dict, and each check is a pure function
of that dict (:data:`CHECKS`), so a wrong machine can be described instead of found.

The limits are the README's set-up table (README.md, "What you need"): Python 3.11-3.14 (vLLM 0.32
needs 3.11+), Linux x86-64 with AVX2 (vLLM's CPU build ships AVX2 and AVX-512 kernels), ~4.5 GB of
disk (3.7 GB venv + 0.5 GB model), 4 GB of RAM free for a live engine and ~12 GB for ``make test``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

PY_MIN, PY_MAX = (3, 11), (3, 14)            # README: Python 3.11-3.14 (vLLM 0.32 needs 3.11+)
ENGINE_RAM_GB = 4.0                          # README: `make lab`, 4 GB RAM free for a live engine
SUITE_RAM_GB = 12.0                          # README: `make test`, ~12 GB RAM (chapter 6b runs three engines)
DISK_GB = 4.5                                # README: ~4.5 GB disk (3.7 GB venv + 0.5 GB model)
PYPI = "https://pypi.org/simple/pip/"
TORCH_CPU = "https://download.pytorch.org/whl/cpu/torch/"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
TIMEOUT_S = 5.0
# promtool without sudo: Debian/Ubuntu's own package, unpacked into the home folder (apt-get download needs
# no root; tried as uid 65534 on Debian 12: promtool 2.42.0 runs from ~/.local/bin)
PROMTOOL_NO_SUDO = ("mkdir -p ~/.local/prometheus ~/.local/bin && cd /tmp && apt-get download prometheus && "
                    "dpkg -x prometheus_*.deb ~/.local/prometheus && "
                    "ln -sf ~/.local/prometheus/usr/bin/promtool ~/.local/bin/promtool")
PROMTOOL_TARBALL = ("or the release tarball https://github.com/prometheus/prometheus/releases "
                    "(prometheus-*.linux-amd64.tar.gz: copy its promtool to ~/.local/bin)")


# ---------------------------------------------------------------- facts (the only part that looks around)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _os_release() -> dict:
    out = {}
    for line in (_read("/etc/os-release") or "").splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k.strip()] = v.strip().strip('"')
    return out


def cpu_flags(cpuinfo: str | None) -> list | None:
    """The first processor's flags from /proc/cpuinfo's text (None when there is none)."""
    if not cpuinfo:
        return None
    m = re.search(r"^flags\s*:\s*(.*)$", cpuinfo, re.MULTILINE)
    return sorted(set(m.group(1).split())) if m else None


def meminfo_gb(meminfo: str | None, key: str) -> float | None:
    if not meminfo:
        return None
    m = re.search(rf"^{key}:\s*(\d+)\s*kB", meminfo, re.MULTILINE)
    return int(m.group(1)) * 1024 / 1e9 if m else None


def pip_indexes(python: str = sys.executable, timeout: float = TIMEOUT_S) -> dict:
    """pip's configured index-url / extra-index-url / find-links (``pip config list`` and PIP_* variables)."""
    out = {"index-url": [], "extra-index-url": [], "find-links": []}
    try:
        text = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True,
                              timeout=timeout, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        name = key.rsplit(".", 1)[-1].strip()
        if sep and name in out:
            out[name] += value.strip().strip("'\"").split()
    for name in out:
        env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
        if env:
            out[name] += env.split()
    return out


def probe(url: str, timeout: float = TIMEOUT_S) -> dict:
    """GET ``url``: {"status": code, "body": first 64 kB} or {"error": what went wrong}."""
    req = urllib.request.Request(url, headers={"User-Agent": "inferopt-preflight"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return {"status": r.status, "body": r.read(65536).decode("utf-8", "replace")}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code, "body": ""}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return {"error": f"{type(reason).__name__}: {reason}"[:160]}


def _local_index(url: str) -> bool:
    return not re.match(r"^https?://", url)


def find_promtool(home: str | None = None) -> str | None:
    """promtool as the course finds it: INFEROPT_PROMTOOL, PATH, then ~/.local/bin."""
    override = os.environ.get("INFEROPT_PROMTOOL")
    if override and os.path.isfile(override) and os.access(override, os.X_OK):
        return override
    home = home or os.path.expanduser("~")
    return shutil.which("promtool") or shutil.which("promtool", path=os.path.join(home, ".local", "bin"))


COURSE = Path(__file__).resolve().parents[2]   # the unpacked course: the venv and the model go here


def gather(room: str | None = None, timeout: float = TIMEOUT_S, where: str | Path = COURSE) -> dict:
    """Every fact the checks read, from this machine (network probes: ``timeout`` seconds each)."""
    import importlib.util

    rel = _os_release()
    pips = pip_indexes(timeout=timeout)
    indexes = {"pypi": probe(PYPI, timeout), "torch-cpu": probe(TORCH_CPU, timeout)}
    for url in pips["index-url"] + pips["extra-index-url"] + pips["find-links"]:
        if url in indexes:
            continue
        if _local_index(url):   # a folder (file:///... or a path): is it there?
            folder = urllib.request.url2pathname(url[len("file://"):]) if url.startswith("file://") else url
            indexes[url] = {"status": 200} if os.path.isdir(folder) else {"error": f"no folder {folder}"}
        else:
            indexes[url] = probe(url.rstrip("/") + "/", timeout)
    usage = shutil.disk_usage(where)
    facts = {
        "python": list(sys.version_info[:3]), "executable": sys.executable,
        "venv_module": importlib.util.find_spec("ensurepip") is not None,
        "pythons_on_path": [f"python3.{m}" for m in range(PY_MIN[1], PY_MAX[1] + 1) if shutil.which(f"python3.{m}")],
        "uv": bool(shutil.which("uv")),
        "system": platform.system(), "machine": platform.machine(),
        "distro": rel.get("ID", ""), "distro_version": rel.get("VERSION_ID", ""),
        "wsl": "microsoft" in (platform.release() or "").lower(),
        "cpu_flags": cpu_flags(_read("/proc/cpuinfo")),
        "mem_available_gb": meminfo_gb(_read("/proc/meminfo"), "MemAvailable"),
        "mem_total_gb": meminfo_gb(_read("/proc/meminfo"), "MemTotal"),
        "disk_free_gb": usage.free / 1e9, "disk_path": str(where),
        "pip_config": pips, "indexes": indexes,
        "promtool": find_promtool(),
        "root": hasattr(os, "geteuid") and os.geteuid() == 0, "sudo": bool(shutil.which("sudo")),
        "room": None,
    }
    if room:
        base = room.rstrip("/")
        facts["room"] = {"url": base, "health": probe(base + "/health", timeout),
                         "models": probe(base + "/v1/models", timeout)}
    return facts


# ---------------------------------------------------------------- checks (pure: facts -> lines)


def _line(level: str, check: str, fact: str, todo: str = "") -> tuple:
    return (level, check, fact, todo)


def check_python(f: dict) -> list:
    v = tuple(f["python"][:2])
    have = f"python3 is {'.'.join(map(str, f['python']))}"
    if PY_MIN <= v <= PY_MAX:
        if f.get("venv_module") is False:   # Debian/Ubuntu split ensurepip into python3.X-venv
            pkg = f"python3.{v[1]}-venv"
            return [_line("FAIL", "python", f"{have} but without ensurepip, so `python3 -m venv` fails",
                          f"sudo apt-get install {pkg} (no sudo: uv python install 3.11, then "
                          "make setup PYTHON=python3.11)")]
        return [_line("ok", "python", have)]
    others = f.get("pythons_on_path") or []
    if others:   # the lowest: 3.11 is the version the README says was tested
        return [_line("FAIL", "python", f"{have}, outside 3.11-3.14, but {others[0]} is installed",
                      f"build the course with it: make setup PYTHON={others[0]}")]
    no_sudo = "uv python install 3.11 (uv: curl -LsSf https://astral.sh/uv/install.sh | sh; no sudo)"
    if v < PY_MIN:
        how = f"install Python 3.11: {no_sudo}"
        if f.get("distro") == "ubuntu":
            how = ("Ubuntu's own python3 is too old: sudo apt-get install python3.11 python3.11-venv (22.04: "
                   f"universe, or the deadsnakes PPA), or {no_sudo}")
        return [_line("FAIL", "python", f"{have}; the course needs 3.11-3.14 (vLLM 0.32 needs 3.11+)",
                      f"{how}; then: make setup PYTHON=python3.11")]
    return [_line("FAIL", "python", f"{have}, newer than 3.14 (no vLLM 0.32 wheels for it)",
                  f"install Python 3.11: {no_sudo}; then: make setup PYTHON=python3.11")]


def check_platform(f: dict) -> list:
    sysname, machine = f.get("system", ""), (f.get("machine") or "").lower()
    if sysname == "Linux" and machine in ("x86_64", "amd64"):
        return [_line("ok", "platform", "Linux x86-64" + (" (WSL)" if f.get("wsl") else ""))]
    if sysname == "Linux":
        return [_line("FAIL", "platform", f"Linux on {machine}; vLLM's CPU build is x86-64 only",
                      "use the room's server (JupyterLab on the hub) or the hosted path in the invitation")]
    todo = {"Darwin": "use the room's server (JupyterLab on the hub) or the hosted path in the invitation",
            "Windows": "install WSL2 with Ubuntu 24.04 (wsl --install) and run this there, or use the room's server"}
    return [_line("FAIL", "platform", f"{sysname or 'unknown OS'} on {machine}; the course runs on Linux x86-64",
                  todo.get(sysname, "use the room's server or a Linux x86-64 machine"))]


def check_cpu(f: dict) -> list:
    flags = f.get("cpu_flags")
    if flags is None:
        return [_line("warn", "cpu", "no /proc/cpuinfo to read the CPU's features",
                      "on Linux x86-64 this file exists; elsewhere use the room's server")]
    flags = set(flags)
    if "avx2" not in flags:
        return [_line("FAIL", "cpu", "no AVX2; vLLM's CPU build needs AVX2 or better",
                      "use the room's server (JupyterLab on the hub): this CPU cannot run the engine")]
    if "avx512f" in flags:
        return [_line("ok", "cpu", "AVX2 and AVX-512" + (" + AMX" if "amx_tile" in flags else ""))]
    return [_line("ok", "cpu", "AVX2 (no AVX-512: vLLM loads its AVX2 kernels; prefill is slower, the labs are not)")]


def check_memory(f: dict) -> list:
    free, total = f.get("mem_available_gb"), f.get("mem_total_gb")
    if free is None:
        return [_line("warn", "memory", "no /proc/meminfo to read", "a live engine needs 4 GB of RAM free")]
    fact = f"{free:.1f} GB free of {total:.1f} GB" if total else f"{free:.1f} GB free"
    if free < ENGINE_RAM_GB:
        return [_line("FAIL", "memory", f"{fact}; a live engine needs {ENGINE_RAM_GB:g} GB free",
                      "close other programs (browser tabs, IDEs) and run this again, or use the room's server")]
    if (total or free) < SUITE_RAM_GB:
        return [_line("ok", "memory", f"{fact} (enough for the labs; `make test` wants ~{SUITE_RAM_GB:g} GB)")]
    return [_line("ok", "memory", fact)]


def check_disk(f: dict) -> list:
    free = f.get("disk_free_gb")
    if free is None:
        return []
    fact = f"{free:.1f} GB free at {f.get('disk_path', '.')}"
    if free < DISK_GB:
        return [_line("FAIL", "disk", f"{fact}; the set-up needs ~{DISK_GB:g} GB (3.7 GB venv + 0.5 GB model)",
                      "free some space or unpack the course on a bigger disk")]
    return [_line("ok", "disk", fact)]


def _reached(r: dict | None) -> bool:
    return bool(r) and "error" not in r and 200 <= r.get("status", 0) < 400


def _why(r: dict | None) -> str:
    if not r:
        return "not tried"
    return r.get("error") or f"HTTP {r.get('status')}"


def check_indexes(f: dict) -> list:
    idx, pip = f.get("indexes") or {}, f.get("pip_config") or {}
    mirrors = [u for u in pip.get("index-url", []) + pip.get("extra-index-url", []) + pip.get("find-links", [])]
    reached_mirrors = [u for u in mirrors if _reached(idx.get(u))]
    lines = []
    for u in mirrors:
        if not _reached(idx.get(u)):
            lines.append(_line("FAIL", "pip-config", f"pip is set to use {u}, which does not answer ({_why(idx.get(u))})",
                               "fix or remove it: python3 -m pip config list shows where it is set"))
    if _reached(idx.get("pypi")):
        lines.append(_line("ok", "pypi", "pypi.org answers"))
    elif reached_mirrors:
        lines.append(_line("warn", "pypi", f"pypi.org does not answer ({_why(idx.get('pypi'))}); pip is set to use "
                           f"{reached_mirrors[0]}", "make sure that mirror serves the course's packages"))
    else:
        lines.append(_line("FAIL", "pypi", f"pypi.org does not answer ({_why(idx.get('pypi'))})",
                           "the set-up downloads ~3 GB from PyPI: use a network that reaches it (or a proxy: "
                           "export HTTPS_PROXY=...), or the room's server"))
    torch_set = any("download.pytorch.org" in u for u in mirrors)
    if _reached(idx.get("torch-cpu")):
        lines.append(_line("ok", "torch-index", "download.pytorch.org/whl/cpu answers" + (
            "" if torch_set else "; add it when you set up: make setup PIP_EXTRA_INDEX_URL=" + TORCH_INDEX)))
    elif reached_mirrors:
        lines.append(_line("warn", "torch-index", f"download.pytorch.org does not answer ({_why(idx.get('torch-cpu'))});"
                           f" pip is set to use {reached_mirrors[0]}", "make sure it serves torch==2.13.0+cpu"))
    else:
        lines.append(_line("FAIL", "torch-index", f"download.pytorch.org does not answer ({_why(idx.get('torch-cpu'))});"
                           " the CPU engine needs torch==2.13.0+cpu from it",
                           "use a network that reaches it, or the room's server"))
    return lines


def check_promtool(f: dict) -> list:
    where = f.get("promtool")
    if where:
        return [_line("ok", "promtool", f"{where} (lab 5 and chapter 06's alert checks)")]
    if f.get("root") or f.get("sudo"):
        todo = ("make tools (apt-get install prometheus); without sudo: " + PROMTOOL_NO_SUDO)
    else:
        todo = "no sudo here, so put it in your home folder: " + PROMTOOL_NO_SUDO + "; " + PROMTOOL_TARBALL
    return [_line("warn", "promtool", "not on PATH, not in ~/.local/bin, INFEROPT_PROMTOOL unset "
                  "(lab 5 and chapter 06 need it)", todo)]


def _model_ids(r: dict | None) -> list | None:
    if not _reached(r):
        return None
    try:
        data = json.loads(r.get("body") or "")
        return [m["id"] for m in data["data"]]
    except (ValueError, KeyError, TypeError):
        return None


def check_room(f: dict) -> list:
    room = f.get("room")
    if not room:
        return []
    url = room["url"]
    ids = _model_ids(room.get("models"))
    if ids:
        health = "" if _reached(room.get("health")) else f" (/health: {_why(room.get('health'))})"
        return [_line("ok", "room", f"{url} serves {', '.join(ids)}{health}")]
    models = room.get("models")
    if _reached(models):
        fact = f"{url}/v1/models answers but not as an OpenAI-compatible server (no data[].id)"
    else:
        fact = f"{url}/v1/models does not answer ({_why(models)})"
    return [_line("FAIL", "room", fact, "check the address in the invitation (http://HOST:PORT, no /v1), and that "
                  "this network reaches the room (VPN, Wi-Fi); tell the instructor if it still fails")]


CHECKS = [check_python, check_platform, check_cpu, check_memory, check_disk, check_indexes, check_promtool, check_room]


def evaluate(facts: dict) -> list:
    return [ln for chk in CHECKS for ln in chk(facts)]


def render(lines: list) -> str:
    return "\n".join(f"{lvl} {chk}: {fact}" + (f"; {todo}" if todo else "") for lvl, chk, fact, todo in lines)


def exit_code(lines: list) -> int:
    return 1 if any(ln[0] == "FAIL" for ln in lines) else 0


def _room_url(text: str) -> str:
    if not re.match(r"^https?://[^/\s]+", text or ""):
        raise ValueError(f"--room {text!r} is not an address like http://HOST:PORT; copy it from the invitation")
    return text


def _add_args(p) -> None:
    p.add_argument("--room", default=os.environ.get("INFEROPT_ROOM_URL"),
                   help="the room engine's address, http://HOST:PORT (default: $INFEROPT_ROOM_URL)")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per network probe (default 5)")
    p.add_argument("--json", action="store_true", help="print the gathered facts as JSON too")


def run(room: str | None, timeout: float = TIMEOUT_S, show_json: bool = False, out=None) -> int:
    out = out or sys.stdout
    if room:
        _room_url(room)
    if not timeout > 0:
        raise ValueError(f"--timeout {timeout} must be a positive number of seconds")
    facts = gather(room, timeout)
    lines = evaluate(facts)
    if show_json:
        print(json.dumps(facts, indent=1), file=out)
    print(render(lines), file=out)
    fails = sum(ln[0] == "FAIL" for ln in lines)
    print(f"{fails} problem(s) to fix before the workshop" if fails else "ready for the workshop", file=out)
    return exit_code(lines)


def add_subcommand(subparsers) -> None:
    p = subparsers.add_parser("preflight", help="will this machine run the course? one line per check",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_args(p)
    p.set_defaults(func=_cli)


def _cli(args) -> int:
    from inferopt.errors import CourseError

    try:
        return run(args.room, args.timeout, args.json)
    except ValueError as exc:
        raise CourseError(str(exc)) from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="preflight", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_args(ap)
    args = ap.parse_args(argv)
    try:
        return run(args.room, args.timeout, args.json)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
