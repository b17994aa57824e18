"""Config files (jinja2 templates) and the ConfigMaps that carry them."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from soperator import __version__
from soperator.api.cluster import SlurmCluster
from soperator.render.common import Obj, content_hash, metadata, object_name
from soperator.render.paths import PATHS

SLURM_FILES = ("slurm.conf", "cgroup.conf", "plugstack.conf", "gres.conf")


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("soperator", "templates"),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              autoescape=False)


def hostlist(prefix: str, count: int) -> str:
    """Slurm hostlist for prefix-0..prefix-(count-1): one range, whatever the count."""
    if count <= 0:
        return ""
    return f"{prefix}0" if count == 1 else f"{prefix}[0-{count - 1}]"


def worker_hostlist(cluster: SlurmCluster) -> str:
    return hostlist(f"{object_name(cluster, 'worker')}-", cluster.spec.workers.replicas)


def controller_host(cluster: SlurmCluster) -> str:
    return f"{object_name(cluster, 'controller')}-0"


def _context(cluster: SlurmCluster) -> dict:
    workers = cluster.spec.workers
    node_gres = ([f"gpu:{workers.gpus}"] if workers.gpus else []) + list(workers.gres)
    gres_types = sorted({g.split(":", 1)[0] for g in node_gres})
    return {
        "name": cluster.name, "namespace": cluster.namespace, "version": __version__,
        "paths": PATHS, "cfg": cluster.spec.slurm_config, "workers": workers,
        "partitions": cluster.spec.partitions, "health": cluster.spec.health_check,
        "plug_stack": cluster.spec.plug_stack, "cgroup": cluster.spec.cgroup_config, "login": cluster.spec.login,
        "controller_host": controller_host(cluster), "worker_hostlist": worker_hostlist(cluster),
        "node_gres": node_gres, "gres_types": gres_types,
        "gpu_range": hostlist("", workers.gpus) if workers.gpus > 1 else "0",
    }


def _render(template: str, cluster: SlurmCluster) -> str:
    return _env().get_template(f"{template}.j2").render(**_context(cluster)).rstrip("\n") + "\n"


def slurm_files(cluster: SlurmCluster) -> dict[str, str]:
    return {f: _render(f, cluster) for f in SLURM_FILES}


def sshd_files(cluster: SlurmCluster) -> dict[str, str]:
    keys = "".join(f"{k}\n" for k in cluster.spec.login.root_ssh_public_keys)
    return {"sshd_config": _render("sshd_config", cluster), "root_authorized_keys": keys}


def slurm_configs_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, "slurm-configs")


def sshd_config_name(cluster: SlurmCluster) -> str:
    return object_name(cluster, "sshd-config")


def slurm_configs_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, slurm_configs_name(cluster), "slurm-configs"),
            "data": slurm_files(cluster)}


def sshd_config_map(cluster: SlurmCluster) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": metadata(cluster, sshd_config_name(cluster), "login"),
            "data": sshd_files(cluster)}


def slurm_config_hash(cluster: SlurmCluster, *, include_node_list: bool) -> str:
    """Hash that rolls pods when their config changes.

    Only slurmctld must restart to learn about added or removed nodes, so workers and login
    nodes hash the files without the NodeName lines: scaling does not restart them.
    """
    parts = []
    for name, text in sorted(slurm_files(cluster).items()):
        lines = text.splitlines()
        if not include_node_list:
            lines = [ln for ln in lines if not ln.startswith("NodeName=")]
        parts.append(name + "\n" + "\n".join(lines))
    return content_hash(parts)


def sshd_config_hash(cluster: SlurmCluster) -> str:
    return content_hash(f"{k}\n{v}" for k, v in sorted(sshd_files(cluster).items()))
