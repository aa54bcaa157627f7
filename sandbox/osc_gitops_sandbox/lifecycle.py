"""The one start/stop/``with`` lifecycle of everything the sandbox runs, and its worker threads.

Every piece (an OVN stack, a Raft NB, a sandbox cluster, a zoned cluster, a data path) owns
processes, namespaces or a temp dir, and each must obey the same three rules: a start that
fails half-way stops what it had started before the error propagates; ``stop()`` can be called
at any time, twice, or after a failed start; and a temp dir it made itself is removed last.
:class:`Lifecycle` states them once; a class implements ``_start`` and ``_stop``.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["Lifecycle", "Stoppable", "Worker"]


class Stoppable:
    """``stop()`` (idempotent, then the owned temp dir goes) and ``with`` for a class whose
    start is its own business (:class:`~osc_gitops_sandbox.ovn.stack.OvnCluster`'s
    ``start_all``); ``with`` enters through :meth:`_enter`."""

    _own_tmp: tempfile.TemporaryDirectory[str] | None = None

    def _own_workdir(self, workdir: str | os.PathLike[str] | None, prefix: str) -> Path:
        """``workdir`` (created if missing), or a new temp dir this object removes on stop.
        Keep ``prefix`` short: unix socket paths in it are limited to 107 bytes."""
        if workdir is None:
            self._own_tmp = tempfile.TemporaryDirectory(prefix=prefix)
            workdir = self._own_tmp.name
        path = Path(workdir).resolve()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _stop(self) -> None:
        """Stop whatever runs; must cope with a half-done start and with being called twice."""

    def stop(self) -> None:
        try:
            self._stop()
        finally:
            if self._own_tmp is not None:
                self._own_tmp.cleanup()
                self._own_tmp = None

    def _start_or_stop(self, start: Callable[[], object]) -> None:
        """Run ``start()``; if it fails, :meth:`stop` what it had started and re-raise."""
        try:
            start()
        except BaseException:
            self.stop()
            raise

    def _enter(self) -> Self:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self._enter()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class Lifecycle(Stoppable):
    """:class:`Stoppable` with ``start()`` = ``_start()``, stopped again if it fails."""

    def _start(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._start_or_stop(self._start)
        return self

    def _enter(self) -> Self:
        return self.start()


class Worker:
    """A thread that runs ``work()`` whenever it is woken (or ``timer()`` seconds passed; a
    ``None`` timer waits for a wake-up) until :meth:`stop`: the loop of KubeVirt's controller
    and of the data path's virt-handler. A failing pass is kept in :attr:`error` and the
    thread goes on (a controller keeps serving)."""

    def __init__(
        self,
        name: str,
        work: Callable[[], object],
        timer: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.name = name
        self._work = work
        self._timer = timer
        self._cond = threading.Condition()
        self._woken = True
        self._busy = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        """What the last failed pass raised (taken by :meth:`take_error`)."""

    def start(self) -> None:
        with self._cond:
            if self._thread is not None:
                return
            self._stopping, self._woken = False, True
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def wake(self) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Until no wake-up is pending and no pass runs (or the worker stopped); ``False``
        after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._woken and not self._busy) or self._thread is None, timeout
            )

    def take_error(self) -> BaseException | None:
        error, self.error = self.error, None
        return error

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._woken or self._stopping, self._timer())
                if self._stopping:
                    return
                self._woken, self._busy = False, True
            try:
                self._work()
            except Exception as exc:  # kept for the caller's thread to raise
                self.error = exc
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
