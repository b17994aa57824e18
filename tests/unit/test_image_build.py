"""images/build.py's pure parts: which images `--only X` builds (X and its parents, parents first), the
progress lines of a build, and the Slurm release check of a build's package record."""
from __future__ import annotations

import pytest

from images.build import IMAGES, SLURM_RELEASE, _wanted, check_slurm_release, image_ref, step_note
from soperator import __version__
from images.podman import PodmanError


def test_only_operator_builds_no_node_image():
    assert _wanted(["operator"]) == ["operator"]


def test_populate_jail_brings_its_parents_first():
    assert _wanted(["populate-jail"]) == ["node", "jail", "populate-jail"]


def test_no_selection_builds_everything_with_parents_before_children():
    order = _wanted(None)
    assert set(order) == set(IMAGES)
    for name, (_, parents) in IMAGES.items():
        assert all(order.index(p) < order.index(name) for p in parents)


def test_unknown_image_is_named():
    with pytest.raises(PodmanError, match="unknown image.*opertor"):
        _wanted(["opertor"])


@pytest.mark.parametrize("line, note", [
    ("STEP 4/15: RUN apt-get install -y slurmd", "step 4/15: RUN apt-get install -y slurmd"),
    ("STEP 1/9: FROM localhost/soperator/node:0.1.0", "step 1/9: FROM localhost/soperator/node:0.1.0"),
    ("STEP 2/3: RUN " + "x" * 200, "step 2/3: RUN " + "x" * 67 + "…"),  # long commands cut to a line
    ("[1/3] STEP 2/7: RUN make -C /src", "stage 1/3 step 2/7: RUN make -C /src"),  # multi-stage (images/common)
    ("--> Using cache 3f2a…", None),
    ("Get:1 http://deb.debian.org/debian trixie InRelease", None),
])
def test_a_build_line_becomes_a_step_note_or_nothing(line, note):
    assert step_note(line) == note


def test_a_build_that_got_another_slurm_release_fails(tmp_path):
    """forky moves on: an image whose Slurm is not SLURM_RELEASE is refused, naming the package."""
    record = tmp_path / "worker.txt"
    record.write_text("# localhost/soperator/worker:0 inputs=x\nlibc6=2.43-7\nslurmd=27.05.1-1\n")
    with pytest.raises(PodmanError, match=f"slurmd 27.05.1-1 is not Slurm {SLURM_RELEASE}"):
        check_slurm_release(record)
    record.write_text(f"# localhost/soperator/worker:0 inputs=x\nslurmd={SLURM_RELEASE}.5-1\n")
    check_slurm_release(record)


def test_another_slurm_release_builds_its_own_tagged_set_without_an_operator():
    """`--slurm 24.11`: the images a cluster upgrades from, tagged apart; the operator carries no Slurm."""
    assert "operator" not in _wanted(None, "24.11") and _wanted(None, "24.11")[0] == "node"
    assert image_ref("worker", "24.11").endswith(f":{__version__}-slurm24.11")
    assert image_ref("worker") == f"localhost/soperator/worker:{__version__}"
    with pytest.raises(PodmanError, match="operator image carries no Slurm"):
        _wanted(["operator"], "24.11")
