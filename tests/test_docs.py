"""The documentation cannot rot: its code references point at the code, and its snippets run.

1. Every reference of the form `path/to/file.py` L123 (`name`) in docs/*.md must land on a line of
   that file that defines `name` at the top level (`def name` or `class name`); `Class.name` names a
   method, defined on a line inside that class. When code moves, repair the numbers
   with `python tests/test_docs.py --fix` (it rewrites each stale number to the one line that defines
   the name in that file, and lists what it cannot resolve).
2. Every ```python block of docs/engine.md runs, in order, in one namespace (as a notebook would), and
   where a ```text block follows it, what the block prints must be exactly that text.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
REFERENCE = re.compile(r"`(?P<path>[\w./-]+\.py)` L(?P<line>\d+) \(`(?P<name>\w+(?:\.\w+)?)`\)")
BLOCK = re.compile(r"```(?P<lang>python|text)\n(?P<body>.*?)```", re.DOTALL)
RUN_SNIPPETS = ["engine.md"]


def references(doc: Path) -> list[tuple[int, re.Match]]:
    """(line of the doc, match) for each code reference in doc."""
    out = []
    for i, line in enumerate(doc.read_text().splitlines(), 1):
        out += [(i, m) for m in REFERENCE.finditer(line)]
    return out


def defines(lines: list[str], i: int, name: str) -> bool:
    """Line i (1-based) defines `name`, or, for `Class.name`, defines name inside class Class."""
    owner, _, name = name.rpartition(".")
    indent = r"\s+" if owner else ""  # a bare name is defined at the module's top level
    if not 1 <= i <= len(lines) or re.match(rf"{indent}(def|class)\s+{re.escape(name)}\b", lines[i - 1]) is None:
        return False
    if not owner:
        return True
    enclosing = next((m[1] for line in reversed(lines[: i - 1]) if (m := re.match(r"class (\w+)", line))), None)
    return enclosing == owner


def definitions(path: Path, name: str) -> list[int]:
    lines = path.read_text().splitlines()
    return [i for i in range(1, len(lines) + 1) if defines(lines, i, name)]


def check_reference(m: re.Match) -> str | None:
    """None when the reference holds, else what is wrong (and where the name is defined now)."""
    path, line, name = ROOT / m["path"], int(m["line"]), m["name"]
    if not path.is_file():
        return f"{m['path']} does not exist"
    if defines(path.read_text().splitlines(), line, name):
        return None
    found = definitions(path, name)
    return f"{m['path']} L{line} does not define {name!r}; it is defined at {found or 'no line'}"


ALL_REFERENCES = [(doc.name, i, m) for doc in DOCS for i, m in references(doc)]


def test_the_engine_chapter_has_references():
    assert sum(1 for doc, _, _ in ALL_REFERENCES if doc == "engine.md") >= 15


@pytest.mark.parametrize("doc,line,m", ALL_REFERENCES, ids=[f"{d}:{i}:{m['name']}" for d, i, m in ALL_REFERENCES])
def test_code_reference_points_at_its_definition(doc, line, m):
    problem = check_reference(m)
    assert problem is None, f"docs/{doc} line {line}: {problem} (repair: python tests/test_docs.py --fix)"


def fix_references() -> list[str]:
    """Rewrite stale line numbers in place where the name is defined exactly once; return what remains."""
    unresolved = []
    for doc in DOCS:
        text = doc.read_text()

        def repair(m: re.Match, doc: Path = doc) -> str:
            if check_reference(m) is None:
                return m[0]
            found = definitions(ROOT / m["path"], m["name"]) if (ROOT / m["path"]).is_file() else []
            if len(found) != 1:
                unresolved.append(f"docs/{doc.name}: {check_reference(m)}")
                return m[0]
            return f"`{m['path']}` L{found[0]} (`{m['name']}`)"

        fixed = REFERENCE.sub(repair, text)
        if fixed != text:
            doc.write_text(fixed)
    return unresolved


# ----------------------------------------------------------------------------- the snippets run
def snippets(doc: Path) -> list[tuple[str, str | None]]:
    """(python code, the text it must print or None) for each python block, in order."""
    blocks = [(m["lang"], m["body"]) for m in BLOCK.finditer(doc.read_text())]
    out = []
    for k, (lang, body) in enumerate(blocks):
        if lang == "python":
            after = blocks[k + 1] if k + 1 < len(blocks) else None
            out.append((body, after[1] if after and after[0] == "text" else None))
    return out


@pytest.mark.parametrize("name", RUN_SNIPPETS)
def test_every_snippet_runs_and_prints_what_the_text_says(name):
    doc = ROOT / "docs" / name
    namespace: dict = {"__name__": f"docs/{name}"}
    blocks = snippets(doc)
    assert blocks, f"docs/{name} has no python snippets"
    for k, (code, expected) in enumerate(blocks, 1):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):  # exec: the docs' own snippets, run as a notebook would
            exec(compile(code, f"docs/{name}, snippet {k}", "exec"), namespace)
        if expected is not None:
            assert printed.getvalue() == expected, (
                f"docs/{name}, snippet {k} printed\n{printed.getvalue()}\ninstead of what the text says:\n{expected}"
            )


if __name__ == "__main__":
    if sys.argv[1:] != ["--fix"]:
        sys.exit("usage: python tests/test_docs.py --fix   (repairs the line numbers of code references in docs/)")
    left = fix_references()
    print("\n".join(left) if left else "every code reference in docs/*.md points at its definition")
    sys.exit(1 if left else 0)


def test_the_reading_guide_gives_the_cores_true_line_counts_and_every_speed_device():
    """docs/READING.md: each core file's line count as it is, and every registered speed device named."""
    import re

    import transformer_np.decoding_cache  # noqa: F401 (registers the decoder's devices)
    from minitensor import fast

    text = (ROOT / "docs" / "READING.md").read_text()
    counts = re.findall(r"\| `(minitensor/core/\w+\.py)` \| (\d+) \|", text)
    assert len(counts) == len(list((ROOT / "minitensor" / "core").glob("*.py")))
    for path, lines in counts:
        assert int(lines) == len((ROOT / path).read_text().splitlines()), f"docs/READING.md: {path}'s line count"
    named = set(re.findall(r"`(\w+)`", text))
    assert sorted(n for n in fast.registered() if not n.startswith("_") and n not in named) == []
