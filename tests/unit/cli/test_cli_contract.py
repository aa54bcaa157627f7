"""The CLI's contract for users and CI (issue #24 items 4 and 6): usage errors exit 1 with the
subcommand's usage, ``-o json`` failures are JSON on stdout, one ``error:`` line in our words
for bad kubeconfigs and TLS flags, help texts for users, the empty-set guard in ``plan``, and
text logs that say why. In-process (``reconciler.cli.app.main``): no process is needed."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.cli.app import in_our_voice
from reconciler.engine.reporting.logs import TextFormatter
from tests.support.cli import cli
from tests.support.paths import EXAMPLES, POLICIES
from tests.unit.cli.snapshots import converged_snapshot

INVALID = EXAMPLES / "invalid" / "unknown-field.yaml"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "--colour"], "osc-gitops plan: error: unrecognized arguments: --colour"),
        (["plan", "a", "b"], "osc-gitops plan: error: unrecognized arguments: b"),
        (["plan", "-o"], "osc-gitops plan: error: argument -o/--output: expected one argument"),
        (["apply", "-o", "yaml"], "osc-gitops apply: error: argument -o/--output: invalid choice"),
        (["validate", "x", "--bogus"], "osc-gitops validate: error: unrecognized arguments"),
        (["status", "--all"], "osc-gitops status: error: unrecognized arguments: --all"),
    ],
)
def test_a_usage_error_exits_1_with_the_subcommand_usage(args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.code == 1  # never 2: that is "plan has changes"
    command = args[0]
    assert result.err.startswith(f"usage: osc-gitops {command} ")
    assert message in result.err
    assert f"Run 'osc-gitops {command} --help' for all options." in result.err
    assert result.out == ""


@pytest.mark.parametrize(
    ("args", "prog"),
    [
        (["sandbox", "up", "extra"], "osc-gitops sandbox up"),
        (["sandbox", "down", "--x"], "osc-gitops sandbox down"),
        (["sandbox", "up", "--ovn", "9"], "osc-gitops sandbox up"),
    ],
)
def test_a_usage_error_of_an_action_shows_that_action_usage(args: list[str], prog: str) -> None:
    """``sandbox up|down``: the usage is the action's, not ``sandbox ACTION ...``."""
    result = cli(*args)
    assert result.code == 1
    assert result.err.startswith(f"usage: {prog} [-h]")
    assert f"{prog}: error: " in result.err
    assert f"Run '{prog} --help' for all options." in result.err


def test_a_json_error_into_a_closed_pipe_is_no_traceback() -> None:
    """``plan -o json invalid/ | head``: the reader left; exit 1 with the error on stderr."""
    read, write = os.pipe()
    os.close(read)  # every write to stdout fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from reconciler.cli import main; sys.exit(main())",
             "plan", EXAMPLES / "invalid", "-o", "json"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "error: " in done.stderr and "problem(s) in the manifests" in done.stderr


def test_an_unknown_command_exits_1_with_the_top_usage() -> None:
    result = cli("plna")
    assert result.code == 1
    assert result.err.startswith("usage: osc-gitops [-h]")
    assert "invalid choice: 'plna'" in result.err


def test_a_usage_error_with_json_output_is_json_too() -> None:
    result = cli("plan", "-o", "json", "--colour")
    assert result.code == 1
    error = json.loads(result.out)
    assert error == {
        "error": {
            "message": "osc-gitops plan: unrecognized arguments: --colour",
            "cause": "usage",
        },
        "issues": [],
    }


@pytest.mark.parametrize("command", ["plan", "apply", "explain"])
def test_invalid_manifests_with_json_output_print_the_issues_as_json(command: str) -> None:
    args = [command, "shop/web-1", INVALID] if command == "explain" else [command, INVALID]
    result = cli(*args, "-o", "json", "--ovn-nb", "unix:/nonexistent.sock")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["error"]["cause"] == "manifests"
    assert data["error"]["message"] == f"{INVALID}: 1 problem(s) in the manifests"
    (issue,) = data["issues"]
    assert issue["file"] == str(INVALID) and issue["path"] == "spec.failurepolicy"
    assert "unknown field 'failurepolicy'" in issue["message"]
    assert f"{INVALID}:" in result.err and "error: " in result.err  # humans still see it


def test_validate_json_keeps_its_shape_and_adds_error_and_issues() -> None:
    result = cli("validate", INVALID, "-o", "json")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["valid"] is False and data["errors"] == data["issues"]
    assert data["error"] == {
        "message": f"{INVALID}: 1 problem in the manifests",
        "cause": "manifests",
    }


def test_status_without_a_status_is_json_with_the_reason(tmp_path: Path) -> None:
    result = cli("status", "--cache-dir", tmp_path, "-o", "json")
    assert result.code == 1
    data = json.loads(result.out)
    assert data["issues"] == []
    assert data["error"]["message"].startswith(f"no status at {tmp_path}/status/osc-gitops.json")
    assert (
        "nothing was applied with this --cache-dir and --instance yet" in data["error"]["message"]
    )


def test_an_endpoint_error_with_json_output_is_json(tmp_path: Path) -> None:
    result = cli("apply", POLICIES, "-o", "json", "--ovn-nb", "unix:/x.sock",
                 "--kubeconfig", tmp_path / "missing")  # fmt: skip
    assert result.code == 1
    assert (
        json.loads(result.out)["error"]["message"] == f"kubeconfig {tmp_path}/missing: no such file"
    )


def test_kubeconfig_errors_are_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.write_text("apiVersion: v1\nclusters: [\n")
    unclosed = tmp_path / "unclosed"
    unclosed.write_text('apiVersion: v1\nclusters: [{name: a, cluster: {server: "x"}\nusers: []\n')
    listed = tmp_path / "listed"
    listed.write_text("- a\n- b\n")
    for path, message in (
        (broken, f"error: kubeconfig {broken}:3:1: YAML syntax error: "),
        # where the mapping that is never closed opened, not where the parser noticed
        (unclosed, f"error: kubeconfig {unclosed}:2:12: YAML syntax error: the mapping '{{' "),
        (listed, f"error: kubeconfig {listed} is a YAML list, expected a mapping"),
    ):
        result = cli("plan", POLICIES, "--ovn-nb", "unix:/x.sock", "--kubeconfig", path)
        assert result.code == 1
        assert result.err.startswith(message), result.err
        assert "Traceback" not in result.err and len(result.err.splitlines()) == 1
        as_json = cli("plan", POLICIES, "--ovn-nb", "unix:/x.sock", "--kubeconfig", path,
                      "-o", "json")  # fmt: skip
        assert json.loads(as_json.out)["error"]["cause"] == "kubernetes"


def test_an_ssl_remote_without_its_files_names_the_flags(tmp_path: Path) -> None:
    result = cli("plan", POLICIES, "--ovn-nb", "ssl:127.0.0.1:6641", "--ovn-ca-cert", "ca.pem")
    assert result.code == 1
    assert result.err == (
        "error: --ovn-nb ssl:127.0.0.1:6641 is a TLS remote: also give --ovn-private-key "
        "(or OSC_OVN_PRIVATE_KEY), --ovn-certificate (or OSC_OVN_CERTIFICATE)\n"
    )


def test_an_ssl_southbound_without_its_files_names_the_flags_before_connecting() -> None:
    result = cli("plan", POLICIES, "--ovn-nb", "unix:/nowhere.sock", "--ovn-sb",
                 "ssl:127.0.0.1:6642", "--ovn-certificate", "c.pem")  # fmt: skip
    assert result.code == 1
    assert result.err == (
        "error: --ovn-sb ssl:127.0.0.1:6642 is a TLS remote: also give --ovn-private-key "
        "(or OSC_OVN_PRIVATE_KEY), --ovn-ca-cert (or OSC_OVN_CA_CERT)\n"
    )


def test_an_endpoint_is_named_once() -> None:
    assert in_our_voice("cannot connect to OVN NB at tcp:h:1: tcp:h:1: Connection refused") == (
        "cannot connect to OVN NB at tcp:h:1: Connection refused"
    )
    two = "cannot connect to OVN NB at a:1,b:2: a:1: refused; b:2: refused"
    assert in_our_voice(two) == two


def test_help_texts_are_for_users() -> None:
    run = cli("run", "--help")
    assert run.code == 0 and "$(" not in run.out and '--node "$OSC_NODE_NAME"' in run.out
    explain = cli("explain", "--help").out
    assert "--svc-monitor-ip" not in explain  # does nothing for explain
    schema = cli("schema", "--help").out
    assert "reconciler/" not in schema
    for command in ("plan", "apply", "snapshot", "explain"):
        text = " ".join(cli(command, "--help").out.split())
        assert "--ovn-private-key FILE client key for an ssl: remote" in text
        assert "--kubeconfig FILE kubeconfig file (env KUBECONFIG" in text
        assert "--instance NAME which osc-gitops instance" in text
    assert "exit codes: 0 ok, 1 error (also a usage error), 2 plan has changes" in cli("--help").out


def test_plan_refuses_an_empty_set_as_apply_does(tmp_path: Path) -> None:
    snapshot = converged_snapshot(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = cli("plan", empty, "--observed", snapshot)
    assert refused.code == 1
    assert "no manifests were found, and applying that would delete all" in refused.err
    assert "--allow-empty" in refused.err
    allowed = cli("plan", empty, "--observed", snapshot, "--allow-empty")
    assert allowed.code == 2 and "to delete." in allowed.out


def test_text_logs_carry_the_reason_and_every_issue() -> None:
    record = logging.LogRecord(
        "osc_gitops.loop", logging.ERROR, "", 0, "revision refused", (), None
    )
    record.revision = "abc"
    record.errors = ["p/a.yaml:3:1: bad", "p/b.yaml:9:2: worse"]
    text = TextFormatter().format(record)
    assert "ERROR revision refused revision=abc errors=2" in text
    assert text.splitlines()[1:] == ["    p/a.yaml:3:1: bad", "    p/b.yaml:9:2: worse"]


def test_plan_out_saves_a_plan_that_apply_recognises(tmp_path: Path) -> None:
    from reconciler.cli import saved

    snapshot = converged_snapshot(tmp_path)
    changed = tmp_path / "policies"
    shutil.copytree(POLICIES, changed)
    (changed / "bindings" / "web.yaml").unlink()
    out = tmp_path / "plan.json"
    result = cli("plan", changed, "--observed", snapshot, "-out", out)
    assert result.code == 2 and f"Saved the plan to {out}." in result.err
    plan = saved.load(str(out))
    assert plan is not None and plan.body["endpoint"] is None  # made offline
    assert plan.desired().bindings.keys() == {"api-firewall", "api-ips", "db-firewall"}
    assert {c["action"] for c in plan.changes} == {"delete"}
    assert saved.load(str(POLICIES / "vnfs.yaml")) is None  # a manifest file is not a plan
    assert saved.load(str(POLICIES)) is None
