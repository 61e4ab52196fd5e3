"""The README's run command (`make lab`) really serves JupyterLab with the start page."""
from __future__ import annotations

import os
import signal
import subprocess

import requests
from outside_process import wait_until_answers

from inferopt.paths import REPO_ROOT
from inferopt.serving.engine import free_port


def test_make_lab_serves_the_start_page():
    port = free_port()
    env = dict(os.environ, LAB_PORT=str(port),
               LAB_OPTS="--no-browser --IdentityProvider.token=")
    proc = subprocess.Popen(["make", "--no-print-directory", "lab"], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answers(proc, base + "/api/status", 180, lambda: proc.stdout.read() if proc.poll() is not None else "",
                           "make lab", poll_s=1)
        page = requests.get(base + "/lab/tree/chapters/00-start-here.ipynb", timeout=30)
        assert page.status_code == 200 and "JupyterLab" in page.text
        landing = requests.get(base + "/", timeout=30, allow_redirects=False)
        assert "00-start-here.ipynb" in landing.headers.get("Location", ""), landing.headers
        nb = requests.get(base + "/api/contents/chapters/00-start-here.ipynb", timeout=30).json()
        first = nb["content"]["cells"][0]["source"]
        assert "Inference optimization" in first, first[:200]
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
