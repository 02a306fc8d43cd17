"""The house rules of the source tree, checked by reading every import with `ast` (no module is imported).

Walks minitensor/, transformer_np/, parity/ and benchmarks/ (tests/ and notebooks/ are outside these rules),
counting imports at any level (function bodies, class bodies, if/try blocks, `if TYPE_CHECKING:` too;
relative imports resolved to module names), and fails on:

    cycle             an import cycle between modules (a strongly connected component of the import graph)
    function-import   a first-party import inside a function body without a reason comment on its line, on
                      the line just above it, or just above the run of import lines it belongs to
    private-import    a private name (one leading underscore) imported from another first-party module
    package-layer     an import against the packages' order (LAYERS): minitensor imports none of the others,
                      transformer_np only minitensor, parity those two, benchmarks and course any of the three
                      below them but not each other
    no-concern        a module without a docstring: its first line names the one concern of the file (files are
                      split by concern, not by size: there is no length limit)
    late-import       an import after the first top-level statement that is not an import, other than under
                      `if __name__ == "__main__":`, `if TYPE_CHECKING:`, or after a documented start-up block
                      (a top-level `if` or call with a comment on the line above or its first line: setting the
                      thread variables before numpy loads, as benchmarks/worker.py does)
    sys-modules-alias an assignment into `sys.modules`

KNOWN lists accepted exceptions (none today); a violation not in it fails, and so does an entry that no longer
occurs, so the list only shrinks. Run `python tests/test_layering.py` to print every
violation found, as KNOWN entries.
"""

from __future__ import annotations

import ast
import os
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("minitensor", "transformer_np", "parity", "benchmarks", "course")
IMPORTS = (ast.Import, ast.ImportFrom)
# The packages' order: a package imports only packages of a lower layer (the engine knows nothing of its users).
LAYERS = {"minitensor": 0, "transformer_np": 1, "parity": 2, "benchmarks": 3, "course": 3}

# Exceptions to the rules, as (rule, file, detail). Empty: keep it so, and
# fix a violation rather than listing it here.
KNOWN: set[tuple[str, str, str]] = set()


@dataclass
class Violation:
    rule: str
    file: str
    line: int
    detail: str
    fix: str

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.rule, self.file, self.detail)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: [{self.rule}] {self.detail}\n    fix: {self.fix}"


@dataclass
class Module:
    name: str  # dotted, e.g. minitensor.nn.functional
    file: str  # relative to ROOT, e.g. minitensor/nn/functional.py
    tree: ast.Module
    lines: list[str]
    is_package: bool
    imports: list[tuple[int, str]] = field(default_factory=list)  # (line, imported module), every level


def _modules(root: str = ROOT, packages=PACKAGES) -> dict[str, Module]:
    mods = {}
    for pkg in packages:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, pkg)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "__pycache__")))
            for fn in sorted(filenames):
                if not fn.endswith(".py"):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                parts = rel[:-3].split("/")
                is_package = parts[-1] == "__init__"
                if is_package:
                    parts = parts[:-1]
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                mods[".".join(parts)] = Module(
                    ".".join(parts), rel, ast.parse(text, filename=rel), text.splitlines(), is_package
                )
    return mods


def _first_party(name: str, mods: dict[str, Module]) -> bool:
    return name.split(".")[0] in mods


def _resolve(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute module name a `from X import ...` reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = mod.name.split(".")
    if not mod.is_package:
        base = base[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(mod: Module, node: ast.stmt, mods: dict[str, Module]) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) pairs of one import statement; a name that is itself a
    module (`from pkg import sub`) is the module pkg.sub."""
    if isinstance(node, ast.Import):
        return [(a.name, None) for a in node.names]
    base = _resolve(mod, node)
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        out.append((sub, None) if sub in mods else (base, a.name))
    return out


def _known_module(name: str, mods: dict[str, Module]) -> str | None:
    """The longest prefix of `name` that is a walked module (import a.b.c may name a package's attribute)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in mods:
            return cand
    return None


def _has_reason(lines: list[str], lineno: int, end: int) -> bool:
    """A comment saying something (not only noqa/type: ignore) on lines lineno..end (1-based)."""
    for i in range(lineno, end + 1):
        text = lines[i - 1]
        if "#" in text:
            comment = text[text.index("#") + 1 :].strip()
            for tag in ("noqa", "type: ignore"):
                if comment.startswith(tag):
                    comment = comment.split(None, 2)[2] if len(comment.split(None, 2)) > 2 else ""
            if any(ch.isalpha() for ch in comment):
                return True
    return False


def _comment_line(text: str) -> bool:
    return text.strip().startswith("#")


def _reason_for_import(lines: list[str], node: ast.stmt) -> bool:
    """A comment on the import's own lines, or just above it or above the run of import lines it sits in."""
    if _has_reason(lines, node.lineno, node.end_lineno):
        return True
    i = node.lineno - 1  # 1-based number of the line above
    while i >= 1 and lines[i - 1].strip().startswith(("import ", "from ")) and not _comment_line(lines[i - 1]):
        i -= 1
    return i >= 1 and _comment_line(lines[i - 1])


def _child_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements directly inside `node` (imports are statements: expressions need no visit, which keeps the
    walk fast)."""
    out = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(node, name, None)
        if isinstance(block, list):
            out += block
    for part in getattr(node, "handlers", []) + getattr(node, "cases", []):
        out += part.body
    return out


def _all_statements(node: ast.AST):
    for child in _child_statements(node):
        yield child
        yield from _all_statements(child)


def _walk_imports(mod: Module, mods: dict[str, Module], out: list[Violation]) -> None:
    """Every import of `mod`, at any depth: record graph edges; check function-import and private-import."""

    def visit(node: ast.AST, func: str | None, scope: str) -> None:
        for child in _child_statements(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, f"{scope}{child.name}", f"{scope}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, func, f"{scope}{child.name}.")
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                check(child, func)
            else:
                visit(child, func, scope)

    def check(node, func):
        targets = _targets(mod, node, mods)
        first = [(m, n) for m, n in targets if _first_party(m, mods)]
        for m, _ in first:
            known = _known_module(m, mods)
            if known and known != mod.name:
                mod.imports.append((node.lineno, known))
        if func and first and not _reason_for_import(mod.lines, node):
            names = ", ".join(sorted({_known_module(m, mods) or m for m, _ in first}))
            out.append(
                Violation(
                    "function-import",
                    mod.file,
                    node.lineno,
                    f"in {func}: {names}",
                    "move the import to the top of the module; if it must stay inside the function (the numpy "
                    "worker must never load torch, command-line start-up time), say why in a comment on that "
                    "line or just above it. Breaking a cycle is not a reason: move the code instead.",
                )
            )
        for m, n in first:
            if n and n.startswith("_") and not n.startswith("__") and _known_module(m, mods) != mod.name:
                out.append(
                    Violation(
                        "private-import",
                        mod.file,
                        node.lineno,
                        f"{n} from {m}",
                        f"{n} is private to {m}: make it public (no underscore) in its one home, or move the code "
                        "that needs it there",
                    )
                )

    visit(mod.tree, None, "")


def _is_name_main(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators)
    )


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_only(node: ast.stmt) -> bool:
    """An import, or a try/if whose bodies hold only imports (an optional dependency, TYPE_CHECKING)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Try):
        bodies = [node.body] + [h.body for h in node.handlers] + [node.orelse]
        return all(_import_only(s) or isinstance(s, (ast.Pass, ast.Assign)) for b in bodies for s in b) and all(
            _import_only(s) for s in node.body
        )
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        return True
    return False


def _startup_block(mod: Module, node: ast.stmt) -> bool:
    """A top-level `if` or bare call carrying a comment (above it, on its line or its first body line):
    work that must run before the imports below it (thread variables before numpy loads)."""
    if not isinstance(node, (ast.If, ast.Expr)):
        return False
    if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call):
        return False
    first_body = node.body[0].lineno if isinstance(node, ast.If) else node.lineno
    return (node.lineno > 1 and _comment_line(mod.lines[node.lineno - 2])) or _has_reason(
        mod.lines, node.lineno, first_body
    )


def _late_imports(mod: Module, mods: dict[str, Module], out: list[Violation]) -> None:
    body = mod.tree.body
    start = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else 0
    seen_other = None  # the first top-level statement that is not an import
    for node in body[start:]:
        if _import_only(node):
            if seen_other is not None:
                imported = sorted(
                    {
                        m
                        for s in [node, *_all_statements(node)]
                        if isinstance(s, IMPORTS)
                        for m, _ in _targets(mod, s, mods)
                    }
                )
                detail = "import of " + ", ".join(imported)
                out.append(
                    Violation(
                        "late-import",
                        mod.file,
                        node.lineno,
                        detail,
                        f"imports belong at the top, before line {seen_other} (the first other statement); move it "
                        "up, or restructure so the module that needs it does not import this one",
                    )
                )
            continue
        if isinstance(node, ast.If) and _is_name_main(node.test):
            continue
        if _startup_block(mod, node):
            continue
        if seen_other is None:
            seen_other = node.lineno


def _package_layers(mod: Module, out: list[Violation]) -> None:
    here = mod.name.split(".")[0]
    for line, imported in mod.imports:
        there = imported.split(".")[0]
        if there != here and there in LAYERS and here in LAYERS and LAYERS[there] >= LAYERS[here]:
            out.append(
                Violation(
                    "package-layer",
                    mod.file,
                    line,
                    f"{here} imports {imported}",
                    f"{here} may import only {', '.join(p for p in LAYERS if LAYERS[p] < LAYERS[here]) or 'none'}"
                    " of the project's packages: move what both need down a layer",
                )
            )


def _sys_modules_alias(mod: Module, out: list[Violation]) -> None:
    for node in _all_statements(mod.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Attribute)
                    and t.value.attr == "modules"
                    and isinstance(t.value.value, ast.Name)
                    and t.value.value.id == "sys"
                ):
                    out.append(
                        Violation(
                            "sys-modules-alias",
                            mod.file,
                            node.lineno,
                            "assignment into sys.modules",
                            "make the module importable under its own name (a package with a real submodule) "
                            "instead of aliasing it",
                        )
                    )


def _cycles(mods: dict[str, Module], out: list[Violation]) -> None:
    """Tarjan's strongly connected components of the module graph; each with more than one module is a cycle."""
    graph = {m: sorted({t for _, t in mod.imports if t in mods}) for m, mod in mods.items()}
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def strong(v):  # iterative: a deep package must not hit the recursion limit
        work = [(v, iter(graph[v]))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            strong(v)
    for comp in comps:
        if len(comp) < 2:
            continue
        members = set(comp)
        files = sorted(mods[m].file for m in comp)
        path = _one_cycle(graph, members, min(comp))
        edges = []
        for a, b in zip(path, path[1:]):
            line = min(ln for ln, t in mods[a].imports if t == b)
            edges.append(f"{mods[a].file}:{line} imports {b}")
        out.append(
            Violation(
                "cycle",
                files[0],
                1,
                f"{len(files)} files: " + " ".join(files),
                "imports must point one way; one cycle among them: "
                + "; ".join(edges)
                + ". Move the shared code into a module both can import, or move the code to where it belongs.",
            )
        )


def _one_cycle(graph: dict, members: set, start: str) -> list[str]:
    """A shortest path start -> ... -> start inside one component (breadth first)."""
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return [*reversed(path), start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def violations(root: str = ROOT, packages=PACKAGES) -> list[Violation]:
    mods = _modules(root, packages)
    out: list[Violation] = []
    for mod in mods.values():
        _walk_imports(mod, mods, out)
        _late_imports(mod, mods, out)
        _sys_modules_alias(mod, out)
        _package_layers(mod, out)
        if any(line.strip() for line in mod.lines) and not ast.get_docstring(mod.tree):
            out.append(
                Violation(
                    "no-concern",
                    mod.file,
                    1,
                    "no module docstring",
                    "begin the file with a docstring whose first line names its one concern",
                )
            )
    _cycles(mods, out)
    return out


def test_the_house_rules_hold():
    found = violations()
    keys = {v.key for v in found}
    new = [v for v in found if v.key not in KNOWN]
    gone = sorted(KNOWN - keys)
    msg = []
    if new:
        msg.append(f"{len(new)} layering violation(s) (rules: tests/test_layering.py docstring):")
        msg += [str(v) for v in sorted(new, key=lambda v: (v.file, v.line))]
    if gone:
        msg.append(
            f"{len(gone)} KNOWN entr{'y no longer occurs' if len(gone) == 1 else 'ies no longer occur'}: "
            "remove it from KNOWN in tests/test_layering.py (the list only shrinks):"
        )
        msg += [f"    {k!r}," for k in gone]
    if msg:
        pytest.fail("\n".join(msg), pytrace=False)


def test_every_rule_fires_on_a_scratch_package(tmp_path):
    """The checker itself: a package built to break each rule once is caught on each, at the right line."""
    files = {
        "__init__.py": "",
        "a.py": """
            \"\"\"a: one cycle, a private import, an unexplained function import, a late import.\"\"\"

            from pkg import b
            from pkg.c import _hidden

            X = 1

            import os


            def f():
                from pkg import c

                # a reason: this one is fine
                from pkg import d
                from pkg import b as b2

                return b, c, d, b2, _hidden, os
            """,
        "b.py": '"""b: the other half of the cycle."""\n\nfrom . import a\n',
        "c.py": '"""c: a private name."""\n\n_hidden = 1\n',
        "d.py": '"""d: an alias in sys.modules."""\n\nimport sys\n\nsys.modules["pkg.e"] = sys.modules[__name__]\n',
        "bare.py": "x = 1\n",
        "start.py": """
            \"\"\"start: documented start-up blocks, no violation.\"\"\"

            import sys

            if __name__ == "__main__":
                # thread variables must be set before numpy loads
                sys.argv.append("-v")

            import os

            # a documented start-up call: what it sets must precede the imports below
            sys.setrecursionlimit(2000)

            import json

            if __name__ == "__main__":
                import pkg.c
            """,
    }
    # two of the project's packages, the lower one importing the higher one
    files["../minitensor/__init__.py"] = '"""The engine."""\n\nfrom transformer_np import model\n'
    files["../transformer_np/__init__.py"] = ""
    files["../transformer_np/model.py"] = '"""A model."""\n'
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    found = sorted(
        (v.rule, v.file, v.line, v.detail) for v in violations(str(tmp_path), ("pkg", "minitensor", "transformer_np"))
    )
    assert found == [
        ("cycle", "pkg/a.py", 1, "2 files: pkg/a.py pkg/b.py"),
        ("function-import", "pkg/a.py", 12, "in f: pkg.c"),
        ("late-import", "pkg/a.py", 8, "import of os"),
        ("no-concern", "pkg/bare.py", 1, "no module docstring"),
        ("package-layer", "minitensor/__init__.py", 3, "minitensor imports transformer_np.model"),
        ("private-import", "pkg/a.py", 4, "_hidden from pkg.c"),
        ("sys-modules-alias", "pkg/d.py", 5, "assignment into sys.modules"),
    ], found


def known_entry(key: tuple[str, str, str], width: int = 100) -> str:
    """One KNOWN entry as source text, a long detail split over lines (implicit concatenation)."""
    rule, file, detail = key
    if len(repr(key)) <= width:
        return f"    {key!r},"
    chunks, line = [], ""
    for word in detail.split(" "):
        if line and len(line) + len(word) + 1 > width - 12:
            chunks.append(line + " ")
            line = word
        else:
            line = f"{line} {word}" if line else word
    chunks.append(line)
    inner = "\n".join(f"            {c!r}" for c in chunks)
    return f"    (\n        {rule!r},\n        {file!r},\n        (\n{inner}\n        ),\n    ),"


if __name__ == "__main__":
    # Every violation found, as KNOWN entries (for the lead; the list must only shrink).
    for key in sorted({v.key for v in violations()}):
        print(known_entry(key))
    sys.exit(0)
