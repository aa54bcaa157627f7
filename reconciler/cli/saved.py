"""Saved plans: ``osc-gitops plan -out FILE`` and ``osc-gitops apply FILE`` (Terraform's habit).

``plan -out FILE`` writes, beside the usual output, a file holding the manifests planned, the
options the plan depends on (instance, steering, probe addresses, scope, ``--allow-empty``), the
commit, and the plan itself (its JSON form). ``apply FILE`` applies exactly that plan:

- the manifests and options come from the file (a flag that contradicts them is refused; the
  connection flags and environment say where the cluster is, defaulting to where the plan was
  made);
- the live state is read and planned again as usual; before anything is written the fresh plan
  must have exactly the saved changes (every action, row and object, before and after). If the
  live state changed underneath so that the plan differs (someone applied meanwhile, a pod came
  or went, a row drifted), the apply is refused, exit 1, nothing written: plan again;
- no question is asked (the plan was reviewed when it was saved), with or without a terminal;
- a file changed after it was saved is refused (its SHA-256 is recorded in it).

The file is JSON (``format: osc-gitops-saved-plan``, ``format_version`` 1); it contains the
manifests and the rows' fields, never credentials.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.errors import UserError

if TYPE_CHECKING:
    from reconciler.core.model.plan import Plan

FORMAT = "osc-gitops-saved-plan"
FORMAT_VERSION = 1
_HEAD = 64 * 1024


class StalePlan(UserError):
    """The live state changed since the plan was saved: the fresh plan differs."""


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(body).encode()).hexdigest()


def desired_to_json(desired: Any) -> dict[str, Any]:
    """The manifests as JSON (fields left out stay left out, so an omitted ``order`` stays the
    default one)."""
    data: dict[str, Any] = desired.model_dump(mode="json", exclude_unset=True)
    return data


def desired_from_json(data: Any) -> Any:
    from reconciler.core.model.desired import Desired

    return Desired.model_validate(data)


def endpoint_of(args: argparse.Namespace) -> dict[str, Any]:
    """What identifies the cluster a command talks to (the saved plan's default connection)."""
    kubeconfig = getattr(args, "kubeconfig", None)
    return {
        "ovn_nb": getattr(args, "ovn_nb", None),
        "kubeconfig": os.path.abspath(kubeconfig) if kubeconfig else None,
        "context": getattr(args, "context", None),
        "in_cluster": bool(getattr(args, "in_cluster", False)),
    }


def write(
    args: argparse.Namespace, path: str, desired: Any, revision: str | None, plan: Any
) -> None:
    """``plan -out FILE``."""
    from reconciler import __version__
    from reconciler.render.json_render import plan_to_dict

    body = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "osc_gitops_version": __version__,
        "source": getattr(args, "repo", None) or args.path,
        "revision": revision,
        "options": {
            "instance": args.instance,
            "steering": args.steering,
            "svc_monitor_ip": args.svc_monitor_ip,
            "svc_monitor_ip_dst": args.svc_monitor_ip_dst,
            "node": getattr(args, "node", None),
            "kubernetes_only": bool(getattr(args, "kubernetes_only", False)),
            "allow_empty": bool(args.allow_empty),
        },
        "endpoint": None if args.observed else endpoint_of(args),
        "manifests": desired_to_json(desired),
        "plan": json.loads(_canonical(plan_to_dict(plan))),
    }
    document = {**body, "sha256": _digest(body)}
    try:
        Path(path).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write the plan to {path}: {exc.strerror or exc}") from exc
    print(
        f"Saved the plan to {path}. To apply exactly this plan: osc-gitops apply {path}",
        file=sys.stderr,
    )


@dataclass(frozen=True)
class SavedPlan:
    path: str
    body: dict[str, Any]

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.body["options"])

    @property
    def changes(self) -> list[dict[str, Any]]:
        """The saved plan's changes, in the JSON plan's form."""
        return list(self.body["plan"]["changes"])

    def desired(self) -> Any:
        from pydantic import ValidationError

        try:
            return desired_from_json(self.body["manifests"])
        except ValidationError as exc:
            raise UserError(f"{self.path}: its manifests are not valid here: {exc}") from None


def _looks_saved(path: str) -> bool:
    """``path`` is a file that starts like a saved plan (its first 64 KiB name the format)."""
    file = Path(path)
    if not file.is_file():
        return False
    try:
        with file.open("rb") as handle:
            head = handle.read(_HEAD)
    except OSError:
        return False
    return FORMAT.encode() in head and head.lstrip().startswith(b"{")


def _document(path: str) -> dict[str, Any] | None:
    """The JSON of the saved plan at ``path``; ``None`` when ``path`` is not one."""
    if not _looks_saved(path):
        return None
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable saved plan: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        return None
    return document


class SavedPlanGiven(UserError):
    """A saved plan given where manifests are expected (``plan plan.json``)."""

    cause = "usage"


def refuse_as_manifests(path: str) -> None:
    """Refuse a saved plan given as manifests (``osc-gitops plan plan.json``
    would otherwise report the file's JSON as invalid manifests), saying what it is and how to
    show or apply it, as Terraform's ``terraform show FILE`` / ``terraform apply FILE``."""
    if not _looks_saved(path):
        return
    try:
        document = _document(path)
    except UserError:
        document = {"format": FORMAT}  # damaged, but a saved plan all the same
    if document is None:
        return
    made = ", ".join(
        part
        for part in (
            f"made {document['created_at']}" if document.get("created_at") else "",
            f"from {document['source']}" if document.get("source") else "",
        )
        if part
    )
    again = (
        f"; to plan again: osc-gitops plan {document['source']}" if document.get("source") else ""
    )
    raise SavedPlanGiven(
        f"{path} is a saved plan (osc-gitops plan -out{', ' + made if made else ''}), not "
        f"manifests: `osc-gitops show {path}` prints it, `osc-gitops apply {path}` applies "
        f"exactly it{again}"
    )


def load(path: str) -> SavedPlan | None:
    """The saved plan at ``path``, ``None`` when ``path`` is not one (a manifest file or folder:
    ``apply PATH`` as ever). A saved plan that is damaged, changed or of another version is an
    error."""
    document = _document(path)
    if document is None:
        return None
    if document.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"{path}: saved plan format_version {document.get('format_version')!r}; this "
            f"osc-gitops reads {FORMAT_VERSION}: plan again"
        )
    digest = document.pop("sha256", None)
    if digest != _digest(document):
        raise UserError(f"{path}: the saved plan was changed after it was saved: plan again")
    return SavedPlan(path, document)


_OPTIONS = (
    ("instance", "--instance"),
    ("steering", "--steering"),
    ("svc_monitor_ip", "--svc-monitor-ip"),
    ("svc_monitor_ip_dst", "--svc-monitor-ip-dst"),
    ("node", "--node"),
    ("kubernetes_only", "--kubernetes-only"),
)


def adopt(args: argparse.Namespace, saved: SavedPlan) -> None:
    """Give ``args`` the saved plan's options, refusing a flag given on the command line that
    says otherwise (environment defaults give way to the file), and, when no connection is
    given, the endpoint the plan was made against."""
    options = saved.options
    if getattr(args, "repo", None):
        raise UserError(f"apply {saved.path}: a saved plan brings its manifests; drop --repo")
    parser = getattr(args, "_parser", None)
    for key, flag in _OPTIONS:
        given = getattr(args, key, None)
        default = parser.get_default(key) if parser is not None else None
        if given != default and given != options.get(key):
            raise UserError(
                f"{saved.path} was planned with {flag} {options.get(key) or '(not given)'}, "
                f"this apply gives {flag} {given}: plan again with it"
            )
        setattr(args, key, options.get(key))
    args.allow_empty = bool(options["allow_empty"] or args.allow_empty)
    endpoint = saved.body.get("endpoint") or {}
    if not args.ovn_nb and endpoint.get("ovn_nb"):
        args.ovn_nb = endpoint["ovn_nb"]
    if not args.kubeconfig and not args.in_cluster and endpoint.get("kubeconfig"):
        args.kubeconfig = endpoint["kubeconfig"]
        args.context = args.context or endpoint.get("context")


def check(saved: SavedPlan, live: Plan) -> None:
    """Refuse when the fresh plan ``live`` is not the saved one (:class:`StalePlan`)."""
    from reconciler.core.model.plan import changes_between
    from reconciler.render.json_render import plan_from_dict

    only_now, only_saved = changes_between(plan_from_dict(saved.body["plan"]).changes, live.changes)
    if not only_now and not only_saved:
        return
    parts = []
    if only_now:
        parts.append(f"now also {', '.join(only_now[:5])}" + (" …" if len(only_now) > 5 else ""))
    if only_saved:
        parts.append(
            f"no longer {', '.join(only_saved[:5])}" + (" …" if len(only_saved) > 5 else "")
        )
    raise StalePlan(
        f"the live state changed since {saved.path} was planned "
        f"({saved.body.get('created_at')}): the plan would differ ({'; '.join(parts)}); nothing "
        "was written: plan again"
    )
