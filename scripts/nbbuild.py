"""Shared helpers for the notebook builder scripts in this folder.

A builder writes a notebook's cells (no outputs); `python -m inferopt.nbtools run NB` then
executes it for real and stores the outputs. Run a builder only for the notebooks you changed:
it overwrites them whole."""
from __future__ import annotations

import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parent.parent


def md(text):
    return new_markdown_cell(textwrap.dedent(text).strip("\n"))


def code(text):
    return new_code_cell(textwrap.dedent(text).strip("\n"))


def write(rel, cells):
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}})
    path = ROOT / rel
    path.parent.mkdir(exist_ok=True)
    nbformat.write(nb, path)
    print("wrote", rel)
