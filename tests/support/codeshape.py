"""The shape of the code, measured: import circles (imports inside functions included) and
long functions. ``tests/unit/test_architecture.py`` asserts on these; ``python -m
tests.support.codeshape`` prints the figures (docs/architecture.md quotes them).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

# The trees whose import graphs must have no circle: the product, the sandbox distribution and
# the benchmark harness.
TREES = (REPO / "reconciler", REPO / "sandbox" / "osc_gitops_sandbox", REPO / "bench")
LONGEST_FUNCTION = 80  # lines, in reconciler/


def module_of(path: Path, root: Path) -> str:
    """``root/a/b.py`` -> ``a.b`` (``root`` is the folder that holds the top package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_of(trees: Iterable[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_of(path, tree.parent)] = path
    return found


def imported(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The known modules ``source`` imports anywhere (top level, functions, ``TYPE_CHECKING``
    blocks): ``from pkg import sub`` names the submodule, ``from mod import name`` the module."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {name for name in found if name in known and name != module}


def import_graph(trees: Iterable[Path] = TREES) -> dict[str, set[str]]:
    modules = modules_of(trees)
    known = set(modules)
    return {
        module: imported(
            path.read_text(encoding="utf-8"), module, path.name == "__init__.py", known
        )
        for module, path in modules.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan), each sorted. A package's
    ``__init__`` re-exporting its submodules is a circle only if a submodule imports the
    package back by name, which is one too."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    line: int
    lines: int


def functions(tree: Path, root: Path = REPO) -> list[Function]:
    """Every function and method below ``tree`` with its length in lines (decorators excluded,
    the docstring and nested functions included)."""
    found: list[Function] = []
    for path in sorted(tree.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                end = node.end_lineno or node.lineno
                found.append(
                    Function(
                        str(path.relative_to(root)), node.name, node.lineno, end - node.lineno + 1
                    )
                )
    return found


def long_functions(
    tree: Path = REPO / "reconciler", limit: int = LONGEST_FUNCTION
) -> list[Function]:
    return sorted((f for f in functions(tree) if f.lines > limit), key=lambda f: -f.lines)


def main() -> int:
    found = circles(import_graph())
    print(f"import circles (reconciler, sandbox, bench; function-level imports too): {len(found)}")
    for part in found:
        print("  " + " <-> ".join(part))
    long = long_functions()
    print(f"functions over {LONGEST_FUNCTION} lines in reconciler/: {len(long)}")
    for f in long:
        print(f"  {f.lines:4d} {f.path}:{f.line} {f.name}")
    core = REPO / "reconciler" / "core"
    modules = [p for p in core.rglob("*.py") if p.name != "__init__.py"]
    top = [p for p in core.glob("*.py") if p.name != "__init__.py"]
    size = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in core.rglob("*.py"))
    print(f"core/: {len(modules)} modules ({size} lines), {len(top)} flat at its top")
    for package in sorted(p for p in core.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        count = len([p for p in package.glob("*.py") if p.name != "__init__.py"])
        print(f"  {package.relative_to(core)}: {count}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
