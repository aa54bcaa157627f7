"""Where the Kubernetes API is: the kubeconfig, the context, or the pod's service account.

:func:`settings` turns ``--kubeconfig``/``--context``/``--in-cluster`` into
:class:`~reconciler.adapters.kube.client.KubeSettings`, refusing a kubeconfig the client library
would choke on with one ``error:`` line naming the file and line.
"""

from __future__ import annotations

import os
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from reconciler.adapters.kube.client import KubeSettings
from reconciler.errors import UserError, yaml_syntax_message

__all__ = ["KubeconfigError", "check_kubeconfig", "settings"]


class KubeconfigError(UserError):
    """A kubeconfig that cannot be used (missing, unreadable, not YAML, not a mapping): a
    Kubernetes problem for ``-o json``'s ``cause`` and the error metric, like the ones the
    client library reports."""

    cause = "kubernetes"


def settings(kubeconfig: str | None, context: str | None, in_cluster: bool) -> KubeSettings:
    """How to reach the API: in the cluster (``in_cluster``, or no kubeconfig given and
    ``KUBERNETES_SERVICE_HOST`` set), else through ``kubeconfig`` (``None``: ``~/.kube/config``;
    ``KUBECONFIG``-style lists too), each file checked first."""
    inside = in_cluster or (not kubeconfig and "KUBERNETES_SERVICE_HOST" in os.environ)
    if not kubeconfig and not inside:
        default = Path.home() / ".kube" / "config"
        if not default.exists():
            raise UserError(
                "no Kubernetes credentials: pass --kubeconfig FILE, set KUBECONFIG, or run "
                "in a cluster (--in-cluster)"
            )
    if not inside:
        for path in (kubeconfig or str(Path.home() / ".kube" / "config")).split(os.pathsep):
            if path:
                check_kubeconfig(path)
    return KubeSettings(kubeconfig=kubeconfig, context=context, in_cluster=inside)


def check_kubeconfig(path: str) -> None:
    """A kubeconfig that is not a YAML mapping, as one ``error:`` line naming the file and line
    (the client library would raise a parser error or a ``TypeError`` from deep inside). A
    syntax error is reported where the construct that was never closed opened, as for
    manifests (``reconciler.errors.yaml_syntax_message``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise KubeconfigError(f"kubeconfig {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(
            f"cannot read kubeconfig {path}: {getattr(exc, 'strerror', exc)}"
        ) from exc
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except MarkedYAMLError as exc:
        message, mark = yaml_syntax_message(exc)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else path
        raise KubeconfigError(f"kubeconfig {where}: {message}") from None
    except YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML: {exc}") from None
    if data is not None and not isinstance(data, dict):
        raise KubeconfigError(
            f"kubeconfig {path} is a YAML {type(data).__name__}, expected a mapping with "
            "clusters, users, contexts and current-context (kubectl config view shows one)"
        )
