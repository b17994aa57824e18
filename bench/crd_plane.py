"""A real control plane with the CRD installed and one namespace, for the benches that need no node."""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from soperator.kube import Kube
from tests.cluster.controlplane import ControlPlane
from tests.cluster.tools import ensure_tools
from tests.kube.conftest import Kubectl, _configuration, install_crd


@contextlib.contextmanager
def crd_plane(namespace: str) -> Iterator[tuple[ControlPlane, Kubectl, Kube, Path]]:
    """(plane, kubectl, kube, a work directory); all of it stopped and removed afterwards."""
    from kubernetes import client

    work = Path(tempfile.mkdtemp(prefix="soperator-bench-"))
    plane = ControlPlane(work / "cp").start()
    try:
        kubectl = Kubectl(ensure_tools()["kubectl"], plane.kubeconfig)
        install_crd(kubectl)
        kubectl("create", "namespace", namespace)
        yield plane, kubectl, Kube(client.ApiClient(configuration=_configuration(plane))), work
    finally:
        plane.stop()
        shutil.rmtree(work, ignore_errors=True)
