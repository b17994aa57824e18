"""Renderer properties: deterministic, labelled, owned; what a change (scale, Slurm settings, sshd) replaces."""
import base64
import json

import pytest
from pydantic import ValidationError

from soperator.api.spec import NodeSetSpec
from soperator.api.validate import SpecError
from soperator.node.layout import CONFIG_HASH_ANNOTATION, ENV
from soperator.node.mounts import LOGIN, WORKER
from soperator.render import render_all
from soperator.render.configs import Storage, slurm_files, slurmdbd_conf, worker_node_conf
from soperator.render.populate_jail import populate_jail_job
from soperator.render.seccomp_profile import pyxis_worker_profile_path
from soperator.render.worker import worker_security_context
from soperator.yamlio import dump_all
from tests.conftest import make_cluster

UID = "0b5d2f8e-1111-2222-3333-444455556666"
# Each job's private tmp and shm directories (spank_chroot/job_dirs.c), named on the plugin's line.
JOB_DIRS = " job_tmp=/var/lib/soperator/job-tmp job_shm=/dev/shm/.soperator-jobs"


def _by_kind_name(objects):
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def _hash(objects, name):
    return _by_kind_name(objects)[("StatefulSet", name)]["spec"]["template"]["metadata"]["annotations"][
        CONFIG_HASH_ANNOTATION]


def test_output_is_byte_identical_across_renders(example, keys):
    assert dump_all(render_all(example, keys)) == dump_all(render_all(example, keys))


def test_every_object_is_labelled_namespaced_and_owned(keys):
    cluster = make_cluster(uid=UID)
    objects = render_all(cluster, keys)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "ConfigMap", "Job", "NetworkPolicy", "NetworkPolicy", "PodDisruptionBudget",
                     "PodDisruptionBudget", "PodDisruptionBudget",
                     "Secret", "Secret", "Secret", "Service", "Service", "Service", "Service", "Service",
                     "StatefulSet", "StatefulSet", "StatefulSet"]
    for obj in objects:
        meta = obj["metadata"]
        assert meta["namespace"] == "hpc"
        assert meta["labels"]["app.kubernetes.io/instance"] == "demo"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "soperator"
        assert meta["labels"]["app.kubernetes.io/name"] == "slurm"
        assert meta["ownerReferences"] == [{"apiVersion": "slurm.soperator.dev/v1alpha1", "kind": "SlurmCluster",
                                            "name": "demo", "uid": UID, "controller": True,
                                            "blockOwnerDeletion": True}]


def test_apply_order_secrets_configs_job_then_nodes(keys):
    kinds = [o["kind"] for o in render_all(make_cluster(), keys)]
    assert kinds.index("Job") > max(i for i, k in enumerate(kinds) if k in ("Secret", "ConfigMap"))
    assert kinds.index("Job") < kinds.index("StatefulSet")


def test_render_prints_accounting_in_the_operators_order(keys):
    """Key Secrets, then accounting (slurmdbd.conf's Secret, the database, slurmdbd), then the rest:
    the order the operator applies them in. Without the password, slurmdbd's StatefulSet (which names
    its config Secret by a hash of the file, password included) is left out, and said so by the CLI."""
    from soperator.render import slurmdbd_left_out

    cluster = make_cluster(accounting={"enabled": True, "managed": {"claimName": "acct-db"}})
    names = [(o["kind"], o["metadata"]["name"]) for o in render_all(cluster, keys)]
    accounting = [("Secret", "demo-db-password"), ("Service", "demo-database"), ("NetworkPolicy", "demo-database-ingress"),
                  ("StatefulSet", "demo-database"), ("Service", "demo-slurmdbd"), ("StatefulSet", "demo-slurmdbd")]
    assert [n for n in names if n in accounting] == accounting
    conf = [n for n in names if n[1].startswith("demo-slurmdbd-conf-")]
    assert len(conf) == 1 and names.index(conf[0]) < names.index(("StatefulSet", "demo-slurmdbd"))
    assert names.index(("StatefulSet", "demo-slurmdbd")) < names.index(("ConfigMap", "demo-slurm-configs"))
    without = [(o["kind"], o["metadata"]["name"]) for o in render_all(cluster, None)]
    assert ("StatefulSet", "demo-database") in without and ("StatefulSet", "demo-slurmdbd") not in without
    assert not [n for n in without if n[0] == "Secret"] and slurmdbd_left_out(cluster, None)
    assert not slurmdbd_left_out(cluster, keys) and not slurmdbd_left_out(make_cluster(), None)


def test_key_material_goes_into_secrets_unchanged(keys):
    objects = _by_kind_name(render_all(make_cluster(), keys))
    munge = objects[("Secret", "demo-munge-key")]["data"]["munge.key"]
    assert base64.b64decode(munge) == keys.munge_key and len(keys.munge_key) == 1024
    host = objects[("Secret", "demo-ssh-host-keys")]["data"]
    assert base64.b64decode(host["ssh_host_ed25519_key.pub"]).decode().startswith("ssh-ed25519 ")
    assert set(host) == {f"ssh_host_{t}_key{s}" for t in ("ed25519", "ecdsa", "rsa") for s in ("", ".pub")}


def test_user_supplied_secrets_are_referenced_not_generated(keys):
    cluster = make_cluster(secrets={"mungeKey": "site-munge", "sshHostKeys": "site-ssh", "jwtKey": "site-jwt"})
    objects = render_all(cluster, keys)
    assert not [o for o in objects if o["kind"] == "Secret"]
    text = json.dumps(objects)
    assert all(f'"secretName": "site-{k}"' in text for k in ("munge", "ssh", "jwt"))


def test_slurm_conf_lists_no_worker_but_a_placeholder_per_node_set_and_partitions_take_node_sets():
    conf = slurm_files(make_cluster(nodeSets=[{"name": "cpu", "replicas": 5, "features": ["fast"]}, {"name": "gpu"}],
                                    partitions=[{"name": "main", "default": True},
                                                {"name": "quick", "nodeSets": ["gpu"]}]))["slurm.conf"]
    # No worker: only each node set's FUTURE placeholder, with the workers' registration line.
    assert [ln for ln in conf.splitlines() if ln.startswith("NodeName=")] == [
        "NodeName=demo-cpu-future Feature=cpu,fast CPUs=1 RealMemory=1024 State=FUTURE",
        "NodeName=demo-gpu-future Feature=gpu CPUs=1 RealMemory=1024 State=FUTURE"]
    assert "NodeSet=cpu Feature=cpu\nNodeName=demo-cpu-future" in conf and "\nNodeSet=gpu Feature=gpu\n" in conf
    assert "PartitionName=main Nodes=cpu,gpu Default=YES" in conf
    assert "PartitionName=quick Nodes=gpu Default=NO" in conf
    # Room for maxNodeCount (1024) dynamic workers besides the two placeholders.
    assert "SlurmctldParameters=enable_configless\n" in conf and "MaxNodeCount=1026\n" in conf
    assert ("AuthAltTypes=auth/jwt\nAuthAltParameters=jwt_key=/run/slurmctld-jwt/jwt_hs256.key,disable_token_creation\n"
            in conf)


def test_each_node_set_is_its_own_statefulset_and_scaling_one_touches_only_it(keys):
    two = [{"name": "cpu", "replicas": 2}, {"name": "gpu", "replicas": 1, "gpus": 1}]
    before = render_all(make_cluster(nodeSets=two), keys)
    after = render_all(make_cluster(nodeSets=[{**two[0], "replicas": 1000}, two[1]]), keys)
    changed = [(a["kind"], a["metadata"]["name"]) for a, b in zip(before, after) if a != b]
    assert changed == [("StatefulSet", "demo-cpu")]
    objects = _by_kind_name(after)
    cpu, gpu = objects[("StatefulSet", "demo-cpu")], objects[("StatefulSet", "demo-gpu")]
    assert cpu["spec"]["replicas"] == 1000 and gpu["spec"]["replicas"] == 1
    # Selectors apart, one headless Service for both (pods resolve under one search domain).
    assert cpu["spec"]["selector"]["matchLabels"]["slurm.soperator.dev/node-set"] == "cpu"
    assert gpu["spec"]["template"]["metadata"]["labels"]["slurm.soperator.dev/node-set"] == "gpu"
    assert cpu["spec"]["serviceName"] == gpu["spec"]["serviceName"] == "demo-worker"
    assert "nvidia.com/gpu" not in json.dumps(cpu) and "nvidia.com/gpu" in json.dumps(gpu)


def test_a_node_set_brings_its_image_volumes_and_local_scratch():
    cluster = make_cluster(jail={"subMounts": [{"name": "home", "mountPath": "/home", "claimName": "home"}]},
                           nodeSets=[{"name": "fat", "image": "registry.example.com/hpc/worker:2",
                                      "subMounts": [{"name": "data", "mountPath": "/data", "claimName": "data",
                                                     "readOnly": True}],
                                      "localVolume": {"mountPath": "/local", "size": "2Ti",
                                                      "storageClassName": "nvme"}}, {"name": "thin"}])
    objects = _by_kind_name(render_all(cluster, None))
    fat, thin = objects[("StatefulSet", "demo-fat")]["spec"], objects[("StatefulSet", "demo-thin")]["spec"]
    container = fat["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/hpc/worker:2"
    assert thin["template"]["spec"]["containers"][0]["image"].startswith("localhost/soperator/worker:")
    mounts = {m["name"]: (m["mountPath"], m.get("readOnly")) for m in container["volumeMounts"]}
    assert mounts["jail-sub-home"] == ("/mnt/jail/home", False)
    assert mounts["jail-sub-data"] == ("/mnt/jail/data", True) and mounts["local"] == ("/mnt/jail/local", False)
    assert fat["volumeClaimTemplates"] == [{"metadata": {"name": "local"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Ti"}}, "storageClassName": "nvme"}}]
    assert "volumeClaimTemplates" not in thin and "jail-sub-data" not in json.dumps(thin)


def test_a_slurm_setting_change_replaces_no_pod(keys):
    """Configless: the ConfigMap changes and the controller reconfigures; no pod template changes."""
    before = render_all(make_cluster(), keys)
    after = render_all(make_cluster(slurmConfig={"slurmdTimeout": 45}, partitions=[{"name": "main", "maxTime": "60"}],
                                    cgroupConfig={"extra": {"AllowedRAMSpace": "90"}}), keys)
    changed = [(a["kind"], a["metadata"]["name"]) for a, b in zip(before, after) if a != b]
    assert changed == [("ConfigMap", "demo-slurm-configs")]


def test_workers_register_with_what_the_spec_gives_their_pods():
    cluster = make_cluster(nodeSets=[{"name": "a100", "cpus": 8, "realMemoryMib": 64000, "gpus": 4,
                                      "gres": ["shard:16"], "features": ["ib"]}])
    sts = _by_kind_name(render_all(cluster, None))[("StatefulSet", "demo-a100")]
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SOPERATOR_SLURMD_CONF"] == "Feature=a100,ib CPUs=8 RealMemory=64000 Gres=gpu:4,shard:16"
    assert env["SOPERATOR_CONF_SERVER"] == "demo-controller-0:6817"
    assert {v["name"] for v in sts["spec"]["template"]["spec"]["volumes"]} == {"munge-key", "jail", "spool", "shm", "job-tmp"}


def test_a_worker_pod_is_limited_to_its_real_memory_and_shm_and_daemons_unless_the_spec_says():
    sets = [{"name": "a100", "realMemoryMib": 64000, "gpus": 4, "sharedMemorySize": "1Gi"},
            {"name": "own", "resources": {"limits": {"memory": "8Gi", "cpu": "4"}}},
            {"name": "big-request", "resources": {"requests": {"memory": "100Gi"}}}]
    objects = _by_kind_name(render_all(make_cluster(nodeSets=sets), None))
    limits = {name: objects[("StatefulSet", f"demo-{name}")]["spec"]["template"]["spec"]["containers"][0]["resources"]
              for name in ("a100", "own", "big-request")}
    assert limits["a100"] == {"limits": {"memory": f"{64000 + 1024 + 512}Mi", "nvidia.com/gpu": "4"}}
    assert limits["own"] == {"limits": {"cpu": "4", "memory": "8Gi"}}
    assert limits["big-request"] == {"requests": {"memory": "100Gi"}, "limits": {"memory": "102400Mi"}}


def test_workers_bind_users_tasks_to_cpus_only_with_task_affinity(keys):
    """slurmstepd's sched_setaffinity on a task that already runs as the job's user needs CAP_SYS_NICE."""
    def added(task_plugin: str, component: str) -> list[str]:
        objects = _by_kind_name(render_all(make_cluster(slurmConfig={"taskPlugin": task_plugin}), keys))
        container = objects[("StatefulSet", f"demo-{component}")]["spec"]["template"]["spec"]["containers"][0]
        return container["securityContext"]["capabilities"]["add"]

    assert "SYS_NICE" in added("task/cgroup,task/affinity", "worker")
    assert "SYS_NICE" not in added("task/cgroup", "worker")
    assert "SYS_NICE" not in added("task/cgroup,task/affinity", "login")


def test_only_a_node_set_without_host_users_runs_in_a_user_namespace_with_proc_unmasked(keys):
    """The jail plugin mounts a procfs for each step, which a user namespace allows only where the
    runtime's masks do not cover /proc (the plugin masks its own)."""
    cluster = make_cluster(nodeSets=[{"name": "own", "hostUsers": False}, {"name": "shared"}])
    objects = _by_kind_name(render_all(cluster, keys))
    own = objects[("StatefulSet", "demo-own")]["spec"]["template"]["spec"]
    shared = objects[("StatefulSet", "demo-shared")]["spec"]["template"]["spec"]
    assert own["hostUsers"] is False and own["containers"][0]["securityContext"]["procMount"] == "Unmasked"
    assert "hostUsers" not in shared and "procMount" not in shared["containers"][0]["securityContext"]
    for name in ("demo-controller", "demo-login"):
        assert "hostUsers" not in objects[("StatefulSet", name)]["spec"]["template"]["spec"]


def test_login_pods_run_in_a_user_namespace_with_proc_unmasked_only_when_asked(keys):
    """Each ssh session gets its own procfs from the jail plugin, as a step does: unmasked /proc, which
    Kubernetes allows only with a user namespace."""
    def login(**spec) -> dict:
        objects = _by_kind_name(render_all(make_cluster(**spec), keys))
        return objects[("StatefulSet", "demo-login")]["spec"]["template"]["spec"]

    own, shared = login(login={"hostUsers": False}), login()
    assert own["hostUsers"] is False and own["containers"][0]["securityContext"]["procMount"] == "Unmasked"
    assert "hostUsers" not in shared and "procMount" not in shared["containers"][0]["securityContext"]
    assert {k: v for k, v in own["containers"][0]["securityContext"].items() if k != "procMount"} == \
        shared["containers"][0]["securityContext"]


def test_a_user_namespaced_pyxis_worker_may_map_root_and_names_its_node_when_it_mounts_images(keys):
    """enroot maps a container's root to the step's (0 to 0 for root): since Linux 5.12 that map needs
    CAP_SETFCAP, which only user-namespaced Pyxis workers get (a capability of their own user namespace).
    Mounting images there needs the node's /dev/fuse open to the pod: the worker names its node when not."""
    sets = [{"name": "own", "hostUsers": False, "pyxis": {"enabled": True}}, {"name": "shared", "pyxis": {"enabled": True}},
            {"name": "plain", "hostUsers": False}]

    def containers(mount_images: bool) -> dict:
        cluster = make_cluster(nodeSets=sets, slurmConfig={"proctrackType": "proctrack/linuxproc", "taskPlugin": "task/none"},
                               plugStack={"pyxis": {"mountImages": mount_images}})
        objects = _by_kind_name(render_all(cluster, keys))
        return {n["name"]: objects[("StatefulSet", f"demo-{n['name']}")]["spec"]["template"]["spec"]["containers"][0]
                for n in sets}

    for mount_images in (False, True):
        seen = containers(mount_images)
        caps = {name: c["securityContext"]["capabilities"]["add"] for name, c in seen.items()}
        assert "SETFCAP" in caps["own"] and "SETFCAP" not in caps["shared"] and "SETFCAP" not in caps["plain"]
        named = {name for name, c in seen.items() if any(e["name"] == "SOPERATOR_NODE_NAME" for e in c["env"])}
        assert named == ({"own"} if mount_images else set())


def test_a_pyxis_node_set_may_name_another_installed_profile_or_none():
    def profile(seccomp: dict) -> dict:
        node_set = NodeSetSpec.model_validate({"name": "b", "pyxis": {"enabled": True, "seccompProfile": seccomp}})
        return worker_security_context(make_cluster(), node_set)["seccompProfile"]

    assert profile({"localhostProfile": "site/seccomp/enroot.json"}) == {
        "type": "Localhost", "localhostProfile": "site/seccomp/enroot.json"}
    assert profile({"type": "Unconfined"}) == {"type": "Unconfined"}
    for bad in ({"type": "Unconfined", "localhostProfile": "a.json"}, {"localhostProfile": "../a.json"},
                {"localhostProfile": "/var/lib/a.json"}, {"type": "RuntimeDefault"}):
        with pytest.raises(ValidationError, match="seccompProfile"):
            profile(bad)


def test_an_sshd_change_rolls_only_login(keys):
    key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ1aXhiSl5sMPz9ViyQz1O0aVd9hP0N1T9YvYzVZ8v0m x"
    before = render_all(make_cluster(), keys)
    after = render_all(make_cluster(login={"rootSshPublicKeys": [key]}), keys)
    assert _hash(before, "demo-login") != _hash(after, "demo-login")
    changed = {(a["kind"], a["metadata"]["name"]) for a, b in zip(before, after) if a != b}
    assert changed == {("ConfigMap", "demo-sshd-config"), ("StatefulSet", "demo-login")}


def test_gpu_workers_get_gres_and_device_limits():
    cluster = make_cluster(nodeSets=[{"name": "gpu", "replicas": 4, "gpus": 8, "gres": ["shard:16"]},
                                     {"name": "cpu"}])
    files = slurm_files(cluster)
    assert "GresTypes=gpu,shard" in files["slurm.conf"]
    # The pod's GPUs are whatever the device plugin gave it: slurmd finds them itself; CPU node sets
    # do not look for any (a 26.05 dynamic slurmd would register the GPUs of the host it lands on).
    lines = [line for line in files["gres.conf"].splitlines() if not line.startswith("#")]
    assert lines == ["NodeName=demo-gpu-[0-1023] AutoDetect=nvml", "NodeName=demo-cpu-[0-1023] AutoDetect=off"]
    assert "File=" not in files["gres.conf"]
    sts = _by_kind_name(render_all(cluster, None))[("StatefulSet", "demo-gpu")]
    assert sts["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_a_gres_with_device_files_gets_them_in_gres_conf():
    """With ConstrainDevices, Slurm opens to a job only the files of the gres it was given: the files
    must be in gres.conf (and its type, if the entry has one)."""
    cluster = make_cluster(nodeSets=[{"name": "cpu", "gres": ["testdev:1", "nic:mlx:2"],
                                      "gresFiles": {"testdev": "/dev/full", "nic:mlx": "/dev/infiniband/uverbs[0-1]"}}])
    lines = [line for line in slurm_files(cluster)["gres.conf"].splitlines() if not line.startswith("#")]
    assert lines == ["NodeName=demo-cpu-[0-1023] AutoDetect=off",
                     "NodeName=demo-cpu-[0-1023] Name=nic Type=mlx File=/dev/infiniband/uverbs[0-1]",
                     "NodeName=demo-cpu-[0-1023] Name=testdev File=/dev/full"]


def test_workers_ready_their_cgroups_only_where_a_plugin_uses_them():
    def env(cluster):
        sts = _by_kind_name(render_all(cluster, None))[("StatefulSet", "demo-cpu")]
        return {e["name"]: e.get("value", e.get("valueFrom")) for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}

    confined = env(make_cluster(nodeSets=[{"name": "cpu"}]))
    assert confined["SOPERATOR_SLURM_CGROUPS"] == "true"
    assert confined["SOPERATOR_NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    portable = env(make_cluster(nodeSets=[{"name": "cpu"}], slurmConfig={
        "proctrackType": "proctrack/linuxproc", "taskPlugin": "task/affinity"}))
    assert "SOPERATOR_SLURM_CGROUPS" not in portable and "SOPERATOR_NODE_NAME" not in portable


PYXIS_SETS = [{"name": "cpu", "replicas": 1},
              {"name": "gpu", "replicas": 1, "pyxis": {"enabled": True, "storageSize": "20Gi",
                                                       "enrootConfig": {"ENROOT_SQUASH_OPTIONS": "-comp zstd"},
                                                       "registryCredentialsSecret": "pull"}}]


def test_plugstack_is_required_and_pyxis_follows_the_jail_when_a_node_set_has_it():
    plain = slurm_files(make_cluster())["plugstack.conf"]
    assert f"required /opt/soperator/lib/spank_chroot.so /mnt/jail{JOB_DIRS}" in plain and "pyxis" not in plain
    lines = [line for line in slurm_files(make_cluster(nodeSets=PYXIS_SETS))["plugstack.conf"].splitlines()
             if line.startswith("required")]
    assert lines == [f"required /opt/soperator/lib/spank_chroot.so /mnt/jail{JOB_DIRS}",
                     "required /usr/local/lib/slurm/spank_pyxis.so container_scope=global runtime_path=/run/pyxis "
                     "importer=/opt/soperator/pyxis/importer"]


def test_only_a_node_set_with_pyxis_gets_enroot_its_volume_and_its_own_seccomp_profile():
    objects = _by_kind_name(render_all(make_cluster(nodeSets=PYXIS_SETS), None))
    plain = objects[("StatefulSet", "demo-cpu")]["spec"]["template"]["spec"]
    gpu = objects[("StatefulSet", "demo-gpu")]["spec"]["template"]["spec"]
    assert plain["containers"][0]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not any(e["name"] == "SOPERATOR_ENROOT_CONF" for e in plain["containers"][0]["env"])
    assert {v["name"] for v in plain["volumes"]}.isdisjoint({"enroot", "enroot-credentials"})
    container = gpu["containers"][0]
    assert container["securityContext"]["seccompProfile"] == {"type": "Localhost",
                                                              "localhostProfile": pyxis_worker_profile_path()}
    # One more capability, for the bounding set only: enroot's imports make whiteouts with mknod.
    plain_caps = plain["containers"][0]["securityContext"]["capabilities"]
    assert container["securityContext"]["capabilities"] == {**plain_caps, "add": sorted([*plain_caps["add"], "MKNOD"])}
    conf = next(e["value"] for e in container["env"] if e["name"] == "SOPERATOR_ENROOT_CONF")
    settings = dict(line.split(" ", 1) for line in conf.splitlines() if line and not line.startswith("#"))
    assert settings == {"ENROOT_RUNTIME_PATH": "/run/enroot/user-$(id -u)/runtime",
                        "ENROOT_DATA_PATH": "/run/enroot/user-$(id -u)/data",
                        "ENROOT_CACHE_PATH": "/run/enroot/user-$(id -u)/cache", "ENROOT_TEMP_PATH": "/tmp",
                        "ENROOT_CONFIG_PATH": "/etc/soperator/enroot", "ENROOT_SQUASH_OPTIONS": "-comp zstd"}
    volumes = {v["name"]: v for v in gpu["volumes"]}
    assert volumes["enroot"] == {"name": "enroot", "emptyDir": {"sizeLimit": "20Gi"}}
    assert volumes["enroot-credentials"]["secret"]["secretName"] == "pull"
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {"/run/enroot", "/etc/soperator/enroot"}


def test_mounted_images_give_pyxis_workers_dev_fuse_and_pyxis_its_squashfuse_option():
    cluster = make_cluster(nodeSets=PYXIS_SETS, plugStack={"pyxis": {"mountImages": True}})
    pyxis = [line for line in slurm_files(cluster)["plugstack.conf"].splitlines() if "spank_pyxis" in line]
    assert pyxis == ["required /usr/local/lib/slurm/spank_pyxis.so container_scope=global runtime_path=/run/pyxis "
                     "importer=/opt/soperator/pyxis/importer use_squashfuse=1"]
    objects = _by_kind_name(render_all(cluster, None))
    limits = {name: objects[("StatefulSet", f"demo-{name}")]["spec"]["template"]["spec"]["containers"][0]
              ["resources"].get("limits", {}) for name in ("cpu", "gpu")}
    assert limits["gpu"]["soperator.dev/fuse"] == "1" and "soperator.dev/fuse" not in limits["cpu"]
    # Off (the default): no device, and Pyxis unpacks.
    unpacked = _by_kind_name(render_all(make_cluster(nodeSets=PYXIS_SETS), None))
    assert "soperator.dev/fuse" not in unpacked[("StatefulSet", "demo-gpu")]["spec"]["template"]["spec"][
        "containers"][0]["resources"].get("limits", {})


def _cache_env(node_sets: list[dict]) -> dict[str, str | None]:
    objects = _by_kind_name(render_all(make_cluster(nodeSets=node_sets), None))
    found = {}
    for node_set in node_sets:
        env = objects[("StatefulSet", f"demo-{node_set['name']}")]["spec"]["template"]["spec"]["containers"][0]["env"]
        found[node_set["name"]] = next((e["value"] for e in env if e["name"] == "SOPERATOR_IMAGE_CACHE_BYTES"), None)
    return found


def test_pyxis_workers_get_an_image_cache_of_the_size_the_spec_gives_unless_it_is_off():
    assert _cache_env(PYXIS_SETS) == {"cpu": None, "gpu": str(10 * 2**30)}  # the default: half of 20Gi
    sized = [{"name": "gpu", "pyxis": {"enabled": True, "imageCache": {"size": "1500Mi"}}},
             {"name": "off", "pyxis": {"enabled": True, "imageCache": {"enabled": False}}}]
    assert _cache_env(sized) == {"gpu": str(1500 * 2**20), "off": None}
    # MKNOD (the cache's imports make whiteouts) only where there is a cache.
    objects = _by_kind_name(render_all(make_cluster(nodeSets=sized), None))
    caps = {name: objects[("StatefulSet", f"demo-{name}")]["spec"]["template"]["spec"]["containers"][0]
            ["securityContext"]["capabilities"]["add"] for name in ("gpu", "off")}
    assert "MKNOD" in caps["gpu"] and "MKNOD" not in caps["off"]


def test_image_cache_imports_hold_mksquashfs_caches_and_their_worker_has_room_for_them():
    sets = [{"name": "plain"},
            {"name": "cached", "pyxis": {"enabled": True}},  # the cache is on by default
            {"name": "zstd", "pyxis": {"enabled": True, "enrootConfig": {"ENROOT_SQUASH_OPTIONS": "-comp zstd"}}},
            {"name": "sized", "pyxis": {"enabled": True, "enrootConfig": {"ENROOT_SQUASH_OPTIONS": "-mem 2G"}}},
            {"name": "off", "pyxis": {"enabled": True, "imageCache": {"enabled": False}}}]
    objects = _by_kind_name(render_all(make_cluster(nodeSets=sets), None))
    containers = {s["name"]: objects[("StatefulSet", f"demo-{s['name']}")]["spec"]["template"]["spec"]["containers"][0]
                  for s in sets}
    options = {name: next((e["value"] for e in c["env"] if e["name"] == "SOPERATOR_IMAGE_IMPORT_SQUASH_OPTIONS"), None)
               for name, c in containers.items()}
    assert options == {"plain": None, "cached": "-comp lzo -noD -exit-on-error -mem 128M",
                       "zstd": "-comp zstd -mem 128M", "sized": "-mem 2G", "off": None}
    memory = {name: int(c["resources"]["limits"]["memory"].removesuffix("Mi")) for name, c in containers.items()}
    assert memory["off"] == memory["plain"] and memory["cached"] == memory["plain"] + 2 * (128 + 64)


def test_an_image_cache_larger_than_its_volume_is_refused_naming_the_field():
    with pytest.raises(SpecError) as refused:
        make_cluster(nodeSets=[{"name": "gpu", "pyxis": {"enabled": True, "storageSize": "10Gi",
                                                         "imageCache": {"size": "11Gi"}}}])
    assert "spec.nodeSets[0].pyxis.imageCache.size" in str(refused.value) and "storageSize" in str(refused.value)


@pytest.mark.parametrize("config,field", [({"ENROOT_DATA_PATH": "/jail/shared"}, "ENROOT_DATA_PATH"),
                                          ({"ENROOT_SQUASH_OPTIONS": "$(touch /x)"}, "ENROOT_SQUASH_OPTIONS"),
                                          ({"PATH": "/x"}, "enrootConfig")])
def test_enroot_settings_refuse_paths_shell_and_other_keys(config, field):
    with pytest.raises(SpecError) as refused:
        make_cluster(nodeSets=[{"name": "gpu", "pyxis": {"enabled": True, "enrootConfig": config}}])
    assert "spec.nodeSets[0].pyxis.enrootConfig" in str(refused.value) and field in str(refused.value)


def test_login_service_follows_the_spec():
    cluster = make_cluster(login={"service": {"type": "LoadBalancer", "annotations": {"a/b": "c"},
                                              "loadBalancerSourceRanges": ["203.0.113.0/24"]}})
    svc = _by_kind_name(render_all(cluster, None))[("Service", "demo-login")]
    assert svc["spec"]["type"] == "LoadBalancer"
    assert svc["spec"]["loadBalancerSourceRanges"] == ["203.0.113.0/24"]
    assert svc["metadata"]["annotations"] == {"a/b": "c"}
    node_port = make_cluster(login={"service": {"type": "NodePort", "nodePort": 30022}})
    svc = _by_kind_name(render_all(node_port, None))[("Service", "demo-login")]
    assert svc["spec"]["ports"][0]["nodePort"] == 30022


def test_populate_job_carries_overwrite_flag():
    plain = populate_jail_job(make_cluster())["spec"]["template"]["spec"]
    assert [c["name"] for c in plain["containers"]] == ["populate-jail"] and "initContainers" not in plain
    assert {"name": "SOPERATOR_POPULATE_OVERWRITE", "value": "false"} in plain["containers"][0]["env"]


def test_an_overwrite_of_a_live_cluster_holds_the_nodes_around_the_fill():
    cluster = make_cluster(populateJail={"overwrite": True})
    job = populate_jail_job(cluster, hold_nodes=True)
    pod = job["spec"]["template"]["spec"]
    # Kubernetes runs init containers one by one, each to success, then the container.
    assert [c["name"] for c in pod["initContainers"]] == ["hold-nodes", "populate-jail"]
    assert [c["name"] for c in pod["containers"]] == ["release-nodes"]
    assert {"name": "SOPERATOR_POPULATE_OVERWRITE", "value": "true"} in pod["initContainers"][1]["env"]
    hold = pod["initContainers"][0]
    assert hold["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID"]}
    assert hold["securityContext"]["allowPrivilegeEscalation"] is False
    assert {m["name"] for m in hold["volumeMounts"]} == {"slurm-configs", "munge-key"}
    assert job["metadata"]["annotations"]["slurm.soperator.dev/hold-nodes"] == "true"
    # slurm.conf names slurmctld by its pod name: the search domains make it resolve, as on the nodes.
    assert "demo-controller.hpc.svc.cluster.local" in pod["dnsConfig"]["searches"]
    # A cluster with no workers yet has no slurmctld to ask: the overwrite fills at once.
    first = populate_jail_job(cluster, hold_nodes=False)["spec"]["template"]["spec"]
    assert "initContainers" not in first and first["containers"][0]["name"] == "populate-jail"


def test_user_namespaces_in_job_steps_are_an_explicit_choice():
    plain = [ln for ln in slurm_files(make_cluster())["plugstack.conf"].splitlines() if ln.startswith("required")]
    assert plain == [f"required /opt/soperator/lib/spank_chroot.so /mnt/jail{JOB_DIRS}"]
    allowed = slurm_files(make_cluster(plugStack={"allowUserNamespaces": True}))["plugstack.conf"]
    assert f"spank_chroot.so /mnt/jail{JOB_DIRS} allow_userns" in allowed


def test_login_and_worker_egress_is_kept_off_the_clusters_private_ranges():
    policy = _by_kind_name(render_all(make_cluster(), None))[("NetworkPolicy", "demo-node-egress")]["spec"]
    assert policy["policyTypes"] == ["Egress"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "demo"
    assert policy["podSelector"]["matchExpressions"][0]["values"] == ["login", "worker"]
    own_namespace, dns, outside = policy["egress"]
    assert own_namespace == {"to": [{"podSelector": {}}]} and {p["port"] for p in dns["ports"]} == {53}
    # Port 53 of the cluster's DNS only: not of every address (a DNS tunnel to the blocked ranges).
    assert dns["to"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                          "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]
    local = make_cluster(networkPolicy={"dns": {"namespace": "dns", "podLabels": {"app": "coredns"},
                                                "cidrs": ["169.254.20.10/32"]}})
    peers = _by_kind_name(render_all(local, None))[("NetworkPolicy", "demo-node-egress")]["spec"]["egress"][1]["to"]
    assert peers[0]["podSelector"] == {"matchLabels": {"app": "coredns"}} and peers[1] == {
        "ipBlock": {"cidr": "169.254.20.10/32"}}
    v4, v6 = outside["to"]
    assert {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"} <= set(v4["ipBlock"]["except"])
    assert v6["ipBlock"]["except"] == ["fc00::/7", "fe80::/10"]
    off = make_cluster(networkPolicy={"enabled": False})
    assert _by_kind_name(render_all(off, None))[("NetworkPolicy", "demo-node-egress")]["spec"]["egress"] == [{}]


def test_slurmrestd_is_reached_from_the_operator_only_and_slurmctld_from_every_pod():
    """The controller's ingress policy: slurmctld's port open (Slurm's own traffic, the metrics the
    operator scrapes), slurmrestd's to the operator's pods, in its namespace once the operator knows it."""
    policy = _by_kind_name(render_all(make_cluster(), None, "soperator-system"))[
        ("NetworkPolicy", "demo-controller-ingress")]["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"
    assert policy["podSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "demo"
    everyone, operator = policy["ingress"]
    assert everyone == {"ports": [{"protocol": "TCP", "port": 6817}]}
    assert operator == {"ports": [{"protocol": "TCP", "port": 6820}], "from": [{
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "soperator-system"}},
        "podSelector": {"matchLabels": {"slurm.soperator.dev/slurm-rest-client": "true"}}}]}
    # Not told where the operator runs (a render for another cluster): its pods by label, anywhere.
    anywhere = _by_kind_name(render_all(make_cluster(), None))[("NetworkPolicy", "demo-controller-ingress")]
    assert anywhere["spec"]["ingress"][1]["from"][0]["namespaceSelector"] == {}
    # The slurmrestd Service's port is the one the policy opens to the operator.
    rest = _by_kind_name(render_all(make_cluster(), None))[("Service", "demo-rest")]["spec"]["ports"][0]
    assert rest["targetPort"] == operator["ports"][0]["port"]
    off = make_cluster(networkPolicy={"enabled": False})
    assert _by_kind_name(render_all(off, None))[("NetworkPolicy", "demo-controller-ingress")]["spec"]["ingress"] == [{}]


def test_login_and_controller_have_default_ceilings_and_sessions_a_process_limit():
    by_name = {o["metadata"]["name"]: o for o in render_all(make_cluster(), None) if o["kind"] == "StatefulSet"}
    controller = by_name["demo-controller"]["spec"]["template"]["spec"]["containers"][0]
    login = by_name["demo-login"]["spec"]["template"]["spec"]["containers"][0]
    assert controller["resources"]["limits"] == {"memory": "4Gi"}
    assert login["resources"] == {"limits": {"memory": "8Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}
    assert {"name": "SOPERATOR_MAX_USER_PROCESSES", "value": "4096"} in login["env"]
    # Each ssh user's sessions get a cgroup with the default limits (4Gi, 2 CPUs: pam_sshd): the login
    # node readies one, and names its Kubernetes node when it cannot.
    assert {"name": "SOPERATOR_SESSION_LIMITS", "value": "true"} in login["env"]
    assert {"name": "SOPERATOR_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in login["env"]
    unlimited = make_cluster(login={"sessionLimits": {"memory": 0, "cpu": "0"}})
    login = next(o for o in render_all(unlimited, None) if o["metadata"]["name"] == "demo-login" and
                 o["kind"] == "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "SOPERATOR_SESSION_LIMITS", "value": "false"} in login["env"]
    # Setting one side keeps the other's default, as the CRD's structural defaulting does.
    custom = make_cluster(login={"resources": {"limits": {"memory": "16Gi"}}})
    assert custom.spec.login.resources.requests == {"cpu": "500m", "memory": "1Gi"}


def test_controller_and_populate_run_as_root_with_only_their_capabilities():
    objects = _by_kind_name(render_all(make_cluster(), None))
    controller = objects[("StatefulSet", "demo-controller")]["spec"]["template"]["spec"]["containers"][0]
    populate = objects[("Job", "demo-populate-jail")]["spec"]["template"]["spec"]["containers"][0]
    for container, caps in ((controller, ["CHOWN", "DAC_OVERRIDE", "KILL", "SETGID", "SETUID"]),
                            (populate, ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"])):
        ctx = container["securityContext"]
        assert ctx["capabilities"] == {"drop": ["ALL"], "add": caps}, container["name"]
        assert ctx["allowPrivilegeEscalation"] is False and ctx["seccompProfile"] == {"type": "RuntimeDefault"}


def test_pull_secrets_reach_every_pod_and_gpus_register_with_their_type():
    cluster = make_cluster(images={"pullSecrets": ["site-registry"]}, nodeSets=[{"name": "g", "gpus": 8, "gpuType": "h100"}],
                           populateJail={"overwrite": True})
    objects = render_all(cluster, None) + [populate_jail_job(cluster, hold_nodes=True)]
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("StatefulSet", "Job")]
    assert len(pods) == 5 and all(p["imagePullSecrets"] == [{"name": "site-registry"}] for p in pods)
    assert worker_node_conf(cluster.spec.node_sets[0]).endswith(" Gres=gpu:h100:8")
    assert "imagePullSecrets" not in json.dumps(render_all(make_cluster(), None))


def test_slurmrestd_runs_beside_slurmctld_unprivileged_and_inside_the_cluster_only(keys):
    objects = _by_kind_name(render_all(make_cluster(), keys))
    pod = objects[("StatefulSet", "demo-controller")]["spec"]["template"]["spec"]
    rest = next(c for c in pod["containers"] if c["name"] == "slurmrestd")
    assert rest["command"][:5] == ["slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/slurmctld"]
    assert {"name": "SLURM_JWT", "value": "daemon"} in rest["env"]
    ctx = rest["securityContext"]
    assert ctx["runAsUser"] == 65534 and ctx["runAsNonRoot"] and ctx["readOnlyRootFilesystem"]
    assert ctx["capabilities"] == {"drop": ["ALL"]} and ctx["allowPrivilegeEscalation"] is False
    # The key is slurmctld's alone: slurmrestd mounts the configs only, and no key is in any env.
    assert [m["name"] for m in rest["volumeMounts"]] == ["slurm-configs"]
    ctld = next(c for c in pod["containers"] if c["name"] == "slurmctld")
    assert {"name": "jwt-key", "mountPath": "/etc/soperator/jwt", "readOnly": True} in ctld["volumeMounts"]
    jwt_volume = next(v for v in pod["volumes"] if v["name"] == "jwt-key")
    assert jwt_volume["secret"] == {"secretName": "demo-jwt-key", "defaultMode": 0o400}
    service = objects[("Service", "demo-rest")]["spec"]
    assert service["type"] == "ClusterIP" and service["ports"][0]["port"] == 6820
    secret = objects[("Secret", "demo-jwt-key")]
    assert secret["immutable"] is True and base64.b64decode(secret["data"]["jwt_hs256.key"]) == keys.jwt_key
    others = [o for k, o in objects.items() if k != ("Secret", "demo-jwt-key")]
    assert secret["data"]["jwt_hs256.key"] not in json.dumps(others)


def test_evictions_never_take_the_controller_and_one_login_node_at_a_time():
    objects = _by_kind_name(render_all(make_cluster(), None))
    controller = objects[("PodDisruptionBudget", "demo-controller")]["spec"]
    login = objects[("PodDisruptionBudget", "demo-login")]["spec"]
    assert controller["maxUnavailable"] == 0 and login["maxUnavailable"] == 1
    assert controller["selector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"
    assert login["selector"]["matchLabels"]["app.kubernetes.io/component"] == "login"


def test_evictions_take_only_the_workers_labelled_evictable():
    """The workers' budget covers every pod of every node set (its labels are a subset of each
    template's) but those labelled evictable, and allows none of them to go."""
    cluster = make_cluster(nodeSets=[{"name": "cpu", "replicas": 2}, {"name": "gpu", "replicas": 1}])
    objects = _by_kind_name(render_all(cluster, None))
    workers = objects[("PodDisruptionBudget", "demo-worker")]["spec"]
    assert workers["maxUnavailable"] == 0
    assert workers["selector"]["matchExpressions"] == [
        {"key": "slurm.soperator.dev/evictable", "operator": "NotIn", "values": ["true"]}]
    for name in ("demo-cpu", "demo-gpu"):
        template = objects[("StatefulSet", name)]["spec"]["template"]["metadata"]["labels"]
        assert workers["selector"]["matchLabels"].items() <= template.items()
        assert "slurm.soperator.dev/evictable" not in template


def test_slurmdbd_conf_carries_the_storage_and_refuses_a_password_it_cannot_hold():
    cluster = make_cluster()
    conf = slurmdbd_conf(cluster, "demo-slurmdbd-0", Storage("db.example", 3307, "slurm", "s3cr3t-Pw_1"))
    assert {"DbdHost=demo-slurmdbd-0", "StorageHost=db.example", "StoragePort=3307", "StorageUser=slurm",
            "StoragePass=s3cr3t-Pw_1", "StorageLoc=slurm_acct_db", "AuthType=auth/munge"} <= set(conf.splitlines())
    for bad in ("", "two words", "hash#tag", 'quo"te', "new\nline"):
        with pytest.raises(ValueError, match="password"):
            slurmdbd_conf(cluster, "demo-slurmdbd-0", Storage("db", 3306, "slurm", bad))


def test_accounting_renders_slurmdbd_and_its_database_with_the_password_in_secrets_only(keys):
    from soperator.render.accounting import accounting_objects, slurmdbd_conf_secret
    from soperator.render.secrets import db_password_secret

    password = "f00dfeedcafe1234"
    off = make_cluster()
    assert "AccountingStorage" not in slurm_files(off)["slurm.conf"] and accounting_objects(off, "x") == []
    cluster = make_cluster(accounting={"enabled": True, "managed": {"claimName": "acct-db"}})
    conf = slurmdbd_conf_secret(cluster, password)
    assert conf["immutable"] is True and conf["metadata"]["name"].startswith("demo-slurmdbd-conf-")
    # Another password, another Secret (the operator only creates Secrets); the same one, the same name.
    assert slurmdbd_conf_secret(cluster, "0ther")["metadata"]["name"] != conf["metadata"]["name"]
    assert slurmdbd_conf_secret(cluster, password) == conf
    objects = render_all(cluster, keys) + [conf, db_password_secret(cluster, password.encode()),
                                           *accounting_objects(cluster, conf["metadata"]["name"])]
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    # slurm.conf names slurmdbd only once it answers: a slurmctld with multifactor and no slurmdbd exits.
    assert "AccountingStorage" not in slurm_files(cluster, accounting_live=False)["slurm.conf"]
    live = slurm_files(cluster)["slurm.conf"]
    assert "AccountingStorageType=accounting_storage/slurmdbd\n" in live
    assert "AccountingStorageHost=demo-slurmdbd-0.demo-slurmdbd.hpc.svc.cluster.local\n" in live
    assert "PriorityType=priority/multifactor\n" in live
    dbd = by_name[("StatefulSet", "demo-slurmdbd")]["spec"]["template"]["spec"]
    db = by_name[("StatefulSet", "demo-database")]["spec"]["template"]["spec"]
    assert "/controller:" in dbd["containers"][0]["image"] and "/database:" in db["containers"][0]["image"]
    assert {"name": "slurmdbd-conf", "secret": {"secretName": conf["metadata"]["name"], "defaultMode": 0o400}} \
        in dbd["volumes"]
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "acct-db"}} in db["volumes"]
    for pod in (dbd, db):
        ctx = pod["containers"][0]["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False and "privileged" not in ctx
    # The password: in the password Secret (base64) and, inside slurmdbd.conf, in the conf Secret only.
    encoded = base64.b64encode(password.encode()).decode()
    for key, obj in by_name.items():
        text = json.dumps(obj)
        assert (password in text or encoded in text) == (key == ("Secret", "demo-db-password")), key
    stored = base64.b64decode(conf["data"]["slurmdbd.conf"]).decode()
    assert f"StoragePass={password}\n" in stored and "DbdHost=demo-slurmdbd-0\n" in stored
    # MariaDB's port is slurmdbd's alone (login and worker pods reach the rest of the namespace).
    policy = by_name[("NetworkPolicy", "demo-database-ingress")]["spec"]
    assert policy["podSelector"]["matchLabels"] == by_name[("StatefulSet", "demo-database")]["spec"]["selector"][
        "matchLabels"] and policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": by_name[("StatefulSet", "demo-slurmdbd")][
        "spec"]["selector"]["matchLabels"]}}], "ports": [{"protocol": "TCP", "port": 3306}]}]
    open_cluster = make_cluster(accounting={"enabled": True}, networkPolicy={"enabled": False})
    opened = {o["metadata"]["name"]: o for o in accounting_objects(open_cluster, "c")}["demo-database-ingress"]
    assert opened["spec"]["ingress"] == [{}]
    external = make_cluster(accounting={"enabled": True, "external": {"host": "db.example", "passwordSecret": "db"}})
    names = {o["metadata"]["name"] for o in accounting_objects(external, "c")}
    assert names == {"demo-slurmdbd"}
    assert "StorageHost=db.example\n" in base64.b64decode(
        slurmdbd_conf_secret(external, password)["data"]["slurmdbd.conf"]).decode()


def test_no_node_container_keeps_its_termination_message_where_the_jail_sees_it():
    # The kubelet makes the file world-writable; /dev, /tmp… are bound into the jail (security #5).
    bound = [b.path for b in (*WORKER, *LOGIN)]
    sets = {o["metadata"]["name"]: o["spec"]["template"]["spec"]
            for o in render_all(make_cluster(nodeSets=PYXIS_SETS), None) if o["kind"] == "StatefulSet"}
    assert sorted(sets) == ["demo-controller", "demo-cpu", "demo-gpu", "demo-login"]
    for pod in sets.values():
        path = pod["containers"][0]["terminationMessagePath"]
        assert path == "/run/termination-log"
        assert not any(path == b or path.startswith(b + "/") for b in bound), path


def test_the_health_check_program_is_a_jail_path_run_through_the_node_wrapper(keys):
    """slurmd runs HealthCheckProgram as root on the node's root: it is soperator's wrapper, which runs
    the spec's program in the jail (soperator/node/health_check.py); the pod names that program."""
    cluster = make_cluster(uid=UID, healthCheck={"program": "/usr/sbin/nhc", "interval": 300})
    conf = slurm_files(cluster)["slurm.conf"]
    assert "HealthCheckProgram=/opt/soperator/bin/health-check\n" in conf
    assert "HealthCheckProgram=/usr/sbin/nhc" not in conf
    worker = _by_kind_name(render_all(cluster, keys))[("StatefulSet", "demo-worker")]
    env = worker["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SOPERATOR_HEALTH_CHECK_PROGRAM", "value": "/usr/sbin/nhc"} in env
    plain = _by_kind_name(render_all(make_cluster(uid=UID), keys))[("StatefulSet", "demo-worker")]
    assert "HealthCheck" not in slurm_files(make_cluster(uid=UID))["slurm.conf"]
    assert not [e for e in plain["spec"]["template"]["spec"]["containers"][0]["env"] if "HEALTH" in e["name"]]


def test_an_autoscaling_node_set_is_listed_as_cloud_records_and_its_workers_register_under_them(keys):
    cluster = make_cluster(nodeSets=[{"name": "cpu", "replicas": 1},
                                     {"name": "gpu", "cpus": 8, "gpus": 2, "autoscale": {"min": 1, "max": 4}}])
    conf = slurm_files(cluster)["slurm.conf"]
    assert "NodeName=demo-gpu-[0-3] Feature=gpu CPUs=8 RealMemory=1024 Gres=gpu:2 State=CLOUD" in conf
    assert ("ResumeProgram=/bin/true\nSuspendProgram=/bin/true\nSuspendTime=4294967293\nSuspendTimeout=10\n"
            in conf)
    assert "SlurmctldParameters=enable_configless,idle_on_node_suspend\n" in conf
    env = {s["metadata"]["name"]: {e["name"]: e.get("value") for e in
                                  s["spec"]["template"]["spec"]["containers"][0]["env"]}
           for s in render_all(cluster, keys) if s["kind"] == "StatefulSet" and s["metadata"]["name"] in
           ("demo-cpu", "demo-gpu")}
    assert env["demo-gpu"][ENV.cloud_node] == "true" and ENV.slurmd_conf not in env["demo-gpu"]
    assert ENV.cloud_node not in env["demo-cpu"] and env["demo-cpu"][ENV.slurmd_conf].startswith("Feature=cpu")
    # One record: no range.
    one = make_cluster(nodeSets=[{"name": "big", "autoscale": {"max": 1}}])
    assert "\nNodeName=demo-big-0 Feature=big CPUs=1 RealMemory=1024 State=CLOUD\n" in slurm_files(one)["slurm.conf"]
    # Without autoscaling, no power saving at all.
    plain = slurm_files(make_cluster())["slurm.conf"]
    assert "ResumeProgram" not in plain and "State=CLOUD" not in plain and "idle_on_node_suspend" not in plain
