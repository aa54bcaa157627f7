"""Small pure rules users meet in messages: one-edit typos, the label syntax and what exactly is
wrong with a label, and the note ``explain`` gives a pod steered beside load balancers."""

from __future__ import annotations

import pytest

from reconciler.core.model.desired import (
    check_label_key,
    check_label_map,
    check_label_term,
    check_label_value,
    check_quantity,
)
from reconciler.core.steering.services import UPSTREAM, pod_note
from reconciler.core.views.typos import one_edit


@pytest.mark.parametrize(
    ("a", "b", "close"),
    [
        ("payments", "paymnets", True),  # two neighbours swapped
        ("payments", "payment", True),  # one deleted (at the end)
        ("payment", "payments", True),  # one inserted
        ("edge", "egde", True),
        ("web", "wab", True),  # one replaced
        ("web", "xweb", True),  # inserted at the start
        ("web", "wxeb", True),  # inserted inside
        ("ab", "ba", True),
        ("web", "web", False),  # no edit
        ("web", "webxx", False),  # two inserted
        ("web", "bew", False),  # a swap of non-neighbours
        ("abc", "bca", False),
        ("abcd", "badc", False),  # two swaps
        ("abcd", "axcy", False),  # two replaced
        ("abc", "acb", True),
        ("abc", "cba", False),
        ("aab", "aba", True),
        ("abc", "abd", True),
        ("abcd", "abdc", True),
        ("ab", "c", False),
        ("abc", "xbz", False),
        ("", "a", True),
        ("a", "", True),
        ("xyz", "xyzw", True),
        ("xyz", "wxyz", True),
        ("xyz", "xwz", True),
        ("xyz", "xz", True),
        ("xyz", "yz", True),
        ("xyz", "xy", True),
        ("xyz", "zy", False),
    ],
)
def test_one_edit(a: str, b: str, close: bool) -> None:
    assert one_edit(a, b) is close
    assert one_edit(b, a) is close


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a b", "label value 'a b' contains a space"),
        ("a\tb", "label value 'a\\tb' contains a tab"),
        ("a\nb", "label value 'a\\nb' contains a line break"),
        ("a/b", "label value 'a/b' contains '/'"),
        ("x" * 64, f"label value '{'x' * 64}' is 64 characters long, more than 63"),
        ("-a", "label value '-a' must start and end with a letter or digit"),
        ("a.", "label value 'a.' must start and end with a letter or digit"),
        # 63 characters are not too many: the ends are what is wrong
        (f"-{'x' * 61}-", f"label value '-{'x' * 61}-' must start and end with a letter or digit"),
    ],
)
def test_a_wrong_label_value_says_what_is_wrong(value: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_label_value(value)
    assert str(caught.value) == (
        f"{message}; it must be at most 63 characters of letters, digits, '-', '_' or '.', "
        "starting and ending with a letter or digit"
    )


@pytest.mark.parametrize("value", ["", "a", "a-b_c.d", "A9", "x" * 63])
def test_label_values_kubernetes_accepts(value: str) -> None:
    assert check_label_value(value) == value


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("", "label key '': name '' is empty"),
        ("app x", "label key 'app x': name 'app x' contains a space"),
        ("example.com/", "label key 'example.com/': name '' is empty"),
        (
            "x" * 64,
            f"label key '{'x' * 64}': name '{'x' * 64}' is 64 characters long, more than 63",
        ),
        ("_app", "label key '_app': name '_app' must start and end with a letter or digit"),
    ],
)
def test_a_wrong_label_key_name_says_what_is_wrong(key: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_label_key(key)
    assert str(caught.value) == (
        f"{message}; it must be 1-63 characters of letters, digits, '-', '_' or '.', starting "
        "and ending with a letter or digit"
    )


@pytest.mark.parametrize("prefix", ["", "Example.com", "a_b", "x" * 254, "-a.com"])
def test_a_label_key_prefix_must_be_a_dns_subdomain(prefix: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_label_key(f"{prefix}/app")
    assert str(caught.value) == (
        f"label key '{prefix}/app': prefix '{prefix}' must be a DNS subdomain (lowercase "
        "letters, digits, '-' and '.', at most 253 characters)"
    )


@pytest.mark.parametrize("key", ["app", "app.kubernetes.io/name", "a" * 253 + "/x", "A_b-9"])
def test_label_keys_kubernetes_accepts(key: str) -> None:
    assert check_label_key(key) == key


def test_label_terms_and_maps() -> None:
    assert check_label_term("app=web") == "app=web"
    assert check_label_term("app=") == "app="  # an empty value is a value
    with pytest.raises(ValueError) as caught:
        check_label_term("app")
    assert str(caught.value) == "label 'app' must have the form key=value"
    with pytest.raises(ValueError, match=r"^label key 'a b'"):
        check_label_term("a b=web")
    with pytest.raises(ValueError, match=r"^label value 'w b'"):
        check_label_term("app=w b")
    # the key ends at the first "=": a second one is in the value, where it is wrong
    with pytest.raises(ValueError, match=r"^label value 'web=1' contains '='"):
        check_label_term("app=web=1")
    assert check_label_map({"app": "web", "tier": ""}) == {"app": "web", "tier": ""}
    with pytest.raises(ValueError, match=r"^label value"):
        check_label_map({"app": "web", "tier": "-x"})
    with pytest.raises(ValueError, match=r"^label key"):
        check_label_map({"app": "web", "-t": "x"})


@pytest.mark.parametrize("ok", ["1Gi", "512Mi", "1.5G", "500m", "2", "0.5Ki", "3E"])
def test_quantities(ok: str) -> None:
    assert check_quantity(ok) == ok


@pytest.mark.parametrize("bad", ["", "1 Gi", "1gi", "1.", ".5Gi", "Gi", "1GiB", "-1Gi"])
def test_not_quantities(bad: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_quantity(bad)
    assert str(caught.value) == (
        f"{bad!r} is not a Kubernetes quantity (for example 512Mi, 2Gi, 1.5G, 500m)"
    )


MEASURED = (
    "measured on OVN 26.03.1 with OVN-Kubernetes' ClusterIP load balancers (2 chassis, one NB "
    "and interconnect)"
)


def test_the_note_of_a_pod_steered_beside_load_balancers() -> None:
    assert pod_note("osc-gitops", "node-1", ["web-fw", "api-fw", "web-fw"]) == (
        "switch node-1 has load balancers (OVN-Kubernetes' Services): osc-gitops makes the VNF "
        "ports there stateless (Port_Group osc._vnf_ports.node_1), without which OVN 26.03 drops "
        "the replies of the Service connections this pod opens when Binding api-fw, web-fw "
        f"steers it entry-lport or both ({UPSTREAM}); {MEASURED}: its Service connections are "
        "steered exactly as its direct ones, except through its own Service (one way only with "
        "exit-lport or both, not at all with entry-lport)"
    )


def test_the_note_says_what_is_not_solved_when_one_instance_is_entered_both_ways() -> None:
    once = pod_note("osc-gitops", "node-1", ["a"])
    twice = pod_note("osc-gitops", "node-1", ["a"], twice=True)
    assert twice.startswith(once)
    assert twice[len(once) :].startswith(
        ". Not solved: a Service connection between two pods steered through one VNF instance "
        "on this node, the caller entry-lport or both and the backend exit-lport or both, never "
        "connects: OVN routes load-balanced traffic through the cluster router"
    )


def test_a_long_list_of_bindings_is_cut_after_five() -> None:
    names = [f"b{i}" for i in range(8)]
    assert "Binding b0, b1, b2, b3, b4 and 3 more steers it" in pod_note("osc", "n", names)
    assert "Binding b0, b1, b2, b3, b4 steers it" in pod_note("osc", "n", names[:5])


def test_the_plans_note_about_load_balancers() -> None:
    from reconciler.core.steering.services import SAME_VNF_LIMIT, plan_note

    assert plan_note("osc-gitops", []) is None
    one = plan_note("osc-gitops", [("web-fw", "node-1"), ("api-fw", "node-1")])
    assert one == (
        "switch node-1 has load balancers (OVN-Kubernetes' Services), beside which OVN does not "
        "support Network Function insertion: osc-gitops makes its VNF ports there stateless "
        "(Port_Group osc._vnf_ports.node_1, two allow-stateless ACLs), without which OVN 26.03 "
        "drops the replies of every Service connection an entry-lport or both pod opens "
        f"({UPSTREAM}); {MEASURED}: Service connections of Binding api-fw, web-fw's pods are "
        "steered exactly as direct ones, both ways, except a pod reaching itself through its own "
        "Service, which crosses the VNF one way only (exit-lport, both) or not at all "
        "(entry-lport)"
    )
    two = plan_note(
        "osc-gitops",
        [("web-fw", "node-2"), ("web-fw", "node-1")],
        [(("fw", "ips"), "node-1"), (("fw",), "node-2"), (("fw",), "node-2")],
    )
    assert two is not None
    assert two.startswith(
        "switches node-1, node-2 have load balancers (OVN-Kubernetes' Services), beside which "
        "OVN does not support Network Function insertion: osc-gitops makes its VNF ports there "
        "stateless (Port_Group osc._vnf_ports.node_1 per node, two allow-stateless ACLs)"
    )
    assert "Service connections of Binding web-fw's pods" in two
    assert two.endswith(
        "(entry-lport). Not solved: a pod steered entry-lport or both through fw, fw -> ips "
        "cannot connect through a Service to a pod the same VNF instance steers exit-lport or "
        f"both on its own node (node-1, node-2): {SAME_VNF_LIMIT}"
    )
