"""Translation units of a notebook: each paragraph-like block of its markdown cells.

A markdown cell is split at blank lines outside fenced code; each block (a paragraph, a heading, a
list, a table, a quote) is one unit, keyed in the notebook's ``.po`` file by its exact English text.
Blocks with nothing to translate stay as they are: fenced code, HTML comments, blocks without a
letter. Joining the blocks with the original separators gives the cell back byte for byte.
"""
from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(```|~~~)")
_LETTER = re.compile(r"[A-Za-z]")


def blocks(text: str) -> list[str]:
    """The cell's text as alternating [block, separator, block, ...] (separators: the blank lines)."""
    out, cur, sep, fence = [], [], [], None
    for line in text.split("\n"):
        m = _FENCE.match(line)
        if fence is None and not line.strip() and cur:
            sep.append(line)
            continue
        if sep:                      # a block ended at the blank lines collected in sep
            out += ["\n".join(cur), "\n" + "\n".join(sep) + "\n"]
            cur, sep = [], []
        cur.append(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
    out.append("\n".join(cur))
    if sep:
        out.append("\n" + "\n".join(sep))
    return out


def join(parts: list[str]) -> str:
    return "".join(parts)


def translatable(block: str) -> bool:
    """A block a translator sees (fenced code, HTML comments and blocks without letters stay English)."""
    s = block.strip()
    if not s or not _LETTER.search(s):
        return False
    if _FENCE.match(s) or (s.startswith("<!--") and s.endswith("-->")):
        return False
    return True


def cell_units(text: str) -> list[str]:
    """The translatable blocks of one markdown cell, in order."""
    parts = blocks(text)
    return [b for b in parts[0::2] if translatable(b)]
