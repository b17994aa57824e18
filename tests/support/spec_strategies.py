"""Random SlurmClusters for property tests (hypothesis): `valid_manifests()` draws specs inside every
rule soperator states, across most fields; `DEFECTS` are single changes each of which breaks one rule,
with the field the refusal must name."""
from __future__ import annotations

import copy
from typing import Any, Callable

from hypothesis import strategies as st

from soperator.api.slurm_config import SELECT_FLAGS, SELECT_RESOURCES
from soperator.api.spec import RESERVED_NODE_SET_NAMES

API = {"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster"}
NAME = st.from_regex(r"\A[a-z]([a-z0-9-]{0,14}[a-z0-9])?\Z")
NODE_SET = st.from_regex(r"\A[a-z][a-z0-9]{0,9}\Z").filter(lambda n: n not in RESERVED_NODE_SET_NAMES)
SLURM_NAME = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,11}\Z").filter(lambda n: n.lower() != "default")
MAX_TIME = st.one_of(st.sampled_from(["INFINITE", "UNLIMITED", "1:30:00", "2-00:00:00", "90"]),
                     st.integers(1, 9_999_999).map(str),
                     st.builds(lambda d, h: f"{d}-{h}", st.integers(0, 9999), st.integers(0, 23)))
SIZE = st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 512), st.sampled_from(["Mi", "Gi", "M", "G", ""]))
LABEL = st.from_regex(r"\A([a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?\.example/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?\Z")
LABEL_VALUE = st.from_regex(r"\A(([A-Za-z0-9]([A-Za-z0-9._-]{0,10}[A-Za-z0-9])?))?\Z")
TOLERATION = st.one_of(
    st.builds(lambda: {"operator": "Exists"}),  # a new dict each time: tests change what they draw
    st.builds(lambda k, v, e: {"key": k, "operator": "Equal", "value": v, "effect": e}, LABEL, LABEL_VALUE,
              st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])),
    st.builds(lambda k, s: {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": s},
              LABEL, st.integers(-10, 2**40)))
SELECT_PARAMETERS = st.builds(lambda base, flags: ",".join([base, *flags]),
                              st.sampled_from([r for r in SELECT_RESOURCES]),
                              st.lists(st.sampled_from(SELECT_FLAGS), unique=True, max_size=3)).filter(
    lambda p: not ("CR_ONE_TASK_PER_CORE" in p and p.startswith("CR_CPU")))
MOUNT_PATHS = ["/data", "/scratch", "/home/shared", "/opt/apps", "/datasets", "/work"]


GRES_NAMES = ["nic", "fpga", "ib", "bandwidth"]
GRES_TYPE = st.from_regex(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,11}\Z")


@st.composite
def _gres(draw, gpus: int) -> dict[str, Any]:
    """More gres than GPUs: counted ones, some with their device files (a range or one file), and
    shards where there are GPUs to share."""
    gres, files = [], {}
    for name in draw(st.lists(st.sampled_from(GRES_NAMES), unique=True, max_size=2)):
        key = f"{name}:{draw(GRES_TYPE)}" if draw(st.booleans()) else name
        count = draw(st.integers(1, 4))
        gres.append(f"{key}:{count}")
        if draw(st.booleans()):
            files[key] = f"/dev/{name}/{name}0" if count == 1 else f"/dev/{name}/{name}[0-{count - 1}]"
    if gpus and draw(st.booleans()):
        gres.append(f"shard:{draw(st.integers(1, 16))}")
    return {"gres": gres, "gresFiles": files} if gres else {}


@st.composite
def _node_set(draw, name: str, names: list[str], taken_paths: set[str], max_memory_mib: int) -> dict[str, Any]:
    memory = draw(st.integers(1, max_memory_mib))
    node_set: dict[str, Any] = {"name": name, "replicas": draw(st.integers(0, 3)), "cpus": draw(st.integers(1, 128)),
                                "realMemoryMib": memory}
    if draw(st.booleans()):
        node_set["resources"] = {"requests": {"cpu": draw(st.sampled_from(["100m", "1", "2"]))},
                                 "limits": {"memory": f"{memory + draw(st.integers(0, 4096))}Mi"}}
    gpus = draw(st.integers(0, 2))
    if gpus:
        node_set["gpus"] = gpus
    node_set.update(draw(_gres(gpus)))
    node_set["features"] = draw(st.lists(SLURM_NAME.filter(lambda f: f not in names), unique=True, max_size=2))
    node_set["featuresFromNodeLabels"] = draw(st.lists(LABEL, unique=True, max_size=2))
    node_set["sharedMemorySize"] = draw(SIZE)
    free = [p for p in MOUNT_PATHS if p not in taken_paths]
    paths = draw(st.lists(st.sampled_from(free), unique=True, max_size=2)) if free else []
    if paths and draw(st.booleans()):
        node_set["localVolume"] = {"mountPath": paths.pop(), "size": draw(SIZE)}
    node_set["subMounts"] = [{"name": f"set-{name}-{i}", "mountPath": p, "claimName": f"claim-{i}"} for i, p in enumerate(paths)]
    node_set["scheduling"] = {"nodeSelector": draw(st.dictionaries(LABEL, LABEL_VALUE, max_size=2)),
                              "tolerations": draw(st.lists(TOLERATION, max_size=2))}
    node_set["pyxis"] = {"enabled": draw(st.booleans())}
    node_set["maxUnavailable"] = draw(st.integers(1, 4))
    return node_set


@st.composite
def valid_manifests(draw, max_memory_mib: int = 65536) -> dict[str, Any]:
    """`max_memory_mib`: no node set's RealMemory above it (a real slurmd drains a node configured with
    more memory than its machine has)."""
    jail_paths = draw(st.lists(st.sampled_from(MOUNT_PATHS), unique=True, max_size=2))
    jail_mounts = [{"name": f"jail-{i}", "mountPath": p, "claimName": f"jail-{i}"} for i, p in enumerate(jail_paths)]
    names = draw(st.lists(NODE_SET, min_size=1, max_size=4, unique=True))
    node_sets = [draw(_node_set(n, names, set(jail_paths), max_memory_mib)) for n in names]
    partitions = []
    for i, pname in enumerate(draw(st.lists(SLURM_NAME, min_size=1, max_size=3, unique_by=str.lower))):
        partitions.append({"name": pname, "default": i == 0, "maxTime": draw(MAX_TIME),
                           "nodeSets": draw(st.lists(st.sampled_from(names), unique=True, max_size=len(names)))})
    replicas = sum(n["replicas"] for n in node_sets)
    service = draw(st.sampled_from([{}, {"type": "NodePort"}, {"type": "LoadBalancer",
                                                              "loadBalancerSourceRanges": ["203.0.113.0/24"]}]))
    service["annotations"] = draw(st.dictionaries(LABEL, st.text(max_size=20), max_size=2))
    spec = {
        "nodeSets": node_sets,
        "partitions": partitions,
        "jail": {"subMounts": jail_mounts},
        "login": {"replicas": draw(st.integers(0, 2)), "service": service},
        "controller": {"spool": {"size": draw(SIZE)}},
        "slurmConfig": {
            "selectTypeParameters": draw(SELECT_PARAMETERS),
            "slurmdTimeout": draw(st.integers(1, 65535)),
            "messageTimeout": draw(st.integers(1, 100)),
            "killWait": draw(st.integers(0, 65535)),
            "minJobAge": draw(st.integers(2, 2**32 - 1)),
            "maxJobCount": draw(st.integers(1, 0x03FF0000)),
            "resumeTimeout": draw(st.integers(30, 65535)),
            "maxNodeCount": draw(st.integers(max(replicas, 1), 65536 - len(node_sets))),
            # What a slurmctld alone in a test container runs with.
            "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none",
        },
        "maintenance": draw(st.booleans()),
    }
    if draw(st.booleans()):
        spec["healthCheck"] = {"program": "/usr/bin/true", "interval": draw(st.integers(1, 65535))}
    if draw(st.booleans()):
        uris = draw(st.lists(st.sampled_from(["ldaps://ldap.example.org", "ldap://10.0.0.7:3389",
                                              "ldaps://dir-2.example.org:1636"]), min_size=1, max_size=3, unique=True))
        spec["identity"] = {"ldap": {"uris": uris, "startTls": True, "searchBase": "ou=hpc,dc=example,dc=org",
                                     "userFilter": draw(st.sampled_from(["(uid=*)", "(&(uid=*)(!(uid=svc-*)))"]))},
                            "cacheSeconds": draw(st.integers(10, 86400))}
        if "ldap://10.0.0.7:3389" in uris:  # a private address: the egress policy must let SSSD reach it
            spec["identity"]["ldap"]["egressCidrs"] = [draw(st.sampled_from(["10.0.0.7/32", "10.0.0.0/24"]))]
    labels = draw(st.dictionaries(LABEL, LABEL_VALUE, max_size=2))
    return {**API, "metadata": {"name": draw(NAME), "labels": labels}, "spec": spec}


def _set(path: tuple, value: Any) -> Callable[[dict], dict]:
    def change(manifest: dict) -> dict:
        out = copy.deepcopy(manifest)
        node = out
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
        return out
    return change


def _field(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


# (what the change does, the change, the field the refusal names)
DEFECTS: list[tuple[str, Callable[[dict], dict], str]] = [
    (f"{'.'.join(map(str, p))}={v!r}", _set(p, v), _field((*p, *below))) for p, v, *below in [
        (("spec", "nodeSets", 0, "replicas"), -1),
        (("spec", "nodeSets", 0, "replicas"), 2.5),
        (("spec", "nodeSets", 0, "replicas"), "3"),
        (("spec", "nodeSets", 0, "name"), "database"),
        (("spec", "nodeSets", 0, "cpus"), 0),
        (("spec", "nodeSets", 0, "realMemoryMib"), 2**64),
        (("spec", "nodeSets", 0, "sharedMemorySize"), "0"),
        (("spec", "nodeSets", 0, "sharedMemorySize"), "1e9999999"),
        (("spec", "nodeSets", 0, "sharedMemorySize"), "64Mi\n"),
        (("spec", "nodeSets", 0, "image"), "registry.example.com/a.-b:1"),
        (("spec", "nodeSets", 0, "scheduling", "nodeSelector"), {"bad key": "x"}),
        (("spec", "nodeSets", 0, "featuresFromNodeLabels"), ["topology.kubernetes.io/zone"] * 2),
        (("spec", "nodeSets", 0, "featuresFromNodeLabels"), ["zone=a"], 0),
        (("spec", "nodeSets", 0, "scheduling", "tolerations"), [{"operator": "Equal", "value": "x"}], 0, "operator"),
        (("spec", "nodeSets", 0, "resources"), {"requests": {"cpus": "1"}}, "requests", "cpus"),
        (("spec", "slurmConfig", "selectTypeParameters"), "CR_Core_Memroy"),
        (("spec", "slurmConfig", "slurmdTimeout"), 65536),
        (("spec", "slurmConfig", "maxJobCount"), 2**32),
        (("spec", "slurmConfig", "maxNodeCount"), 65536),
        (("spec", "slurmConfig", "selectType"), "select/linear"),
        (("spec", "partitions", 0, "maxTime"), "99999999"),
        (("spec", "controller", "spool", "size"), 0),
        (("spec", "node_sets"), []),
        (("spec", "login", "service", "annotations"), {"a b": "c"}),
        (("spec", "identity"), {"ldap": {"uris": ["ldap://ldap.example.org"], "searchBase": "dc=example,dc=org"}},
         "ldap", "uris"),
        (("metadata", "name"), "Bad"),
    ]]


# Any JSON value, for changes that must never crash the parser.
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
                    max_leaves=10)
