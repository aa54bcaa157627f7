"""Cross-reference checks over all manifests of a run (pure functions, no I/O).

A single manifest can be perfectly valid and still wrong in context: two groups named ``web``,
a Binding to a group that does not exist, two Bindings claiming position 10 of the same group.
Those checks need every document of the run at once, so they live here, after ``load`` turned
each document into a model and recorded where each field was written (:class:`SourceDoc`).
Every issue points at the offending field's ``file:line:column``, and, for clashes, also names
where the other side was declared, so the user sees both ends of the conflict.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from reconciler.core.model.desired import (
    Binding,
    BindingSpec,
    Desired,
    Manifest,
    SecurityGroup,
    VnfDeployment,
)
from reconciler.errors import ManifestIssue


@dataclass(frozen=True, slots=True)
class SourceDoc:
    """A validated manifest and where it came from.

    ``positions`` maps field paths (``metadata.name``, ``spec.labels[1]``) to 1-based
    ``(line, column)`` of their value, so cross-reference issues land on the exact field.
    """

    file: str
    document: int
    line: int
    column: int
    manifest: Manifest
    positions: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.manifest.kind

    @property
    def name(self) -> str:
        return self.manifest.metadata.name

    def at(self, path: str) -> tuple[int, int]:
        """Position of ``path``, falling back to its closest written parent, then the document."""
        probe = path
        while probe:
            if probe in self.positions:
                return self.positions[probe]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return (self.line, self.column)

    def where(self, path: str = "metadata.name") -> str:
        line, column = self.at(path)
        return f"{self.file}:{line}:{column}"

    def issue(self, path: str, message: str, expected: str | None = None) -> ManifestIssue:
        line, column = self.at(path)
        return ManifestIssue(
            file=self.file,
            line=line,
            column=column,
            document=self.document,
            path=path,
            kind=self.kind,
            name=self.name,
            message=message,
            expected=expected,
        )


Declared = Mapping[str, Mapping[str, str]]
"""``kind -> name -> "file:line"`` of manifests that failed their own validation but whose kind
and name could be read. They still count as declared, so a typo in one group's labels does not
also produce "unknown SecurityGroup" on every Binding that uses it."""


def did_you_mean(value: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'web'?)`` when a close candidate exists, else an empty string."""
    close = difflib.get_close_matches(value, sorted(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_duplicates(docs: Sequence[SourceDoc]) -> list[ManifestIssue]:
    """Names are unique per kind: the second and later declarations are errors."""
    first: dict[tuple[str, str], SourceDoc] = {}
    issues: list[ManifestIssue] = []
    for doc in docs:
        ident = (doc.kind, doc.name)
        if ident in first:
            issues.append(
                doc.issue(
                    "metadata.name",
                    f"duplicate {doc.kind} name {doc.name!r} "
                    f"(first declared at {first[ident].where()})",
                )
            )
        else:
            first[ident] = doc
    return issues


def check_references(
    docs: Sequence[SourceDoc], declared: Declared | None = None
) -> list[ManifestIssue]:
    """Every Binding names an existing SecurityGroup and VnfDeployment."""
    declared = declared or {}
    groups = {d.name for d in docs if isinstance(d.manifest, SecurityGroup)}
    groups |= set(declared.get("SecurityGroup", {}))
    vnfs = {d.name for d in docs if isinstance(d.manifest, VnfDeployment)}
    vnfs |= set(declared.get("VnfDeployment", {}))
    issues: list[ManifestIssue] = []
    for doc in docs:
        if not isinstance(doc.manifest, Binding):
            continue
        spec = doc.manifest.spec
        refs = [("spec.securityGroup", "SecurityGroup", spec.securityGroup, groups)]
        refs += [(path, "VnfDeployment", vnf, vnfs) for path, vnf in vnf_paths(spec)]
        for path, kind, ref, known in refs:
            if ref not in known:
                if not known:
                    issues.append(doc.issue(path, f"unknown {kind} {ref!r}: no {kind} is declared"))
                    continue
                issues.append(
                    doc.issue(
                        path,
                        f"unknown {kind} {ref!r}{did_you_mean(ref, known)}",
                        expected="one of: " + ", ".join(sorted(known)),
                    )
                )
    return issues


def vnf_paths(spec: BindingSpec) -> list[tuple[str, str]]:
    """``(field path, VNF)`` of each VNF a Binding names: ``spec.vnf`` for the single form,
    ``spec.vnf[i]`` (or ``spec.vnf[i].name``) for the hops of a chain, so an issue lands on
    the hop."""
    if isinstance(spec.vnf, str):
        return [("spec.vnf", spec.vnf)]
    return [
        (f"spec.vnf[{i}]", hop) if isinstance(hop, str) else (f"spec.vnf[{i}].name", hop.name)
        for i, hop in enumerate(spec.vnf)
    ]


def check_chains(docs: Sequence[SourceDoc]) -> list[ManifestIssue]:
    """A chain crosses each VNF once: a VNF twice in one chain is an error, at the second
    occurrence. (OVN wires a chain as one function through the hops' NICs, in order, and a
    VNF instance cannot be two hops of one wire.)"""
    issues: list[ManifestIssue] = []
    for doc in docs:
        if not isinstance(doc.manifest, Binding):
            continue
        first: dict[str, str] = {}
        for path, vnf in vnf_paths(doc.manifest.spec):
            if vnf in first:
                issues.append(
                    doc.issue(
                        path,
                        f"VNF {vnf} appears twice in the chain (first at {first[vnf]}): a "
                        "packet crosses each VNF of a chain once",
                        expected="distinct VnfDeployments, in the order a packet crosses them",
                    )
                )
            else:
                first[vnf] = path
    return issues


def check_bindings(docs: Sequence[SourceDoc]) -> list[ManifestIssue]:
    """Per group: each ``order`` used once, each VNF (or chain) bound once.

    Two bindings at the same order would make the evaluation order depend on file order;
    binding one VNF (or one chain) twice to one group says the same thing twice, and only the
    earlier binding would ever steer. A VNF in a chain *and* alone (``[ngfw, ids]`` for tcp/443,
    ``ids`` for the rest) is two different paths, and fine.
    """
    by_order: dict[tuple[str, int], tuple[SourceDoc, Binding]] = {}
    by_vnf: dict[tuple[str, tuple[str, ...]], SourceDoc] = {}
    seen_names: set[str] = set()
    issues: list[ManifestIssue] = []
    for doc in docs:
        if not isinstance(doc.manifest, Binding) or doc.name in seen_names:
            continue  # duplicates of a name are reported by check_duplicates
        seen_names.add(doc.name)
        spec = doc.manifest.spec
        order_key = (spec.securityGroup, spec.order)
        if order_key in by_order:
            other, other_binding = by_order[order_key]
            defaulted = spec.order_is_default or other_binding.spec.order_is_default
            theirs = ", which omits spec.order" if other_binding.spec.order_is_default else ""
            issues.append(
                doc.issue(
                    "spec.order",
                    f"duplicate order {spec.order}{_default_note(doc.manifest)} on "
                    f"SecurityGroup {spec.securityGroup} (also used by Binding/{other.name} at "
                    f"{other.where('spec.order')}{theirs})",
                    expected="a unique order per SecurityGroup"
                    + (": give one of them an explicit spec.order" if defaulted else ""),
                )
            )
        else:
            by_order[order_key] = (doc, doc.manifest)
        vnf_key = (spec.securityGroup, spec.vnfs)
        if vnf_key in by_vnf:
            other = by_vnf[vnf_key]
            what = f"chain {spec.vnf_text}" if spec.is_chain else f"VNF {spec.vnf_text}"
            issues.append(
                doc.issue(
                    "spec.vnf",
                    f"{what} is bound twice to SecurityGroup {spec.securityGroup} "
                    f"(also by Binding/{other.name} at {other.where('spec.vnf')})",
                )
            )
        else:
            by_vnf[vnf_key] = doc
    return issues


def check_generated_names(docs: Sequence[SourceDoc]) -> list[ManifestIssue]:
    """VnfDeployments of one namespace whose Kubernetes objects can take the same name.

    A VM is named ``<vnf>-<node>`` and its NetworkAttachmentDefinitions
    ``<dataNetwork or vnf>-<node>-in/-out``: VNF ``fw`` on node ``edge-node-1`` and VNF
    ``fw-edge`` on node ``node-1`` are both ``fw-edge-node-1``. Node names are not known here,
    so any two names of which one is the other followed by ``-`` (or two equal NAD prefixes)
    are refused: a run that validates must never compile two objects under one name (plan on
    main died with a traceback). Other namespaces are other name spaces."""
    vnfs = [(d, d.manifest) for d in docs if isinstance(d.manifest, VnfDeployment)]
    issues: list[ManifestIssue] = []
    seen: set[str] = set()
    for doc, vnf in vnfs:
        if doc.name in seen:
            continue  # a duplicate name is check_duplicates' to report
        seen.add(doc.name)
        for other, theirs in vnfs:
            if other.name == doc.name or theirs.spec.namespace != vnf.spec.namespace:
                continue
            problem = _name_clash(doc, vnf, other, theirs)
            if problem is not None:
                issues.append(problem)
                break
    return issues


def _name_clash(
    doc: SourceDoc, vnf: VnfDeployment, other: SourceDoc, theirs: VnfDeployment
) -> ManifestIssue | None:
    """The issue on ``doc`` when its generated names can equal ``other``'s (see
    :func:`check_generated_names`); reported on the longer name, where renaming helps."""
    namespace = vnf.spec.namespace
    where = f"VnfDeployment/{other.name} at {other.where()}"
    if doc.name.startswith(other.name + "-"):
        rest = doc.name[len(other.name) + 1 :]
        return doc.issue(
            "metadata.name",
            f"its VirtualMachines can take the names of those of {where} in namespace "
            f"{namespace}: {other.name} on a node named {rest}-<node> and {doc.name} on <node> "
            f"are both VirtualMachine {doc.name}-<node>",
            expected="VnfDeployment names of one namespace of which none is another's name "
            "followed by '-': rename one, or give it another spec.namespace",
        )
    mine = vnf.spec.dataNetwork or doc.name
    prefix = theirs.spec.dataNetwork or other.name
    path = "spec.dataNetwork" if vnf.spec.dataNetwork else "metadata.name"
    if mine == prefix:
        return doc.issue(
            path,
            f"its NetworkAttachmentDefinitions would have the names of those of {where} in "
            f"namespace {namespace} ({mine}-<node>-in and -out on every node)",
            expected="a spec.dataNetwork (or name) of its own per namespace",
        )
    if mine.startswith(prefix + "-"):
        rest = mine[len(prefix) + 1 :]
        return doc.issue(
            path,
            f"its NetworkAttachmentDefinitions can take the names of those of {where} in "
            f"namespace {namespace}: {prefix} on a node named {rest}-<node> and {mine} on "
            f"<node> are both {mine}-<node>-in",
            expected="NetworkAttachmentDefinition prefixes (spec.dataNetwork, else the name) of "
            "one namespace of which none is another's followed by '-'",
        )
    return None


def _default_note(binding: Binding) -> str:
    """Says that a Binding's order is the default one, so a clash of two bindings that omit
    ``order`` explains itself (the position then points at their ``spec``)."""
    return " (the default: spec.order omitted)" if binding.spec.order_is_default else ""


def cross_check(
    docs: Sequence[SourceDoc], declared: Declared | None = None, *, complete: bool = True
) -> list[ManifestIssue]:
    """All cross-reference checks.

    ``complete=False`` means some file of the run could not be parsed at all: it may declare the
    groups and VNFs that Bindings refer to, so unknown-reference checks are skipped rather than
    reporting errors that are only echoes of the parse error.
    """
    issues = check_duplicates(docs)
    if complete:
        issues += check_references(docs, declared)
    issues += check_chains(docs)
    issues += check_bindings(docs)
    issues += check_generated_names(docs)
    return issues


def build_desired(docs: Sequence[SourceDoc]) -> Desired:
    """Index validated manifests by name (call after :func:`cross_check` found nothing)."""
    groups: dict[str, SecurityGroup] = {}
    vnfs: dict[str, VnfDeployment] = {}
    bindings: dict[str, Binding] = {}
    for doc in docs:
        m = doc.manifest
        if isinstance(m, SecurityGroup):
            groups.setdefault(m.metadata.name, m)
        elif isinstance(m, VnfDeployment):
            vnfs.setdefault(m.metadata.name, m)
        else:
            bindings.setdefault(m.metadata.name, m)
    return Desired(
        security_groups=dict(sorted(groups.items())),
        vnfs=dict(sorted(vnfs.items())),
        bindings=dict(sorted(bindings.items())),
    )
