"""A Kubernetes API that stops answering ends the operator's call with a timeout: it never holds a
pass (and the cluster's lock) for ever. The peer is a loopback socket that takes the request and
says nothing, as a stalled apiserver or a kubelet behind it does."""
from __future__ import annotations

import socket
import threading

import pytest
import urllib3
from kubernetes import client

from soperator.kube import REQUEST_TIMEOUT, Kube, _timed

# Long enough that a call without its timeout would not end with the silent peer's close: it would
# fail with a closed connection instead, not a timeout.
SILENCE_SECONDS = 30


@pytest.fixture
def silent_peer():
    listener = socket.create_server(("127.0.0.1", 0))
    taken: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            taken.append(conn)  # read nothing back, answer nothing
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    closer = threading.Timer(SILENCE_SECONDS, stop.set)
    closer.start()
    yield listener.getsockname()[1]
    closer.cancel()
    stop.set()
    thread.join()
    for conn in taken:
        conn.close()
    listener.close()


def _client(port: int) -> client.ApiClient:
    return client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{port}"))  # the operator's retries


def _timed_out(exc: BaseException) -> bool:
    """urllib3 retries a GET that timed out, then gives up with the timeout as its reason."""
    return isinstance(exc, urllib3.exceptions.ReadTimeoutError) or (
        isinstance(exc, urllib3.exceptions.MaxRetryError) and isinstance(exc.reason, urllib3.exceptions.ReadTimeoutError))


def test_a_silent_api_ends_the_clients_first_call_with_a_read_timeout(silent_peer):
    with pytest.raises(Exception) as raised:
        Kube(_client(silent_peer), timeout=(1.0, 0.2))  # its discovery: the dynamic client's first call
    assert _timed_out(raised.value), repr(raised.value)


def test_a_silent_api_ends_a_typed_call_with_a_read_timeout(silent_peer):
    api = _client(silent_peer)
    api.rest_client.request = _timed(api.rest_client.request, (1.0, 0.2))
    with pytest.raises(Exception) as raised:
        client.CoreV1Api(api).read_namespaced_pod_log("some-pod", "default", container="c", tail_lines=5)
    assert _timed_out(raised.value), repr(raised.value)


def test_a_caller_s_own_timeout_stands_and_a_client_is_wrapped_once():
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))
    original = api.rest_client.request
    seen = []
    api.rest_client.request = _timed(lambda *a, **kw: seen.append(kw["_request_timeout"]), (1.0, 2.0))
    api.rest_client.request("GET", "/")
    api.rest_client.request("GET", "/", _request_timeout=7)
    assert seen == [(1.0, 2.0), 7]
    twice = _timed(_timed(original, (1.0, 2.0)), REQUEST_TIMEOUT)
    assert twice.__wrapped__ is original
    assert REQUEST_TIMEOUT[1] >= 30  # a slow but live apiserver is not cut off
