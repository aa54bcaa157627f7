"""Import boundaries of the package, checked on the source with ``ast``.

The design keeps a functional core (no I/O, testable with plain data) and an imperative shell:
only ``reconciler.adapters`` talks to Kubernetes, OVN and git, and the pure core does no
networking, processes or threads. A stray import breaks that silently; this test makes it loud.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import PACKAGE

CLIENT_LIBS = {"kubernetes", "ovsdbapp", "ovs", "git"}
CORE_PACKAGES = {"core", "manifests", "render", "errors"}
CORE_FORBIDDEN = {"subprocess", "socket", "requests", "urllib.request", "http", "threading"}
CORE_FORBIDDEN_INTERNAL = {"reconciler.adapters", "osc_gitops_sandbox"}


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        found.append((".".join(("reconciler", *rel.parts)), path))
    return found


def imported_names(path: Path, module: str) -> set[str]:
    """Absolute names of everything ``path`` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def matches(name: str, prefixes: set[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def is_core(module: str) -> bool:
    parts = module.split(".")[1:]
    return bool(parts) and parts[0] in CORE_PACKAGES


ALL = modules()


def test_modules_are_found() -> None:
    names = {m for m, _ in ALL}
    assert {"reconciler.core.model", "reconciler.manifests.load", "reconciler.cli.app"} <= names


@pytest.mark.parametrize(("module", "path"), ALL, ids=[m for m, _ in ALL])
def test_only_adapters_import_client_libraries(module: str, path: Path) -> None:
    if module.startswith("reconciler.adapters"):
        return
    bad = sorted(n for n in imported_names(path, module) if matches(n, CLIENT_LIBS))
    assert not bad, f"{path}: imports {bad}; only reconciler/adapters/ may"


@pytest.mark.parametrize(
    ("module", "path"), [(m, p) for m, p in ALL if is_core(m)], ids=lambda x: str(x)
)
def test_core_modules_do_no_io_and_stay_off_the_shell(module: str, path: Path) -> None:
    names = imported_names(path, module)
    bad = sorted(n for n in names if matches(n, CORE_FORBIDDEN | CORE_FORBIDDEN_INTERNAL))
    assert not bad, f"{path}: pure core module imports {bad}"


def test_the_checker_catches_violations(tmp_path: Path) -> None:
    sample = tmp_path / "x.py"
    sample.write_text(
        "import subprocess\nfrom ovsdbapp.backend import ovs_idl\nfrom ...adapters import kube\n"
    )
    names = imported_names(sample, "reconciler.core.steering.x")
    assert matches("subprocess", names) or "subprocess" in names
    assert any(matches(n, CLIENT_LIBS) for n in names)
    assert any(matches(n, CORE_FORBIDDEN_INTERNAL) for n in names)
    assert is_core("reconciler.core.steering.nf") and is_core("reconciler.manifests.load")
    assert not is_core("reconciler.cli.app") and not is_core("reconciler.adapters.kube.client")
