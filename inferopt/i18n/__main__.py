"""The Chinese edition's tools: ``python -m inferopt.i18n {build,check,diff,update}``.

  build [NB ...]   regenerate zh/chapters and zh/labs from the English notebooks + their .po files (make zh)
  check            every English unit has a current translation that keeps its numbers, inline code,
                   flags, links and math and uses the glossary's terms (both ways, no retired form); the zh
                   notebooks are as build writes them; what assets-check checks; the glossary over inferopt.po
  diff NB          what changed in each stale unit of NB: the English it was translated from, today's English,
                   the translation to update
  update [NB ...]  merge each notebook's .po with its current English units (changed units: fuzzy, with the
                   old English kept as ``#| msgid``; new units: empty; removed units: obsolete)
  assets-update    merge locale/zh_CN/LC_MESSAGES/assets.po with the learner-visible prose of assets/ (inferopt.i18n.prose)
  assets-check     every learner-visible asset string has a Chinese translation that keeps its numbers, flags, code
  outputs-todo [NB ...]   the printed lines still English in the zh notebooks, as catalog templates to translate
                   (numbers as {vN}); add each with its Chinese to locale/zh_CN/LC_MESSAGES/inferopt.po, then build
  outputs-count [NB ...]  the English sentences (4+ English words in a row) and their words a learner meets in
                   the stored outputs and figures of the zh notebooks (vLLM's own log lines excepted), per notebook
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inferopt import i18n
from inferopt.errors import CourseError
from inferopt.i18n import build as b
from inferopt.i18n import checks, prose
from inferopt.paths import REPO_ROOT


def unit_problems(nb) -> list[str]:
    """Preservation and glossary problems of the current translations of one notebook."""
    table = b.translations(nb)
    terms = checks.glossary()
    out = []
    for u in b.notebook_units(nb):
        if u.text in table:
            for p in checks.preservation_problems(u.text, table[u.text]) + \
                    checks.glossary_problems(u.text, table[u.text], terms):
                out.append(f"{u.nb} cell {u.cell} unit {u.index}: {p}")
    return out


def check_all(paths=None) -> list[str]:
    problems = []
    for nb in paths or b.sources():
        problems += [s.line() for s in b.stale(nb)] + unit_problems(nb)
    if not paths:
        problems += b.out_of_date() + checks.asset_prose_problems()   # and the asset prose the widgets show (assets.po)
        # and the widgets' and checks' strings (inferopt.po) against the glossary, both ways
        problems += checks.catalog_problems(only=[i18n.po_path(i18n.RUNTIME_DOMAIN)])
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inferopt.i18n", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("build", "update"):
        sub.add_parser(name).add_argument("notebooks", nargs="*")
    sub.add_parser("check")
    sub.add_parser("diff").add_argument("notebook")
    sub.add_parser("assets-update")
    sub.add_parser("assets-check")
    sub.add_parser("outputs-count").add_argument("notebooks", nargs="*")
    sub.add_parser("outputs-todo").add_argument("notebooks", nargs="*")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "build":
            written, left = b.build([b.source_of(n) for n in a.notebooks] or None)
            for p in written:
                print("wrote", p.relative_to(REPO_ROOT))
            for name, n in left.items():
                print(f"{name}: {n} unit(s) still in English (python -m inferopt.i18n diff {name}.ipynb)")
            return 0
        if a.cmd == "update":
            for nb in [b.source_of(n) for n in a.notebooks] or b.sources():
                c = b.update(nb)
                print(f"{b.domain(nb)}: {c['kept']} current, {c['fuzzy']} fuzzy, {c['new']} new, "
                      f"{c['obsolete']} obsolete")
            return 0
        if a.cmd == "assets-update":
            c = prose.update()
            print(f"{prose.DOMAIN}: {c['kept']} kept, {c['new']} new, {c['obsolete']} obsolete "
                  f"({len(prose.english())} learner-visible strings)")
            return 0
        if a.cmd == "assets-check":
            problems = checks.asset_prose_problems()
            for p in problems:
                print("-", p)
            if problems:
                print(f"{len(problems)} problem(s); run {prose.FIX_UPDATE}, then translate the empty entries "
                      f"of locale/zh_CN/LC_MESSAGES/{prose.DOMAIN}.po")
                return 1
            print(f"every learner-visible asset string ({len(prose.english())}) has a current Chinese translation")
            return 0
        if a.cmd == "outputs-count":
            from inferopt.i18n import outputs

            paths = a.notebooks or b.zh_pages()
            counts = outputs.count(paths)
            for p, c in counts.items():
                shown = Path(p).resolve()
                shown = shown.relative_to(REPO_ROOT) if shown.is_relative_to(REPO_ROOT) else shown
                print(f"{shown}: {c['runs']} English sentence(s), "
                      f"{c['words']} word(s)")
            print(f"total: {sum(c['runs'] for c in counts.values())} English sentence(s), "
                  f"{sum(c['words'] for c in counts.values())} word(s) in the stored outputs and figures")
            return 0
        if a.cmd == "outputs-todo":
            import json

            from inferopt.i18n import outputs

            n = 0
            for nb in [b.source_of(x) for x in a.notebooks] or b.sources():
                zh = b.zh_solution_target(nb) or b.zh_target(nb)       # a solution's answers: its zh twin
                todo = outputs.missing_templates(json.loads(nb.read_text(encoding="utf-8")),
                                                 json.loads(zh.read_text(encoding="utf-8")))
                for template, place in todo.items():
                    print(f"{b.domain(nb)} {place}\n  msgid {json.dumps(template, ensure_ascii=False)}")
                n += len(todo)
            print(f"{n} line(s) need a Chinese template")
            return 0
        if a.cmd == "diff":
            print(b.diff_text(b.source_of(a.notebook)))
            return 0
        problems = check_all()
        for p in problems:
            print("-", p)
        if problems:
            print(f"{len(problems)} problem(s); fix the .po files (locale/zh_CN/LC_MESSAGES/), then {b.FIX_BUILD}")
            return 1
        print("every English unit has a current translation; the zh notebooks are up to date")
        return 0
    except CourseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
