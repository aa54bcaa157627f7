"""A pre-imported process that forks one real ``osc-gitops`` process per request.

Why: the fault tests kill ``osc-gitops apply`` hundreds of times at random points. Starting a
fresh interpreter each time would import the CLI, the Kubernetes client and ovsdbapp again, which
costs far more than the run itself; forking from a process that already imported them is nearly
free, and the child is still a separate OS process with its own sockets, so SIGTERM/SIGKILL hit
exactly what they would hit in production. The parent never starts a thread before forking
(fork-safe).

Protocol (one JSON line each way): the test writes ``["apply", ...]``; the worker forks, answers
``{"pid": N}`` at once, then ``{"pid": N, "status": S}`` (a waitpid status) when the child ends.
The child's stdout/stderr go to the files named by ``OSC_WORKER_OUT``/``OSC_WORKER_ERR`` + pid.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

import kubernetes.client  # noqa: F401  (pre-import: the point of this worker)
import ovsdbapp.backend.ovs_idl  # noqa: F401

import reconciler.adapters.kube.client
import reconciler.adapters.ovn.northbound
import reconciler.engine.pipeline  # noqa: F401
from reconciler.cli.app import main as cli_main


def _child(argv: list[str], out_dir: str) -> None:
    pid = os.getpid()
    out = os.open(os.path.join(out_dir, f"{pid}.out"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    err = os.open(os.path.join(out_dir, f"{pid}.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    code = 1
    try:
        code = cli_main(argv)
    except BaseException:
        # What the console script would print: os._exit below would swallow it.
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    out_dir = sys.argv[1]
    for line in sys.stdin:
        argv = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(argv, out_dir)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "status": status}), flush=True)


if __name__ == "__main__":
    main()
