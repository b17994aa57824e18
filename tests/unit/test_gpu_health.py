"""The jail's GPU check (images/jail/gpu_health.py) as a table: nvidia-smi's CSV answers in, the
reasons out; and its run on this machine, which has no NVIDIA driver."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.support_paths import ROOT

SCRIPT = ROOT / "images" / "jail" / "gpu_health.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_health", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.dont_write_bytecode, before = True, sys.dont_write_bytecode  # nothing written into the image's directory
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


gpu_health = _module()
# As `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` prints them.
HEALTHY = "0, 00000000:07:00.0, 0, No\n1, 00000000:0F:00.0, 0, No\n"
NO_REMAP = "0, [N/A], [N/A]\n1, [N/A], [N/A]\n"


@pytest.mark.parametrize("gpus,remap,expected,found", [
    (HEALTHY, NO_REMAP, 2, []),
    (HEALTHY, NO_REMAP, None, []),
    (HEALTHY, NO_REMAP, 8, ["2 of 8 GPUs answer"]),
    ("0, 00000000:07:00.0, [N/A], [N/A]\n", "", 1, []),  # no ECC on this GPU: nothing to say
    ("0, 00000000:07:00.0, 0, No\n1, 00000000:0F:00.0, 3, Yes\n", NO_REMAP, 2,
     ["gpu 1 (00000000:0F:00.0): 3 uncorrected ECC errors", "gpu 1 (00000000:0F:00.0): retired pages pending, reset it"]),
    (HEALTHY, "0, No, No\n1, Yes, No\n", 2, ["gpu 1: remapped rows pending, reset it"]),
    (HEALTHY, "0, Yes, Yes\n1, No, No\n", 2, ["gpu 0: row remapping failed"]),
])
def test_what_nvidia_smi_says_becomes_the_reason(gpus, remap, expected, found):
    assert gpu_health.problems(gpu_health.parse(gpus), gpu_health.parse(remap), expected) == found


def test_without_a_driver_it_fails_saying_so_on_its_last_line():
    proc = subprocess.run([sys.executable, "-B", str(SCRIPT)], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "SOPERATOR_NODE_GPUS": "8"})
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-1] == "no NVIDIA driver in the jail: nvidia-smi not found"
