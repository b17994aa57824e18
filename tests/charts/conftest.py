from tests.kube.conftest import tools  # noqa: F401 - the real helm/kubectl binaries
