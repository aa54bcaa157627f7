"""Git source: the only module that imports ``git`` (GitPython).

``osc-gitops plan|apply|run --repo URL --ref REF --path DIR`` reads the manifests of one exact
commit instead of a local folder. Why it works the way it does:

- One bare repository per remote in the cache dir (``<cache>/repos/<sha256(url)[:16]>.git``),
  created once and then only *fetched*: a long-running loop polls cheaply, and a restart of the
  pod with a persistent cache does not clone again.
- Fetches are shallow (``--depth=1``) for branch and tag names. A bare SHA is fetched shallow
  too when the server allows it (GitHub and ``uploadpack.allowAnySHA1InWant`` servers do), else
  by a full fetch of every branch and tag.
- The commit is exported with ``git archive`` into ``<cache>/checkouts/<sha>`` (an immutable
  directory per commit, written to a temporary name and renamed, so a crash never leaves a
  half-written checkout that looks complete). No working tree, no index, nothing to get dirty.
- Credentials never appear in the URL, in process arguments, or in logs: an https token (from
  ``OSC_GIT_TOKEN`` or ``--git-token-file``) is handed to git as an ``http.extraHeader`` through
  ``GIT_CONFIG_*`` environment variables; an ssh key through ``GIT_SSH_COMMAND`` with
  ``StrictHostKeyChecking=accept-new``. Every message that leaves this module goes through
  :func:`redact` (userinfo stripped from URLs, the token replaced by ``***``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import shutil
import tarfile
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import git
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from reconciler.errors import EndpointError

__all__ = [
    "Checkout",
    "GitSettings",
    "GitSource",
    "GitSourceError",
    "default_cache_dir",
    "redact",
]

TOKEN_ENV = "OSC_GIT_TOKEN"
"""Environment variable holding an https token (GitHub/GitLab PAT or app token)."""

_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
KEEP_CHECKOUTS = 5
"""Exported commits kept in the cache (the current one, the last good one and a few more)."""


class GitSourceError(EndpointError):
    """The git source could not be fetched or read; the message names the (redacted) remote."""

    cause = "git"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/osc-gitops`` or ``~/.cache/osc-gitops`` (the flag's default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "osc-gitops"


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with userinfo removed from URLs and every secret replaced by ``***``."""
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


@dataclass(frozen=True)
class GitSettings:
    """Where the manifests live: ``repo`` (URL or local path), ``ref`` (branch, tag or SHA),
    ``path`` (folder inside the repository). ``token``/``token_file`` for https,
    ``ssh_key`` for ssh."""

    repo: str
    ref: str = "main"
    path: str = "."
    cache_dir: str | None = None
    token: str | None = None
    token_file: str | None = None
    ssh_key: str | None = None
    timeout: float = 60.0

    @property
    def display_url(self) -> str:
        """The remote as it may be printed (no credentials)."""
        return redact(self.repo)


@dataclass(frozen=True)
class Checkout:
    """One exported commit: ``commit`` (full SHA) and ``directory`` (= ``root`` / ``path``)."""

    commit: str
    root: Path
    directory: Path
    ref: str
    repo: str

    @property
    def short(self) -> str:
        return self.commit[:12]


class GitSource:
    """Fetches ``settings.ref`` and exports its commit; thread-safe (one fetch at a time)."""

    def __init__(self, settings: GitSettings) -> None:
        if not settings.repo:
            raise GitSourceError("--repo is empty")
        rel = Path(settings.path)
        if rel.is_absolute() or ".." in rel.parts:
            raise GitSourceError(
                f"--path {settings.path!r} must be a folder inside the repository "
                "(relative, without '..')"
            )
        self.settings = settings
        self.cache = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
        key = hashlib.sha256(settings.repo.encode()).hexdigest()[:16]
        self.bare = self.cache / "repos" / f"{key}.git"
        self.checkouts = self.cache / "checkouts" / key
        self._lock = threading.Lock()
        self._token = self._read_token()

    # -------------------------------------------------------------------- credentials

    def _read_token(self) -> str | None:
        s = self.settings
        if s.token_file:
            try:
                token = Path(s.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise GitSourceError(
                    f"cannot read --git-token-file {s.token_file}: {exc.strerror or exc}"
                ) from exc
            return token or None
        return s.token or None

    def _secrets(self) -> tuple[str, ...]:
        token = self._token or ""
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode() if token else ""
        return (token, basic)

    def git_environment(self) -> dict[str, str]:
        """Environment for every git process: credentials, no prompts, no system config
        surprises. Public so tests can check that the token only ever travels here."""
        env = {
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        config: list[tuple[str, str]] = [("protocol.file.allow", "always")]
        if self._token:
            # Works for GitHub (x-access-token), GitLab and Gitea (any user + token as password).
            basic = base64.b64encode(f"x-access-token:{self._token}".encode()).decode()
            config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        if self.settings.ssh_key:
            key_file = Path(self.settings.ssh_key)
            if not key_file.is_file():
                raise GitSourceError(f"--git-ssh-key {key_file}: no such file")
            known_hosts = self.cache / "known_hosts"
            env["GIT_SSH_COMMAND"] = " ".join(
                [
                    "ssh",
                    "-i",
                    shlex.quote(str(key_file)),
                    "-o",
                    "IdentitiesOnly=yes",
                    "-o",
                    "StrictHostKeyChecking=accept-new",
                    "-o",
                    f"UserKnownHostsFile={shlex.quote(str(known_hosts))}",
                    "-o",
                    "BatchMode=yes",
                ]
            )
        return env

    # -------------------------------------------------------------------- fetch + export

    def _repo(self) -> git.Repo:
        try:
            return git.Repo(self.bare)
        except (InvalidGitRepositoryError, NoSuchPathError):
            if self.bare.exists():
                shutil.rmtree(self.bare)  # a broken cache entry: start over
            self.bare.parent.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.init(self.bare, bare=True)
            repo.git.remote("add", "origin", self.settings.repo)
            return repo

    def _fail(self, what: str, exc: GitCommandError) -> GitSourceError:
        stderr = (exc.stderr or "").strip().replace("stderr: ", "").strip("'").strip()
        last = [line for line in stderr.splitlines() if line.strip()]
        reason = "; ".join(line.strip() for line in last[-2:]) or f"exit status {exc.status}"
        return GitSourceError(
            redact(
                f"git {what} {self.settings.display_url} (ref {self.settings.ref}): {reason}",
                self._secrets(),
            )
        )

    def _fetch(self, repo: git.Repo) -> str:
        """Fetch the ref and return the commit it points to."""
        ref = self.settings.ref
        timeout = self.settings.timeout
        with repo.git.custom_environment(**self.git_environment()):
            try:
                repo.git.fetch(
                    "--depth=1",
                    "--no-tags",
                    "--force",
                    "origin",
                    ref,
                    kill_after_timeout=timeout,
                )
                return str(repo.git.rev_parse("FETCH_HEAD^{commit}"))
            except GitCommandError as exc:
                if not _SHA.match(ref.lower()):
                    raise self._fail("fetch", exc) from None
                first = exc
            # A (possibly abbreviated) SHA the server would not serve directly: fetch all.
            try:
                repo.git.fetch(
                    "--force",
                    "--tags",
                    "origin",
                    "+refs/heads/*:refs/remotes/origin/*",
                    kill_after_timeout=timeout,
                )
            except GitCommandError:
                raise self._fail("fetch", first) from None
            try:
                return str(repo.git.rev_parse("--verify", f"{ref}^{{commit}}"))
            except GitCommandError:
                raise GitSourceError(
                    f"{self.settings.display_url}: commit {ref} does not exist in the repository"
                ) from None

    def _export(self, repo: git.Repo, commit: str) -> Path:
        root = self.checkouts / commit
        if root.is_dir():
            return root
        self.checkouts.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=self.checkouts))
        try:
            (tmp / "tree").mkdir()
            # A commit whose tree is empty (every file deleted) has nothing to export, and
            # `git archive` gives no valid tar for it: an empty folder is its checkout.
            if len(repo.commit(commit).tree) > 0:
                archive = tmp / "tree.tar"
                with archive.open("wb") as out:
                    repo.archive(out, commit, format="tar")
                with tarfile.open(archive) as tar:
                    _extract(tar, tmp / "tree")
                archive.unlink()
            os.replace(tmp / "tree", root)
        except OSError:
            if not root.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._prune(keep={commit})
        return root

    def _prune(self, keep: set[str]) -> None:
        """Keep the newest :data:`KEEP_CHECKOUTS` exports (and ``keep``)."""
        entries = sorted(
            (p for p in self.checkouts.iterdir() if p.is_dir() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for old in entries[KEEP_CHECKOUTS:]:
            if old.name not in keep:
                shutil.rmtree(old, ignore_errors=True)

    def sync(self) -> Checkout:
        """Fetch the ref, export its commit and return it. Raises :class:`GitSourceError`."""
        with self._lock:
            try:
                repo = self._repo()
            except (GitCommandError, OSError) as exc:
                raise GitSourceError(
                    redact(f"cannot prepare git cache {self.bare}: {exc}", self._secrets())
                ) from None
            try:
                commit = self._fetch(repo)
                root = self._export(repo, commit)
            finally:
                repo.close()
        directory = root / self.settings.path
        return Checkout(
            commit=commit,
            root=root,
            directory=directory,
            ref=self.settings.ref,
            repo=self.settings.display_url,
        )


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract regular files and folders only (``git archive`` output, but a repository may hold
    symlinks pointing anywhere on the reconciler's disk: those are skipped, not followed)."""
    dest.mkdir(parents=True, exist_ok=True)
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if Path(member.name).is_absolute() or ".." in parts:
            continue
        if member.isdir():
            (dest / member.name).mkdir(parents=True, exist_ok=True)
        elif member.isfile():
            target = dest / member.name
            target.parent.mkdir(parents=True, exist_ok=True)
            source = tar.extractfile(member)
            if source is not None:
                with source, target.open("wb") as out:
                    shutil.copyfileobj(source, out)
