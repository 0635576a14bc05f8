"""systemd's readiness protocol (``Type=notify``): one datagram to ``$NOTIFY_SOCKET`` when the daemon is ready.

No dependency: the protocol is a ``KEY=VALUE`` line sent on a Unix datagram socket; a name starting with ``@``
is in the abstract namespace. Without ``NOTIFY_SOCKET`` (not started by systemd) it does nothing.
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["notify"]

log = logging.getLogger("polpo.daemon")


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1\\nSTATUS=watching missions"``); True when a socket was there to take it."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(address)
            s.sendall(state.encode())
    except OSError as e:
        log.warning("could not notify systemd at %s: %s", os.environ.get("NOTIFY_SOCKET"), e)
        return False
    return True
