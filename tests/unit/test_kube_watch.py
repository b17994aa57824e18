"""The watched lists' own logic: label selectors matched as the apiserver matches them, and a write of
ours never replaced by an older version. The watch itself runs against the real apiserver in
tests/scale (the rig's operator reads its pods and nodes through it) and tests/kube (`soperator run`)."""
from __future__ import annotations

import pytest

from soperator.kube_watch import Selector, supersedes


@pytest.mark.parametrize("text, labels, matches", [
    ("a=b", {"a": "b"}, True),
    ("a=b", {"a": "c"}, False),
    ("a==b,c=d", {"a": "b", "c": "d"}, True),
    ("a=b,c=d", {"a": "b"}, False),
    ("a!=b", {}, True),
    ("a!=b", {"a": "b"}, False),
    ("a", {"a": ""}, True),
    ("a", {}, False),
    ("!a", {}, True),
    ("!a", {"a": "x"}, False),
    ("", {"x": "y"}, True),
    (" app.kubernetes.io/instance = c1 , x ", {"app.kubernetes.io/instance": "c1", "x": "1"}, True),
])
def test_equality_selectors_match_as_the_apiserver_does(text, labels, matches):
    assert Selector.parse(text).matches(labels) is matches


@pytest.mark.parametrize("text", ["a in (b,c)", "a notin (b)", "a=b,c in (d)"])
def test_set_based_selectors_are_left_to_the_apiserver(text):
    assert Selector.parse(text) is None


def _pod(version: str) -> dict:
    return {"metadata": {"name": "w-0", "resourceVersion": version}}


def test_a_write_of_ours_is_kept_until_a_newer_version_comes():
    assert supersedes(_pod("12"), None)
    assert supersedes(_pod("12"), _pod("11")) and supersedes(_pod("12"), _pod("12"))
    assert not supersedes(_pod("11"), _pod("12")), "an older answer arriving late changes nothing"
    assert not supersedes(_pod("x"), _pod("12"))


def test_a_write_answered_before_the_objects_deletion_does_not_bring_it_back():
    assert not supersedes(_pod("12"), None, deleted_at=13)
    assert supersedes(_pod("14"), None, deleted_at=13), "a pod made again under the name"


def test_a_kept_pod_holds_what_the_operator_reads_and_no_more():
    from soperator.kube_watch import slim_node, slim_pod

    pod = {"metadata": {"name": "w-0", "labels": {"a": "b"}, "managedFields": [{"manager": "kubelet"}]},
           "spec": {"nodeName": "n1", "containers": [{"name": "slurmd"}], "volumes": [{"name": "jail"}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    assert slim_pod(pod) == {"metadata": {"name": "w-0", "labels": {"a": "b"}}, "spec": {"nodeName": "n1"},
                             "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    node = {"metadata": {"name": "n1", "managedFields": []}, "spec": {"unschedulable": True},
            "status": {"images": [{"names": ["x"]}], "conditions": []}}
    assert slim_node(node) == {"metadata": {"name": "n1"}, "spec": {"unschedulable": True}, "status": {"conditions": []}}
