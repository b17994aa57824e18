"""Pyxis's importer (plugstack.conf's `importer=`), run by Pyxis in the jail as the step's user for every
image that is not a file: `importer get URI` prints the squashfs path of the image, `importer release`
has nothing to undo (the file is the cache's, not the step's).

It asks the node's image cache (image_cache.py, over its socket): the cache imports the image once for
every user of the node. A user cannot import a registry image alone in the jail (enroot's import
needs privileges no job step has), so where the node has no cache the step fails saying so.

Standard library only, and nothing but this package's layout: the node image places it, with layout.py,
in a directory the workers bind read-only into the jail, run by the jail's python3 (-I)."""
from __future__ import annotations

import json
import socket
import sys

from .layout import PATHS

NO_CACHE = ("this node has no image cache (its node set's pyxis.imageCache is off, or the worker is "
            "starting): registry images cannot be imported here; use a squashfs file (--container-image=/path)")


def ask(image: str, socket_path: str = PATHS.image_cache_socket) -> dict:
    """The cache's answer: {"path": …} or {"error": …}."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(socket_path)
            conn.sendall(json.dumps({"image": image}).encode() + b"\n")
            reply = conn.makefile("rb").readline()
    except (FileNotFoundError, ConnectionRefusedError):
        return {"error": NO_CACHE}
    except OSError as exc:
        return {"error": f"the node's image cache did not answer: {exc}"}
    try:
        answer = json.loads(reply)
    except ValueError:
        answer = None
    return answer if isinstance(answer, dict) else {"error": "the node's image cache went away while asked"}


def main(argv: list[str]) -> int:
    if argv == ["release"]:  # Pyxis may call it twice; nothing of the step's to remove
        return 0
    if len(argv) != 2 or argv[0] != "get":
        print("pyxis importer: usage: importer get URI | importer release", file=sys.stderr)
        return 2
    answer = ask(argv[1])
    if isinstance(answer.get("path"), str):
        print(answer["path"], flush=True)
        return 0
    print(f"pyxis importer: {answer.get('error')}", file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
