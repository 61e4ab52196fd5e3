"""The README is read in two minutes (issue #47): its length, the two commands, what they need, the ways in from
macOS and Windows; the rest lives in docs/ and CONTRIBUTING.md, linked, with the README's figures backed there.

Length is counted in reading units: a word of Latin script (anything with a letter or digit between spaces), or one
Chinese character; fenced code blocks (the commands themselves) and link targets are not read, so they do not count.
Two minutes: ~450 English words (about 225 a minute), ~750 units of the Chinese page.
"""
from __future__ import annotations

import re

import pytest

from inferopt.paths import REPO_ROOT

README, README_ZH, DOCS = REPO_ROOT / "README.md", REPO_ROOT / "README.zh.md", REPO_ROOT / "docs"
CEILING = {"README.md": 450, "README.zh.md": 750}
CJK = r"[\u3400-\u9fff]"

# what the first screen must say (English; the Chinese page the same, in its words)
NEEDS = {
    "README.md": ["Linux x86-64 with AVX2", "Python 3.11–3.14", "~4.5 GB of disk", "4 GB of RAM free",
                  "~12 GB", "00b-gpu-and-hosted", "WSL2", "INFEROPT_ENGINE_URL", "make preflight", "docs/gpu.md",
                  "chapters/00-start-here.ipynb", "README.zh.md", "CONTRIBUTING.md"],
    "README.zh.md": ["支持 AVX2 的 Linux x86-64", "Python 3.11–3.14", "约 4.5 GB 磁盘", "4 GB 空闲内存", "约 12 GB",
                     "00b-gpu-and-hosted", "WSL2", "INFEROPT_ENGINE_URL", "make preflight", "docs/gpu.zh.md",
                     "zh/chapters/00-start-here.ipynb", "README.md", "docs/zh-edition.zh.md"],
}
COMMANDS = {"README.md": ["make lab", "make test"], "README.zh.md": ["make lab EDITION=zh", "make test"]}


def reading_units(text: str) -> int:
    """Latin-script words plus Chinese characters, outside fenced code blocks and link targets."""
    text = re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    chinese = len(re.findall(CJK, text))
    words = [t for t in re.split(r"[\s\u3000-\u303f\uff00-\uffef]+", re.sub(CJK, " ", text))
             if re.search(r"[A-Za-z0-9]", t)]
    return len(words) + chinese


def problems(name: str, text: str) -> list[str]:
    """What keeps this README from being the two-minute page: too long, a command or a need missing."""
    out = []
    units = reading_units(text)
    if units > CEILING[name]:
        out.append(f"{name}: {units} reading units, above {CEILING[name]}: move detail to docs/")
    blocks = "\n".join(re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M))
    for cmd in COMMANDS[name]:
        if not re.search(rf"^{re.escape(cmd)}\s", blocks, flags=re.M):
            out.append(f"{name}: no `{cmd}` line in a bash block")
    out += [f"{name}: does not say {need!r}" for need in NEEDS[name] if need not in text]
    return out


def test_the_readmes_read_in_two_minutes_and_say_what_a_newcomer_needs():
    for path in (README, README_ZH):
        assert problems(path.name, path.read_text(encoding="utf-8")) == []


def test_the_check_rejects_a_long_readme_a_missing_command_and_a_missing_need():
    text = README.read_text(encoding="utf-8")
    longer = text + "\n" + "An audit trail row. " * 120 + "\n"                     # 480 words more
    assert any("reading units, above 450" in p for p in problems("README.md", longer))
    in_code = text + "\n```bash\n" + "echo audit trail\n" * 300 + "```\n"           # code is not read: still fine
    assert problems("README.md", in_code) == []
    without_test = text.replace("make test   #", "make check  #")
    assert problems("README.md", without_test) == ["README.md: no `make test` line in a bash block"]
    assert problems("README.md", text.replace("WSL2", "VM")) == ["README.md: does not say 'WSL2'"]
    zh = README_ZH.read_text(encoding="utf-8")
    assert any("above 750" in p for p in problems("README.zh.md", zh + "审计记录" * 60))
    assert reading_units("一二三 four five\n```bash\nsix seven\n```\n[eight](http://x/nine)") == 6


def test_every_relative_link_of_the_readmes_and_docs_resolves():
    pages = [README, README_ZH, REPO_ROOT / "CONTRIBUTING.md", *sorted(DOCS.glob("*.md"))]
    assert {p.name for p in DOCS.glob("*.md")} >= {"setup-details.md", "suite-times.md", "gpu.md", "commands.md",
                                                    "gpu.zh.md", "zh-edition.zh.md"}
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)", page.read_text(encoding="utf-8")):
            path, anchor = target
            if re.match(r"[a-z]+:", path):
                continue
            dest = (page.parent / path).resolve()
            assert dest.exists(), f"{page.name} links {path}"
            if anchor:
                slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                         for h in re.findall(r"^#+ (.*)$", dest.read_text(encoding="utf-8"), flags=re.M)}
                assert anchor in slugs, f"{page.name} links {path}#{anchor}; headings there: {sorted(slugs)}"


def _table(lines: list[str], start: int) -> list[list[str]]:
    out = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        out.append([c.strip() for c in ln.strip().strip("|").split("|")])
    return out


def test_the_readmes_times_are_the_measured_ones():
    """The README's ranges hold every measured row of docs/suite-times.md, and its set-up times are the set-up
    table's (docs/setup-details.md); the Chinese page quotes no number the English one does not."""
    check_times(README.read_text(encoding="utf-8"), README_ZH.read_text(encoding="utf-8"))


def test_the_times_check_rejects_a_range_the_rows_do_not_hold():
    text, zh = README.read_text(encoding="utf-8"), README_ZH.read_text(encoding="utf-8")
    for wrong, right in [("~20–23 min of pytest", "~20–25 min of pytest"),      # the 24.7 min row falls outside
                         ("~15–25 min of pytest", "~20–25 min of pytest"),      # padded: no row near 15
                         ("~35–45 min on an AVX2", "~35–50 min on an AVX2"),
                         ("~1.0 min of set-up", "~1.3 min of set-up")]:
        assert right in text
        with pytest.raises(AssertionError):
            check_times(text.replace(right, wrong), zh)
    with pytest.raises(AssertionError):
        check_times(text, zh.replace("20–25", "20–26"))                          # the Chinese page drifted


def check_times(text: str, zh: str) -> None:
    lo, hi = map(float, re.search(r"~(\d+)–(\d+) min of pytest on a 2-core Xeon", text).groups())
    slo, shi = map(float, re.search(r"~(\d+)–(\d+) min on an AVX2-only AMD EPYC", text).groups())
    times = (DOCS / "suite-times.md").read_text(encoding="utf-8").splitlines()
    rows = _table(times, next(i for i, ln in enumerate(times) if ln.startswith("| when (tree) | machine")))
    xeon = [float(re.match(r"([\d.]+) min", r[4]).group(1)) for r in rows if "Xeon" in r[1]]
    slow = [float(t) for r in rows if "AVX2 + FMA only" in r[1]
            for t in re.findall(r"(?:^|pytest )([\d.]+) min", r[4] + " | " + r[5])]
    # each range holds every row and is no wider than they are (its ends within a minute or two of the extremes)
    assert len(xeon) >= 5 and all(lo <= t <= hi for t in xeon) and min(xeon) < lo + 1 and max(xeon) > hi - 1, xeon
    assert len(slow) == 2 and all(slo <= t <= shi for t in slow) and min(slow) < slo + 1 and max(slow) > shi - 2, slow
    setup = (DOCS / "setup-details.md").read_text(encoding="utf-8")
    row = next(ln for ln in setup.splitlines() if ln.startswith("| `make setup` (inside both)"))
    first_run = re.search(r"set-up from a local mirror, ~(\d+) min over the network", text)
    assert "~1.3 min of set-up from a local mirror" in text and "~1.3 min on the 2-core Xeon" in row
    assert first_run and f"~{first_run.group(1)} min where PyPI's ~3 GB come over the network" in row
    assert "~35–50 s to start" in text and "~35–50 s to start" in setup and "~3.4 GiB" in setup
    numbers = lambda t: set(re.findall(r"\d+(?:\.\d+)*", re.sub(r"^```.*?^```", "", t, flags=re.S | re.M)))  # noqa: E731
    assert numbers(zh) <= numbers(text)
