"""The Chinese edition (中文版): translations current, faithful and regenerated; the widgets' and checks' strings.

- drift: every English unit of every chapter and solution has a current translation in its .po; an edited
  English paragraph makes the check fail (naming the unit and the diff command) until its translation is
  updated (shown on a temporary copy);
- preservation + glossary: each translation keeps the numbers, inline code, flags, links and math of its
  English unit and uses the glossary's Chinese terms (and the checks reject a translation that does not);
- the zh notebooks are exactly what ``python -m inferopt.i18n build`` writes: code cells equal to the English
  notebooks', outputs the English run's translated through the catalog's templates (``inferopt.i18n.outputs``;
  tests/test_i18n_outputs.py checks none is left in English), markdown translated;
- runtime: ``tr``/``localize`` answer in the edition ``INFEROPT_EDITION`` (or the ``zh/`` folder) selects,
  every ``tr("...")`` of the package has a translation, a lab check's hint renders in Chinese.
"""
from __future__ import annotations

import ast
import copy
import json
import re
import shutil

import polib
import pytest

from inferopt import i18n
from inferopt.errors import CourseError
from inferopt.i18n import build as b
from inferopt.i18n import checks, outputs
from inferopt.i18n.__main__ import main, unit_problems
from inferopt.paths import REPO_ROOT

SOURCES = b.sources()
IDS = [b.domain(p) for p in SOURCES]
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("nb", SOURCES, ids=IDS)
def test_every_english_unit_has_a_current_translation(nb):
    stale = b.stale(nb)
    assert not stale, f"{len(stale)} stale unit(s):\n" + "\n".join(s.line() for s in stale)


@pytest.mark.parametrize("nb", SOURCES, ids=IDS)
def test_translations_keep_numbers_code_flags_links_math_and_use_the_glossary(nb):
    problems = unit_problems(nb)
    assert not problems, "\n".join(problems)


def test_zh_notebooks_are_what_the_build_command_writes():
    problems = b.out_of_date()
    assert not problems, "\n".join(problems)


def _text(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _outputs(cell) -> list:
    """A code cell's outputs without their figure images (an image is drawn from the figure's JSON)."""
    outs = copy.deepcopy(cell.get("outputs", []))
    for o in outs:
        o.get("data", {}).pop("image/png", None)
        o.get("metadata", {}).pop("inferopt", None)
        if isinstance(o.get("text"), list):                       # as nbformat stores it: a list of lines
            o["text"] = "".join(o["text"])
        for k, v in o.get("data", {}).items():
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                o["data"][k] = "".join(v)
    return outs


def _code(nb: dict, translate: bool = False) -> list:
    return [(_text(c), _outputs(outputs.translate_outputs(copy.deepcopy(c)) if translate else c),
             c.get("execution_count")) for c in nb["cells"] if c["cell_type"] == "code"]


@pytest.mark.parametrize("nb", SOURCES, ids=IDS)
def test_zh_code_cells_are_the_english_ones_and_outputs_their_translation(nb, monkeypatch):
    zh = json.loads(b.zh_target(nb).read_text(encoding="utf-8"))
    english = REPO_ROOT / "labs" / nb.name if b.english_home(nb) == "labs" else nb
    en = json.loads(english.read_text(encoding="utf-8"))
    monkeypatch.setenv(i18n.ENV, "zh")
    assert _code(zh) == _code(en, translate=True)
    assert [c["cell_type"] for c in zh["cells"]] == [c["cell_type"] for c in en["cells"]]
    first_md = next(c for c in zh["cells"] if c["cell_type"] == "markdown")
    assert "中文版说明" in _text(first_md)           # says where its outputs come from
    assert HAN.search("".join(_text(c) for c in zh["cells"] if c["cell_type"] == "markdown"))


# ------------------------------------------------------------------ the drift check on a temporary copy
@pytest.fixture
def tmp_course(tmp_path, monkeypatch):
    """Chapter 07 and its .po in a temporary repository that the i18n tools read instead of the real one."""
    src = REPO_ROOT / "chapters" / "07-knowledge-map-and-tradeoffs.ipynb"
    (tmp_path / "chapters").mkdir()
    (tmp_path / "solutions").mkdir()
    nb = tmp_path / "chapters" / src.name
    shutil.copy(src, nb)
    po_dir = tmp_path / "locale" / "zh_CN" / "LC_MESSAGES" / "chapters"
    po_dir.mkdir(parents=True)
    shutil.copy(i18n.po_path("chapters/07-knowledge-map-and-tradeoffs"), po_dir)
    for mod, name, value in [(b, "REPO_ROOT", tmp_path), (b, "CHAPTERS", tmp_path / "chapters"),
                             (b, "SOLUTIONS", tmp_path / "solutions"), (b, "ZH_ROOT", tmp_path / "zh"),
                             (i18n, "LOCALE", tmp_path / "locale")]:
        monkeypatch.setattr(mod, name, value)
    return nb


def _edit_english(nb, old: str, new: str) -> None:
    data = json.loads(nb.read_text(encoding="utf-8"))
    cell = next(c for c in data["cells"] if c["cell_type"] == "markdown" and old in "".join(c["source"]))
    cell["source"] = "".join(cell["source"]).replace(old, new)
    nb.write_text(json.dumps(data), encoding="utf-8")


def test_drift_check_fails_on_an_edited_english_paragraph_until_its_translation_is_updated(tmp_course, capsys):
    nb = tmp_course
    assert b.stale(nb) == []
    _edit_english(nb, "about 10 minutes of reading", "about 15 minutes of reading")
    stale = b.stale(nb)
    assert [(s.why, s.unit.cell) for s in stale] == [("changed", 0)]
    assert "python -m inferopt.i18n diff chapters/07-knowledge-map-and-tradeoffs.ipynb" in stale[0].line()
    # the diff command shows the English it was translated from, today's English and the translation
    assert main(["diff", str(nb)]) == 0
    out = capsys.readouterr().out
    assert "-**Time**: about 10 minutes" in out and "+**Time**: about 15 minutes" in out and "阅读约 10 分钟" in out
    # update keeps the old translation as fuzzy: still stale
    assert main(["update", str(nb)]) == 0
    assert [s.why for s in b.stale(nb)] == ["fuzzy"]
    # a translation still saying 10 minutes would not pass the preservation check either
    po_file = i18n.po_path("chapters/07-knowledge-map-and-tradeoffs")
    po = polib.pofile(str(po_file))
    entry = next(e for e in po if "fuzzy" in e.flags)
    assert checks.preservation_problems(entry.msgid, entry.msgstr) == ["numbers missing: 15"]
    entry.msgstr = entry.msgstr.replace("10 分钟", "15 分钟", 1)
    entry.flags.remove("fuzzy")
    po.save(str(po_file))
    assert b.stale(nb) == [] and unit_problems(nb) == []
    # a brand-new paragraph is stale as "new"
    _edit_english(nb, "## What to remember", "## What to remember\n\nA paragraph nobody translated.")
    assert [s.why for s in b.stale(nb)] == ["new"]


def test_a_zh_notebook_out_of_date_is_found(tmp_course):
    b.build([tmp_course])
    assert b.out_of_date() == []
    target = b.zh_target(tmp_course)
    target.write_text(target.read_text(encoding="utf-8").replace("知识图", "知识地图", 1), encoding="utf-8")
    assert b.out_of_date() == ["zh/chapters/07-knowledge-map-and-tradeoffs.ipynb is not what the English notebook "
                               "and its .po give; fix: python -m inferopt.i18n build   (or: make zh)"]


# ------------------------------------------------------------------ the checks reject what they should
ENGLISH = ("Run `vllm serve` with `--enable-prefix-caching` and 3.5 GiB of KV cache for $B \\cdot L$ tokens; "
           "see [Chapter 2](02-decision-tree.ipynb).")
GOOD = "用 `--enable-prefix-caching` 运行 `vllm serve`，KV Cache 3.5 GiB，容纳 $B \\cdot L$ 个 token；见[第 2 章](02-decision-tree.ipynb)。"


@pytest.mark.parametrize("bad, problem", [
    (GOOD.replace("3.5", "4.5"), "numbers missing: 3.5"),
    (GOOD.replace("`vllm serve`", "vllm serve"), "code missing: vllm serve"),
    (GOOD.replace("`--enable-prefix-caching`", "前缀缓存"), "code missing: --enable-prefix-caching"),
    (GOOD.replace("02-decision-tree.ipynb", "02b-decision-tree-live.ipynb"), "links missing: 02-decision-tree.ipynb"),
    (GOOD.replace("$B \\cdot L$", "B·L"), "math missing: $B \\cdot L$"),
])
def test_preservation_check_rejects_a_lost_or_changed_item(bad, problem):
    assert checks.preservation_problems(ENGLISH, GOOD) == []
    assert problem in checks.preservation_problems(ENGLISH, bad)


def test_preservation_check_reads_a_flag_outside_code():
    assert checks.preservation_problems("pass --max-num-seqs 8", "传入 --max-num-seqs 8") == []
    assert checks.preservation_problems("pass --max-num-seqs 8", "传入 8") == ["flags missing: --max-num-seqs"]


def test_glossary_check_rejects_a_translation_without_the_term():
    english = "Prefix caching cuts the time to first token."
    assert checks.glossary_problems(english, "前缀缓存降低首 token 延迟。") == []
    assert checks.glossary_problems(english, "前缀缓存降低第一个 token 的时间。") == [
        "glossary: 'time to first token' should appear as 首 token 延迟"]
    # inside inline code a term is code, not prose
    assert checks.glossary_problems("set `prefix_caching`", "设置 `prefix_caching`") == []


def test_the_glossary_pairs_are_the_ones_the_english_text_gives_at_first_use():
    """Each '(English..., 中文)' pairing the English chapters give for a glossary term agrees with the glossary
    (its term, or the older rendering it records as ``gloss``, which no translation may use)."""
    terms = {e.lower(): t["zh"] + t.get("gloss", []) for t in checks.glossary() for e in t["en"]}
    seen = 0
    for md in sorted((REPO_ROOT / "chapters").glob("*.md")) + sorted((REPO_ROOT / "solutions").glob("*.md")):
        for en, zh in re.findall(r"([A-Za-z][A-Za-z' -]{2,40}) \((?:[A-Z]{2,5}, )?([\u4e00-\u9fff][^,;)]*)\)",
                                 md.read_text(encoding="utf-8")):
            for n in range(1, 5):
                key = " ".join(en.lower().split()[-n:])
                if key in terms:
                    seen += 1
                    assert any(z in zh for z in terms[key]), f"{md.name}: {en} ({zh}) vs glossary {terms[key]}"
                    break
    assert seen > 20


# ------------------------------------------------------------------ runtime strings
def test_edition_is_one_setting_and_a_bad_value_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    assert i18n.edition() == "zh" and i18n.tr("Baseline") == "基线"
    monkeypatch.setenv("INFEROPT_EDITION", "en")
    assert i18n.tr("Baseline") == "Baseline"
    monkeypatch.setenv("INFEROPT_EDITION", "cn")
    with pytest.raises(CourseError, match="INFEROPT_EDITION='cn' is not an edition"):
        i18n.edition()
    monkeypatch.delenv("INFEROPT_EDITION")
    monkeypatch.chdir(tmp_path)
    assert i18n.edition() == "en"
    (REPO_ROOT / "zh" / "chapters").mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(REPO_ROOT / "zh" / "chapters")        # a kernel of a Chinese notebook
    assert i18n.edition() == "zh"


def _tr_literals() -> list[tuple[str, str]]:
    out = []
    for f in sorted((REPO_ROOT / "inferopt").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "tr"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                out.append((str(f.relative_to(REPO_ROOT)), node.args[0].value))
    return out


def test_every_tr_string_of_the_package_has_a_chinese_translation():
    literals = _tr_literals()
    assert len(literals) > 30
    cat = i18n.catalog("zh_CN")
    missing = [f"{f}: {s!r}" for f, s in literals if s not in cat]
    assert not missing, f"add to {i18n.po_path('inferopt').relative_to(REPO_ROOT)}:\n" + "\n".join(missing)
    for _f, s in literals:
        assert set(re.findall(r"\{(\w+)\}", s)) == set(re.findall(r"\{(\w+)\}", cat[s])), s


def test_a_composed_hint_is_localized_fragment_by_fragment(monkeypatch):
    from inferopt.labcheck import CheckFailed, NotDone

    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    line = NotDone("Task 2 is not done yet: define `predicted_tokens` (run the task's cell first)")._render_traceback_()[0]
    assert "任务 2 还没有完成" in line and "`predicted_tokens`" in line
    monkeypatch.setenv("INFEROPT_EDITION", "en")
    assert "Task 2 is not done yet" in CheckFailed("Task 2 is not done yet: define `x`")._render_traceback_()[0]


def test_a_lab_check_given_a_wrong_answer_hints_in_chinese(monkeypatch):
    """Lab 1's pitfall check, answered with a real pitfall id that is not the one in the plan."""
    from inferopt.diagnosis import knowledge
    from inferopt.labcheck import CheckFailed, lab1

    right = {c["id"] for c in lab1.conflicts_for(lab1.PLAN, lab1.PLAN_WORKLOAD)}
    wrong = next(p["id"] for p in knowledge.load("pitfalls")["pitfalls"] if p["id"] not in right)
    with pytest.raises(CheckFailed) as info:
        lab1.part3({"pitfall": wrong})
    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    line = info.value._render_traceback_()[0]
    assert f"第 3 部分：引擎中 '{wrong}' 的规则对这个方案不触发" in line, line
    monkeypatch.setenv("INFEROPT_EDITION", "en")
    assert "the engine's rule for" in info.value._render_traceback_()[0]


def test_the_chinese_book_builds_offline_and_links_to_the_english_one(tmp_path):
    from inferopt import book

    manifest = book.build(tmp_path, edition="zh")
    assert book.check_book(manifest) == []
    index = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    assert 'lang="zh-CN"' in index and 'href="../index.html"' in index
    page = (tmp_path / "html" / "chapters" / "07-knowledge-map-and-tradeoffs.html").read_text(encoding="utf-8")
    assert "知识图" in page and "中文版说明" in page
    # the check notices a missing link between the editions
    assert book.check_book({**manifest, "other_edition": "nowhere.html"})[-1].startswith("index.html does not link")


def test_make_lab_edition_zh_opens_the_chinese_start_page_with_chinese_menus():
    import subprocess
    from importlib import metadata

    def lab_command(*args):
        return subprocess.run(["make", "--no-print-directory", "-s", "lab-command", *args], cwd=REPO_ROOT,
                              capture_output=True, text=True)

    zh, en = lab_command("EDITION=zh").stdout, lab_command().stdout
    assert zh.startswith("INFEROPT_EDITION=zh JUPYTER_CONFIG_PATH=") and f"{REPO_ROOT}/jupyter/zh:" in zh
    assert "INFEROPT_EDITION" not in en and "jupyter/zh" not in en
    server = json.loads((REPO_ROOT / "jupyter/zh/jupyter_server_config.json").read_text(encoding="utf-8"))
    start = server["LabApp"]["default_url"].removeprefix("/lab/tree/")
    assert start == "zh/chapters/00-start-here.ipynb" and (REPO_ROOT / start).exists()
    overrides = json.loads((REPO_ROOT / "jupyter/zh/labconfig/default_setting_overrides.json").read_text())
    assert overrides["@jupyterlab/translation-extension:plugin"]["locale"] == "zh_CN"
    assert metadata.version("jupyterlab-language-pack-zh-CN")          # the menus' translations are installed
    bad = lab_command("EDITION=cn")
    assert bad.returncode != 0 and "EDITION=cn is not an edition of the course" in bad.stderr


def test_the_learner_pack_holds_the_chinese_labs_but_no_worked_answer(tmp_path):
    """`make learner-pack` leaves out solutions/ and their translations (which hold the answers' markdown)."""
    import subprocess
    import tarfile

    pack = tmp_path / "pack.tar.gz"
    subprocess.run(["make", "--no-print-directory", "-s", "learner-pack", f"PACK={pack}"], cwd=REPO_ROOT,
                   check=True, capture_output=True)
    names = tarfile.open(pack).getnames()
    assert "inference-course/zh/labs/lab2-memory-calculator.ipynb" in names
    assert not [n for n in names if "/solutions/" in n or n.endswith("/solutions")], "a solution is in the pack"
    translations = b.translations(REPO_ROOT / "solutions" / "lab2-memory-calculator.ipynb")
    answer = next(zh for en, zh in translations.items() if en.startswith("BEGIN SOLUTION"))
    with tarfile.open(pack) as tar:
        lab = tar.extractfile("inference-course/zh/labs/lab2-memory-calculator.ipynb").read().decode()
    assert answer.splitlines()[1][:30] not in lab and "在此作答" in lab and "YOUR ANSWER HERE" not in lab


@pytest.mark.parametrize("check, ns, chinese", [
    ("lab5.task1", {"my_rule": [], "my_test": {}}, "任务 1：my_rule 和 my_test 都应是 dict"),
    ("lab5.task1", {"my_rule": {"alert": "KVFull"}, "my_test": {}}, "任务 1：告警名应为 KVCacheNearlyFull"),
    ("lab1.part2", {"answers": [], "INCIDENTS": {}, "SLO": {}}, "第 2 部分：`answers` 应是一个 dict"),
    ("lab1.part2", {"answers": {}, "INCIDENTS": {"support-bot": {}}, "SLO": {}},
     "第 2 部分 还没有完成：`answers` 里缺少 support-bot 的条目"),
])
def test_the_hints_the_review_found_without_a_template_render_in_chinese(monkeypatch, check, ns, chinese):
    """zh review §4: lab checks whose hints stayed English (only the task prefix translated), raised by the real
    checks on a wrong submission."""
    import importlib

    from inferopt.labcheck import CheckFailed, NotDone

    module, name = check.split(".")
    with pytest.raises((CheckFailed, NotDone)) as info:
        getattr(importlib.import_module(f"inferopt.labcheck.{module}"), name)(ns)
    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    line = info.value._render_traceback_()[0]
    assert chinese in line, line


@pytest.mark.parametrize("english, chinese", [
    ("Task 2: max_concurrency should return a pair (best, basis)", "任务 2：max_concurrency 应返回一个二元组"),
    ("Task 4: your max_concurrency differs from the course's on today's sweep", "与课程在今天这次扫描上的结果不一致"),
    ("Task 4: your P95 TTFT at concurrency 4 differs from the course's on today's records",
     "任务 4：并发 4 下你的 P95 TTFT 与课程根据今天的记录算出的不一致"),
    ("Task 3: requests_that_fit should return a whole number of requests as an int (int(...), math.floor(...)), "
     "got float", "应返回 int 类型的整数请求数"),
    ("Task 1: your code ended the process it was graded in (exit, os._exit or a crash)", "你的代码结束了评分所在的进程"),
    ("Task 1: your cells could not be loaded for grading (SyntaxError)", "你的单元格无法加载，没法评分（SyntaxError）"),
    ("Task 1: tpot_ms is wrong for a record the check made up (n=5): TPOT starts after the first token: subtract "
     "the TTFT", "TPOT 从首个 token 之后才开始算：要减去 TTFT"),
])
def test_the_other_hints_without_a_template_localize(monkeypatch, english, chinese):
    from inferopt.i18n.leftover import english_runs

    monkeypatch.setenv("INFEROPT_EDITION", "zh")
    shown = i18n.localize(english)
    assert chinese in shown and not english_runs(shown), shown


def test_lab1_prints_its_six_incident_reports_in_chinese(monkeypatch):
    """zh review §4: the reports the learner must read; the set-up cell prints each through tr()."""
    import contextlib
    import io

    nb = json.loads((REPO_ROOT / "zh" / "labs" / "lab1-decision-tree.ipynb").read_text(encoding="utf-8"))
    cell = next(_text(c) for c in nb["cells"] if c["cell_type"] == "code" and "REPORTS = {" in _text(c))
    out = {}
    for edition in ("en", "zh"):
        monkeypatch.setenv("INFEROPT_EDITION", edition)
        buf, scope = io.StringIO(), {}
        with contextlib.redirect_stdout(buf):
            exec(cell, scope)
        out[edition] = buf.getvalue()
    reports = list(scope["REPORTS"].values())
    assert len(reports) == 6 and all(r in out["en"] for r in reports)
    assert not any(r in out["zh"] for r in reports)
    assert len(HAN.findall(out["zh"])) > 200 and "Chunked Prefill 被关掉了" in out["zh"]
    for r in reports:                     # each report's Chinese keeps the glossary's terms
        assert checks.glossary_problems(r, i18n.catalog("zh_CN")[r]) == []
