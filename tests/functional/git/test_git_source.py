"""The git source (real git, a bare remote on disk) and the CLI around it: refs, shallow
fetches, credentials that never leak, ``plan --repo``, ``status`` and the plan workflow's
command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.adapters.git import GitSettings, GitSource, GitSourceError, redact
from reconciler.cli.app import main
from tests.support.gitops import Remote, git
from tests.support.paths import REPO


def source(remote: Remote, tmp: Path, **kw: str) -> GitSource:
    settings = {"repo": remote.url, "ref": "main", "path": "policies", "cache_dir": str(tmp / "c")}
    settings.update(kw)
    return GitSource(GitSettings(**settings))  # type: ignore[arg-type]


def test_branch_tag_and_sha_are_exported_exactly(remote: Remote, tmp_path: Path) -> None:
    remote.copy_examples()
    one = remote.commit("one")
    git(remote.work, "tag", "v1")
    git(remote.work, "push", "-q", "origin", "v1")
    (remote.policies() / "vnfs.yaml").unlink()
    two = remote.commit("two")

    head = source(remote, tmp_path).sync()
    assert head.commit == two and not (head.directory / "vnfs.yaml").exists()
    assert (
        git(Path(source(remote, tmp_path).bare), "rev-parse", "--is-shallow-repository") == "true"
    )
    tagged = source(remote, tmp_path, ref="v1").sync()
    assert tagged.commit == one and (tagged.directory / "vnfs.yaml").is_file()
    by_sha = source(remote, tmp_path, ref=one[:12]).sync()
    assert by_sha.commit == one and by_sha.root.name == one
    # the export is a plain tree: no .git, nothing to get dirty
    assert not (by_sha.root / ".git").exists()

    with pytest.raises(GitSourceError, match=r"does not exist|couldn.t find remote ref"):
        source(remote, tmp_path, ref="no-such-branch").sync()
    with pytest.raises(GitSourceError, match="inside the repository"):
        source(remote, tmp_path, path="../etc")


def test_credentials_never_leak(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t-token\n")
    src = GitSource(
        GitSettings(repo="https://user:pw@127.0.0.1:9/acme/policies.git", ref="main",
                    cache_dir=str(tmp_path / "c"), token_file=str(token_file))
    )  # fmt: skip
    env = src.git_environment()
    header = [v for k, v in env.items() if k.startswith("GIT_CONFIG_VALUE_") and "Basic" in v]
    assert header and "s3cr3t-token" not in header[0]  # base64 in an env var, never argv/URL
    with pytest.raises(GitSourceError) as err:
        src.sync()
    message = str(err.value)
    assert "s3cr3t-token" not in message and "pw@" not in message
    assert "https://***@127.0.0.1:9/acme/policies.git" in message
    assert redact("ssh://git:tok@host/x", ("tok",)) == "ssh://***@host/x"

    key = tmp_path / "id_ed25519"
    key.write_text("not a real key")
    ssh = GitSource(GitSettings(repo="git@example.com:a/b.git", ssh_key=str(key),
                                cache_dir=str(tmp_path / "c")))  # fmt: skip
    command = ssh.git_environment()["GIT_SSH_COMMAND"]
    assert f"-i {key}" in command and "StrictHostKeyChecking=accept-new" in command


def test_plan_and_apply_status_from_a_repo(remote: Remote, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    remote.copy_examples()
    sha = remote.commit("policies")
    snapshot = REPO / "deploy" / "ci" / "observed-snapshot.json"
    cache = str(tmp_path / "c")
    code = main(["plan", "--repo", remote.url, "--ref", "main", "--path", "policies",
                 "--cache-dir", cache, "--observed", str(snapshot), "-o", "json"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 2
    assert json.loads(out.out)["summary"]["create"] > 0
    assert sha in out.err

    # an invalid commit: refused with file:line relative to the repository root
    (remote.policies() / "vnfs.yaml").write_text("kind: [unclosed\n")
    remote.commit("broken")
    code = main(["plan", "--repo", remote.url, "--path", "policies",
                 "--cache-dir", str(tmp_path / "c"), "--observed", str(snapshot)])  # fmt: skip
    err = capsys.readouterr().err
    assert (
        code == 1 and "policies/vnfs.yaml:1:7: YAML syntax error" in err and "problem(s)" in err
    ), err

    # status: nothing yet -> clear message, exit 1
    assert main(["status", "--cache-dir", str(tmp_path / "c")]) == 1
    assert "no status" in capsys.readouterr().err


def test_status_command_reads_the_status_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.engine.reporting import status

    st = status.Status(instance="osc-gitops", result="refused", revision="a" * 40,
                       revision_applied_at="2026-11-22T05:00:00Z", attempted="b" * 40,
                       errors=["policies/x.yaml:3:1: unknown kind"])  # fmt: skip
    status.write(status.status_path(tmp_path, "osc-gitops"), st)
    assert main(["status", "--cache-dir", str(tmp_path)]) == 1
    text = capsys.readouterr().out
    assert "a" * 40 in text and "b" * 40 in text and "policies/x.yaml:3:1" in text
    assert main(["status", "--cache-dir", str(tmp_path), "-o", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["revision"] == "a" * 40


def test_the_plan_workflow_command_line_works_on_the_committed_snapshot() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "plan", "examples/policies", "--observed",
         "deploy/ci/observed-snapshot.json", "-o", "markdown"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stdout.startswith("<!-- osc-gitops-plan -->")
    # The workflow runs this command through the repository's own action (action.yml), whose
    # script keeps one sticky comment marked with an osc-gitops-plan marker.
    workflow = (REPO / ".github" / "workflows" / "plan.yml").read_text()
    assert "uses: ./" in workflow and "deploy/ci/observed-snapshot.json" in workflow
    script = (REPO / ".github" / "osc-gitops-action" / "plan.py").read_text()
    assert "<!-- osc-gitops-plan:" in script and '"-o", "markdown"' in script
