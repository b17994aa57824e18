"""The malformed-manifest corpus against the real apiserver with the generated CRD: a server-side
dry-run create gives the same verdict as `soperator validate`, naming the same field, except where the
corpus file says the schema cannot express the rule (then the operator refuses it: test_operator)."""
from __future__ import annotations

import pytest

from tests.support.bad_corpus import CASES

pytestmark = pytest.mark.kube


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_apiserver_agrees_with_the_cli(kubectl, crd_installed, case):
    # A dry run stores nothing, so the object's own namespace (or the default one) is fine.
    proc = kubectl("create", "--dry-run=server", "-f", str(case.path), check=False)
    if case.api in ("accepts", "file-only"):
        assert proc.returncode == 0, f"{case.name} is now refused; drop its '{case.api}' header:\n{proc.stderr}"
        return
    assert proc.returncode != 0, f"the apiserver accepted {case.name}"
    if case.api == "refuses":
        assert case.api_error_at in proc.stderr, proc.stderr[:2000]
