"""One source per notebook: each stored .ipynb is paired with its MyST .md twin (jupytext)."""
import shutil
import subprocess
import sys

from inferopt import nbtools
from inferopt.paths import REPO_ROOT


def test_no_builder_writes_notebook_cells():
    """Nothing in the repository builds notebook cells from Python strings any more."""
    out = subprocess.run(["git", "grep", "-l", "-E", r"new_(code|markdown)_cell\(|nbbuild"],
                         cwd=REPO_ROOT, capture_output=True, text=True)
    # tests may build throw-away notebooks in tmp folders; nothing else may build cells
    offenders = [f for f in out.stdout.split() if not f.startswith("tests/")]
    assert not offenders, f"notebook builders found: {offenders}"
    assert not (REPO_ROOT / "scripts").exists()


def test_every_notebook_has_its_twin_and_they_agree():
    problems = nbtools.unsynced_pairs()
    assert not problems, "\n".join(problems)


def _copy_pair(tmp_path, name="03-combination-pitfalls"):
    shutil.copy(REPO_ROOT / "jupytext.toml", tmp_path)
    for ext in (".ipynb", ".md"):
        shutil.copy(REPO_ROOT / "chapters" / f"{name}{ext}", tmp_path)
    return tmp_path / f"{name}.ipynb", tmp_path / f"{name}.md"


def test_the_check_catches_an_edit_and_the_printed_fix_repairs_it(tmp_path):
    ipynb, md = _copy_pair(tmp_path)
    assert nbtools.unsynced_pairs([ipynb]) == []
    text = md.read_text(encoding="utf-8")
    assert "Combination pitfalls" in text
    md.write_text(text.replace("Combination pitfalls", "Combination traps", 1), encoding="utf-8")
    problems = nbtools.unsynced_pairs([ipynb])
    assert len(problems) == 1 and "differ" in problems[0] and "jupytext --sync" in problems[0]
    # the fix the message prints, run where an instructor would run it
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", ipynb.name], cwd=tmp_path, check=True)
    assert nbtools.unsynced_pairs([ipynb]) == []
    nb = nbtools._load(ipynb)
    assert "Combination traps" in "".join(nbtools._source(c) for c in nb["cells"])
    # the stored outputs survived the sync (nbval compares them)
    before = nbtools._load(REPO_ROOT / "chapters" / ipynb.name)
    assert [c.get("outputs") for c in nb["cells"]] == [c.get("outputs") for c in before["cells"]]


def test_an_edit_in_the_notebook_reaches_the_twin(tmp_path):
    ipynb, md = _copy_pair(tmp_path)
    nb = nbtools._load(ipynb)
    first_md = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    first_md["source"] = nbtools._source(first_md) + "\n\nAn instructor's note."
    ipynb.write_text(nbtools._dumps(nb), encoding="utf-8")
    assert nbtools.unsynced_pairs([ipynb])
    subprocess.run([sys.executable, "-m", "jupytext", "--sync", "--quiet", ipynb.name], cwd=tmp_path, check=True)
    assert "An instructor's note." in md.read_text(encoding="utf-8")
    assert nbtools.unsynced_pairs([ipynb]) == []


def test_a_missing_twin_is_named(tmp_path):
    ipynb, md = _copy_pair(tmp_path)
    md.unlink()
    (problem,) = nbtools.unsynced_pairs([ipynb])
    assert "twin" in problem and "missing" in problem


def test_sync_leaves_the_twin_no_older_than_the_notebook(tmp_path):
    """JupyterLab's jupytext refuses a pair whose .ipynb is newer than its .md: sync must not leave one."""
    import os

    ipynb, md = _copy_pair(tmp_path)
    os.utime(md, (1_000_000, 1_000_000))            # a twin far older than its notebook
    nbtools.sync_files([ipynb])
    assert md.stat().st_mtime >= ipynb.stat().st_mtime
    assert nbtools.unsynced_pairs([ipynb]) == []
