"""The product wheel: ``reconciler`` and nothing else, and a clear word when the demo is missing.

The sandbox (API emulator, local OVN stacks, demo) is a distribution of its own so that the
wheel and the image hold none of it. Packaging mistakes are silent: a subpackage without
``__init__.py`` drops out of the wheel, a widened ``packages.find`` pulls the sandbox or the
tests in. So the wheel is built here the way a user builds it (``pip wheel .``) and inspected.

The wheel is built from a copy of the checkout: building in place writes ``build/`` and
``*.egg-info`` into a tree other people are editing, and a stale ``build/lib`` can smuggle
deleted modules into the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.slow

OUR_DISTRIBUTIONS = ("osc_gitops", "__editable__", "reconciler")
"""Names in the dev venv's site-packages that belong to this repository's two distributions."""

NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis",
    ".osc-cache",
)  # fmt: skip


@pytest.fixture(scope="module")
def checkout_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("packaging") / "src"
    shutil.copytree(REPO, copy, ignore=NOT_SOURCE, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def wheel(checkout_copy: Path) -> Path:
    out = checkout_copy.parent / "wheelhouse"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(checkout_copy),
            "--no-deps",
            "-q",
            "-w",
            str(out),
        ],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("osc_gitops-*.whl")
    return built


def wheel_files(wheel: Path) -> list[PurePosixPath]:
    with zipfile.ZipFile(wheel) as archive:
        return [PurePosixPath(name) for name in archive.namelist()]


def dist_info_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        (member,) = (n for n in archive.namelist() if n.endswith(f".dist-info/{name}"))
        return archive.read(member).decode()


def test_the_wheel_holds_the_reconciler_package_only(wheel: Path) -> None:
    files = wheel_files(wheel)
    top_level = {f.parts[0] for f in files}
    dist_info = {name for name in top_level if name.endswith(".dist-info")}
    assert len(dist_info) == 1 and top_level - dist_info == {"reconciler"}, top_level
    for word in ("sandbox", "kubeapi"):
        offenders = [str(f) for f in files if word in str(f).lower()]
        assert not offenders, f"the product wheel holds {word} code: {offenders}"
    tests = [
        str(f) for f in files if "tests" in f.parts or f.name.startswith(("test_", "conftest"))
    ]
    assert not tests, f"the product wheel holds tests: {tests}"


def test_every_module_of_the_source_is_in_the_wheel(wheel: Path, checkout_copy: Path) -> None:
    source = {
        PurePosixPath(p.relative_to(checkout_copy).as_posix())
        for p in (checkout_copy / "reconciler").rglob("*")
        if p.suffix == ".py" or p.name == "py.typed"
    }
    missing = sorted(str(f) for f in source - set(wheel_files(wheel)))
    assert not missing, f"not packaged (a package without __init__.py?): {missing}"


def test_the_wheel_neither_requires_nor_plugs_into_the_sandbox(wheel: Path) -> None:
    entry_points = dist_info_text(wheel, "entry_points.txt")
    assert "osc-gitops = reconciler.cli:main" in entry_points
    assert "osc_gitops.demo" not in entry_points
    requires = [
        line
        for line in dist_info_text(wheel, "METADATA").splitlines()
        if line.startswith("Requires-Dist:")
    ]
    assert requires and not [r for r in requires if "sandbox" in r], requires


def dependencies_without_our_distributions(where: Path) -> Path:
    """A view of the dev venv's site-packages (symlinks) without this repository's own
    distributions: the product's dependencies, with neither ``reconciler`` nor the sandbox and
    its ``osc_gitops.demo`` entry point. Saves downloading the dependencies into a new venv."""
    view = where / "dependencies"
    view.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OUR_DISTRIBUTIONS) and entry.suffix != ".pth":
            (view / entry.name).symlink_to(entry)
    return view


@pytest.fixture(scope="module")
def product_only_venv(wheel: Path, checkout_copy: Path) -> Path:
    """A venv with the wheel installed and the sandbox distribution absent, as a user gets it
    from ``pip install osc-gitops``. System site-packages are visible, as in ``make setup``."""
    venv = checkout_copy.parent / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    view = dependencies_without_our_distributions(venv)
    (Path(purelib) / "osc_gitops_dependencies.pth").write_text(f"{view}\n", encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return venv


def run_in(venv: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]],
        cwd=venv,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_venv_runs_the_wheel_without_the_sandbox(product_only_venv: Path) -> None:
    found = run_in(
        product_only_venv,
        "python",
        "-c",
        "import importlib.util as u, reconciler;"
        "print(reconciler.__file__); print(u.find_spec('osc_gitops_sandbox'))",
    )
    assert found.returncode == 0, found.stderr
    package_file, sandbox_spec = found.stdout.splitlines()
    assert Path(package_file).is_relative_to(product_only_venv), package_file
    assert sandbox_spec == "None"


def test_demo_without_the_sandbox_says_how_to_get_it(product_only_venv: Path) -> None:
    result = run_in(product_only_venv, "osc-gitops", "demo")
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("error: the demo needs the osc-gitops sandbox"), result.stderr
    assert "make setup" in result.stderr and "pip install -e ./sandbox" in result.stderr
    assert result.stdout == ""
