"""Where the loop's manifests come from, and which revision of them is the last good one.

A :class:`ManifestSource` hands out :class:`Snapshot` s (a folder of manifests, and the commit
when it is known): :class:`LocalSource` for a folder on disk, :class:`GitManifestSource` for a
git remote. :class:`SourceTracker` keeps the loop's rules about them:

- **Last good commit.** A revision whose manifests do not load is refused whole: its errors are
  logged and reported (with ``file:line`` relative to the repository root), and the last good
  revision keeps being reconciled. A refused revision is not loaded again.
- **Unreachable source.** A fetch that fails keeps the last good revision (at start, the one the
  status file says was applied, if its checkout is still cached). Reported, never fatal.
- **Identity.** A reload that yields the same manifests keeps the previous ``Desired`` object:
  the incremental planner keys on its identity.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from reconciler.core.model.desired import Desired
from reconciler.engine.providers import Reporter
from reconciler.engine.reporting.logs import LOGGER
from reconciler.errors import RevisionRefused, UserError, ValidationFailed, error_cause
from reconciler.manifests.load import load_path

log = logging.getLogger(LOGGER)


@dataclass(frozen=True)
class Snapshot:
    """Manifests of one revision: ``directory`` to load, ``revision`` (commit) if known,
    ``root`` to make error paths relative."""

    directory: Path
    revision: str | None = None
    root: Path | None = None
    fingerprint: str | None = None
    """For a local folder: changes whenever a file or directory under it does (see
    :func:`folder_fingerprint`); the same value means the manifests need no reload."""


def folder_fingerprint(root: Path) -> str:
    """A digest of every path under ``root`` with its inode, size and mtime (links followed,
    loops cut): much cheaper than reading and validating the manifests again. A ConfigMap
    update swaps the ``..data`` link to a new directory, so every file's inode changes with
    it."""
    entries: list[tuple[str, int, int, int, int]] = []
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        current = stack.pop()
        try:
            st = os.stat(current)
        except OSError:
            entries.append((current, -1, -1, -1, -1))
            continue
        entries.append((current, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
        if not os.path.isdir(current) or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            names = sorted(os.listdir(current))
        except OSError:
            entries.append((current + "/", -1, -1, -1, -1))
            continue
        stack.extend(os.path.join(current, name) for name in names)
    entries.sort()
    return hashlib.sha256(repr(entries).encode()).hexdigest()


class ManifestSource(Protocol):
    description: str
    polls: bool
    """True for remote sources (fetched by the poller thread), False for a local folder
    (re-read at the start of every reconcile)."""

    def fetch(self) -> Snapshot:
        """The newest revision; raises when the source cannot be reached."""
        ...

    def cached(self, revision: str) -> Snapshot | None:
        """``revision`` from a local cache, if still there (used while unreachable)."""
        ...


class LocalSource:
    """A folder on disk (a ConfigMap mount, a git-sync sidecar's checkout, a CI workspace)."""

    polls = False

    def __init__(self, path: str | Path, revision: str | None = None) -> None:
        self.path = Path(path)
        self.revision = revision
        self.description = str(path)

    def fetch(self) -> Snapshot:
        return Snapshot(self.path, self.revision, fingerprint=folder_fingerprint(self.path))

    def cached(self, revision: str) -> Snapshot | None:
        return None


class GitCheckout(Protocol):
    @property
    def commit(self) -> str: ...
    @property
    def root(self) -> Path: ...
    @property
    def directory(self) -> Path: ...


class GitSourceSettings(Protocol):
    @property
    def display_url(self) -> str: ...
    @property
    def ref(self) -> str: ...
    @property
    def path(self) -> str: ...


class GitRepository(Protocol):
    """What :class:`GitManifestSource` uses of ``reconciler.adapters.git.GitSource``."""

    @property
    def settings(self) -> GitSourceSettings: ...
    @property
    def checkouts(self) -> Path:
        """The folder holding one exported checkout per commit."""
        ...

    def sync(self) -> GitCheckout: ...


class GitManifestSource:
    """A git remote (``reconciler.adapters.git.GitSource``) as a :class:`ManifestSource`."""

    polls = True

    def __init__(self, source: GitRepository) -> None:
        self.source = source
        self.description = f"{source.settings.display_url}@{source.settings.ref}"

    def fetch(self) -> Snapshot:
        checkout = self.source.sync()
        return Snapshot(checkout.directory, checkout.commit, checkout.root)

    def cached(self, revision: str) -> Snapshot | None:
        root = self.source.checkouts / revision
        if not root.is_dir():
            return None
        return Snapshot(root / self.source.settings.path, revision, root)


@dataclass(frozen=True)
class Current:
    """What to reconcile now: ``desired`` of the last good ``revision`` (None before any
    revision loaded), and ``source_error`` while the source is unreachable."""

    desired: Desired | None
    revision: str | None
    source_error: str | None


class SourceTracker:
    """The last good revision of a :class:`ManifestSource`, the refused ones, and whether the
    source is reachable (module docstring). Thread-safe: the poller thread refreshes while the
    loop reads :meth:`current`.

    ``request(reason)`` asks the loop for a reconcile (an outage or a refusal must be reported
    even when no pass is due); ``on_refused(revision, errors)`` hands a refusal to the status.
    """

    def __init__(
        self,
        source: ManifestSource,
        reporter: Reporter,
        request: Callable[[str], None],
        on_refused: Callable[[str | None, list[str]], None],
    ) -> None:
        self.source = source
        self.reporter = reporter
        self.request = request
        self.on_refused = on_refused
        self._lock = threading.Lock()
        self.desired: Desired | None = None
        self.revision: str | None = None
        """The last good (validated) revision."""
        self.latest_seen: str | None = None
        """The newest revision the source showed (refused or not)."""
        self.source_error: str | None = None
        self._fingerprint: str | None = None  # of the local folder last loaded
        self._refused: dict[str, list[str]] = {}

    def current(self) -> Current:
        with self._lock:
            return Current(self.desired, self.revision, self.source_error)

    def refused_errors(self, revision: str | None) -> list[str] | None:
        """The errors ``revision`` was refused for, or None if it was not refused."""
        return self._refused.get(revision or "")

    @property
    def latest_refused(self) -> bool:
        return self.latest_seen is not None and self.latest_seen in self._refused

    def refresh(self, last_applied: str | None = None) -> bool:
        """Fetch + validate; True when the desired state changed. Never raises.

        ``last_applied``: the revision a previous run applied (from the status file), used
        when the source is unreachable before any revision was loaded."""
        with self._lock:
            try:
                snap = self.source.fetch()
            except RevisionRefused as refused:  # reachable, but the commit is refused whole
                self._reachable()
                self.latest_seen = refused.revision
                if refused.revision not in self._refused:
                    self._refuse(refused.revision, [str(i) for i in refused.issues])
                return False
            except Exception as exc:  # GitSourceError and anything the fetch may throw
                return self._unreachable(exc, last_applied)
            self._reachable()
            self.latest_seen = snap.revision
            if snap.revision is not None and snap.revision in self._refused:
                return False  # already refused; errors were reported when it arrived
            if self.source.polls and snap.revision is not None and snap.revision == self.revision:
                return False
            if snap.fingerprint is not None and snap.fingerprint == self._fingerprint:
                return False  # the folder did not change since it was last loaded
            self._fingerprint = snap.fingerprint
            try:
                desired = load_path(snap.directory)
            except ValidationFailed as failed:
                self._refuse(snap.revision, [_relative(str(i), snap) for i in failed.issues])
                return False
            except UserError as exc:  # PathNotFound: --path missing in that commit
                self._refuse(snap.revision, [_relative(str(exc), snap)])
                return False
            except Exception as exc:  # our bug: refuse the revision, keep the poller alive
                log.error("loading the manifests failed", exc_info=exc,
                          extra={"revision": snap.revision})  # fmt: skip
                self._refuse(snap.revision, [f"internal error while loading: {exc!r}"])
                return False
            changed = snap.revision != self.revision or self.desired != desired
            if not changed and self.desired is not None:
                desired = self.desired  # keep the object: the planner keys on its identity
            self.desired, self.revision = desired, snap.revision
            if changed and self.source.polls:
                log.info("new revision", extra={"revision": snap.revision})
            return changed

    def _reachable(self) -> None:
        if self.source_error is not None:
            log.info("source reachable again", extra={"source": self.source.description})
        self.source_error = None
        self.reporter.source_up(True)

    def _unreachable(self, exc: Exception, last_applied: str | None) -> bool:
        message = str(exc)
        first = self.source_error is None
        self.source_error = message
        self.reporter.source_up(False)
        self.reporter.error(error_cause(exc))
        (log.warning if first else log.info)(
            "source unreachable, keeping the last good revision",
            extra={"error": message, "revision": self.revision},
        )
        if first:
            self.request("source-down")  # records and reports it in the status
        if self.desired is None:
            return self._fall_back_to_cached(last_applied)
        return False

    def _refuse(self, revision: str | None, errors: list[str]) -> None:
        key = revision or "(local)"
        if self._refused.get(key) != errors:
            kept = "keeping the last good one" if self.desired is not None else "no valid one yet"
            log.error(
                f"manifests invalid, revision refused; {kept}",
                extra={"revision": revision, "kept": self.revision, "errors": errors},
            )
            self.request("refused")  # reconcile the last good one, report in the status
        if revision is not None:
            self._refused[revision] = errors
        self.reporter.error("manifests")
        self.on_refused(revision, errors)

    def _fall_back_to_cached(self, revision: str | None) -> bool:
        """At start with an unreachable source: the commit a previous run applied (if its
        export is still in the cache) is the last good one."""
        snap = self.source.cached(revision) if revision else None
        if snap is None:
            return False
        try:
            self.desired = load_path(snap.directory)
        except UserError:
            return False
        self.revision = revision
        log.info("using the cached last good revision", extra={"revision": revision})
        return True


def _relative(text: str, snap: Snapshot) -> str:
    """Error text with paths relative to the repository root (``policies/x.yaml:3:1``)."""
    if snap.root is not None:
        text = text.replace(str(snap.root) + os.sep, "")
    return text
