"""Whether a live object already holds what would be applied (reconcile/diff.py)."""
from __future__ import annotations

import pytest

from soperator.reconcile.diff import contains


@pytest.mark.parametrize("live, desired", [("2Gi", "2048Mi"), ("1", "1000m"), ("500m", "0.5"), ("1Gi", 1073741824),
                                           ("64Mi", "64Mi")])
def test_a_quantity_the_apiserver_spelt_canonically_is_the_same_field(live, desired):
    assert contains({"resources": {"limits": {"memory": live}}}, {"resources": {"limits": {"memory": desired}}})
    assert contains({"resources": {"requests": {"storage": live}}}, {"resources": {"requests": {"storage": desired}}})
    assert contains({"emptyDir": {"sizeLimit": live}}, {"emptyDir": {"sizeLimit": desired}})


@pytest.mark.parametrize("live, desired", [("2Gi", "2G"), ("1", "1001m"), ("on", "1"), ("1", True), ("x", "x ")])
def test_another_value_or_no_quantity_at_all_is_a_difference(live, desired):
    assert not contains({"limits": {"cpu": live}}, {"limits": {"cpu": desired}})


def test_only_a_quantity_field_is_compared_by_value():
    """An env value or a label spelt otherwise is another value: 4096 is not 4Ki there."""
    assert not contains({"env": [{"name": "N", "value": "4Ki"}]}, {"env": [{"name": "N", "value": "4096"}]})
    assert not contains({"labels": {"size": "08"}}, {"labels": {"size": "8"}})
    assert not contains({"requests": {"cpu": {"x": "1"}}}, {"requests": {"cpu": {"x": "1000m"}}})


@pytest.mark.parametrize("empty", [False, "", [], {}, None])
def test_an_empty_value_the_apiserver_leaves_out_is_held(empty):
    assert contains({"name": "a"}, {"name": "a", "readOnly": empty})
    assert not contains({"name": "a", "readOnly": True}, {"name": "a", "readOnly": empty})


def test_a_zero_or_a_value_that_is_set_is_not_empty():
    assert not contains({"name": "a"}, {"name": "a", "replicas": 0})
    assert not contains({"name": "a"}, {"name": "a", "readOnly": True})


def test_a_subset_holds_and_a_missing_or_extra_list_item_does_not():
    live = {"spec": {"replicas": 2, "template": {"containers": [{"name": "a", "image": "x"}]}}, "status": {}}
    assert contains(live, {"spec": {"replicas": 2}})
    assert not contains(live, {"spec": {"template": {"containers": []}}})
    assert not contains(live, {"spec": {"paused": True}})
