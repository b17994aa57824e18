"""Which images `python -m images.build --only X` builds: X and what it is built FROM, parents first."""
from __future__ import annotations

import pytest

from images.build import IMAGES, _wanted, step_note
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
