"""Property tests on the real apiserver (hypothesis): a random valid SlurmCluster and every object
soperator renders from it pass a server-side dry-run create (the CRD's schema and CEL, and Kubernetes'
own validation of StatefulSets, Services, Secrets…); a random valid cluster with one known defect put
in is refused by the CRD, as by soperator."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soperator.api import parse_cluster
from soperator.render import render_all
from tests.support.spec_strategies import DEFECTS, valid_manifests

pytestmark = pytest.mark.kube
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _dry_run(kubectl, objects: list[dict]):
    return kubectl("create", "--dry-run=server", "-o", "name", "-f", "-",
                   input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), check=False)


@settings(SETTINGS, max_examples=25)
@given(manifest=valid_manifests())
def test_random_valid_clusters_and_their_objects_pass_the_apiserver(kubectl, crd_installed, namespace, keys,
                                                                     manifest):
    manifest["metadata"]["namespace"] = namespace
    objects = [manifest, *render_all(parse_cluster(manifest), keys)]
    proc = _dry_run(kubectl, objects)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.split()) == len(objects)


@settings(SETTINGS, max_examples=40)
@given(manifest=valid_manifests(), defect=st.sampled_from(DEFECTS))
def test_a_known_defect_is_refused_by_the_apiserver(kubectl, crd_installed, namespace, manifest, defect):
    what, change, field = defect
    manifest["metadata"]["namespace"] = namespace
    proc = _dry_run(kubectl, [change(manifest)])
    assert proc.returncode != 0, what
