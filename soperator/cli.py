"""`soperator` command line: run (the operator), render, validate, crd, generate (every generated file of
the repository), and the node DaemonSets' commands."""
from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path
from typing import Any

from soperator import kubeyaml
from soperator.api import SpecError, parse_cluster
from soperator.api.cluster import GROUP, KIND
from soperator.api.crd import crd_yaml
from soperator.yamlio import dump_all


def _documents(path: str) -> list[Any]:
    """The file's documents as kubectl would send them (soperator/kubeyaml.py)."""
    with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as fh:
        return list(kubeyaml.load_all(fh.read()))


def _another_kind(doc: Any) -> bool:
    """A document of another kind and API group (a Secret beside the cluster): `kubectl apply -f` sends
    it as itself, so it is not checked here. A wrong kind in our group, or our kind in another group, is
    a SlurmCluster written wrong, and refused."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str) or not isinstance(doc.get("apiVersion"), str):
        return False
    return doc["kind"] != KIND and doc["apiVersion"].split("/")[0] != GROUP


def _load(path: str):
    """Parse every document; report every error of every document before giving up."""
    clusters, failed = [], False
    try:
        docs = _documents(path)
    except (OSError, UnicodeDecodeError, kubeyaml.ManifestError) as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return None
    if not docs:
        print(f"error: {path}: no SlurmCluster document", file=sys.stderr)
        return None
    ours = [(index, doc) for index, doc in enumerate(docs) if not _another_kind(doc)]
    for index, doc in enumerate(docs):
        if _another_kind(doc):
            print(f"note: {path}[{index}]: {doc['apiVersion']} {doc['kind']} is not a SlurmCluster: left to kubectl",
                  file=sys.stderr)
    if not ours:
        print(f"error: {path}: no SlurmCluster document", file=sys.stderr)
        return None
    for index, doc in ours:
        try:
            clusters.append(parse_cluster(doc))
        except SpecError as exc:
            failed = True
            for err in exc.errors:
                print(f"error: {path}[{index}]: {err.path}: {err.message}", file=sys.stderr)
    return None if failed else clusters


def _dump(objects: list[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(objects if len(objects) != 1 else objects[0], indent=2, sort_keys=True) + "\n"
    return dump_all(objects)


def cmd_render(args: argparse.Namespace) -> int:
    from soperator.keys import load_or_create
    from soperator.render import KeyMaterial, render_all, slurmdbd_left_out

    clusters = _load(args.file)
    if clusters is None:
        return 1
    keys = None
    if args.with_secrets:
        if not args.keys_dir:
            print("error: --with-secrets needs --keys-dir DIR (where the keys are kept)", file=sys.stderr)
            return 2
        munge, host, jwt_key, db_password = load_or_create(args.keys_dir)
        keys = KeyMaterial(munge_key=munge, ssh_host_keys=host, jwt_key=jwt_key, db_password=db_password)
        print("warning: the output holds private keys (munge key, ssh host keys): keep it like them",
              file=sys.stderr)
    objects = [obj for cluster in clusters for obj in render_all(cluster, keys, args.operator_namespace)]
    for cluster in clusters:
        if slurmdbd_left_out(cluster, keys):
            print(f"note: {cluster.namespace}/{cluster.name}: slurmdbd's StatefulSet is left out: it names its config "
                  "Secret by a hash of slurmdbd.conf, database password included ("
                  + ("the external database's password is in your Secret" if cluster.spec.accounting.external
                     else "render it with --with-secrets --keys-dir DIR") + ")", file=sys.stderr)
    sys.stdout.write(_dump(objects, args.output))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    clusters = _load(args.file)
    if clusters is None:
        return 1
    for cluster in clusters:
        print(f"ok: {cluster.namespace}/{cluster.name}")
    return 0


def _emit(text: str, path: str | None) -> int:
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_crd(args: argparse.Namespace) -> int:
    return _emit(crd_yaml(), args.write)


def cmd_generate(args: argparse.Namespace) -> int:
    from soperator import generate

    root = Path(args.root)
    if not generate.is_repository(root):
        print(f"error: {root.resolve()} is not the soperator repository (no pyproject.toml, charts/, crds/): "
              "run it from the repository's root or give --root", file=sys.stderr)
        return 2
    if args.check:
        stale = generate.stale(root)
        for path in stale:
            print(f"out of date: {path}")
        if stale:
            print(f"run `{generate.COMMAND}` to bring them up to date", file=sys.stderr)
        return 1 if stale else 0
    for path in generate.write(root):
        print(f"wrote {path}" if (root / path).exists() else f"removed {path}")
    return 0


def cmd_seccomp_profile(args: argparse.Namespace) -> int:
    from soperator.render.seccomp_profile import profile_file_name, profile_json

    if not args.write_dir:
        return _emit(profile_json(), None)
    # The chart ships one profile: the file of an older digest goes.
    for stale in Path(args.write_dir).glob("pyxis-worker-*.json"):
        stale.unlink()
    return _emit(profile_json(), str(Path(args.write_dir) / profile_file_name()))


def cmd_install_seccomp_profiles(args: argparse.Namespace) -> int:
    from soperator.seccomp_install import install_and_stay

    return install_and_stay(Path(args.source), Path(args.target))


def cmd_fuse_device_plugin(args: argparse.Namespace) -> int:
    import logging

    from soperator.fuse_device.plugin import PluginConfig, run_until_signalled

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_until_signalled(PluginConfig(args.plugin_dir, args.host_device, args.devices))


def cmd_cgroup_delegate(args: argparse.Namespace) -> int:
    import logging
    import signal
    import threading

    from soperator.cgroup_delegate.agent import run
    from soperator.kube import Kube

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    return run(Kube.from_environment(), args.node_name, args.cgroup_root, args.proc_root, stop)


def cmd_run(args: argparse.Namespace) -> int:
    import logging

    import kopf

    from soperator import handlers  # registers the handlers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # An explicit identity: kopf's default asks getpass for a user name, and a container running as
    # a UID with no passwd entry (any securityContext.runAsUser) has none.
    kopf.run(clusterwide=not args.namespace, namespaces=args.namespace or [],
             liveness_endpoint=f"http://0.0.0.0:{args.health_port}/healthz" if args.health_port else None,
             standalone=True, identity=f"soperator@{socket.gethostname()}",
             memo=handlers.new_memo(args.namespace or []))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="soperator", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print every Kubernetes object a SlurmCluster implies")
    render.add_argument("-f", "--file", required=True, help="SlurmCluster YAML/JSON ('-' for stdin)")
    render.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    render.add_argument("--with-secrets", action="store_true",
                        help="also print the key Secrets (private keys!); the default leaves them out")
    render.add_argument("--keys-dir", help="with --with-secrets: keys read from here, created on first use")
    render.add_argument("--no-secrets", action="store_true", help="the default; kept for old scripts")
    render.add_argument("--operator-namespace", help="where the operator runs: the controller's ingress policy lets "
                        "slurmrestd be reached from there only (default: the operator's pods in any namespace)")
    render.set_defaults(func=cmd_render)
    validate = sub.add_parser("validate", help="check a SlurmCluster; errors name the field")
    validate.add_argument("-f", "--file", required=True)
    validate.set_defaults(func=cmd_validate)
    crd = sub.add_parser("crd", help="print the CustomResourceDefinition generated from the API models")
    crd.add_argument("--write", metavar="PATH", help="write to PATH instead of stdout")
    crd.set_defaults(func=cmd_crd)
    generate = sub.add_parser("generate", help="write every generated file of the repository: the CRD (crds/ and "
                              "the operator chart's copy), the charts' values schemas, the seccomp profile")
    generate.add_argument("--root", default=".", help="the repository's root (default: the current directory)")
    generate.add_argument("--check", action="store_true", help="write nothing; list what is out of date, exit 1 if any")
    generate.set_defaults(func=cmd_generate)
    profile = sub.add_parser("seccomp-profile", help="print the seccomp profile of node sets with Pyxis")
    profile.add_argument("--write-dir", metavar="DIR", help="write it into DIR under its name, pyxis-worker-<digest>"
                         ".json (and remove older ones), instead of to stdout")
    profile.set_defaults(func=cmd_seccomp_profile)
    install = sub.add_parser("install-seccomp-profiles", help="copy seccomp profiles into a node's kubelet "
                             "directory, then wait for SIGTERM (the operator chart's DaemonSet)")
    install.add_argument("--from", dest="source", required=True, help="directory of *.json profiles")
    install.add_argument("--to", dest="target", required=True, help="e.g. /var/lib/kubelet/seccomp/soperator")
    install.set_defaults(func=cmd_install_seccomp_profiles)
    fuse = sub.add_parser("fuse-device-plugin", help="offer the node's /dev/fuse to pods that ask for "
                          "soperator.dev/fuse (the operator chart's DaemonSet)")
    fuse.add_argument("--plugin-dir", required=True, help="the kubelet's device-plugins directory, e.g. "
                      "/var/lib/kubelet/device-plugins")
    fuse.add_argument("--host-device", required=True, help="where the node's /dev/fuse is seen here (health)")
    fuse.add_argument("--devices", type=int, default=64, help="pods per node that may hold it at once")
    fuse.set_defaults(func=cmd_fuse_device_plugin)
    delegate = sub.add_parser("cgroup-delegate", help="give user-namespaced workers and login pods on this "
                              "node their own cgroups (the operator chart's DaemonSet)")
    delegate.add_argument("--node-name", required=True, help="this Kubernetes node (the pod's spec.nodeName)")
    delegate.add_argument("--cgroup-root", required=True, help="where the node's /sys/fs/cgroup is seen here")
    delegate.add_argument("--proc-root", default="/proc", help="the node's /proc (the pod shares its PID namespace)")
    delegate.set_defaults(func=cmd_cgroup_delegate)
    run = sub.add_parser("run", help="run the operator (in-cluster service account, else kubeconfig)")
    run.add_argument("-n", "--namespace", action="append", help="watch only these namespaces")
    run.add_argument("--health-port", type=int, default=8081, help="liveness on /healthz; 0 disables")
    run.set_defaults(func=cmd_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
