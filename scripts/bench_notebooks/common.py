import nbformat
from nbformat.v4 import new_notebook, new_markdown_cell, new_code_cell

def build(cells, path):
    nb = new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for kind, src in cells:
        src = src.strip("\n")
        nb.cells.append(new_markdown_cell(src) if kind == "md" else new_code_cell(src))
    nbformat.write(nb, path)
    print("wrote", path, len(nb.cells), "cells")
