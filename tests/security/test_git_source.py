"""What a git source is given: ``--ref``, ``--repo`` and the commits of the repository.

Issue 31, items 7, 9 and 12. On main ``--ref '--upload-pack=touch /tmp/x; git-upload-pack'``
ran the command; a commit with a 300 MB file put 573 MB in the cache (git's child at 577 MB
RSS, 42 s); a token in an https ``--repo`` URL was written in clear to the cache's git config.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reconciler.adapters import git as git_adapter
from reconciler.adapters.git import GitSettings, GitSource
from reconciler.engine.sources import GitManifestSource, SourceTracker
from reconciler.manifests.load import MAX_FILE_BYTES
from tests.security.hostile import osc
from tests.support.fakes import RecordingReporter
from tests.support.gitops import Remote, git

# --------------------------------------------------------------------------- --ref and --repo


@pytest.mark.parametrize(
    "ref",
    [
        "--upload-pack=touch {x}; git-upload-pack",
        "-c",
        "main..HEAD",
        "a b",
        "x\x1b[2Jy",
        "@{-1}",
        "@",
        ".hidden",
        "a/.b",
        "x.lock",
        "x/",
        "main~1",
        "a:b",
        "*",
        "x" * 300,
    ],
)
def test_a_ref_git_would_not_accept_is_refused_before_git_runs(
    remote: Remote, tmp_path: Path, ref: str
) -> None:
    remote.copy_examples()
    remote.commit("policies")
    marker = tmp_path / "pwned"
    ref = ref.replace("{x}", str(marker))
    run = osc("plan", "--repo", remote.url, f"--ref={ref}", "--path", "policies",
              "--cache-dir", tmp_path / "cache", "--observed", tmp_path / "none.json")  # fmt: skip
    assert run.code == 1 and not marker.exists()  # main: the command ran
    assert run.err.startswith("error: --ref ") and "check-ref-format" in run.err, run.err
    assert "\x1b" not in run.err and "Traceback" not in run.err
    assert not (tmp_path / "cache").exists(), "refused before anything was fetched"


def test_refs_git_accepts_still_work() -> None:
    from reconciler.adapters.git import GitSettingError, check_ref

    for ref in ("main", "release/1.2", "v1.0.0", "refs/heads/main", "0123abc", "a-b_c.d"):
        assert check_ref(ref) == ref
    with pytest.raises(GitSettingError):
        check_ref("")


def test_a_repo_that_looks_like_an_option_is_a_path_not_an_option(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    run = osc("plan", "--repo", f"--upload-pack=touch {marker}", "--cache-dir",
              tmp_path / "cache", "--observed", tmp_path / "none.json")  # fmt: skip
    assert run.code == 1 and not marker.exists()
    assert "error: git fetch --upload-pack=touch" in run.err and "Traceback" not in run.err


# --------------------------------------------------------------------------- export size


def test_a_file_past_the_size_limit_refuses_the_commit_and_is_never_fetched(
    remote: Remote, tmp_path: Path
) -> None:
    assert git_adapter.MAX_EXPORT_FILE_BYTES == MAX_FILE_BYTES  # the loader's own limit
    policies = remote.copy_examples()
    (policies / "big.yaml").write_bytes(os.urandom(3 * 1024 * 1024))  # main: 300 MB read
    (policies / "notes.bin").write_bytes(os.urandom(3 * 1024 * 1024))  # not a manifest
    sha = remote.commit("a big file")
    cache = tmp_path / "cache"
    run = osc("plan", "--repo", remote.url, "--path", "policies", "--cache-dir", cache,
              "--observed", tmp_path / "none.json")  # fmt: skip
    assert run.code == 1
    assert run.err.splitlines() == [
        "policies/big.yaml:1:1: file is larger than the 1 MiB limit for a manifest file",
        f"error: commit {sha} of {remote.url}: 1 problem(s) in the manifests",
    ]
    stored = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file())
    assert stored < 1024 * 1024, f"the cache holds {stored} bytes: a big blob was fetched"


def test_too_many_bytes_in_all_refuse_the_commit(
    remote: Remote, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(git_adapter, "MAX_EXPORT_BYTES", 64 * 1024)
    policies = remote.copy_examples()
    for i in range(20):
        (policies / "extra" / f"f{i}.yaml").parent.mkdir(exist_ok=True)
        (policies / "extra" / f"f{i}.yaml").write_text("# " + "x" * 4000 + "\n")
    sha = remote.commit("many files")
    from reconciler.errors import RevisionRefused

    source = GitSource(GitSettings(repo=remote.url, path="policies",
                                   cache_dir=str(tmp_path / "cache")))  # fmt: skip
    with pytest.raises(RevisionRefused) as refused:
        source.sync()
    assert refused.value.revision == sha
    (issue,) = refused.value.issues
    assert str(issue).startswith("policies:1:1: the manifests under policies are 0.1 MiB, more ")


def test_the_loop_refuses_such_a_commit_and_keeps_the_source_up(
    remote: Remote, tmp_path: Path
) -> None:
    policies = remote.copy_examples()
    good = remote.commit("policies")
    requests: list[str] = []
    refusals: list[tuple[str | None, list[str]]] = []
    reporter = RecordingReporter()
    source = GitManifestSource(GitSource(GitSettings(
        repo=remote.url, path="policies", cache_dir=str(tmp_path / "cache"))))  # fmt: skip
    tracker = SourceTracker(source, reporter, requests.append,
                            lambda rev, errors: refusals.append((rev, errors)))  # fmt: skip
    assert tracker.refresh() and tracker.revision == good
    (policies / "big.yml").write_bytes(b"#" * (2 * 1024 * 1024))
    bad = remote.commit("big")
    assert not tracker.refresh()
    assert tracker.revision == good and tracker.latest_seen == bad and tracker.latest_refused
    assert refusals == [(bad, ["policies/big.yml:1:1: file is larger than the 1 MiB limit "
                               "for a manifest file"])]  # fmt: skip
    assert tracker.source_error is None and reporter.of("source_up")[-1] == (True,)


# --------------------------------------------------------------------------- credentials


class _GitHttp(BaseHTTPRequestHandler):
    """git's smart HTTP (``git http-backend`` as CGI) behind Basic authentication."""

    root: Path
    credentials: str
    seen: list[str]

    def log_message(self, format: str, *args: object) -> None:
        return

    def _cgi(self) -> None:
        self.seen.append(self.headers.get("Authorization") or "")
        if self.headers.get("Authorization") != f"Basic {self.credentials}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(length), "REMOTE_USER": "u", "GIT_PROTOCOL":
            self.headers.get("Git-Protocol") or "",
        }  # fmt: skip
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=True).stdout  # fmt: skip
        head, _, payload = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            key, _, value = line.partition(": ")
            if key.lower() == "status":
                status = int(value.split()[0])
            else:
                headers.append((key, value))
        self.send_response(status)
        for key, value in headers:
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = _cgi
    do_POST = _cgi


@pytest.fixture
def http_remote(remote: Remote) -> Iterator[tuple[str, str, list[str]]]:
    remote.copy_examples()
    remote.commit("policies")
    token = "ghp_" + os.urandom(12).hex()
    seen: list[str] = []
    handler = type("Handler", (_GitHttp,), {
        "root": remote.bare.parent, "seen": seen,
        "credentials": base64.b64encode(f"x-access-token:{token}".encode()).decode()})  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/{remote.bare.name}", token, seen
    finally:
        server.shutdown()
        server.server_close()


def _on_disk(folder: Path, secret: str) -> list[Path]:
    return [f for f in folder.rglob("*") if f.is_file() and secret.encode() in f.read_bytes()]


def test_a_token_in_the_repo_url_is_sent_as_a_header_and_never_written(
    http_remote: tuple[str, str, list[str]], tmp_path: Path
) -> None:
    url, token, seen = http_remote
    with_token = url.replace("http://", f"http://x-access-token:{token}@")
    cache = tmp_path / "cache"
    run = osc("plan", "--repo", with_token, "--path", "policies", "--cache-dir", cache,
              "--observed", tmp_path / "none.json")  # fmt: skip
    assert "commit " in run.err, run.err  # fetched and exported with the URL's credentials
    assert any(h.startswith("Basic ") for h in seen)
    assert token not in run.out + run.err
    assert _on_disk(cache, token) == []  # main: the cache's git config held the URL
    assert _on_disk(cache, base64.b64encode(f"x-access-token:{token}".encode()).decode()) == []


def test_a_cache_an_earlier_version_wrote_with_the_token_is_scrubbed(
    http_remote: tuple[str, str, list[str]], tmp_path: Path
) -> None:
    url, token, _ = http_remote
    with_token = url.replace("http://", f"http://x-access-token:{token}@")
    cache = tmp_path / "cache"
    source = GitSource(GitSettings(repo=with_token, path="policies", cache_dir=str(cache)))
    # what main left behind: a bare repository keyed by the URL with the token, its origin
    # remote the URL itself
    legacy = source._legacy
    assert legacy is not None
    git(tmp_path, "init", "-q", "--bare", str(legacy))
    git(legacy, "remote", "add", "origin", with_token)
    assert _on_disk(cache, token)
    source.sync()
    assert _on_disk(cache, token) == [] and not legacy.exists()
