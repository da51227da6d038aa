#!/usr/bin/env python3
"""Checks that the docs match the tree (ctest: docs_match_the_code, label cpu).

1. Every folder of the source tree appears in README.md's layout table (as `path/`, or through a
   listed folder below it); folders at any depth under src/ and include/, one level below the
   other top-level folders.
2. docs/notes/README.md indexes every note, and every docs/notes/NAME that a doc names exists.
3. The tests named in comments and docs exist. Looks in src/, include/, cli/, bench/, docs/ (not docs/notes/, whose raw results name the tests
of the commit they were measured at) and README.md for
  - test files: tests/{cpu,gpu,python,tools}/NAME (globs such as test_quant_*.cpp match at least
    one file) and bare test_NAME.cpp / test_NAME.py;
  - GoogleTest names: Suite.Name, Suite.Prefix*, Suite.* and Suite* where Suite is a suite of
    tests/cpu or tests/gpu, or any CamelCase Suite.Name on a line that speaks of tests.
Prints one line per problem (file:line: reference: why) and exits 1 if there is one.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
SCANNED = ["src", "include", "cli", "bench", "docs", "README.md"]
SKIPPED_DIRS = {ROOT / "docs" / "notes"}
LAYOUT_ROOTS = {"src", "include", "cli", "tests", "bench", "fuzz", "docs", "scripts"}
SUFFIXES = {".h", ".cpp", ".cu", ".cuh", ".py", ".md", ".txt", ".sh"}

TEST_MACRO = re.compile(r"\b(?:TEST|TEST_F|TEST_P|TYPED_TEST)\(\s*(\w+)\s*,\s*(\w+)\s*\)")
TEST_PATH = re.compile(r"\btests/(?:cpu|gpu|python|tools)/[\w./*-]*[\w*]")  # may hold a * glob
BARE_TEST_FILE = re.compile(r"(?<![/\w])test_\w+\.(?:cpp|py)\b")
# Suite.Name, Suite.Prefix*, Suite.*; the suite is CamelCase (upper first, some lower case).
DOTTED = re.compile(r"(?<![\w.])([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\.(\*|[A-Z]\w*\*?)(?![\w(])")
# `Suite*` or (Suite*): a wildcard over suites.
SUITE_GLOB = re.compile(r"[`(]([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\*[`)]")
COMMENT = {".h": "//", ".cpp": "//", ".cu": "//", ".cuh": "//", ".py": "#", ".txt": "#", ".sh": "#"}


def known_tests():
    tests = set()
    for path in (ROOT / "tests").rglob("*.cpp"):
        for suite, name in TEST_MACRO.findall(path.read_text(errors="replace")):
            tests.add((suite, name))
    return tests


def scanned_files():
    for entry in SCANNED:
        path = ROOT / entry
        if path.is_file():
            yield path
            continue
        for f in sorted(path.rglob("*")):
            if f.is_file() and f.suffix in SUFFIXES and not any(d in f.parents for d in SKIPPED_DIRS):
                yield f


def layout_problems():
    """Folders that README.md's layout table does not name."""
    listed = set(re.findall(r"`([\w./-]+/)`", (ROOT / "README.md").read_text()))
    folders = []
    for top in sorted(p for p in ROOT.iterdir() if p.is_dir() and p.name in LAYOUT_ROOTS):
        depth = None if top.name in ("src", "include") else 1
        for d in [top, *sorted(top.rglob("*"))]:
            rel = d.relative_to(ROOT)
            if not d.is_dir() or any(part.startswith((".", "__")) for part in rel.parts):
                continue
            if depth is None or len(rel.parts) <= depth + 1:
                folders.append(rel.as_posix() + "/")
    return [f"README.md: {d}: folder missing from the layout table" for d in folders
            if not any(entry.startswith(d) for entry in listed)]


def notes_problems():
    """Notes missing from the index, and index entries or references to notes that do not exist."""
    notes = ROOT / "docs" / "notes"
    index = (notes / "README.md").read_text()
    linked = set(re.findall(r"\]\(([\w.-]+)\)", index))
    problems = [f"docs/notes/README.md: {n.name}: note missing from the index"
                for n in sorted(notes.iterdir()) if n.is_file() and n.name != "README.md" and n.name not in linked]
    problems += [f"docs/notes/README.md: {name}: no such note" for name in sorted(linked) if not (notes / name).is_file()]
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *scanned_files()]:
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for name in re.findall(r"docs/notes/([\w.-]*\w)", line):
                if not (notes / name).is_file():
                    problems.append(f"{f.relative_to(ROOT)}:{lineno}: docs/notes/{name}: no such note")
    return sorted(set(problems))


def main():
    problems = layout_problems() + notes_problems()
    tests = known_tests()
    suites = {s for s, _ in tests}
    test_files = {p.name for p in (ROOT / "tests").rglob("test_*") if p.is_file()}
    for f in scanned_files():
        rel = f.relative_to(ROOT)
        marker = COMMENT.get(f.suffix)
        for lineno, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            if marker is not None:  # code: only its comments name tests
                if marker not in line:
                    continue
                line = line[line.index(marker):]
            where = f"{rel}:{lineno}"
            for ref in TEST_PATH.findall(line):
                if not any(ROOT.glob(ref)):
                    problems.append(f"{where}: {ref}: no such file")
            for ref in BARE_TEST_FILE.findall(line):
                if ref not in test_files:
                    problems.append(f"{where}: {ref}: no such test file under tests/")
            speaks_of_tests = re.search(r"test", line, re.IGNORECASE) is not None
            for suite, name in DOTTED.findall(line):
                ref = f"{suite}.{name}"
                if suite not in suites:
                    if speaks_of_tests and name != "*" and not name.endswith("*") and name[1:2].islower():
                        problems.append(f"{where}: {ref}: no test suite {suite}")
                    continue
                if name == "*":
                    continue
                if name.endswith("*"):
                    if not any(s == suite and n.startswith(name[:-1]) for s, n in tests):
                        problems.append(f"{where}: {ref}: no test of {suite} starts with {name[:-1]}")
                elif (suite, name) not in tests:
                    problems.append(f"{where}: {ref}: no such test")
            for prefix in SUITE_GLOB.findall(line):
                if not any(s.startswith(prefix) for s in suites):
                    problems.append(f"{where}: {prefix}*: no test suite starts with {prefix}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s): docs that do not match the code")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
