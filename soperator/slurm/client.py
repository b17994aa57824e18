"""A small typed client of slurmrestd (data parser v0.0.44, served by Slurm 25.11 through 27.05): the
endpoints the operator uses, nothing else.

Every failure raises: a REST error, a refused token, an unreachable or garbled server. An empty list
is only ever Slurm saying it has no nodes, never a failure read as "nothing there".

The node list is asked for again only as of its last answer (`update_time`): slurmctld answers an
unchanged cluster with 304 and no body, and the list kept from before is returned. One client per
cluster, kept across passes, is what makes a quiet poll cost a few hundred bytes at any size.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Callable
from urllib.parse import quote

import urllib3
from pydantic import ValidationError
from urllib3.util import Retry, Timeout

from soperator.slurm.nodes import JobsResponse, NodesResponse, SlurmJob, SlurmNode

API = "/slurm/v0.0.44"
# Slurm 24.11's slurmrestd serves v0.0.40 to v0.0.42 only: a cluster on it (one being upgraded, until
# its slurmctld moves) is read through v0.0.42, whose node and job fields the models read alike. It
# is asked for the whole list each time: with update_time, 24.11 fails the call ("Unable to query
# partitions", measured) whenever the nodes changed and the partitions did not.
LEGACY_API = "/slurm/v0.0.42"
# FUTURE: slurmrestd hides node records that never registered unless asked. Naming any flag replaces
# its default set (ALL, DETAIL, MIXED), so MIXED is named too, or a partly used node reads ALLOCATED.
NODE_FLAGS = ("FUTURE", "MIXED")
NOT_MODIFIED = 304
# slurmctld's answer to a token it cannot verify (measured: wrong key, expired): SLURM_PROTOCOL_AUTHENTICATION_ERROR.
ESLURM_AUTH = (1007,)


# How slurmrestd and slurmctld's HTTP server take a caller's JWT.
TOKEN_HEADER = "X-SLURM-USER-TOKEN"


def read_pool(timeout: float, retries: int) -> urllib3.PoolManager:
    """Connections to one Slurm HTTP server: idempotent reads only are retried, with backoff, on
    connection errors and gateway answers."""
    return urllib3.PoolManager(
        timeout=Timeout(connect=min(timeout, 3.0), read=timeout),
        retries=Retry(total=retries, connect=retries, read=retries, status=retries, backoff_factor=0.5,
                      status_forcelist=(502, 503, 504), allowed_methods=frozenset({"GET"}), raise_on_status=False))


class SlurmError(RuntimeError):
    """Slurm could not be asked, or did not answer: its state is unknown."""


class SlurmUnreachable(SlurmError):
    pass


class SlurmAuthError(SlurmError):
    pass


class SlurmApiError(SlurmError):
    pass


@dataclass(frozen=True)
class _NodeList:
    last_update: int
    nodes: list[SlurmNode]


class SlurmRestClient:
    def __init__(self, base_url: str, token: Callable[[], str], timeout: float = 10.0, retries: int = 2,
                 api: str = API):
        self.base_url = base_url.rstrip("/")
        self.api = api
        self.token = token
        self._pool = read_pool(timeout, retries)
        self.calls = 0
        self.bytes_received = 0
        # Reconcile passes and metrics scrapes share a client: the kept list is swapped whole.
        self._node_list: _NodeList | None = None
        self._node_list_lock = threading.Lock()

    def _call(self, method: str, path: str, fields: list[tuple[str, str]] | None = None,
              body: dict | None = None) -> dict | None:
        """slurmrestd's JSON answer; None for 304 Not Modified (only a GET with update_time gets one)."""
        self.calls += 1
        try:
            reply = self._pool.request(method, self.base_url + self.api + path, fields=fields,
                                       body=json.dumps(body).encode() if body is not None else None,
                                       headers={TOKEN_HEADER: self.token(),
                                                **({"Content-Type": "application/json"} if body is not None else {})})
        except urllib3.exceptions.HTTPError as exc:
            raise SlurmUnreachable(f"slurmrestd at {self.base_url}: {exc}") from None
        self.bytes_received += len(reply.data)
        if reply.status == 401:
            raise SlurmAuthError(f"slurmrestd refused the token: {reply.data[:200].decode(errors='replace')}")
        if reply.status == NOT_MODIFIED and method == "GET" and any(k == "update_time" for k, _ in fields or ()):
            return None
        try:
            answer = json.loads(reply.data)
        except ValueError:
            raise SlurmUnreachable(f"slurmrestd answered {reply.status} without JSON") from None
        errors = (answer.get("errors") or []) if isinstance(answer, dict) else []
        if any(e.get("error_number") in ESLURM_AUTH for e in errors):
            raise SlurmAuthError(f"slurmctld refused the token: {errors[0].get('error')}")
        if reply.status != 200 or errors:
            detail = "; ".join(f"{e.get('error')} ({e.get('description')})" for e in errors) or reply.status
            raise SlurmApiError(f"{method} {path}: {detail}")
        return answer

    def list_nodes(self) -> list[SlurmNode]:
        """Every node record, FUTURE ones included; after the first answer, only if any changed."""
        with self._node_list_lock:
            kept = self._node_list
        fields = [("flags", flag) for flag in NODE_FLAGS]
        if kept is not None and self.api != LEGACY_API:
            fields.append(("update_time", str(kept.last_update)))
        body = self._call("GET", "/nodes", fields)
        if body is None:
            assert kept is not None
            return kept.nodes
        try:
            answer = NodesResponse.model_validate(body)
        except ValidationError as exc:
            raise SlurmApiError(f"GET /nodes: unexpected answer: {exc.errors()[0]['msg']}") from None
        if answer.last_update is not None:
            with self._node_list_lock:
                self._node_list = _NodeList(answer.last_update, answer.nodes)
        return answer.nodes

    def list_jobs(self) -> list[SlurmJob]:
        """Every job slurmctld still holds, with the nodes each one has."""
        body = self._call("GET", "/jobs")
        try:
            return JobsResponse.model_validate(body).jobs
        except ValidationError as exc:
            raise SlurmApiError(f"GET /jobs: unexpected answer: {exc.errors()[0]['msg']}") from None

    def submit_job(self, script: str, job: dict) -> int:
        """A batch job (`job`: v0.0.44's job description); its id."""
        body = self._call("POST", "/job/submit", body={"script": script, "job": job})
        try:
            return int(body["job_id"])
        except (KeyError, TypeError, ValueError):
            raise SlurmApiError(f"POST /job/submit: no job id in the answer: {str(body)[:200]}") from None

    def set_comment(self, name: str, comment: str) -> None:
        """The node's comment (`scontrol show node`'s Comment=): a note, no state change."""
        self._call("POST", f"/node/{quote(name)}", body={"comment": comment})

    def cancel_job(self, job_id: int) -> None:
        """As scancel does: the whole job, every step, SIGKILL after the steps' KillWait."""
        self._call("DELETE", f"/job/{job_id}")

    def drain(self, name: str, reason: str) -> None:
        """No new job lands on the node; running ones go on."""
        self._call("POST", f"/node/{quote(name)}", body={"state": ["DRAIN"], "reason": reason})

    def down(self, name: str, reason: str) -> None:
        """The node is gone: each job on it ends as a node failure, or is requeued where it may be."""
        self._call("POST", f"/node/{quote(name)}", body={"state": ["DOWN"], "reason": reason})

    def resume(self, name: str) -> None:
        """Undo a drain (only ever one of the operator's own: the caller checks the reason)."""
        self._call("POST", f"/node/{quote(name)}", body={"state": ["RESUME"]})

    def power_up(self, name: str) -> None:
        """Power saving: a powered-down node the operator starts a pod for. Slurm then waits for its
        slurmd (ResumeTimeout); a slurmd that registered while the node was powered down could be
        marked DOWN as "unexpectedly rebooted"."""
        self._call("POST", f"/node/{quote(name)}", body={"state": ["POWER_UP"]})

    def power_down(self, name: str) -> None:
        """Power saving: a released node, its pod gone, back to powered down (a job then resumes it).
        Slurm clears any drain of it: the caller asks only for nodes no one else drained."""
        self._call("POST", f"/node/{quote(name)}", body={"state": ["POWER_DOWN"]})

    def set_topology(self, name: str, place: str) -> None:
        """The node's place in a topology of topology.yaml (`name:unit`, a tree's switches top first):
        Slurm makes the switches it does not have yet, never a block."""
        self._call("POST", f"/node/{quote(name)}", body={"topology_str": place})

    def set_features(self, name: str, features: list[str]) -> None:
        """The node's features, available and active alike (no node_features plugin changes them):
        what `--constraint` matches."""
        self._call("POST", f"/node/{quote(name)}", body={"features": features, "features_act": features})

    def delete_node(self, name: str) -> None:
        """Forget a dynamic node's record; slurmctld refuses while a job runs there."""
        self._call("DELETE", f"/node/{quote(name)}")
