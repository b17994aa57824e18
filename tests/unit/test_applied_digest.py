"""The digest each applied object carries (reconcile/apply.py): what makes the operator apply again."""
from __future__ import annotations

from soperator.node.layout import APPLIED_DIGEST_ANNOTATION
from soperator.reconcile.apply import with_digest
from soperator.reconcile.diff import contains


def _sts(**spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "w", "annotations": {"a": "b"}},
            "spec": {"replicas": 1, **spec}}


def test_a_field_taken_out_changes_the_digest_so_the_live_object_no_longer_holds_it():
    before = with_digest(_sts(template={"spec": {"nodeSelector": {"disk": "ssd"}}}))
    after = with_digest(_sts(template={"spec": {}}))
    assert contains(before, {k: v for k, v in after.items() if k != "metadata"})  # the subset test alone: blind
    assert not contains(before, after)
    assert before["metadata"]["annotations"]["a"] == "b"  # the object's own annotations kept
    assert with_digest(_sts(template={"spec": {}})) == after  # deterministic


def test_a_statefulsets_claim_templates_never_change_the_digest_the_apiserver_refuses_their_change():
    claims = [{"metadata": {"name": "local"}, "spec": {"storageClassName": "fast"}}]
    with_class = with_digest(_sts(volumeClaimTemplates=claims))["metadata"]["annotations"][APPLIED_DIGEST_ANNOTATION]
    without = with_digest(_sts(volumeClaimTemplates=[{"metadata": {"name": "local"}, "spec": {}}]))
    assert without["metadata"]["annotations"][APPLIED_DIGEST_ANNOTATION] == with_class
    assert without["spec"]["volumeClaimTemplates"] == [{"metadata": {"name": "local"}, "spec": {}}]  # still applied
