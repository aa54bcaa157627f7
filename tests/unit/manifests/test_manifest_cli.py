"""The CLI: exit codes, stderr/stdout split, JSON output, examples, no tracebacks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler import __version__
from reconciler.cli import app as cli
from reconciler.errors import UserError
from tests.support.paths import REPO

POLICIES = REPO / "examples" / "policies"
INVALID = sorted((REPO / "examples" / "invalid").glob("*.yaml"))


def test_examples_policies_are_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", str(POLICIES)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"{POLICIES}: 3 security groups, 2 VNFs, 5 bindings — valid\n"


def expectations(file: Path) -> tuple[str, int]:
    head = file.read_text(encoding="utf-8").splitlines()[:2]
    expect = re.fullmatch(r"# expect: (.+)", head[0])
    line = re.fullmatch(r"# line: (\d+)", head[1])
    assert expect and line, f"{file} must start with '# expect: ...' and '# line: N'"
    return expect.group(1), int(line.group(1))


def test_there_is_an_invalid_example_per_class_of_error() -> None:
    assert len(INVALID) >= 15


@pytest.mark.parametrize("file", INVALID, ids=lambda p: p.name)
def test_each_invalid_example_fails_with_its_expected_message(
    file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect, line = expectations(file)
    assert cli.main(["validate", str(file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    matching = [m for m in err.splitlines() if m.startswith(f"{file}:{line}:")]
    assert matching, err
    assert expect in matching[0], err
    assert "Traceback" not in err


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    target = REPO / "examples" / "invalid" / "duplicate-order.yaml"
    assert cli.main(["validate", "-o", "json", str(target)]) == 1
    out, _ = capsys.readouterr()
    data = json.loads(out)
    assert data["valid"] is False
    (error,) = data["errors"]
    assert error == {
        "file": str(target),
        "line": 33,
        "column": 10,
        "document": 5,
        "kind": "Binding",
        "name": "web-ips",
        "path": "spec.order",
        "message": error["message"],
        "expected": "a unique order per SecurityGroup",
    }
    assert error["message"].startswith("duplicate order 10 on SecurityGroup web")


def test_json_output_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "--output", "json", str(POLICIES)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data == {
        "valid": True,
        "errors": [],
        "counts": {"securityGroups": 3, "vnfs": 2, "bindings": 5},
    }


def test_empty_folder_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", str(tmp_path)]) == 0
    assert "no manifests found" in capsys.readouterr().err


def test_default_path_is_current_folder(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(POLICIES)
    assert cli.main(["validate"]) == 0
    assert capsys.readouterr().err.startswith(".: 3 security groups")


def test_missing_path_is_a_user_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "/nonexistent/manifests"]) == 1
    assert capsys.readouterr().err == (
        "error: cannot read manifests at /nonexistent/manifests: no such file or directory\n"
    )


def test_user_errors_and_extensible_tuple(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class Boom(Exception):
        pass

    def fail_user(_: object) -> int:
        raise UserError("cannot reach https://kube.example:6443: connection refused")

    def fail_boom(_: object) -> int:
        raise Boom("the NB at unix:/run/ovn/nb.sock is read-only")

    def interrupted(_: object) -> int:
        raise KeyboardInterrupt

    extra = [
        cli.Command("fail-user", "test", lambda p: None, fail_user),
        cli.Command("fail-boom", "test", lambda p: None, fail_boom),
        cli.Command("interrupted", "test", lambda p: None, interrupted),
    ]
    monkeypatch.setattr(cli, "COMMANDS", [*cli.COMMANDS, *extra])
    monkeypatch.setattr(cli, "USER_ERRORS", (*cli.USER_ERRORS, Boom))
    assert cli.main(["fail-user"]) == 1
    assert capsys.readouterr().err == (
        "error: cannot reach https://kube.example:6443: connection refused\n"
    )
    assert cli.main(["fail-boom"]) == 1
    assert capsys.readouterr().err == "error: the NB at unix:/run/ovn/nb.sock is read-only\n"
    assert cli.main(["interrupted"]) == 130


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    # main returns the exit code of --version and --help too (argparse would raise SystemExit).
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out == f"osc-gitops {__version__}\n"
    assert cli.main(["--help"]) == 0
    help_text = capsys.readouterr().out
    assert "validate" in help_text and "osc-gitops validate examples/policies" in help_text
    assert cli.main(["validate", "--help"]) == 0
    assert "exit codes: 0 valid" in capsys.readouterr().out


def test_no_command_prints_help_and_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 1
    assert "usage: osc-gitops" in capsys.readouterr().err


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "osc-gitops"
    return [str(script)] if script.exists() else [sys.executable, "-m", "reconciler.cli"]


def test_real_subprocess_has_no_traceback_and_right_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text("a: &a [1]\nb: *a\n")
    (tmp_path / "bin.yaml").write_bytes(b"\x00\x01\x02")
    bad = subprocess.run(
        [*console_script(), "validate", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1
    assert "Traceback" not in bad.stderr
    assert f"{tmp_path}/bomb.yaml:2:4: YAML alias *a is not allowed" in bad.stderr
    assert f"{tmp_path}/bin.yaml:1:1: binary file" in bad.stderr
    good = subprocess.run(
        [*console_script(), "validate", "-o", "json", str(POLICIES)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["valid"] is True
