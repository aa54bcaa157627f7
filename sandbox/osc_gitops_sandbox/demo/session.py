"""``osc-gitops sandbox up`` / ``down``: a local cluster that stays up, to try your own manifests.

``up`` starts a background process (the *session*) that runs real OVN daemons (NB, SB and
northd: OVN 26.03 from the sid root, or the host's 23.03 with ``--ovn 23.03``) and the
Kubernetes API emulator, seeds them from a cluster description (``--cluster DIR``, default
``examples/cluster/``: ``namespaces.yaml``, ``nodes.yaml``, ``pods.yaml`` in kubectl's List
format) as OVN-Kubernetes would, and prints the environment that points every osc-gitops command
and ``kubectl`` at it::

    eval "$(osc-gitops sandbox up)"
    kubectl get pods -A
    osc-gitops plan examples/policies
    osc-gitops sandbox down

While it runs, the session plays OVN-Kubernetes and the kubelets for what you do through the
API (:mod:`osc_gitops_sandbox.demo.session_player`): a pod you create (``kubectl run``, ``kubectl
apply``) is placed on a node when it names none, given an address (the
``k8s.ovn.org/pod-networks`` annotation) and its logical switch port, and reported running; a
pod you delete loses its port. Relabelling (``kubectl label``) needs nothing from it.

There is no data path by default: no ``ovn-controller`` and no VNF guest; the session plays each
VNF VM answering OVN's health probe (:mod:`osc_gitops_sandbox.ovn.vnf_health`: while the VM exists,
is not ``Halted`` and is not annotated ``sandbox.osc.io/forwarding: "false"``), so steering held
until a VNF is healthy (issue 22) is switched on and ``explain --trace`` follows the logical
flows, but no packet crosses a VNF. ``up --datapath`` (root) adds the data path the packet tests use
(:mod:`osc_gitops_sandbox.datapath.network`): OVS 4.0 userspace and ``ovn-controller`` per chassis,
every pod plugged in a network namespace, and a VNF guest (a namespace bridging its two NICs, or
routing for 23.03) for every VirtualMachine instance the user's ``apply`` creates, so VNFs pass
their health checks and traffic is steered through them.

With ``--datapath`` the session also runs the sandbox's security manager
(:mod:`osc_gitops_sandbox.datapath.security_manager`) on ``127.0.0.1:8790`` (another free port
when that one is taken; ``up`` says which), so a VnfDeployment whose image names Suricata
(``examples/suricata/``) gets Suricata 8 guests fed with its groups' members; every plugged pod
serves HTTP on port 80, and ``bin/in-pod NAMESPACE/POD COMMAND...`` runs a command in a pod's
network namespace (``curl`` an attack, watch it dropped).

Everything lives in one folder (``--dir``, ``OSC_SANDBOX_DIR``, default
``~/.cache/osc-gitops/sandbox``): ``session.json`` (what ``up`` printed, and the session's pid),
``session.log``, the databases and sockets under ``world/``, and ``bin/`` with ``ovn-nbctl``,
``ovn-sbctl`` and ``ovn-trace`` wrappers of the sandbox's own OVN (the NB/SB as defaults).
``down`` stops the session (SIGTERM: it stops its daemons and removes its network namespaces
and veths; the daemons also die with it, started with the parent-death signal), then, should
the session have died without cleaning up, kills the daemons ``session.json`` lists by PID
(only a process whose command line names the sandbox folder), removes the network namespaces
of the dead session, and removes the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reconciler.errors import UserError

STATE = "session.json"
LOG = "session.log"
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
TOOLS = ("ovn-nbctl", "ovn-sbctl", "ovn-trace")
SECURITY_MANAGER_PORT = 8790
"""Where ``up --datapath``'s security manager listens (``examples/suricata`` names it)."""
PODS_FILE = "pods.json"
"""``<namespace>/<pod>`` -> its network namespace, for ``bin/in-pod`` (``--datapath``)."""
REPO = Path(__file__).resolve().parents[2]


def default_dir() -> Path:
    if os.environ.get("OSC_SANDBOX_DIR"):
        return Path(os.environ["OSC_SANDBOX_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "osc-gitops" / "sandbox"


def _cluster_dir(given: str | None) -> Path:
    for candidate in (
        [Path(given)] if given else [Path("examples/cluster"), REPO / "examples/cluster"]
    ):
        if candidate.is_dir():
            return candidate.resolve()
    if given:
        raise UserError(f"--cluster {given}: no such folder")
    raise UserError("no cluster description: pass --cluster DIR (like examples/cluster/)")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state_file(folder: Path) -> dict[str, Any] | None:
    """``session.json`` as written, whether its session still runs or not."""
    try:
        state = json.loads((folder / STATE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def read_state(folder: Path) -> dict[str, Any] | None:
    """The running session's ``session.json`` (``None`` when there is none, or it died)."""
    state = _state_file(folder)
    if state is None or not _alive(int(state.get("pid", 0))):
        return None
    return state


def exports(state: Mapping[str, Any]) -> str:
    """The shell lines ``up`` prints on stdout (for ``eval``)."""
    names = {
        "OSC_OVN_NB": state["nb"],
        "OSC_OVN_SB": state["sb"],
        "KUBECONFIG": state["kubeconfig"],
        "OSC_OVN_TRACE": state["trace"],
    }
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in names.items())


def command(action: str, folder: Path) -> str:
    """``osc-gitops sandbox ACTION``, with the ``--dir`` that finds this sandbox when it is not
    the default one (the hints we print must work when copied)."""
    if folder.resolve() == default_dir().resolve():
        return f"osc-gitops sandbox {action}"
    return f"osc-gitops sandbox {action} --dir {shlex.quote(str(folder))}"


def up_command(state: Mapping[str, Any], folder: Path) -> str:
    """The ``up`` that reports this very sandbox again (its own options: ``up`` with others
    is refused while it runs), for the ``eval`` line it prints."""
    from osc_gitops_sandbox.datapath.world import DEFAULT_OVN

    options = []
    try:
        default: str | None = str(_cluster_dir(None))
    except UserError:
        default = None
    if state["cluster"] != default:
        options.append(f"--cluster {shlex.quote(str(state['cluster']))}")
    if state.get("ovn") and state["ovn"] != DEFAULT_OVN:
        options.append(f"--ovn {state['ovn']}")
    if state.get("datapath"):
        options.append("--datapath")
    return command(" ".join(["up", *options]), folder)


NO_DATAPATH_HINT = (
    "No data path: no packet crosses a VNF here; the session plays every VNF VM answering OVN's "
    "health probe (annotate one sandbox.osc.io/forwarding=false to play it dead), so steering "
    "is switched on and explain --trace follows the logical flows. For packets through the "
    "VNFs, run as root: osc-gitops sandbox up --datapath\n"
)


DATAPATH_HINT = (
    "Every pod and VNF guest is a network namespace: run a command in one with\n"
    "  {exec} shop-frontend/web-1 -- ping -c 3 10.244.1.9\n"
    "  {exec} osc-vnfs/firewall-node-1 -- ip -s link      # a VNF guest (by its VM)\n"
    "Make a guest stop forwarding (and OVN's health check fail): kubectl annotate vm -n "
    "osc-vnfs firewall-node-1 sandbox.osc.io/forwarding=false (remove it to resume)\n"
)


def _summary(state: Mapping[str, Any], folder: Path) -> str:
    datapath = state.get("datapath", False)
    parts = (
        f"osc-gitops sandbox is up (pid {state['pid']}): OVN {state['ovn']} NB+SB+northd"
        + (", OVS and ovn-controller (pods and VNF guests in network namespaces)" if datapath
           else "")
        + f" and a Kubernetes API emulator at {state['api']}, seeded from {state['cluster']} "
        f"({state['nodes']} nodes, {state['pods']} pods).\n"
        f'Set the variables in your shell with: eval "$({up_command(state, folder)})"; then\n'
        "  kubectl get pods -A\n"
        "  osc-gitops plan examples/policies        # or your own manifests\n"
        f"OVN tools of this sandbox: {state['bin']} (ovn-nbctl, ovn-sbctl, ovn-trace)\n"
        f"Stop it with: {command('down', folder)}\n"
    )  # fmt: skip
    if not datapath:
        return parts + NO_DATAPATH_HINT
    if state.get("security_manager"):
        parts += (
            f"Security manager (Suricata guests' address groups): {state['security_manager']}"
            " (GET /status); try: osc-gitops apply examples/suricata --wait\n"
            "Every pod serves HTTP on port 80.\n"
        )  # fmt: skip
    return parts + DATAPATH_HINT.format(exec=command("exec", folder))


def up(
    state_dir: str | None, cluster_dir: str | None, ovn_version: str | None,
    datapath: bool = False,
) -> int:  # fmt: skip
    """Start the session (or report the one running) and print its exports; ``datapath``:
    with OVS, ovn-controller, pods and VNF guests (root only)."""
    from osc_gitops_sandbox.datapath.network import datapath_unavailable_reason
    from osc_gitops_sandbox.datapath.world import DEFAULT_OVN, OVN_VERSIONS
    from osc_gitops_sandbox.ovn.stack import ovn_unavailable_reason

    folder = Path(state_dir) if state_dir else default_dir()
    version = ovn_version or DEFAULT_OVN
    if version not in OVN_VERSIONS:
        raise UserError(f"--ovn {version}: one of {', '.join(OVN_VERSIONS)}")
    seed = _cluster_dir(cluster_dir)
    running = read_state(folder)
    if running is not None:
        if (
            running["ovn"] != version
            or running["cluster"] != str(seed)
            or running.get("datapath", False) != datapath
        ):
            with_dp = " with --datapath" if running.get("datapath") else " without --datapath"
            raise UserError(
                f"a sandbox is already up in {folder} (OVN {running['ovn']}, cluster "
                f"{running['cluster']}{with_dp}): run `{command('down', folder)}` first"
            )
        sys.stdout.write(exports(running))
        print(f"(already up) {_summary(running, folder)}", end="", file=sys.stderr)
        return 0
    reason = ovn_unavailable_reason(northd=True, distribution=OVN_VERSIONS[version].distribution)
    if reason:
        other = ", or try --ovn 23.03" if version != "23.03" else ""
        raise UserError(f"the sandbox on OVN {version} cannot run here: {reason}{other}")
    if datapath:
        if os.geteuid() != 0:
            raise UserError(
                "--datapath needs root: it creates network namespaces and veths and runs "
                "ovs-vswitchd (run it as root, or without --datapath: then no VNF passes OVN's "
                "health checks)"
            )
        reason = datapath_unavailable_reason(OVN_VERSIONS[version].distribution)
        if reason:
            raise UserError(f"--datapath cannot run here: {reason}")
    _check_seed(seed)
    _remove(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOG, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "osc_gitops_sandbox.demo.session", "serve", str(folder),
             str(seed), version, "datapath" if datapath else "plain"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT * (2 if datapath else 1)
    while (state := read_state(folder)) is None or state["pid"] != proc.pid:
        if proc.poll() is not None:
            raise UserError(
                f"the sandbox did not start (exit code {proc.returncode}); its log "
                f"{folder / LOG}:\n{_tail(folder / LOG)}"
            )
        if time.monotonic() > deadline:
            proc.terminate()
            raise UserError(
                f"the sandbox did not start within {START_TIMEOUT:.0f} s; log {folder / LOG}"
            )
        time.sleep(0.05)
    sys.stdout.write(exports(state))
    print(_summary(state, folder), end="", file=sys.stderr)
    return 0


def down(state_dir: str | None) -> int:
    """Stop the session and remove its folder."""
    folder = Path(state_dir) if state_dir else default_dir()
    state = read_state(folder)
    if state is None:
        existed = folder.exists()
        if existed and _ours(folder):
            _clean_leftovers(folder, _state_file(folder))
        _remove(folder)
        print(
            f"no sandbox is up in {folder}"
            + (" (removed what a stopped one left)" if existed else ""),
            file=sys.stderr,
        )
        return 0
    pid = int(state["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _clean_leftovers(folder, state)
    _remove(folder)
    print(f"sandbox stopped (pid {pid}) and {folder} removed", file=sys.stderr)
    return 0


def exec_in(state_dir: str | None, target: str, cmd: list[str]) -> int:
    """``osc-gitops sandbox exec NS/NAME -- CMD``: run ``CMD`` in the network namespace of pod
    ``NS/NAME``, or of the VNF guest of VirtualMachine ``NS/NAME`` (a data path only: without
    one, pods and guests are no namespaces). Replaces this process: its exit code is CMD's."""
    import shutil

    from osc_gitops_sandbox.demo.session_player import GUESTS_FILE

    folder = Path(state_dir) if state_dir else default_dir()
    state = read_state(folder)
    if state is None:
        raise UserError(f"no sandbox is up in {folder}: `osc-gitops sandbox up --datapath` first")
    if not state.get("datapath"):
        raise UserError(
            "this sandbox runs without a data path: its pods and VNF guests are no network "
            f"namespaces to run a command in; start it with `{command('down', folder)}` and "
            f"`{command('up --datapath', folder)}` (root)"
        )
    namespace, _, name = target.partition("/")
    if not namespace or not name or "/" in name:
        raise UserError(f"{target!r}: name a pod or a VNF VirtualMachine as NAMESPACE/NAME")
    if not cmd:
        raise UserError("no command: osc-gitops sandbox exec NAMESPACE/NAME -- CMD [ARG...]")
    pods, guests = _read_map(folder / PODS_FILE), _read_map(folder / "dp" / GUESTS_FILE)
    netns = pods.get(target) or guests.get(target)
    if netns is None:
        known = sorted([*pods, *guests])
        shown = ", ".join(known[:8]) + (f", … {len(known) - 8} more" if len(known) > 8 else "")
        raise UserError(
            f"{target}: no pod or VNF guest of that name in the sandbox's data path"
            + (f" (there are: {shown})" if known else " (none yet)")
        )
    if os.geteuid() != 0:
        raise UserError("sandbox exec enters a network namespace: run it as root (like up)")
    if shutil.which(cmd[0]) is None:
        hint = " (apt-get install iputils-ping; make setup installs it)" if cmd[0] == "ping" else ""
        raise UserError(f"{cmd[0]}: not installed on this machine{hint}")
    sys.stdout.flush()
    os.execvp("ip", ["ip", "netns", "exec", netns, *cmd])
    return 1  # not reached


def _read_map(path: Path) -> dict[str, str]:
    """A ``NAMESPACE/NAME`` -> network namespace file the session keeps (none yet: empty)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _clean_leftovers(folder: Path, state: Mapping[str, Any] | None) -> None:
    """What a session that died without cleaning up leaves: its daemons (by the PIDs
    ``session.json`` lists, only while their command line names ``folder``: a PID may have been
    reused) and its network namespaces (``osc-dp-<session pid>-…``, with their veths)."""
    if state is None:
        return
    for pid in state.get("pids") or []:
        try:
            cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(folder.resolve()).encode() in cmdline or str(folder).encode() in cmdline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    if state.get("datapath") and os.geteuid() == 0:
        from osc_gitops_sandbox.datapath.netns import NETNS_DIR, NETNS_PREFIX, delete_netns

        prefix = f"{NETNS_PREFIX}{int(state['pid'])}-"
        with contextlib.suppress(FileNotFoundError):
            for entry in sorted(NETNS_DIR.iterdir()):
                if entry.name.startswith(prefix) and not _alive(int(state["pid"])):
                    delete_netns(entry.name)


def _ours(folder: Path) -> bool:
    """Whether ``folder`` is a sandbox folder (or empty): the only kind ``up``/``down`` remove."""
    if not folder.is_dir():
        return False
    names = {p.name for p in folder.iterdir()}
    return not names or bool(names & {STATE, LOG, "world", "bin", "dp"})


def _remove(folder: Path) -> None:
    import shutil

    if not folder.exists():
        return
    if not _ours(folder):
        raise UserError(
            f"{folder} is not a sandbox folder (no {STATE}, {LOG} or world/ in it): choose "
            "another --dir"
        )
    shutil.rmtree(folder, ignore_errors=True)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _check_seed(folder: Path) -> None:
    """Refuse a cluster description the session could not seed, here, with the file named."""
    from ruamel.yaml.error import MarkedYAMLError

    from osc_gitops_sandbox.ovn.cluster import load_items, load_seed_dir

    for name in ("namespaces.yaml", "nodes.yaml", "pods.yaml"):
        path = folder / name
        if not path.exists():
            continue
        try:
            load_items(path)
        except MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
            raise UserError(f"{where}: YAML syntax error: {exc.problem or exc.context}") from None
        except Exception as exc:  # not kubectl's List format: one line, no traceback
            raise UserError(f"{path}: not a list of Kubernetes objects ({exc})") from None
    nodes, pods, _ = load_seed_dir(folder)
    if not nodes:
        raise UserError(f"{folder}/nodes.yaml: no Node: the sandbox needs at least one node")
    names = {n.get("metadata", {}).get("name") for n in nodes}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node is not None and node not in names:
            meta = pod.get("metadata", {})
            raise UserError(
                f"{folder}/pods.yaml: pod {meta.get('namespace')}/{meta.get('name')} is on node "
                f"{node}, which nodes.yaml does not declare"
            )


# -- the session process --------------------------------------------------------------------------


def _wrappers(folder: Path, dist: Any, nb: str, sb: str) -> Path:
    """``bin/`` with the sandbox's own OVN tools, the NB/SB as their defaults."""
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    env = {"OVN_NB_DB": nb, "OVN_SB_DB": sb}
    for tool in TOOLS:
        command = " ".join(shlex.quote(part) for part in dist.command(tool))
        assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        script = bin_dir / tool
        script.write_text(
            f"#!/bin/sh\n# {tool} of the osc-gitops sandbox ({dist.label})\n"
            f'exec env {assignments} {command} "$@"\n'
        )
        script.chmod(0o755)
    return bin_dir


IN_POD = """\
#!{python}
\"\"\"in-pod NAMESPACE/POD COMMAND...: COMMAND in the pod's network namespace (osc-gitops sandbox
up --datapath plugs every pod in one; the session keeps {pods} up to date).\"\"\"
import json
import os
import sys

if len(sys.argv) < 3:
    sys.exit("usage: in-pod NAMESPACE/POD COMMAND...")
with open({pods!r}) as fh:
    pods = json.load(fh)
if sys.argv[1] not in pods:
    sys.exit(f"in-pod: no pod {{sys.argv[1]}} is plugged; known: {{', '.join(sorted(pods))}}")
os.execvp("ip", ["ip", "netns", "exec", pods[sys.argv[1]], *sys.argv[2:]])
"""


def _in_pod(bin_dir: Path, pods_file: Path) -> None:
    """``bin/in-pod NAMESPACE/POD COMMAND...``: ``ip netns exec`` in that pod's namespace."""
    script = bin_dir / "in-pod"
    script.write_text(IN_POD.format(python=sys.executable, pods=str(pods_file)))
    script.chmod(0o755)


def _security_manager(dp: Any) -> Any:
    """The sandbox's security manager on :data:`SECURITY_MANAGER_PORT`, else any free port."""
    from osc_gitops_sandbox.datapath.security_manager import SecurityManager

    try:
        return SecurityManager(dp.suricata, port=SECURITY_MANAGER_PORT).start()
    except OSError:
        return SecurityManager(dp.suricata).start()


class _PodServices:
    """What a plugged pod runs in the session: a web server on port 80; and ``pods.json``."""

    def __init__(self, dp: Any, path: Path) -> None:
        self.dp = dp
        self.path = path
        self.servers: dict[str, Any] = {}
        self.written: dict[str, str] | None = None

    def sync(self) -> None:
        from osc_gitops_sandbox.datapath.netns import DatapathError
        from osc_gitops_sandbox.datapath.web import serve_http

        pods = dict(self.dp.pods)
        for lsp in set(self.servers) - set(pods):
            self.servers.pop(lsp).close()
        for lsp, endpoint in pods.items():
            if lsp not in self.servers or self.servers[lsp][0] is not endpoint:
                if lsp in self.servers:
                    self.servers.pop(lsp)[1].close()
                try:
                    self.servers[lsp] = (endpoint, serve_http(endpoint, 80))
                except DatapathError as exc:
                    print(f"no web server in pod {lsp}: {exc}", flush=True)
        # an LSP is <namespace>_<pod>, and neither name may hold an underscore (DNS-1123)
        names = {lsp.replace("_", "/", 1): endpoint.netns for lsp, endpoint in pods.items()}
        if names != self.written:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(names, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
            self.written = names

    def close(self) -> None:
        for _, server in self.servers.values():
            server.close()
        self.servers.clear()


def serve(folder: Path, seed: Path, version: str, datapath: bool = False) -> int:
    """The session: start, seed, publish ``session.json``, play OVN-Kubernetes and the kubelets
    (and, with ``datapath``, run the chassis, pods and VNF guests) until SIGTERM."""
    from osc_gitops_sandbox.datapath.world import OVN_VERSIONS
    from osc_gitops_sandbox.demo.session_player import ClusterPlayer
    from osc_gitops_sandbox.ovn.cluster import SandboxCluster, load_seed_dir

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    distribution = OVN_VERSIONS[version].distribution
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(
            SandboxCluster(folder / "world", distribution=distribution, northd=True)
        )
        nodes, pods, namespaces = load_seed_dir(seed)
        placed = [p for p in pods if (p.get("metadata", {}).get("annotations") or {}).get(
            "k8s.ovn.org/pod-networks") and (p.get("spec") or {}).get("nodeName")]  # fmt: skip
        cluster.seed(nodes, placed, namespaces)
        if len(placed) < len(pods):  # the others the player places, addresses and wires
            cluster.kube.add_objects([p for p in pods if p not in placed])
        dp = None
        if datapath:
            from osc_gitops_sandbox.datapath.network import Datapath

            dp = stack.enter_context(
                Datapath(cluster, folder / "dp", chassis_per_node=len(nodes) > 2)
            )
        player = ClusterPlayer(cluster, dp)
        player.plug_all()
        player.sync()
        ovn_version = cluster.distribution.version("ovn-northd")
        bin_dir = _wrappers(folder, cluster.distribution, cluster.nb_remote, cluster.ovn.sb_remote)
        manager = services = None
        if dp is not None:
            manager = _security_manager(dp)
            stack.callback(manager.stop)
            services = _PodServices(dp, folder / PODS_FILE)
            stack.callback(services.close)
            services.sync()
            _in_pod(bin_dir, folder / PODS_FILE)
        state: dict[str, Any] = {
            "pid": os.getpid(),
            "ovn": version,
            "ovn_release": ovn_version,
            "distribution": cluster.distribution.label,
            "nb": cluster.nb_remote,
            "sb": cluster.ovn.sb_remote,
            "kubeconfig": cluster.kubeconfig,
            "api": cluster.kube.url,
            "cluster": str(seed),
            "nodes": len(nodes),
            "pods": len(pods),
            "bin": str(bin_dir),
            "trace": str(bin_dir / "ovn-trace"),
            "datapath": datapath,
            "pids": [*cluster.ovn.pids, *(dp.pids if dp is not None else [])],
        }
        if manager is not None:
            state["security_manager"] = manager.url
        tmp = folder / (STATE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, folder / STATE)
        print(f"sandbox up: {json.dumps(state)}", flush=True)
        while not stop.wait(0.2):
            try:
                player.sync()
                if services is not None:
                    services.sync()
            except Exception as exc:  # keep serving; the log says what went wrong
                print(f"playing OVN-Kubernetes failed: {exc!r}", flush=True)
    (folder / STATE).unlink(missing_ok=True)
    print("sandbox stopped", flush=True)
    return 0


if __name__ == "__main__":  # the session process ``up`` starts
    if len(sys.argv) != 6 or sys.argv[1] != "serve" or sys.argv[5] not in ("datapath", "plain"):
        sys.exit(
            "usage: python -m osc_gitops_sandbox.demo.session serve DIR CLUSTER_DIR OVN_VERSION "
            "datapath|plain"
        )
    sys.exit(serve(Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4], sys.argv[5] == "datapath"))
