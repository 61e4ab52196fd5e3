"""Every stored plotly figure carries a PNG rendered from its own JSON; `check` notices a missing or stale one."""
from __future__ import annotations

import base64
import json

import plotly.graph_objects as go

from inferopt import nbtools


def _nb(tmp_path, fig):
    out = {"output_type": "display_data", "metadata": {},
           "data": {nbtools.PLOTLY_MIME: json.loads(fig.to_json()), "text/plain": "Figure"}}
    nb = {"cells": [{"id": "fig0", "cell_type": "code", "execution_count": 1, "metadata": {}, "source": "fig.show()",
                     "outputs": [out]}],
          "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "figs.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _monkey_root(monkeypatch, tmp_path):
    monkeypatch.setattr(nbtools, "REPO_ROOT", tmp_path)


def test_images_are_added_checked_and_go_stale(tmp_path, monkeypatch):
    _monkey_root(monkeypatch, tmp_path)
    path = _nb(tmp_path, go.Figure(go.Bar(x=["a", "b"], y=[1, 3]), layout={"width": 400, "height": 300}))
    assert nbtools.missing_images([path]) == ["figs.ipynb cell 0: plotly figure without its static image"]

    assert nbtools.image_files([path]) == [(path, 1)]
    out = json.loads(path.read_text())["cells"][0]["outputs"][0]
    assert base64.b64decode(out["data"]["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    assert nbtools.missing_images([path]) == []
    assert nbtools.image_files([path]) == []              # up to date: nothing re-rendered

    nb = json.loads(path.read_text())                     # the figure changes, the image does not
    nb["cells"][0]["outputs"][0]["data"][nbtools.PLOTLY_MIME]["data"][0]["y"] = [1, 4]
    path.write_text(json.dumps(nb))
    assert nbtools.missing_images([path]) == ["figs.ipynb cell 0: the static image is not of the figure stored next to it"]
    assert nbtools.image_files([path]) == [(path, 1)] and nbtools.missing_images([path]) == []


def test_every_stored_figure_has_its_image():
    problems = nbtools.missing_images()
    assert not problems, "\n".join(problems) + f"\nfix: {nbtools.FIX_IMAGES}"
