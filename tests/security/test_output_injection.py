"""What a pull request can put into the sticky comment, the job log and our logs.

Issue 31, items 2, 6 and 10. On main a pod named with a line break and a fence in the
snapshot (``--observed``, which a pull request may change) put a heading, an @mention, an
``<img>`` and a link into the comment outside any code block; file names, ``metadata.name`` and
a foreign ``apiVersion`` reached stderr raw, and the Action copied it into the job log, where
``::error::`` lines, ANSI screen clears and OSC-8 hyperlinks acted; two bindings drew as one
node of the Mermaid diagram.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.core.model.desired import Desired
from reconciler.core.model.observed import Observed
from reconciler.engine.reporting.logs import JsonFormatter, TextFormatter
from reconciler.render.mermaid import diagram
from tests.security.hostile import osc, policies, raw_controls
from tests.support.paths import REPO

SNAPSHOT = REPO / "deploy" / "ci" / "observed-snapshot.json"
EVIL = "web-1\n```\n# Owned\n@admin <img src=x onerror=alert(1)> [click](https://evil.example)\n```"


def _evil_snapshot(tmp_path: Path, field: str = "name") -> Path:
    data = json.loads(SNAPSHOT.read_text())
    for pod in data["pods"]:
        if pod["name"] == "web-1":
            pod[field] = EVIL
    for port in data["pod_ports"]:
        if port["pod"] == "web-1" and field == "name":
            port["pod"], port["name"] = EVIL, f"shop-frontend_{EVIL}"
    path = tmp_path / "observed.json"
    path.write_text(json.dumps(data))
    return path


# --------------------------------------------------------------------------- the snapshot


@pytest.mark.parametrize("field", ["name", "node", "namespace"])
def test_a_snapshot_with_names_kubernetes_would_refuse_is_refused(
    tmp_path: Path, field: str
) -> None:
    base = policies(tmp_path / "base")
    (base / "bindings" / "web.yaml").unlink()  # the pull request adds the web bindings
    run = osc("plan", policies(tmp_path / "p"), "-o", "markdown", "--observed",
              _evil_snapshot(tmp_path, field), "--base", base)  # fmt: skip
    assert run.code == 1 and run.out == ""  # main: exit 2 and the comment injected
    what = {"name": "a Kubernetes object name", "node": "a node name",
            "namespace": "a namespace"}[field]  # fmt: skip
    assert re.fullmatch(
        rf"error: snapshot \S+: pods\[10\]\.{field}: 'web-1\\n```\\n# Owned.*\.\.\. is not "
        rf"{what} \(a DNS-1123 (subdomain|label)\)\n", run.err), run.err  # fmt: skip


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("pods", 0, "labels"), {"app\n": "web"}),
        (("pods", 0, "labels"), {"app": "web\u202e"}),
        (("nodes", 0, "name"), "node-1\x1b[2J"),
        (("pod_ports", 0, "namespace"), "Shop"),
        (("ovn_rows",), [{"table": "ACL", "key": "k\n# heading", "fields": {}}]),
        (("switches", 0, "name"), "node-1\x9b2J"),
    ],
)
def test_every_field_is_checked(where: tuple[object, ...], value: object) -> None:
    data = json.loads(SNAPSHOT.read_text())
    target = data
    for step in where[:-1]:
        target = target[step]  # type: ignore[index]
    target[where[-1]] = value  # type: ignore[index]
    from reconciler.core.model.observed import SnapshotRefused

    with pytest.raises(SnapshotRefused):
        Observed.from_json(data)


def test_the_committed_snapshot_is_valid() -> None:
    assert Observed.from_json(json.loads(SNAPSHOT.read_text())).pods


# --------------------------------------------------------------------------- the comment


def test_untrusted_text_cannot_leave_its_block_or_become_markup() -> None:
    from reconciler.render.md import code, fence, text

    block = fence(EVIL + "\n````", "diff")
    assert block[0] == "`````diff" and block[-1] == "`````"
    assert all(not line.startswith("`````") for line in block[1:-1])
    assert code("a`b|c\nd") == "``a`b\\|c d``"
    shown = text("x\n# h <img src=x> [l](https://e.x) @admin ![i](y) **b** | c")
    assert "\n" not in shown and "<img" not in shown and not re.search(r"(?<!\\)\]\(", shown)
    assert "@admin" not in shown and "https://" not in shown and "**" not in shown
    assert "\\|" in shown


def test_the_comment_of_a_hostile_live_state_is_inert(tmp_path: Path) -> None:
    """OVN strings are not Kubernetes names (a snapshot checks them only for control
    characters): a key or a warning with Markdown in it is shown, never interpreted."""
    from reconciler.core.model.facts import Finding
    from reconciler.core.model.plan import Change, Plan
    from reconciler.render.markdown import render_markdown

    key = "osc.x`](https://evil.example) <img src=x> @admin | ```"
    change = Change(action="delete", kind="ACL", key=key, origin="Binding/<b>", node="n|`x`",
                    before={"k": 1}, after=None)  # fmt: skip
    text = "a [link](https://evil.example) and <script>x</script> and @admin"
    plan = Plan(changes=(change,), findings=(Finding("note", "", None, text),))
    md = _outside_blocks(render_markdown(plan))
    assert not re.search(r"(?<!\\)\]\(https://evil", md) and "<img" not in md
    assert "<script>" not in md
    assert "@admin" not in md.replace("@\u2060admin", "")
    row = next(line for line in md.splitlines() if line.startswith("| <code> |"))
    assert row.count(" | ") == 4, row  # five cells: no '|' of the data split one


def _outside_blocks(markdown: str) -> str:
    """``markdown`` without its fenced code blocks (CommonMark's rule for their end)."""
    kept, fence = [], None
    for line in markdown.splitlines():
        ticks = re.match(r" {0,3}(`{3,})", line)
        if fence is None and ticks:
            fence = ticks.group(1)
        elif (
            fence is not None
            and ticks
            and len(ticks.group(1)) >= len(fence)
            and not (line.strip().strip("`"))
        ):
            fence = None
        elif fence is None:
            kept.append(line)
    assert fence is None, "a block is never closed"
    spans = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")  # inline code: inert too
    return spans.sub("<code>", "\n".join(kept))


def test_mermaid_ids_are_unique_whatever_the_names() -> None:
    """``fw`` -> ``ips-0-scan`` and ``fw-0-ips`` -> ``scan`` made one id on main."""
    data = {"labels": ["app=web"], "namespaces": None, "bindings": [
        {"name": "fw", "order": 1, "redirection": "both", "traffic": "all IP",
         "failurePolicy": "fail-close", "precedence": "after-network-policy",
         "vnfs": ["ips-0-scan"]},
        {"name": "fw-0-ips", "order": 2, "redirection": "both", "traffic": "all IP",
         "failurePolicy": "fail-close", "precedence": "after-network-policy",
         "vnfs": ["scan"]}]}  # fmt: skip
    lines = diagram("web", data)
    declared = [line.split("[", 1)[0].strip() for line in lines if '["Binding' in line]
    assert len(declared) == len(set(declared)) == 2
    assert any("Binding fw<br/>VNF ips-0-scan" in line for line in lines)
    assert any("Binding fw-0-ips<br/>VNF scan" in line for line in lines)


def test_mermaid_of_real_manifests_declares_each_node_once(tmp_path: Path) -> None:
    from reconciler.render.mermaid import group_bindings
    from tests.support.manifests import load_text

    header = "apiVersion: osc.io/v1alpha1\n"
    vnf = "kind: VnfDeployment\nmetadata: {{name: {}}}\nspec: {{namespace: v, image: a/b:1}}\n"
    bind = (
        "kind: Binding\nmetadata: {{name: {}}}\nspec: {{securityGroup: web, vnf: {}, order: {}}}\n"
    )
    text_ = "".join(
        header + doc + "---\n"
        for doc in (
            "kind: SecurityGroup\nmetadata: {name: web}\nspec: {labels: [app=web]}\n",
            vnf.format("ips-0-scan"),
            vnf.format("scan"),
            bind.format("fw", "ips-0-scan", 1),
            bind.format("fw-0-ips", "scan", 2),
        )
    )
    desired: Desired = load_text(text_)
    lines = diagram("web", group_bindings(desired, ["web"])["web"])
    edges = [line for line in lines if "-->" in line]
    targets = [edge.rsplit(" ", 1)[-1] for edge in edges]
    assert len(targets) == len(set(targets)) == 2


# --------------------------------------------------------------------------- stderr and logs


def _hostile_folder(tmp_path: Path) -> Path:
    folder = policies(tmp_path / "p")
    (folder / "x\x1b[2J\n::error file=a.yaml::pwned.yaml").write_text("kind: [\n")
    (folder / "names.yaml").write_text(
        'apiVersion: osc.io/v1alpha1\nkind: SecurityGroup\nmetadata: {name: "w\\e[31m\\n'
        '::warning::x"}\nspec: {labels: [app=web]}\n---\n'
        'apiVersion: "evil/v1\\e]8;;https://evil.example\\e\\\\click\\e]8;;\\e\\\\"\nkind: X\n'
    )
    return folder


def test_stderr_carries_no_control_character_and_no_workflow_command(tmp_path: Path) -> None:
    folder = _hostile_folder(tmp_path)
    for command in (["validate", folder], ["validate", "-o", "json", folder],
                    ["plan", folder, "--observed", SNAPSHOT]):  # fmt: skip
        run = osc(*command)
        assert run.code == 1
        for stream in (run.err, run.out):
            assert raw_controls(stream) == [], (command, stream)
            assert not [line for line in stream.splitlines() if line.lstrip().startswith("::")]
        assert "\\x1b[2J\\n::error file=a.yaml::pwned.yaml" in run.err or command[1] == "-o"


def test_log_lines_escape_every_control_character() -> None:
    hostile = "a\x1b[2Jb\x9bc\u202ed\ne\x7f"
    record = logging.LogRecord("osc_gitops.loop", logging.ERROR, "f", 1, hostile, None, None)
    record.errors = [hostile]
    record.file = hostile
    line = JsonFormatter().format(record)
    assert raw_controls(line) == [] and "\n" not in line and "\u202e" not in line
    assert json.loads(line)["msg"] == hostile  # nothing lost: JSON escapes are exact
    human = TextFormatter().format(record)
    assert raw_controls(human) == [] and "\u202e" not in human
    assert len(human.splitlines()) == 2  # the line and the one list item, no more


def test_a_security_managers_answer_reaches_status_and_logs_as_one_inert_line() -> None:
    """Whoever answers at a VnfDeployment's ``securityManager.url`` is a network peer: the
    body of its error answer is quoted in ``status``, ``apply``'s warning and the logs."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    from reconciler.adapters.notify import SecurityManagerError, post_json

    class Hostile(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            body = b"no\x1b[2J\n::error file=a.yaml::pwned\r\n\xe2\x80\xae @admin"
            self.send_response(500)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(SecurityManagerError) as caught:
            post_json(f"http://127.0.0.1:{server.server_port}/events", {"event": "members"})
    finally:
        server.shutdown()
        server.server_close()
    message = str(caught.value)
    assert raw_controls(message) == [] and "\n" not in message and "\u202e" not in message
    assert "answered HTTP 500: no\\x1b[2J\\n::error file=a.yaml::pwned" in message


def test_the_action_copies_output_into_the_job_log_as_inert_text(tmp_path: Path) -> None:
    folder = _hostile_folder(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_", "PLAN_"))}
    summary = tmp_path / "summary.md"
    env.update(PLAN_PATH=str(folder), PLAN_COMMENT="false", RUNNER_TEMP=str(tmp_path / "rt"),
               GITHUB_STEP_SUMMARY=str(summary), GITHUB_OUTPUT=str(tmp_path / "out"))  # fmt: skip
    done = subprocess.run([sys.executable, str(REPO / ".github/osc-gitops-action/plan.py")],
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1
    log = done.stdout + done.stderr
    assert raw_controls(log) == []
    # outside the stop-commands regions, the only workflow commands are the action's own
    inside, commands = None, []
    for line in log.splitlines():
        if inside is None and line.startswith("::stop-commands::"):
            inside = line.removeprefix("::stop-commands::")
        elif inside is not None and line == f"::{inside}::":
            inside = None
        elif inside is None and line.startswith("::"):
            commands.append(line.split("::")[1].split(" ")[0])
    assert inside is None and set(commands) <= {"group", "endgroup", "error"}, commands
    assert commands.count("error") == 1  # the action's own verdict, nothing from the text
    report = summary.read_text()
    opened = re.search(r"^(`{3,})$", report, re.M)
    assert opened is not None
    assert report.count(opened.group(1)) == 2  # the error report is one block
