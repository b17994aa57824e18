"""Whether a live object already holds what would be applied (reconcile/diff.py)."""
from __future__ import annotations

import pytest

from soperator.reconcile.diff import contains


@pytest.mark.parametrize("live, desired", [("2Gi", "2048Mi"), ("1", "1000m"), ("500m", "0.5"), ("1Gi", 1073741824),
                                           ("64Mi", "64Mi")])
def test_a_quantity_the_apiserver_spelt_canonically_is_the_same_field(live, desired):
    assert contains({"resources": {"limits": {"memory": live}}}, {"resources": {"limits": {"memory": desired}}})


@pytest.mark.parametrize("live, desired", [("2Gi", "2G"), ("1", "1001m"), ("on", "1"), ("1", True), ("x", "x ")])
def test_another_value_or_no_quantity_at_all_is_a_difference(live, desired):
    assert not contains({"value": live}, {"value": desired})


def test_a_subset_holds_and_a_missing_or_extra_list_item_does_not():
    live = {"spec": {"replicas": 2, "template": {"containers": [{"name": "a", "image": "x"}]}}, "status": {}}
    assert contains(live, {"spec": {"replicas": 2}})
    assert not contains(live, {"spec": {"template": {"containers": []}}})
    assert not contains(live, {"spec": {"paused": False}})
