"""Where things live on disk: repository folders, the cache (models, server pid files) and results.

Every path can be moved with an environment variable so a shared workshop machine can put the
cache on a bigger disk:
- ``INFEROPT_CACHE``   (default ``<repo>/.cache``): prepared models, pid files, logs;
- ``INFEROPT_RESULTS`` (default ``<repo>/results``): benchmark results (JSON lines).
"""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ASSETS = REPO_ROOT / "assets"
CHAPTERS = REPO_ROOT / "chapters"
SOLUTIONS = REPO_ROOT / "solutions"
LABS = REPO_ROOT / "labs"


def cache_dir() -> Path:
    """The cache folder (created on demand)."""
    p = Path(os.environ.get("INFEROPT_CACHE", REPO_ROOT / ".cache"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def results_dir() -> Path:
    """The folder where benchmark runs append their JSON-lines results (created on demand)."""
    p = Path(os.environ.get("INFEROPT_RESULTS", REPO_ROOT / "results"))
    p.mkdir(parents=True, exist_ok=True)
    return p


def models_dir() -> Path:
    p = cache_dir() / "models"
    p.mkdir(parents=True, exist_ok=True)
    return p


def servers_dir() -> Path:
    """Pid files and logs of the vLLM servers this package started."""
    p = cache_dir() / "servers"
    p.mkdir(parents=True, exist_ok=True)
    return p

