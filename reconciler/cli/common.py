"""What every command shares: exit codes, the source/connection/compile flags and how
they become adapters, and the :class:`Command` record.

Kept apart from ``cli`` (manifest-only commands) so that ``osc-gitops validate`` never imports
the Kubernetes client or ovsdbapp. Connection flags follow kubectl (``--kubeconfig``,
``--context``) and fall back to environment variables, so a CronJob or CI job sets them once:

| flag | environment |
|---|---|
| ``--ovn-nb`` | ``OSC_OVN_NB`` |
| ``--ovn-private-key`` | ``OSC_OVN_PRIVATE_KEY`` |
| ``--ovn-certificate`` | ``OSC_OVN_CERTIFICATE`` |
| ``--ovn-ca-cert`` | ``OSC_OVN_CA_CERT`` |
| ``--ovn-max-reply-mib`` | ``OSC_OVN_MAX_REPLY_MIB`` |
| ``--ovn-sb`` | ``OSC_OVN_SB`` (optional: unbound ports from Port_Binding.chassis too) |
| ``--kubeconfig`` | ``KUBECONFIG`` (in a pod without either: the service account) |
| ``--instance`` | ``OSC_INSTANCE`` |
| ``--svc-monitor-ip`` | ``OSC_SVC_MONITOR_IP`` |
| ``--svc-monitor-ip-dst`` | ``OSC_SVC_MONITOR_IP_DST`` |
| ``--empty-grace`` | ``OSC_EMPTY_GRACE`` |
| ``--vnf-namespaces`` | ``OSC_VNF_NAMESPACES`` |
| ``--notify-timeout`` | ``OSC_NOTIFY_TIMEOUT`` |
| ``--notify-max-members`` | ``OSC_NOTIFY_MAX_MEMBERS`` |
| ``--node`` | ``OSC_NODE_NAME`` (a node agent; the DaemonSet sets it from ``spec.nodeName``) |
| ``--ovs-db`` | ``OSC_OVS_DB`` (the node binder: the node's Open_vSwitch database) |

Exit codes, as Terraform's ``-detailed-exitcode``: ``plan`` 0 = no changes, 2 = changes, 1 = error;
``apply`` 0 = applied and converged (or nothing to do), 1 = error or not converged."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.errors import UserError

if TYPE_CHECKING:
    import threading

    from reconciler.adapters.git import Checkout, GitSource
    from reconciler.adapters.kube.client import KubeCluster, KubeSettings
    from reconciler.adapters.ovn.vswitch import OvsDb
    from reconciler.core.model.desired import Desired
    from reconciler.core.model.observed import Observed
    from reconciler.core.planning.slicing import Scope
    from reconciler.core.steering.base import CompileOptions
    from reconciler.engine.binder import Binder
    from reconciler.engine.providers import OvnProvider, StatusPublisher
    from reconciler.engine.reporting.metrics import Metrics, MetricsServer

EXIT_OK, EXIT_ERROR, EXIT_CHANGES = 0, 1, 2


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help, argument setup and handler."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str = ""
    epilog: str = ""


def add_source_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", default=".", metavar="PATH", help="manifest folder or file (default .)"
    )
    env = os.environ.get
    git = parser.add_argument_group(
        "git source (instead of PATH)",
        "Read the manifests of one exact commit. Credentials: an https token from "
        "$OSC_GIT_TOKEN or --git-token-file (sent as an HTTP header, never put in the URL), "
        "or an ssh key with --git-ssh-key.",
    )
    git.add_argument(
        "--repo", default=env("OSC_GIT_REPO"), metavar="URL|PATH",
        help="git remote (https://, ssh://, git@host:path, or a local path)",
    )  # fmt: skip
    git.add_argument(
        "--ref", default=env("OSC_GIT_REF", "main"), metavar="BRANCH|TAG|SHA",
        help="what to check out (default: main)",
    )  # fmt: skip
    git.add_argument(
        "--path", dest="repo_path", default=env("OSC_GIT_PATH", "."), metavar="DIR",
        help="manifest folder inside the repository (default: the root)",
    )  # fmt: skip
    add_cache_dir_arg(git, "clone cache and status file (default: ~/.cache/osc-gitops)")
    git.add_argument(
        "--git-token-file", default=env("OSC_GIT_TOKEN_FILE"), metavar="FILE",
        help="file holding an https access token (a GitHub, GitLab or Gitea token; surrounding "
        "whitespace ignored), used instead of $OSC_GIT_TOKEN and sent only as an HTTP "
        "Authorization header (env OSC_GIT_TOKEN_FILE)",
    )  # fmt: skip
    git.add_argument(
        "--git-ssh-key", default=env("OSC_GIT_SSH_KEY"), metavar="FILE",
        help="private key for an ssh:// or git@host:path --repo (no passphrase; the host key is "
        "accepted on first use and pinned in the cache dir's known_hosts) "
        "(env OSC_GIT_SSH_KEY)",
    )  # fmt: skip
    add_number(git, "--git-timeout", 60.0, "how long one git fetch may take")


def add_reconcile_args(parser: argparse.ArgumentParser) -> None:
    """The flags of every command that plans or applies: the manifests' source, the
    connections, the compile options and the scope."""
    add_source_args(parser)
    add_connection_args(parser)
    add_compile_args(parser)
    add_scope_args(parser)


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    ovn = parser.add_argument_group("OVN Northbound")
    ovn.add_argument(
        "--ovn-nb", default=env("OSC_OVN_NB"), metavar="REMOTE",
        help="tcp:HOST:PORT, ssl:HOST:PORT, unix:PATH, or a comma-separated list (Raft cluster)",
    )  # fmt: skip
    _add_tls_args(ovn, "ovn", "remote", "CA that signed the NB's certificate")
    add_number(ovn, "--ovn-timeout", 10.0, "how long to wait for the NB to answer")
    add_number(
        ovn, "--ovn-max-reply-mib", 256.0, metavar="MIB", env="OSC_OVN_MAX_REPLY_MIB",
        help="largest message read from the NB, in MiB: a bigger one (a server that never stops "
        "sending) is an error naming the NB", note="some 15 times the reply of an NB with 10,000 "
        "pods",
    )  # fmt: skip
    ovn.add_argument(
        "--ovn-sb", default=env("OSC_OVN_SB"), metavar="REMOTE",
        help="the Southbound DB northd writes for --ovn-nb (env OSC_OVN_SB; optional; TLS "
        "files as for the NB): a VNF port whose Port_Binding has no chassis there is reported "
        "unbound too (without it, the NB's Logical_Switch_Port up alone says); explain --trace "
        "traces against it",
    )  # fmt: skip
    add_kube_args(parser)
    add_instance_arg(
        parser,
        "which osc-gitops instance: its rows and objects carry osc.io/owner=NAME, and only "
        "those are ever read as ours or changed (env OSC_INSTANCE; default osc-gitops)",
    )


def add_instance_arg(group: argparse._ActionsContainer, text: str) -> None:
    """``--instance`` (env ``OSC_INSTANCE``; default ``osc-gitops``): whose rows, objects and
    status a command works on; ``text``: the help, saying what this command does with it."""
    group.add_argument(
        "--instance", default=os.environ.get("OSC_INSTANCE", "osc-gitops"), metavar="NAME",
        help=text,
    )  # fmt: skip


def add_cache_dir_arg(group: argparse._ActionsContainer, text: str) -> None:
    """``--cache-dir`` (env ``OSC_CACHE_DIR``; without either, :func:`cache_dir`'s default):
    where the clone cache and the status files are; ``text``: the help."""
    group.add_argument("--cache-dir", default=os.environ.get("OSC_CACHE_DIR"), metavar="DIR",
                       help=text)  # fmt: skip


_TLS_FILES = ("private-key", "certificate", "ca-cert")
"""The client's TLS files of an ``ssl:`` database remote: ``--ovn-…`` for the NB,
``--ovs-…`` for the node's Open_vSwitch database, each also from ``OSC_OVN_…``/``OSC_OVS_…``."""


def _tls_flags(db: str) -> list[tuple[str, str, str]]:
    """``(args attribute, flag, environment variable)`` of ``db``'s (``ovn``, ``ovs``) TLS
    files."""
    attrs = [f"{db}_{name}".replace("-", "_") for name in _TLS_FILES]
    return [(a, f"--{a}".replace("_", "-"), f"OSC_{a}".upper()) for a in attrs]


def _add_tls_args(group: argparse._ArgumentGroup, db: str, remote: str, ca_help: str) -> None:
    """``db``'s TLS file flags, for an ``ssl:`` ``remote`` (what its help calls it)."""
    helps = (
        f"client key for an ssl: {remote}",
        f"client certificate for an ssl: {remote}",
        ca_help,
    )
    for (_, flag, env), text in zip(_tls_flags(db), helps, strict=True):
        group.add_argument(
            flag, default=os.environ.get(env), metavar="FILE", help=f"{text} (env {env})"
        )


def add_kube_args(parser: argparse.ArgumentParser) -> None:
    """The ``Kubernetes`` group: ``--kubeconfig``, ``--context``, ``--in-cluster``."""
    kube = parser.add_argument_group("Kubernetes")
    kube.add_argument(
        "--kubeconfig", default=os.environ.get("KUBECONFIG"), metavar="FILE",
        help="kubeconfig file (env KUBECONFIG; default ~/.kube/config)",
    )  # fmt: skip
    kube.add_argument("--context", default=None, metavar="NAME", help="kubeconfig context")
    kube.add_argument(
        "--in-cluster", action="store_true", help="use the pod's service account (in a cluster)"
    )


def add_compile_args(parser: argparse.ArgumentParser, *, health: bool = True) -> None:
    """``--steering`` and (``health``: for commands that write or plan writes) the NB_Global
    health-probe addresses."""
    from reconciler.core.steering import DEFAULT_STEERING, STEERING_CHOICES
    from reconciler.core.steering.base import (
        DEFAULT_EMPTY_GRACE,
        DEFAULT_SVC_MONITOR_IP,
        DEFAULT_SVC_MONITOR_IP_DST,
    )

    parser.add_argument(
        "--steering", choices=STEERING_CHOICES, default=None,
        help=f"steering backend (default: {DEFAULT_STEERING} when the NB schema has it)",
    )  # fmt: skip
    env = os.environ.get
    add_number(
        parser, "--empty-grace", DEFAULT_EMPTY_GRACE, env="OSC_EMPTY_GRACE", note="0: at once",
        help="how long a group's Port_Group and ACLs on a node outlive its last member pod "
        "there, so a pod that comes back reuses them",
    )  # fmt: skip
    parser.add_argument(
        "--vnf-namespaces",
        default=env("OSC_VNF_NAMESPACES", ""),
        metavar="NS[,NS...]",
        help="namespaces whose VirtualMachines and NADs with this instance's labels are ours "
        "besides those the VnfDeployments name (spec.namespace): where objects of a removed "
        "VnfDeployment are pruned. Labelled objects in any other namespace are never changed "
        "or deleted (a tenant can write labels). The deployment sets the namespaces its RBAC "
        "Roles grant (env OSC_VNF_NAMESPACES)",
    )
    from reconciler.core.steering.base import DEFAULT_JOIN_SUBNETS, DEFAULT_TRANSIT_SUBNETS

    node = parser.add_argument_group(
        "node traffic (left out of steering unless a Binding says steerNodeTraffic: true)",
        "Kubelet probes from the node's management port (its subnet's .2, from "
        "k8s.ovn.org/node-subnets) and traffic from or to OVN-Kubernetes' join and transit "
        "subnets are not steered. Give these when your OVN-Kubernetes uses other subnets.",
    )
    node.add_argument(
        "--ovn-join-subnets",
        default=env("OSC_OVN_JOIN_SUBNETS", ",".join(DEFAULT_JOIN_SUBNETS)),
        metavar="CIDR[,CIDR]",
        help=f"OVN-Kubernetes' join subnets (default {','.join(DEFAULT_JOIN_SUBNETS)})",
    )
    node.add_argument(
        "--ovn-transit-subnets",
        default=env("OSC_OVN_TRANSIT_SUBNETS", ",".join(DEFAULT_TRANSIT_SUBNETS)),
        metavar="CIDR[,CIDR]",
        help=f"OVN-Kubernetes' transit subnets (default {','.join(DEFAULT_TRANSIT_SUBNETS)})",
    )
    if not health:
        return
    probe = parser.add_argument_group(
        "VNF health checks (network-function steering)",
        "OVN probes a VNF only when NB_Global options:svc_monitor_ip and svc_monitor_ip_dst "
        "are set. osc-gitops sets each one nobody set (and records that it did), never "
        "changes one someone else set, and removes its own once no health-checked VNF is left.",
    )
    probe.add_argument(
        "--svc-monitor-ip", default=env("OSC_SVC_MONITOR_IP"), metavar="ADDRESS",
        help=f"source address of OVN's probe (default {DEFAULT_SVC_MONITOR_IP}, link-local)",
    )  # fmt: skip
    probe.add_argument(
        "--svc-monitor-ip-dst", default=env("OSC_SVC_MONITOR_IP_DST"), metavar="ADDRESS",
        help=f"destination address of OVN's probe (default {DEFAULT_SVC_MONITOR_IP_DST})",
    )  # fmt: skip


def add_number(
    group: argparse._ActionsContainer, flag: str, default: float, help: str, *,
    kind: Callable[[str], Any] = float, metavar: str = "SECONDS", env: str | None = None,
    note: str = "",
) -> None:  # fmt: skip
    """A numeric flag, seconds unless ``metavar`` says otherwise. Its help ends with how else it
    is set and its default, ``(env OSC_X; default 5; <note>)``, written from the values given
    here so the text cannot drift from them. ``env`` names a variable that replaces the
    default."""
    said = [f"env {env}"] if env else []
    said += [f"default {default:g}", *([note] if note else [])]
    group.add_argument(
        flag, type=kind, metavar=metavar, help=f"{help} ({'; '.join(said)})",
        default=os.environ.get(env, default) if env else default,
    )  # fmt: skip


def _positive(kind: Callable[[str], float | int]) -> Callable[[str], Any]:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0")
        return value

    return parse


def add_status_namespace_arg(group: argparse._ActionsContainer, text: str) -> None:
    """``--status-namespace``: where the node agents and binders publish their status Leases
    (env ``OSC_STATUS_NAMESPACE``; default ``osc-gitops-agents``, as deploy/ has it); ``text``:
    the help, saying what this command does there."""
    group.add_argument(
        "--status-namespace", default=os.environ.get("OSC_STATUS_NAMESPACE", "osc-gitops-agents"),
        metavar="NS", help=text,
    )  # fmt: skip


def add_service_args(group: argparse._ActionsContainer) -> None:
    """What a long-running command (``run``, ``bind``) serves and logs: ``--metrics-addr``,
    ``--log-format``, ``--log-level``."""
    group.add_argument(
        "--metrics-addr", default=os.environ.get("OSC_METRICS_ADDR", "127.0.0.1:9090"),
        metavar="HOST:PORT", help="/metrics, /healthz, /readyz (port 0: any; 'off' to disable)",
    )  # fmt: skip
    group.add_argument(
        "--log-format", choices=("json", "text"), default="json",
        help="log lines on stderr: one JSON object each (default), or text for a terminal",
    )  # fmt: skip
    group.add_argument(
        "--log-level", choices=("debug", "info", "warning", "error"), default="info",
        help="least severe level logged (default info)",
    )  # fmt: skip


def start_service(args: argparse.Namespace) -> threading.Event:
    """A long-running command's first steps: SIGTERM and SIGINT set the event it returns (a
    clean exit 0, also while it is still connecting), then logging as ``--log-format`` and
    ``--log-level`` say."""
    import signal
    import threading

    from reconciler.engine.reporting.logs import setup_logging

    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    setup_logging(args.log_format, args.log_level)
    return stopping


def serve_metrics(
    args: argparse.Namespace,
    metrics: Metrics,
    health: Callable[[], tuple[bool, dict[str, Any]]],
    ready: Callable[[], tuple[bool, dict[str, Any]]],
    supervise: Callable[..., None] | None = None,
) -> MetricsServer | None:
    """``/metrics``, ``/healthz`` and ``/readyz`` on ``--metrics-addr``, started (``None`` when
    it is ``off``); an address it cannot listen on is a user error."""
    if args.metrics_addr == "off":
        return None
    from reconciler.engine.reporting.metrics import MetricsServer

    try:
        server = MetricsServer(args.metrics_addr, metrics, health, ready, supervise=supervise)
    except OSError as exc:
        raise UserError(str(exc)) from exc
    server.start()
    print(json.dumps({"msg": "serving", "metrics_addr": server.address}),
          file=sys.stderr, flush=True)  # fmt: skip
    return server


def add_notify_args(parser: argparse.ArgumentParser) -> None:
    """How the security managers are told (``VnfDeployment.spec.securityManager``)."""
    group = parser.add_argument_group(
        "security managers",
        "Each VnfDeployment's securityManager gets deployed/removed events and, per Binding and "
        "node, the SecurityGroup's members (schemas/security-manager-notification.json), "
        "beside the reconcile: a manager that is down, slow or failing never holds it up; "
        "what fails is retried with backoff and shown in metrics and osc-gitops status.",
    )
    add_number(
        group, "--notify-timeout", 5.0, kind=_positive(float), env="OSC_NOTIFY_TIMEOUT",
        help="how long one POST may take; apply and run --once try each manager once before "
        "they exit, for at most twice as long",
    )  # fmt: skip
    add_number(
        group, "--notify-max-members", 1000, kind=_positive(int), metavar="N",
        env="OSC_NOTIFY_MAX_MEMBERS", help="members per message: a longer list goes in parts of "
        "one sequence",
    )  # fmt: skip


def told_path(args: argparse.Namespace, name: str) -> Path:
    """Where a one-shot run (``apply``, ``run --once``) keeps what it told the security managers,
    so the next run sends only what changed: ``<cache-dir>/notify/<name>-<cluster>.json``, the
    cluster being a hash of the Kubernetes and OVN endpoints given (two clusters reconciled from
    one machine never share it). Without the file (a CronJob's fresh ``emptyDir``) everything is
    sent again, which a manager absorbs (``sequence``, ``digest``)."""
    import hashlib

    where = "|".join(
        str(getattr(args, attr, None) or "")
        for attr in ("kubeconfig", "context", "in_cluster", "ovn_nb")
    )
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    return cache_dir(args) / "notify" / f"{name}-{digest}.json"


def outbox_for(args: argparse.Namespace, reporter: Any = None) -> Any:
    """The security managers' outbox the flags describe (``reconciler.engine.notifications``),
    posting through ``reconciler.adapters.notify``."""
    from reconciler.adapters.notify import JsonPoster
    from reconciler.engine.notifications import NotifySettings, Outbox

    settings = NotifySettings(timeout=args.notify_timeout, max_members=args.notify_max_members)
    return Outbox(JsonPoster(settings.timeout), settings, reporter=reporter)


def add_scope_args(parser: argparse.ArgumentParser, *, kubernetes_only: bool = True) -> None:
    """``--node`` (a node agent) and ``--kubernetes-only`` (the central owner) for
    interconnect clusters, where every node has its own NB
    (``reconciler.core.planning.slicing``)."""
    group = parser.add_argument_group(
        "interconnect clusters (one OVN Northbound per node)",
        "Without these flags, one process reconciles everything in one central NB.",
    )
    group.add_argument(
        "--node", default=os.environ.get("OSC_NODE_NAME") or None, metavar="NAME",
        help="node agent: only this node's OVN rows, in the NB --ovn-nb names (its zone's); "
        "Kubernetes is read (this node's pods only), never written",
    )  # fmt: skip
    if kubernetes_only:
        group.add_argument(
            "--kubernetes-only", action="store_true",
            help="central owner: the VNF VirtualMachines and NADs of every node and the "
            "security managers' deployed/removed events (the node agents tell them the "
            "members); no OVN access at all (no --ovn-nb)",
        )  # fmt: skip


def add_ovs_args(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """The node binder's flags: where the node's Open_vSwitch database is, and its pace."""
    env = os.environ.get
    group = parser.add_argument_group(
        "node binder (released ovs-cni sets no iface-id: see docs/operations.md)"
    )
    default = env("OSC_OVS_DB") or ("unix:/var/run/openvswitch/db.sock" if required else None)
    group.add_argument(
        "--ovs-db", default=default, metavar="URL",
        help="the node's Open_vSwitch database, unix:PATH or ssl:HOST:PORT (env OSC_OVS_DB"
        + ("; default unix:/var/run/openvswitch/db.sock)" if required else
           "): with --node, also bind this node's VNF NICs (the node binder)"),
    )  # fmt: skip
    _add_tls_args(group, "ovs", "--ovs-db", "CA of the Open_vSwitch DB's certificate")
    add_number(
        group, "--bind-resync", 60.0, "the binder lists the node's VMs and pods again and "
        "re-checks every interface at least this often",
    )  # fmt: skip
    add_number(
        group, "--stats-interval", 10.0, "how often the binder samples the VNF NICs' OVS "
        "counters and publishes its state",
    )  # fmt: skip


def ovs_db(args: argparse.Namespace) -> OvsDb:
    """The Open_vSwitch DB adapter from the flags (not connected yet)."""
    from reconciler.adapters.ovn.vswitch import OvsDb

    remote = str(args.ovs_db)
    if remote.startswith("ssl:"):
        missing = [flag for attr, flag, _ in _tls_flags("ovs") if not getattr(args, attr)]
        if missing:
            raise UserError(f"--ovs-db {remote} is a TLS remote: also give {', '.join(missing)}")
    elif not remote.startswith(("unix:", "tcp:")):
        raise UserError(f"--ovs-db {remote!r}: use unix:PATH or ssl:HOST:PORT")
    return OvsDb(
        remote, private_key=args.ovs_private_key, certificate=args.ovs_certificate,
        ca_cert=args.ovs_ca_cert, timeout=float(getattr(args, "ovn_timeout", 10.0) or 10.0),
    )  # fmt: skip


def binder_publisher(args: argparse.Namespace, node: str) -> StatusPublisher | None:
    """The binder's status Lease ``osc-gitops-binder-<node>`` (none with ``--no-publish``)."""
    if getattr(args, "no_publish", False):
        return None
    from reconciler.adapters.kube.status_lease import StatusLease
    from reconciler.engine.binder import binder_lease_name

    identity = os.environ.get("POD_NAME") or f"binder-{os.getpid()}"
    duration = max(30.0, 3 * float(args.stats_interval))
    return StatusLease.for_settings(
        kube_settings(args), args.status_namespace, binder_lease_name(node),
        identity=identity, duration=duration, owner_node=node,
    )  # fmt: skip


def make_binder(args: argparse.Namespace, node: str, metrics: Metrics | None = None) -> Binder:
    """The binder of ``node`` from the flags (shared by ``bind`` and ``run --ovs-db``)."""
    from reconciler.adapters.kube.node_vms import NodeVms
    from reconciler.engine.binder import Binder, BinderConfig

    config = BinderConfig(
        node=node, instance=args.instance, resync=float(args.bind_resync),
        stats_interval=float(args.stats_interval),
    )  # fmt: skip
    reporter = metrics.binder() if metrics is not None else None
    return Binder(
        config, NodeVms(kube_settings(args), node, args.instance), ovs_db(args),
        reporter=reporter, publisher=binder_publisher(args, node),
    )  # fmt: skip


def binder_status_file(args: argparse.Namespace, node: str) -> Callable[[dict[str, Any]], None]:
    """Writes the binder's state into the status file ``osc-gitops status --node`` reads."""
    from reconciler.engine.reporting import status

    path = status.status_path(cache_dir(args), f"{args.instance}.node.{node}")

    def write(record: dict[str, Any]) -> None:
        st = status.Status(
            instance=args.instance, result="bound" if record.get("ok") else "error",
            message=str(record.get("error") or ""), binder=record,
        )  # fmt: skip
        status.write(path, st)

    return write


def scope_of(args: argparse.Namespace) -> Scope:
    """The scope the flags ask for; refuses a bad node name or both flags at once."""

    from reconciler.core.planning.slicing import scope_for

    node = getattr(args, "node", None) or None
    kubernetes_only = bool(getattr(args, "kubernetes_only", False))
    if node is not None and kubernetes_only:
        raise UserError(
            "give either --node (or OSC_NODE_NAME: a node agent) or --kubernetes-only (the "
            "central owner), not both"
        )
    if node is not None and (len(node) > 253 or not re.fullmatch(_NODE_NAME, node)):
        raise UserError(f"--node {node!r} is not a Kubernetes node name (a DNS subdomain)")
    return scope_for(node, kubernetes_only)


_NODE_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def compile_options(args: argparse.Namespace) -> CompileOptions:

    from reconciler.core.compiling.compile import CompileOptions
    from reconciler.core.model.desired import DNS1123_LABEL
    from reconciler.core.steering import check_options
    from reconciler.core.steering.base import DEFAULT_EMPTY_GRACE

    if not re.fullmatch(DNS1123_LABEL, args.instance):
        raise UserError(f"--instance {args.instance!r} must be a DNS-1123 label")
    grace = float(getattr(args, "empty_grace", DEFAULT_EMPTY_GRACE))
    if not 0 <= grace < float("inf"):
        raise UserError(f"--empty-grace {grace:g} must be a number of seconds, 0 or more")
    namespaces = tuple(
        sorted(
            {n.strip() for n in str(getattr(args, "vnf_namespaces", "") or "").split(",")} - {""}
        )
    )
    for namespace in namespaces:
        if not re.fullmatch(DNS1123_LABEL, namespace):
            raise UserError(
                f"--vnf-namespaces: {namespace!r} is not a namespace (a DNS-1123 label)"
            )
    infra = _infra_subnets(args)
    options = CompileOptions(
        vnf_namespaces=namespaces,
        instance=args.instance,
        steering=args.steering,
        svc_monitor_ip=getattr(args, "svc_monitor_ip", None) or None,
        svc_monitor_ip_dst=getattr(args, "svc_monitor_ip_dst", None) or None,
        empty_grace=grace,
    )
    if "join_subnets" in infra:
        options = replace(options, join_subnets=infra["join_subnets"])
    if "transit_subnets" in infra:
        options = replace(options, transit_subnets=infra["transit_subnets"])
    check_options(options)  # refuse a bad address now, before connecting anywhere
    return options


def _infra_subnets(args: argparse.Namespace) -> dict[str, tuple[str, ...]]:
    """``--ovn-join-subnets``/``--ovn-transit-subnets`` as checked networks, by the
    ``CompileOptions`` field they set (only those given)."""
    import ipaddress

    infra: dict[str, tuple[str, ...]] = {}
    for flag, field in (("join", "join_subnets"), ("transit", "transit_subnets")):
        raw = getattr(args, f"ovn_{flag}_subnets", None)
        if raw is None:
            continue
        networks: list[str] = []
        for value in (v.strip() for v in str(raw).split(",")):
            if not value:
                continue
            try:
                networks.append(str(ipaddress.ip_network(value, strict=False)))
            except ValueError:
                raise UserError(
                    f"--ovn-{flag}-subnets: {value!r} is not an IP network (CIDR, e.g. "
                    "100.64.0.0/16)"
                ) from None
        infra[field] = tuple(networks)
    return infra


@contextlib.contextmanager
def connections(
    args: argparse.Namespace,
    *,
    read_only: bool = False,
    one_shot: bool = False,
    scope: Scope | None = None,
) -> Iterator[tuple[KubeCluster, OvnProvider]]:
    """Kubernetes and OVN adapters from the flags (their errors are ``EndpointError``s, which
    :func:`reconciler.cli.app.main` prints as one line naming the endpoint).

    ``read_only``: the OVN side is a one-shot snapshot reader instead of a live IDL mirror
    (for commands that only read the NB once). ``one_shot``: snapshot reads and one raw
    transaction under the write lock (``apply``: writes once and exits). ``scope``: a node
    agent's Kubernetes adapter reads only its node's pods and objects; ``--kubernetes-only``
    connects to no NB at all (the OVN side is ``reconciler.engine.scoped.NO_OVN``)."""
    from reconciler.adapters.ovn.northbound import OvnNorthbound, OvnSettings
    from reconciler.adapters.ovn.oneshot import OvnOneShot
    from reconciler.adapters.ovn.snapshot import OvnSnapshot

    if scope is not None and not scope.reads_ovn:
        from reconciler.engine.scoped import NO_OVN

        kube = kube_connection(args)
        if args.ovn_nb:
            print(f"note: --kubernetes-only never connects to OVN (ignoring {args.ovn_nb})",
                  file=sys.stderr)  # fmt: skip
        yield kube, NO_OVN
        return
    if not args.ovn_nb:
        raise UserError("no OVN Northbound given: pass --ovn-nb REMOTE or set OSC_OVN_NB")
    check_tls_flags(args)
    if getattr(args, "ovn_sb", None):
        check_tls_flags(args, "ovn_sb")
    kube = kube_connection(args)
    max_reply = float(args.ovn_max_reply_mib)
    if not 1 <= max_reply < 1 << 20:
        raise UserError(f"--ovn-max-reply-mib {max_reply:g} must be a size in MiB, 1 or more")
    settings = OvnSettings(
        remote=args.ovn_nb,
        max_reply_bytes=int(max_reply * 1024 * 1024),
        private_key=args.ovn_private_key,
        certificate=args.ovn_certificate,
        ca_cert=args.ovn_ca_cert,
        timeout=args.ovn_timeout,
        instance=args.instance,
    )
    # Read-only commands read the NB once with one raw select transaction: mirroring it into
    # the ovs IDL first (what a writer needs for its lock and transaction) costs several times
    # the time and memory at 10,000 pods (docs/benchmarks.md).
    # A one-shot apply reads the same way and writes with one raw transaction: the IDL would
    # also parse and keep the server's echo of every row it inserts.
    ovn: OvnProvider
    if read_only:
        ovn = OvnSnapshot(settings)
    elif one_shot:
        ovn = OvnOneShot.connect(settings)
    else:
        ovn = OvnNorthbound.connect(settings)
    if getattr(args, "ovn_sb", None):
        from reconciler.adapters.ovn.southbound import WithSouthbound

        ovn = WithSouthbound(ovn, replace(settings, remote=args.ovn_sb))
    try:
        yield kube, ovn
    finally:
        ovn.close()


def check_tls_flags(args: argparse.Namespace, remote: str = "ovn_nb") -> None:
    """An ``ssl:`` NB (or, ``remote="ovn_sb"``, SB) remote needs the three TLS files: say which
    flags are missing, before anything connects."""
    value = str(getattr(args, remote))
    if not any(member.strip().startswith("ssl:") for member in value.split(",")):
        return
    missing = [
        f"{flag} (or {env})" for attr, flag, env in _tls_flags("ovn") if not getattr(args, attr)
    ]
    if missing:
        flag = "--" + remote.replace("_", "-")
        raise UserError(f"{flag} {value} is a TLS remote: also give {', '.join(missing)}")


def kube_connection(args: argparse.Namespace) -> KubeCluster:
    """The Kubernetes adapter from the flags (a node agent's sees only its node's share)."""
    from reconciler.adapters.kube.client import KubeCluster

    return KubeCluster(kube_settings(args), node=getattr(args, "node", None) or None)


def kube_settings(args: argparse.Namespace) -> KubeSettings:
    """Where the Kubernetes API is, from ``--kubeconfig``/``--context``/``--in-cluster``."""
    from reconciler.adapters.kube.kubeconfig import settings

    return settings(args.kubeconfig, args.context, args.in_cluster)


def cache_dir(args: argparse.Namespace) -> Path:
    if getattr(args, "cache_dir", None):
        return Path(args.cache_dir)
    # ``reconciler.adapters.git.default_cache_dir``'s rule, inline: importing that module loads
    # GitPython, which a command without ``--repo`` never uses and should not pay for.
    # tests/unit/cli pins the two equal.
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "osc-gitops"


def git_source(args: argparse.Namespace) -> GitSource:
    """A :class:`reconciler.adapters.git.GitSource` from the flags (``--repo`` given)."""
    from reconciler.adapters.git import TOKEN_ENV, GitSettings, GitSource

    return GitSource(
        GitSettings(
            repo=args.repo,
            ref=args.ref,
            path=args.repo_path,
            cache_dir=str(cache_dir(args)),
            token=os.environ.get(TOKEN_ENV),
            token_file=args.git_token_file,
            ssh_key=args.git_ssh_key,
            timeout=args.git_timeout,
        )
    )


def redacted_repo(repo: str) -> str:
    """``--repo`` as it may be printed (``reconciler.adapters.git.redact``'s rule)."""
    from reconciler.adapters.git import redact

    return redact(repo)


def load_source(args: argparse.Namespace) -> tuple[Desired, str | None]:
    """The manifests from PATH or ``--repo``: ``(Desired, revision)`` (revision = commit)."""
    if not getattr(args, "repo", None):
        return load_manifests(args.path), getattr(args, "revision", None)
    if args.path != ".":
        raise UserError(f"give either PATH ({args.path}) or --repo, not both")
    from reconciler.errors import RevisionRefused

    try:
        checkout = git_source(args).sync()
    except RevisionRefused as refused:
        raise ManifestsInvalid(
            f"commit {refused.revision} of {redacted_repo(args.repo)}: "
            f"{len(refused.issues)} problem(s) in the manifests",
            refused.issues,
        ) from None
    print(f"{checkout.repo}@{checkout.ref}: commit {checkout.commit}", file=sys.stderr)
    return load_checkout(checkout), checkout.commit


class ManifestsInvalid(UserError):
    """The manifests of a command are invalid; ``issues`` holds every problem (``main`` prints
    them, one ``file:line:column`` per line, before the summary; ``-o json`` puts them in the
    error object's ``issues``)."""

    cause = "manifests"

    def __init__(self, message: str, issues: list[Any]) -> None:
        super().__init__(message)
        self.issues = issues


def print_notes(notes: list[str]) -> None:
    """The loader's notes (files and documents skipped as not ours), on stderr; a note names
    files and other APIs' kinds from the pull request: one printable line each."""
    from reconciler.errors import one_line

    for note in notes:
        print(f"note: {one_line(note)}", file=sys.stderr)


def load_checkout(checkout: Checkout) -> Desired:
    from dataclasses import replace

    from reconciler.errors import ValidationFailed
    from reconciler.manifests.load import load_path

    prefix = str(checkout.root) + os.sep
    notes: list[str] = []
    try:
        desired = load_path(checkout.directory, notes)
    except ValidationFailed as failed:
        issues = [replace(issue, file=issue.file.replace(prefix, "", 1)) for issue in failed.issues]
        raise ManifestsInvalid(
            f"commit {checkout.commit} of {checkout.repo}: {len(issues)} problem(s) in the "
            "manifests",
            issues,
        ) from None
    finally:
        print_notes([note.replace(prefix, "", 1) for note in notes])
    return desired


def load_manifests(path: str) -> Desired:
    from reconciler.cli.saved import refuse_as_manifests
    from reconciler.errors import ValidationFailed
    from reconciler.manifests.load import load_path

    refuse_as_manifests(path)  # `plan plan.json`: say what the file is, not why it is invalid
    notes: list[str] = []
    try:
        return load_path(path, notes)
    except ValidationFailed as failed:
        raise ManifestsInvalid(
            f"{path}: {len(failed.issues)} problem(s) in the manifests", failed.issues
        ) from None
    finally:
        print_notes(notes)


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="text (stderr, for humans) or json (stdout, for tools); default: text",
    )  # fmt: skip


def print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def plural(count: int, singular: str, plural: str | None = None) -> str:
    return f"{count} {singular if count == 1 else (plural or singular + 's')}"


DEMO_OVN_VERSIONS = ("26.03", "23.03")
"""The OVN versions the demo and ``sandbox up`` run, the first the default: the one list of them
(the sandbox's ``osc_gitops_sandbox.datapath.world.OVN_VERSIONS`` is keyed by it)."""


def add_ovn_version_arg(parser: argparse.ArgumentParser, old_ovn: str) -> None:
    """``--ovn``: which OVN the sandbox runs (``old_ovn``: what the older one means)."""
    parser.add_argument(
        "--ovn", choices=DEMO_OVN_VERSIONS, default=DEMO_OVN_VERSIONS[0],
        help="26.03: OVN 26.03 from the Debian sid root `make setup` builds (Network Function "
        f"steering); 23.03: the host's Debian OVN ({old_ovn}). Default: 26.03",
    )  # fmt: skip


def status_name(args: argparse.Namespace) -> str:
    """The status file's name: the instance, plus the scope when it is not the whole (a node
    agent and the central owner of one instance may share a cache dir)."""
    if getattr(args, "node", None):
        return f"{args.instance}.node.{args.node}"
    if getattr(args, "kubernetes_only", False):
        return f"{args.instance}.kubernetes"
    return str(args.instance)


_POD_REF = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)/([a-z0-9]([-a-z0-9.]*[a-z0-9])?)$")


def parse_pod(ref: str) -> tuple[str, str]:
    """``NAMESPACE/POD`` -> ``(namespace, pod)``, in Kubernetes name syntax."""
    match = _POD_REF.fullmatch(ref)
    if match is None or len(match.group(1)) > 63 or len(match.group(3)) > 253:
        raise UserError(
            f"{ref!r} is not NAMESPACE/POD (a namespace and a pod name, e.g. shop/web-7)"
        )
    return match.group(1), match.group(3)


def read_snapshot(path: str) -> Observed:
    """The ``Observed`` of a plain snapshot file (``plan --observed``, ``explain --observed``)."""
    return parse_snapshot(path, read_json(path))


def read_json(path: str) -> dict[str, Any]:
    """A snapshot file's JSON (plain or zoned)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot read snapshot {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UserError(f"{path} is not an osc-gitops snapshot: {exc}") from exc
    if not isinstance(data, dict):
        raise UserError(f"{path} is not an osc-gitops snapshot")
    return data


def parse_snapshot(path: str, data: dict[str, Any]) -> Observed:
    from reconciler.core.model.observed import Observed, SnapshotRefused

    try:
        return Observed.from_json(data)
    except SnapshotRefused as exc:  # well-formed, but names what Kubernetes would refuse
        raise UserError(f"snapshot {path}: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise UserError(f"{path} is not an osc-gitops snapshot: {exc}") from exc


def add_verbose_arg(parser: argparse.ArgumentParser) -> None:
    """``-v``/``--verbose`` of the commands that print a plan (plan, apply, show)."""
    parser.add_argument(
        "-v", "--verbose", action="store_true",
        help="list every row of the plan text (by default more than three rows of one kind, "
        "action and origin are counted on one line)",
    )  # fmt: skip
