"""The osc-gitops GitHub Action's main step: validate, plan, report, keep one sticky PR comment.

``action.yml`` runs this file with the python of the venv it installed osc-gitops into, so the
``osc-gitops`` executable sits next to ``sys.executable``. Every input arrives as a ``PLAN_*``
environment variable (the token as ``GH_TOKEN``): nothing the caller or a pull request controls
is ever pasted into a shell script by ``${{ }}``, and arguments reach osc-gitops and ``gh`` as
argv lists, never through a shell.

What osc-gitops prints comes from the pull request (file names, manifest names, a snapshot's
contents): it is copied into the job log with every control character escaped (no ANSI screen
clear, no OSC-8 link) and between ``::stop-commands::`` and its random end token, so no line of
it is a workflow command (``::error::``, ``::add-mask::``, ``##[...]``); in the summary and
the comment it sits in a fence longer than any backtick run it holds.

The step's own exit status is the check's verdict: 0 when the plan ran (whether it found changes
or not: changes are what a pull request is for), 1 when ``validate`` or ``plan`` failed. The
outputs, the job summary and the comment are written first, so a red check still explains itself
in the pull request. Only the standard library is used, and osc-gitops only as a command, so the
tool's internals and dependencies stay free to change under the action.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

NO_CHANGES, CHANGES, ERROR = 0, 2, 1
"""The plan's exit codes (Terraform's -detailed-exitcode), reported as the ``exit-code`` output."""

COMMENT_LIMIT = 65_000
"""GitHub refuses comment bodies over 65,536 characters; a margin keeps the truncation note in."""

DEFAULT_INSTANCE = "osc-gitops"
"""osc-gitops' own default for ``--instance``, used in the marker when no instance is given."""


@dataclass(frozen=True)
class Settings:
    """The action's inputs and the runner's environment, read once from ``os.environ``."""

    path: str
    observed: str
    base: str
    ovn_nb: str
    kubeconfig: str
    steering: str
    instance: str
    instance_fallback: str
    comment: bool
    comment_author: str
    runner_temp: Path
    github_output: str
    step_summary: str
    event_path: str
    repository: str
    server_url: str

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> Settings:
        return cls(
            path=env.get("PLAN_PATH") or ".",
            observed=env.get("PLAN_OBSERVED", ""),
            base=env.get("PLAN_BASE", ""),
            ovn_nb=env.get("PLAN_OVN_NB", ""),
            kubeconfig=env.get("PLAN_KUBECONFIG", ""),
            steering=env.get("PLAN_STEERING", ""),
            instance=env.get("PLAN_INSTANCE", ""),
            instance_fallback=env.get("OSC_INSTANCE", ""),
            comment=env.get("PLAN_COMMENT", "true").strip().lower() == "true",
            comment_author=env.get("PLAN_COMMENT_AUTHOR", ""),
            runner_temp=Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()),
            github_output=env.get("GITHUB_OUTPUT", ""),
            step_summary=env.get("GITHUB_STEP_SUMMARY", ""),
            event_path=env.get("GITHUB_EVENT_PATH", ""),
            repository=env.get("GITHUB_REPOSITORY", ""),
            server_url=env.get("GITHUB_SERVER_URL", ""),
        )

    @property
    def effective_instance(self) -> str:
        """The instance osc-gitops will use: the input, else its ``OSC_INSTANCE`` fallback."""
        return self.instance or self.instance_fallback or DEFAULT_INSTANCE


@dataclass(frozen=True)
class PlanResult:
    """What the step reports: the normalised exit code and the markdown the comment shows."""

    exit_code: int
    markdown: str


def marker(instance: str, path: str) -> str:
    """The hidden first line that identifies this action's comment for one instance and folder.

    Two uses of the action in one pull request (two instances, or two policy folders) keep two
    comments. Characters outside a safe set become ``_`` so the marker can never close the HTML
    comment early or differ between runs by formatting alone (``./a/`` and ``a`` are one folder).
    """

    def safe(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._/-]", "_", text)

    return f"<!-- osc-gitops-plan:{safe(instance)}:{safe(posixpath.normpath(path))} -->"


def osc_gitops() -> str:
    """The osc-gitops executable of the venv this script runs in."""
    return str(Path(sys.executable).parent / "osc-gitops")


def connection_flags(settings: Settings) -> list[str]:
    """Flags for the inputs that are set; unset ones leave osc-gitops' env fallbacks in charge."""
    flags: list[str] = []
    for flag, value in (
        ("--observed", settings.observed),
        ("--base", settings.base),
        ("--ovn-nb", settings.ovn_nb),
        ("--kubeconfig", settings.kubeconfig),
        ("--steering", settings.steering),
        ("--instance", settings.instance),
    ):
        if value:
            flags += [flag, value]
    return flags


def fence(text: str) -> str:
    """A fenced code block whose fence is longer than any backtick run in ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}\n{text.rstrip()}\n{ticks}"


def error_report(command: Sequence[str], exit_code: int, output: str) -> str:
    """The markdown shown instead of a plan when ``validate`` or ``plan`` failed."""
    shown = " ".join(["osc-gitops", *command[1:]])
    return "\n".join(
        [
            "### osc-gitops plan: error",
            "",
            f"`{shown}` failed (exit {exit_code}); no plan was computed.",
            "",
            fence(output[-COMMENT_LIMIT // 2 :] or "(no output)"),
            "",
        ]
    )


GITHUB_TOKENS = ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
"""Tokens only ``gh`` needs: osc-gitops reads the pull request's manifests and never sees them."""


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""What a terminal or the job log acts on (ESC starts ANSI and OSC-8 sequences, CR rewrites
a line, CSI is a C1 control, bidirectional controls reorder text); tab and newline stay."""


def escape_controls(text: str) -> str:
    """``text`` with every control character but tab and newline written as an escape."""

    def one(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return _CONTROL.sub(one, text)


def copy_to_log(text: str) -> None:
    """Put untrusted ``text`` in the job log as plain text: control characters escaped, and no
    line of it read as a workflow command (GitHub's ``stop-commands`` with a fresh token, which
    the text cannot know)."""
    if not text:
        return
    token = secrets.token_hex(16)
    sys.stdout.flush()
    print(f"::stop-commands::{token}", flush=True)
    sys.stdout.write(escape_controls(text))
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    print(f"::{token}::", flush=True)


def run(command: Sequence[str], title: str) -> subprocess.CompletedProcess[str]:
    """Run one osc-gitops command, folding its diagnostics into a log group."""
    environment = {k: v for k, v in os.environ.items() if k not in GITHUB_TOKENS}
    print(f"::group::{title}", flush=True)
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, check=False, env=environment
        )
        copy_to_log(result.stderr)
        print(f"exit {result.returncode}", flush=True)
        return result
    finally:
        print("::endgroup::", flush=True)


def plan(settings: Settings) -> PlanResult:
    """Validate, then plan; exit 0 and 2 both give a plan, anything else is an error report."""
    validate = [osc_gitops(), "validate", settings.path]
    validated = run(validate, "osc-gitops validate")
    if validated.returncode != 0:
        output = validated.stderr + validated.stdout
        return PlanResult(ERROR, error_report(validate, validated.returncode, output))
    command = [osc_gitops(), "plan", settings.path, "-o", "markdown", *connection_flags(settings)]
    planned = run(command, "osc-gitops plan")
    if planned.returncode in (NO_CHANGES, CHANGES):
        return PlanResult(planned.returncode, planned.stdout)
    output = planned.stderr + planned.stdout
    return PlanResult(ERROR, error_report(command, planned.returncode, output))


_FENCE = re.compile(r" {0,3}(`{3,})")


def open_fence(markdown: str) -> str | None:
    """The fence of the code block still open at the end of ``markdown`` (CommonMark: a block
    opened by N backticks closes on a line of N or more backticks alone), or None."""
    fence: str | None = None
    for line in markdown.split("\n"):
        found = _FENCE.match(line)
        if not found:
            continue
        ticks = found.group(1)
        if fence is None:
            fence = ticks
        elif len(ticks) >= len(fence) and not line.strip().strip("`"):
            fence = None
    return fence


def comment_body(marker_line: str, markdown: str) -> str:
    """Marker first, then the markdown, cut to GitHub's size limit with its blocks closed."""
    body = f"{marker_line}\n{markdown}"
    if len(body) <= COMMENT_LIMIT:
        return body
    body = body[:COMMENT_LIMIT]
    fence = open_fence(body)
    if fence is not None:
        body += "\n" + fence
    if body.count("<details>") > body.count("</details>"):
        body += "\n\n</details>"
    return body + "\n\n*Truncated: the full plan is in the job summary of this check.*\n"


def workflow_command(level: str, message: str) -> str:
    """A ``::warning::``-style annotation, escaped so a multi-line message stays one command
    (and carries no control character)."""
    escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return f"::{level}::{escape_controls(escaped)}"


def pull_request_number(event_path: str) -> int | None:
    """The pull request this run belongs to, from the event payload; None outside pull requests."""
    if not event_path or not Path(event_path).is_file():
        return None
    event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    if isinstance(event.get("pull_request"), dict):
        return int(event["pull_request"]["number"])
    issue = event.get("issue")
    if isinstance(issue, dict) and issue.get("pull_request"):
        return int(issue["number"])
    return None


class CommentError(Exception):
    """``gh`` could not list, create or update the comment (the message is gh's stderr)."""


def gh_environment(environment: Mapping[str, str], server_url: str) -> dict[str, str]:
    """``gh``'s environment: on GitHub Enterprise Server it needs the host, and the token under
    the name it reads for such hosts."""
    gh_env = dict(environment)
    host = urlparse(server_url).hostname if server_url else None
    if host and host != "github.com":
        gh_env["GH_HOST"] = host
        if "GH_TOKEN" in gh_env:
            gh_env.setdefault("GH_ENTERPRISE_TOKEN", gh_env["GH_TOKEN"])
    return gh_env


def gh_api(
    arguments: Sequence[str], environment: Mapping[str, str], payload: dict[str, str] | None = None
) -> str:
    """One ``gh api`` call; a JSON payload goes on stdin so a body never becomes an argument."""
    try:
        result = subprocess.run(
            ["gh", "api", *arguments],
            input=json.dumps(payload) if payload is not None else None,
            capture_output=True,
            text=True,
            check=False,
            env=dict(environment),
        )
    except OSError as error:  # no gh on this runner
        raise CommentError(f"cannot run gh: {error}") from error
    if result.returncode != 0:
        raise CommentError(result.stderr.strip() or f"gh api exited {result.returncode}")
    return result.stdout


def json_documents(text: str) -> Iterator[object]:
    """Each JSON value in ``text``: ``gh api --paginate`` prints one array per page, unmerged."""
    decoder = json.JSONDecoder()
    position = 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return
        document, position = decoder.raw_decode(text, position)
        yield document


def sticky_comment(
    repository: str,
    number: int,
    marker_line: str,
    body: str,
    author: str,
    environment: Mapping[str, str],
) -> str:
    """Update the comment that starts with ``marker_line`` (by ``author`` if set), else create it.

    Returns ``"updated"`` or ``"created"``. The author check keeps a comment someone else wrote
    with the same marker from being picked (updating it would fail anyway: it is not ours).
    """
    comments = f"repos/{repository}/issues/{number}/comments"
    listing = gh_api(["--paginate", f"{comments}?per_page=100"], environment)
    for page in json_documents(listing):
        for existing in page if isinstance(page, list) else []:
            if not str(existing.get("body", "")).startswith(marker_line):
                continue
            if author and existing.get("user", {}).get("login") != author:
                continue
            comment_url = f"repos/{repository}/issues/comments/{existing['id']}"
            gh_api(["--method", "PATCH", comment_url, "--input", "-"], environment, {"body": body})
            return "updated"
    gh_api(["--method", "POST", comments, "--input", "-"], environment, {"body": body})
    return "created"


def plan_file(settings: Settings) -> Path:
    """Where the markdown goes: one file per instance and folder, under the runner's temp dir."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", f"{settings.effective_instance}-{settings.path}")
    return settings.runner_temp / f"osc-gitops-plan-{slug.strip('-.') or 'plan'}.md"


def append(path: str, text: str) -> None:
    """Append to one of the runner's files (outputs, summary); skipped when it is not given."""
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)


def post_comment(settings: Settings, body: str, marker_line: str) -> None:
    """Keep the sticky comment, or say in the log why there is none; never fails the step."""
    number = pull_request_number(settings.event_path)
    if number is None:
        print(workflow_command("notice", "not a pull request: the plan is in the job summary"))
        return
    environment = gh_environment(os.environ, settings.server_url)
    try:
        author = settings.comment_author
        done = sticky_comment(settings.repository, number, marker_line, body, author, environment)
    except CommentError as error:
        # A fork's pull request gets a read-only token: the plan is still in the job summary.
        print(workflow_command("warning", f"could not write the plan comment: {error}"))
        return
    print(f"plan comment {done} on #{number}")


def main() -> int:
    settings = Settings.from_environment(os.environ)
    result = plan(settings)
    marker_line = marker(settings.effective_instance, settings.path)
    output_file = plan_file(settings)
    output_file.parent.mkdir(parents=True, exist_ok=True)
    output_file.write_text(result.markdown, encoding="utf-8")
    append(
        settings.github_output,
        f"exit-code={result.exit_code}\n"
        f"has-changes={'true' if result.exit_code == CHANGES else 'false'}\n"
        f"plan-file={output_file}\n",
    )
    append(settings.step_summary, result.markdown + "\n")
    if settings.comment:
        post_comment(settings, comment_body(marker_line, result.markdown), marker_line)
    if result.exit_code == ERROR:
        print(workflow_command("error", f"osc-gitops could not plan {settings.path}"))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
