"""The architecture of the package, enforced.

The import rules (layers, the pure core, one adapter per client library, no sandbox in the
product) are import-linter contracts in ``.importlinter``; ``make lint`` checks them, and so does
this test, so that ``make test`` alone cannot pass with the architecture broken. A linter that
never fails proves nothing, so a second test breaks every contract on purpose, in a throw-away
copy of the package, and checks that import-linter reports each one.

import-linter cannot express the rule that no module imports another module's private names
(``from x import _y``): a plain ``ast`` check does that.
"""

from __future__ import annotations

import ast
import configparser
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import codeshape
from tests.support.paths import PACKAGE, REPO

CONTRACTS = REPO / ".importlinter"
SANDBOX = REPO / "sandbox" / "osc_gitops_sandbox"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def run_lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts on the ``reconciler`` package found first
    on ``source_root`` (PYTHONPATH wins over the editable install of the checkout)."""
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: `make setup` installs the dev extras")
    env = {**os.environ, "PYTHONPATH": str(source_root), "COLUMNS": "400"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(CONTRACTS)],
        cwd=source_root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def contract_names() -> dict[str, str]:
    """Contract id -> name, as written in ``.importlinter``."""
    config = configparser.ConfigParser()
    config.read(CONTRACTS, encoding="utf-8")
    prefix = "importlinter:contract:"
    return {s.removeprefix(prefix): config[s]["name"] for s in config if s.startswith(prefix)}


def test_the_import_contracts_are_kept() -> None:
    result = run_lint_imports(REPO)
    assert result.returncode == 0, (
        "import-linter found broken contracts (each rule and its reason: .importlinter):\n"
        + result.stdout
        + result.stderr
    )


@dataclass(frozen=True)
class Probe:
    """A module that breaks ``contract`` on purpose; ``evidence`` is what the report must say."""

    contract: str
    path: str
    source: str
    evidence: str


PROBES = (
    Probe(
        "layers",
        "reconciler/core/probe_upward.py",
        "import reconciler.manifests\n",
        "reconciler.core.probe_upward -> reconciler.manifests",
    ),
    # An import inside a function is still a dependency: the engine must not reach the adapters.
    Probe(
        "layers",
        "reconciler/engine/probe_lazy.py",
        "def adapter() -> object:\n    import reconciler.adapters.ovn\n\n"
        "    return reconciler.adapters.ovn\n",
        "reconciler.engine.probe_lazy -> reconciler.adapters.ovn",
    ),
    # A new top-level package must be placed in the layers (exhaustive).
    Probe("layers", "reconciler/probe_unplaced.py", "", "- reconciler.probe_unplaced"),
    # Inside the core: the vocabulary never reaches up to a planner, a backend never reaches the
    # transitions (lazily either), and a new core package must be placed (exhaustive).
    Probe(
        "core-layers",
        "reconciler/core/model/probe_planner.py",
        "import reconciler.core.planning.full\n",
        "reconciler.core.model.probe_planner -> reconciler.core.planning.full",
    ),
    Probe(
        "core-layers",
        "reconciler/core/steering/probe_lazy.py",
        "def gate() -> object:\n    import reconciler.core.transitions.hold\n\n"
        "    return reconciler.core.transitions.hold\n",
        "reconciler.core.steering.probe_lazy -> reconciler.core.transitions.hold",
    ),
    Probe(
        "core-layers", "reconciler/core/probe_unplaced.py", "", "- reconciler.core.probe_unplaced"
    ),
    Probe(
        "adapters-use-only-core",
        "reconciler/adapters/kube/probe_render.py",
        "import reconciler.render\n",
        "reconciler.adapters.kube.probe_render -> reconciler.render",
    ),
    Probe(
        "pure-core",
        "reconciler/render/probe_process.py",
        "import subprocess\n",
        "reconciler.render.probe_process -> subprocess",
    ),
    Probe(
        "kubernetes-only-in-kube-adapter",
        "reconciler/cli/probe_kubernetes.py",
        "import kubernetes\n",
        "reconciler.cli.probe_kubernetes -> kubernetes",
    ),
    # Inside the OVN adapter too: only python_ovs may import ovs, and ovsdbapp only it and
    # northbound (the IDL's connection layer).
    Probe(
        "ovs-only-in-python-ovs",
        "reconciler/adapters/ovn/probe_ovs.py",
        "from ovs.db import idl\n",
        "reconciler.adapters.ovn.probe_ovs -> ovs",
    ),
    Probe(
        "ovsdbapp-only-for-the-idl",
        "reconciler/adapters/ovn/probe_ovsdbapp.py",
        "import ovsdbapp\n",
        "reconciler.adapters.ovn.probe_ovsdbapp -> ovsdbapp",
    ),
    Probe(
        "ovsdbapp-only-for-the-idl",
        "reconciler/engine/probe_ovsdbapp.py",
        "import ovsdbapp\n",
        "reconciler.engine.probe_ovsdbapp -> ovsdbapp",
    ),
    Probe(
        "git-only-in-git-adapter",
        "reconciler/adapters/kube/probe_git.py",
        "import git\n",
        "reconciler.adapters.kube.probe_git -> git",
    ),
    Probe(
        "no-sandbox",
        "reconciler/cli/probe_sandbox.py",
        "import osc_gitops_sandbox\n",
        "reconciler.cli.probe_sandbox -> osc_gitops_sandbox",
    ),
    # The sandbox's parts: the API emulator never reaches OVN, OVN never reaches the data path
    # (lazily either), and a new module must be placed in a part (exhaustive).
    Probe(
        "sandbox-parts",
        "osc_gitops_sandbox/kubeapi/probe_ovn.py",
        "import osc_gitops_sandbox.ovn.stack\n",
        "osc_gitops_sandbox.kubeapi.probe_ovn -> osc_gitops_sandbox.ovn.stack",
    ),
    Probe(
        "sandbox-parts",
        "osc_gitops_sandbox/ovn/probe_lazy.py",
        "def chassis() -> object:\n    import osc_gitops_sandbox.datapath.chassis\n\n"
        "    return osc_gitops_sandbox.datapath.chassis\n",
        "osc_gitops_sandbox.ovn.probe_lazy -> osc_gitops_sandbox.datapath.chassis",
    ),
    Probe(
        "sandbox-parts",
        "osc_gitops_sandbox/probe_unplaced.py",
        "",
        "- osc_gitops_sandbox.probe_unplaced",
    ),
    Probe(
        "adapters-independent",
        "reconciler/adapters/kube/probe_ovn.py",
        "import reconciler.adapters.ovn\n",
        "reconciler.adapters.kube.probe_ovn -> reconciler.adapters.ovn",
    ),
)


def test_every_contract_catches_a_violation(tmp_path: Path) -> None:
    for package in (PACKAGE, SANDBOX):
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(package, tmp_path / package.name, ignore=ignore)
    for probe in PROBES:
        (tmp_path / probe.path).write_text(probe.source, encoding="utf-8")

    result = run_lint_imports(tmp_path)
    report = result.stdout + result.stderr

    assert result.returncode == 1, report
    names = contract_names()
    unprobed = sorted(set(names) - {p.contract for p in PROBES})
    assert not unprobed, f"add a Probe that breaks each of {unprobed} to PROBES"
    for contract, name in names.items():
        assert f"{name} BROKEN" in report, (
            f"contract {contract!r} did not catch its probe:\n{report}"
        )
    missing = [p.evidence for p in PROBES if p.evidence not in report]
    assert not missing, f"import-linter did not report {missing}:\n{report}"


# --- private names --------------------------------------------------------------------------

PrivateImport = tuple[str, str, str]  # importer module, imported module, private name


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_imports(source: str, module: str, is_package: bool = False) -> set[PrivateImport]:
    """``from M import _x`` in ``source``, ``M`` another module (relative ``M`` resolved against
    ``module``). Dunder names are public by convention."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[PrivateImport] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not name.startswith("__") and base != module:
                found.add((module, base, name))
    return found


def project_private_imports() -> set[PrivateImport]:
    """Private-name imports in the product and the sandbox, except private *submodules*
    (``from pkg import _impl``): those are the package's own business."""
    found: set[PrivateImport] = set()
    modules: set[str] = set()
    for package_dir in (PACKAGE, SANDBOX):
        for path in sorted(package_dir.rglob("*.py")):
            module = module_name(path, package_dir)
            modules.add(module)
            source = path.read_text(encoding="utf-8")
            found |= private_imports(source, module, is_package=path.name == "__init__.py")
    return {
        (importer, base, name) for importer, base, name in found if f"{base}.{name}" not in modules
    }


def test_no_module_imports_another_modules_private_names() -> None:
    found = sorted(project_private_imports())
    assert not found, "make these names public in the module that owns them:\n" + "\n".join(
        f"  {importer}: from {base} import {name}" for importer, base, name in found
    )


def test_the_private_name_check_catches_violations() -> None:
    source = "from .client import _pod, Public\nfrom reconciler.errors import __all__\n"
    found = private_imports(source, "reconciler.adapters.kube.cache")
    assert found == {("reconciler.adapters.kube.cache", "reconciler.adapters.kube.client", "_pod")}
    two_up = private_imports("from ..naming import _hash\n", "reconciler.core.steering.base")
    assert two_up == {("reconciler.core.steering.base", "reconciler.core.naming", "_hash")}


# --- the steering seam ------------------------------------------------------------------------

NF_TABLES = frozenset(
    {"Network_Function", "Network_Function_Group", "Network_Function_Health_Check"}
)


def seam_breaches(source: str, backends: frozenset[str]) -> list[str]:
    """What in ``source`` names a steering backend from outside ``reconciler.core.steering``: a
    comparison with a backend's name (``steering == "router-policy"``), or a Network Function
    table named in code (not in a docstring: ``"Network_Function_Group"`` as a whole string)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and side.value in backends:
                    found.append(f"line {node.lineno}: compares with {side.value!r}")
        elif isinstance(node, ast.Constant) and node.value in NF_TABLES:
            found.append(f"line {node.lineno}: names {node.value}")
    return found


def test_nothing_outside_the_steering_package_names_a_backend() -> None:
    """``SteeringBackend`` carries what callers need (capabilities, the health index, what it
    holds and drains): the rest of the core, the engine and the CLI never compare a backend's
    name nor read Network Function tables themselves. (The model's table registry and the OVN
    adapter, which reads and writes every table, are the vocabulary, not callers.)"""
    from reconciler.core.steering import STEERING_CHOICES

    backends = frozenset(STEERING_CHOICES)
    steering, model = PACKAGE / "core" / "steering", PACKAGE / "core" / "model"
    breaches = []
    for folder in (PACKAGE / "core", PACKAGE / "engine", PACKAGE / "cli"):
        for path in sorted(folder.rglob("*.py")):
            if steering in path.parents or model in path.parents:
                continue
            for breach in seam_breaches(path.read_text(encoding="utf-8"), backends):
                breaches.append(f"{path.relative_to(REPO)} {breach}")
    assert not breaches, "ask the backend (SteeringBackend) instead:\n" + "\n".join(breaches)
    planted = 'if steering == "router-policy":\n    table = "Network_Function_Group"\n'
    assert len(seam_breaches(planted, backends)) == 2


# --- circles, long functions, a thin CLI --------------------------------------------------------


def test_no_import_circle_anywhere() -> None:
    """No two modules of the product, the sandbox or the benchmarks import each other, even
    through a function-level or ``TYPE_CHECKING`` import (a lazy import hides a circle, it does
    not remove it). A planted pair proves the check finds one."""
    found = codeshape.circles(codeshape.import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)
    planted = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert codeshape.circles(planted) == [["a", "b", "c"]]


def test_no_function_in_the_product_is_over_80_lines() -> None:
    """A function a reader can hold: split a longer one along the steps it already has."""
    long = codeshape.long_functions()
    assert not long, "split: " + ", ".join(f"{f.path}:{f.line} {f.name} ({f.lines})" for f in long)
    assert codeshape.long_functions(limit=5), "the check finds functions longer than a limit"


def test_command_modules_do_not_import_each_other() -> None:
    """A command's module (one with ``COMMAND``) imports helpers (``cli/common.py`` and the
    helper modules), never another command's module."""
    cli = PACKAGE / "cli"
    commands = {p.stem for p in cli.glob("*.py") if "\nCOMMAND = " in p.read_text(encoding="utf-8")}
    assert {"plan", "apply", "explain", "run"} <= commands
    graph = codeshape.import_graph((PACKAGE,))
    crossing = sorted(
        f"{src} -> {dst}"
        for src, dsts in graph.items()
        if src.startswith("reconciler.cli.") and src.rpartition(".")[2] in commands
        for dst in dsts
        if dst.startswith("reconciler.cli.") and dst.rpartition(".")[2] in commands
    )
    assert not crossing, "move what they share into cli/common.py:\n" + "\n".join(crossing)
