"""The scale rig's hostlists: a thousand pod names in one `scontrol` argument, as Slurm reads them."""
from __future__ import annotations

from tests.support.scale_rig import hostlist


def test_pod_names_fold_into_one_range_expression_per_prefix():
    names = [f"rig-cpu-{i}" for i in (3, 0, 1, 2, 7, 9, 10)] + ["rig-gpu-0", "rig-gpu-5"]
    assert hostlist(names) == ["rig-cpu-[0-3,7,9-10]", "rig-gpu-[0,5]"]
    assert hostlist(["a-b-1"]) == ["a-b-[1]"]
