"""Git source: the only module that imports ``git`` (GitPython).

``osc-gitops plan|apply|run --repo URL --ref REF --path DIR`` reads the manifests of one exact
commit instead of a local folder. Why it works the way it does:

- One bare repository per remote in the cache dir (``<cache>/repos/<sha256(url)[:16]>.git``),
  created once and then only *fetched*: a long-running loop polls cheaply, and a restart of the
  pod with a persistent cache does not clone again.
- Fetches are shallow (``--depth=1``) for branch and tag names. A bare SHA is fetched shallow
  too when the server allows it (GitHub and ``uploadpack.allowAnySHA1InWant`` servers do), else
  by a full fetch of every branch and tag.
- The commit is exported into ``<cache>/checkouts/<sha>`` (an immutable directory per commit,
  written to a temporary name and renamed, so a crash never leaves a half-written checkout that
  looks complete). No working tree, no index, nothing to get dirty. Only what the loader reads
  is exported: the ``.yaml``/``.yml`` files under ``--path`` (hidden folders and symlinks
  skipped, as the loader skips them) and ``--path``'s ``.oscignore``, blob by blob, after their
  sizes were read from the tree (git never inflates a blob we would refuse): a file larger than
  :data:`MAX_EXPORT_FILE_BYTES`, more than :data:`MAX_EXPORT_FILES` files or
  :data:`MAX_EXPORT_BYTES` in all refuse the commit whole (:class:`RevisionRefused`, reported
  like invalid manifests, at ``file:1:1``), before anything is written.
- Credentials are never written to disk, never put in process arguments, never logged: an https
  token (``OSC_GIT_TOKEN`` or ``--git-token-file``), or the ``user:password@`` of an https
  ``--repo`` URL, is handed to each git command as an ``http.extraHeader`` through
  ``GIT_CONFIG_*`` environment variables; the URL git sees, and the cache's config, carry no
  userinfo (a cache an earlier version wrote with it is scrubbed). An ssh key goes through
  ``GIT_SSH_COMMAND`` with ``StrictHostKeyChecking=accept-new``. Every message that leaves this
  module goes through :func:`redact` (userinfo stripped from URLs, secrets replaced by ``***``).
- Every value a user gives reaches git after ``--`` or ``--end-of-options``, and ``--ref`` is
  checked first with git's own rules for ref names (:func:`check_ref`): ``--ref
  '--upload-pack=…'`` is refused, never run.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import git
from git.exc import GitCommandError, InvalidGitRepositoryError, NoSuchPathError

from reconciler.errors import EndpointError, ManifestIssue, RevisionRefused, UserError

__all__ = [
    "Checkout",
    "GitSettings",
    "GitSource",
    "GitSourceError",
    "check_ref",
    "default_cache_dir",
    "redact",
]

TOKEN_ENV = "OSC_GIT_TOKEN"
"""Environment variable holding an https token (GitHub/GitLab PAT or app token)."""

_SHA = re.compile(r"^[0-9a-f]{7,40}$")
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@")
KEEP_CHECKOUTS = 5
"""Exported commits kept in the cache (the current one, the last good one and a few more)."""

MAX_EXPORT_FILE_BYTES = 1024 * 1024
"""Largest file exported: the loader refuses a larger manifest unread
(``reconciler.manifests.load.MAX_FILE_BYTES``; a test pins the two equal), so git never
inflates it either (a 300 MB file made git's child use 576 MB, against the deployment's 1 Gi)."""
MAX_EXPORT_FILES = 10_000
"""Most files exported from one commit (a large policy repository has hundreds)."""
MAX_EXPORT_BYTES = 64 * 1024 * 1024
"""Most bytes exported from one commit in all: 64 manifests at the size limit, or some 10,000
of a typical few KiB; the loader needs about 1.5 s per MiB, so more is never loaded in time
anyway. Bounds the cache (``KEEP_CHECKOUTS`` commits of it at most)."""
MAX_REF_CHARS = 255
"""Longest ``--ref`` accepted (a file name's limit: git stores a branch as a file)."""
_FILTER = f"blob:limit={MAX_EXPORT_FILE_BYTES}"
"""What a fetch leaves out (partial clone): a server that supports filters (GitHub, GitLab,
git >= 2.19 with ``uploadpack.allowFilter``) never sends a blob the export would refuse."""
_LOCAL_UPLOAD_PACK = "git -c uploadpack.allowFilter=true upload-pack"
_YAML_SUFFIXES = (".yaml", ".yml")
_IGNORE_FILE = ".oscignore"
_REGULAR_FILES = (0o100644, 0o100755)
"""Tree modes of the blobs exported (not symlinks 0o120000, not submodules 0o160000)."""
_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


class GitSourceError(EndpointError):
    """The git source could not be fetched or read; the message names the (redacted) remote."""

    cause = "git"


class GitSettingError(UserError):
    """A git flag that cannot be used (``--ref``, ``--path``, ``--repo``): the user's to fix,
    before anything is fetched."""

    cause = "git"


def check_ref(ref: str) -> str:
    """``ref`` when it is a name git accepts for a branch, tag or commit
    (``git check-ref-format --allow-onelevel``'s rules), else :class:`GitSettingError`.

    Why: ``--ref`` reaches ``git fetch``, and a value starting with ``-`` would be an option to
    it (``--upload-pack=…`` runs a command); ``--`` keeps it a refspec, and this check makes a
    bad value a clear error instead of git's own."""
    problem = None
    if not ref:
        problem = "is empty"
    elif len(ref) > MAX_REF_CHARS:
        problem = f"is longer than {MAX_REF_CHARS} characters"
    elif ref.startswith("-"):
        problem = "starts with '-'"
    elif _BAD_REF.search(ref):
        problem = (
            "contains a character or sequence git does not allow in a ref name (control "
            "characters, space, ~ ^ : ? * [ \\, '..', '@{', '//')"
        )
    elif ref == "@" or ref.endswith(("/", ".", ".lock")) or ref.startswith("/"):
        problem = "is not a ref name (it ends in '/', '.' or '.lock', starts with '/', or is '@')"
    elif any(part.startswith(".") or part.endswith(".lock") for part in ref.split("/")):
        problem = "has a part starting with '.' or ending in '.lock'"
    if problem is not None:
        raise GitSettingError(
            f"--ref {ref!r} {problem}: give a branch, a tag or a commit SHA "
            "(git check-ref-format's rules)"
        )
    return ref


def _credentials(repo: str) -> tuple[str, tuple[str, str] | None]:
    """``repo`` without userinfo, and the ``(user, password)`` an https URL carried.

    Other schemes keep a user name (``ssh://git@host/x``: not a secret, ssh needs it) and are
    refused with a password (ssh takes none in a URL)."""
    if "://" not in repo:
        return repo, None  # a local path, or scp-like git@host:path
    parts = urlsplit(repo)
    if parts.username is None and parts.password is None:
        return repo, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    if parts.scheme in ("http", "https"):
        clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
        return clean, (unquote(parts.username or ""), unquote(parts.password or ""))
    if parts.password is not None:
        raise GitSettingError(
            f"--repo {redact(repo)}: a password in a {parts.scheme}:// URL is not supported; "
            "use --git-ssh-key (ssh) or an https URL"
        )
    return repo, None


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
    timeout: float = 60.0
    """Seconds one fetch or clone may take."""
    cache_dir: str | None = None
    # credentials, one kind per remote
    token: str | None = None
    token_file: str | None = None
    ssh_key: str | None = None

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
        check_ref(settings.ref)
        self.settings = settings
        self.url, self._url_credentials = _credentials(settings.repo)
        """The remote as git sees it: never with credentials."""
        self.cache = Path(settings.cache_dir) if settings.cache_dir else default_cache_dir()
        key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        self.bare = self.cache / "repos" / f"{key}.git"
        self.checkouts = self.cache / "checkouts" / key
        legacy = hashlib.sha256(settings.repo.encode()).hexdigest()[:16]
        self._legacy = self.cache / "repos" / f"{legacy}.git" if legacy != key else None
        """Where an earlier version kept this remote, keyed by the URL with its credentials
        (and with them in its config): removed at the first sync."""
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

    def _basic(self) -> str | None:
        """The ``Authorization: Basic`` value: the token's, else the URL's credentials."""
        if self._token:
            # Works for GitHub (x-access-token), GitLab and Gitea (any user + token as password).
            return base64.b64encode(f"x-access-token:{self._token}".encode()).decode()
        if self._url_credentials is not None:
            user, password = self._url_credentials
            return base64.b64encode(f"{user}:{password}".encode()).decode()
        return None

    def _secrets(self) -> tuple[str, ...]:
        url_password = self._url_credentials[1] if self._url_credentials else ""
        return (self._token or "", url_password, self._basic() or "")

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
        basic = self._basic()
        if basic:
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
        if self._legacy is not None and self._legacy.exists():
            shutil.rmtree(self._legacy, ignore_errors=True)  # its config held the credentials
        try:
            repo = git.Repo(self.bare)
        except (InvalidGitRepositoryError, NoSuchPathError):
            if self.bare.exists():
                shutil.rmtree(self.bare)  # a broken cache entry: start over
            self.bare.parent.mkdir(parents=True, exist_ok=True)
            repo = git.Repo.init(self.bare, bare=True)
        self._configure(repo)
        return repo

    def _configure(self, repo: git.Repo) -> None:
        """Remote ``origin`` is :attr:`url` (no credentials: an earlier version's URL, with
        them, is overwritten) and a partial-clone promisor, so that fetches may leave out blobs
        larger than :data:`MAX_EXPORT_FILE_BYTES` (``--filter=blob:limit``)."""
        wanted = {
            ("core", "repositoryformatversion"): "1",
            ("extensions", "partialClone"): "origin",
            ('remote "origin"', "url"): self.url,
            ('remote "origin"', "promisor"): "true",
            ('remote "origin"', "partialclonefilter"): _FILTER,
        }
        if _is_local(self.url):
            # A remote on this machine runs its upload-pack as our child, which ignores our
            # GIT_CONFIG_* environment: filters must be allowed on its command line.
            wanted[('remote "origin"', "uploadpack")] = _LOCAL_UPLOAD_PACK
        reader = repo.config_reader("repository")
        if all(
            reader.has_option(section, key) and str(reader.get_value(section, key)) == value
            for (section, key), value in wanted.items()
        ):
            return
        with repo.config_writer("repository") as writer:
            for (section, key), value in wanted.items():
                writer.set_value(section, key, value)

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
                    f"--filter={_FILTER}",
                    "--",
                    "origin",
                    ref,
                    kill_after_timeout=timeout,
                )
                return str(
                    repo.git.rev_parse("--verify", "--end-of-options", "FETCH_HEAD^{commit}")
                )
            except GitCommandError as exc:
                if not _SHA.match(ref.lower()):
                    raise self._fail("fetch", exc) from None
                first = exc
            # A (possibly abbreviated) SHA the server would not serve directly: fetch all.
            try:
                repo.git.fetch(
                    "--force",
                    "--tags",
                    f"--filter={_FILTER}",
                    "--",
                    "origin",
                    "+refs/heads/*:refs/remotes/origin/*",
                    kill_after_timeout=timeout,
                )
            except GitCommandError:
                raise self._fail("fetch", first) from None
            try:
                return str(repo.git.rev_parse("--verify", "--end-of-options", f"{ref}^{{commit}}"))
            except GitCommandError:
                raise GitSourceError(
                    f"{self.settings.display_url}: commit {ref} does not exist in the repository"
                ) from None

    def _export(self, repo: git.Repo, commit: str) -> Path:
        root = self.checkouts / commit
        if root.is_dir():
            return root
        blobs, folder = self._exported_blobs(repo, commit)
        self.checkouts.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}-", dir=self.checkouts))
        try:
            tree = tmp / "tree"
            tree.mkdir()
            if folder is not None:  # --path exists even when it holds no manifest
                tree.joinpath(*folder.split("/")).mkdir(parents=True, exist_ok=True)
            for path, binsha in blobs:
                target = tree.joinpath(*path.split("/"))
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(repo.odb.stream(binsha).read(MAX_EXPORT_FILE_BYTES + 1))
            os.replace(tree, root)
        except OSError:
            if not root.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self._prune(keep={commit})
        return root

    def _exported_blobs(
        self, repo: git.Repo, commit: str
    ) -> tuple[list[tuple[str, bytes]], str | None]:
        """``(path, blob id)`` of every file the export writes (module docstring), sizes
        checked from the tree before any blob is read, and ``--path`` when it is a folder of
        the commit (``None``: not one); :class:`RevisionRefused` when a limit is passed."""
        node: object = repo.commit(commit).tree
        prefix = "/".join(p for p in Path(self.settings.path).parts if p != ".")
        for part in prefix.split("/") if prefix else ():
            if not isinstance(node, git.Tree):
                return [], None
            try:
                node = node[part]
            except KeyError:
                return [], None  # --path is not in this commit: the loader says so
        folder: str | None = None
        if isinstance(node, git.Blob):  # --path names one file
            entries: list[tuple[str, git.Blob, bool]] = [(prefix, node, True)]
        elif isinstance(node, git.Tree):
            entries = list(_wanted(node, prefix))
            folder = prefix
        else:
            return [], None
        missing = _missing(repo, commit, prefix)
        issues: list[ManifestIssue] = []
        chosen: list[tuple[str, bytes]] = []
        total = 0
        limit = f"the {MAX_EXPORT_FILE_BYTES // 1048576} MiB limit for a manifest file"
        for path, blob, _ in entries:
            if blob.hexsha in missing:  # left out by the fetch's filter: larger than the limit
                issues.append(ManifestIssue(path, 1, 1, f"file is larger than {limit}"))
                continue
            size = int(blob.size)
            if size > MAX_EXPORT_FILE_BYTES:
                issues.append(ManifestIssue(path, 1, 1, (
                    f"file is {size / 1048576:.1f} MiB, larger than {limit}"
                )))  # fmt: skip
                continue
            total += size
            chosen.append((path, blob.binsha))
        where = prefix or "the repository root"
        if len(chosen) > MAX_EXPORT_FILES:
            issues.append(ManifestIssue(prefix or ".", 1, 1, (
                f"{where} holds {len(chosen)} manifest files, more than the limit of "
                f"{MAX_EXPORT_FILES} for one commit"
            )))  # fmt: skip
        elif total > MAX_EXPORT_BYTES:
            issues.append(ManifestIssue(prefix or ".", 1, 1, (
                f"the manifests under {where} are {total / 1048576:.1f} MiB, more than the "
                f"limit of {MAX_EXPORT_BYTES // 1048576} MiB for one commit"
            )))  # fmt: skip
        if issues:
            raise RevisionRefused(commit, issues)
        return chosen, folder

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


def _is_local(url: str) -> bool:
    """A path or ``file://`` URL (git's rule: not ``scheme://``, not scp-like ``host:path``)."""
    if url.startswith("file://"):
        return True
    if "://" in url:
        return False
    colon, slash = url.find(":"), url.find("/")
    return colon == -1 or (slash != -1 and slash < colon)


def _missing(repo: git.Repo, commit: str, prefix: str) -> set[str]:
    """Blobs under ``prefix`` the partial fetch left out (never fetched now: ``rev-list
    --missing=print`` only lists them)."""
    listing = repo.git.rev_list(
        "--objects", "--missing=print", "--end-of-options", commit, "--", prefix or "."
    )
    return {line[1:].split()[0] for line in str(listing).splitlines() if line.startswith("?")}


def _safe_name(name: str) -> bool:
    """A tree entry name that is one plain path part (a crafted tree may hold others)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name


def _wanted(tree: git.Tree, prefix: str) -> list[tuple[str, git.Blob, bool]]:
    """The blobs of ``tree`` (at ``prefix``) the loader would read: its ``.oscignore``, and the
    YAML files in it and in its non-hidden folders; regular files only."""
    found: list[tuple[str, git.Blob, bool]] = []
    stack: list[tuple[git.Tree, str, bool]] = [(tree, prefix, True)]
    while stack:
        current, where, top = stack.pop()
        for entry in current:
            name = entry.name
            if not _safe_name(name):
                continue
            path = f"{where}/{name}" if where else name
            if isinstance(entry, git.Tree):
                if not name.startswith("."):
                    stack.append((entry, path, False))
                continue
            if not isinstance(entry, git.Blob) or entry.mode not in _REGULAR_FILES:
                continue  # symlinks and submodules are never exported
            if top and name == _IGNORE_FILE:
                found.append((path, entry, True))
            elif not name.startswith(".") and name.lower().endswith(_YAML_SUFFIXES):
                found.append((path, entry, False))
    return sorted(found, key=lambda item: item[0])
