"""A stdio MCP server that fails on purpose, for the tests of what polpo does with one: run as
``python -m tests.support.mcp_faulty MODE`` (or by path). It answers the handshake and ``tools/list`` (one tool,
``work``) and then, on ``tools/call``:

* ``ok``: answers ``done: <x>``;
* ``hang``: never answers;
* ``garbage``: writes a line that is not JSON-RPC on stdout;
* ``crash``: writes ``boom: the disk is on fire`` on stderr and exits 3;
* ``nostart``: (at start, before any message) writes ``cannot open the database`` on stderr and exits 2;
* ``slow``: answers after 30 s.

It writes its pid to ``$FAULTY_PID_FILE`` when that is set, and creates ``$FAULTY_CALLED_FILE`` (when set) as a
call arrives, so a test acts while the call is in flight. Deliberately tiny and dependency-free (not the SDK's
server: it must start in milliseconds and misbehave where it is told to).
"""

from __future__ import annotations

import json
import os
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
    if os.environ.get("FAULTY_PID_FILE"):
        with open(os.environ["FAULTY_PID_FILE"], "w") as f:
            f.write(f"{os.getpid()}\n")
    if mode == "nostart":
        sys.stderr.write("cannot open the database\n")
        return 2
    for line in sys.stdin:
        if not line.strip():
            continue
        msg = json.loads(line)
        method, ident = msg.get("method"), msg.get("id")
        if ident is None:
            continue  # a notification
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "faulty", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [{
                "name": "work", "description": "Does some work.",
                "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}]}})
        elif method == "tools/call":
            if os.environ.get("FAULTY_CALLED_FILE"):
                open(os.environ["FAULTY_CALLED_FILE"], "w").close()
            if mode == "hang":
                continue
            if mode == "garbage":
                sys.stdout.write("Traceback (most recent call last): not a message\n")
                sys.stdout.flush()
                continue
            if mode == "crash":
                sys.stderr.write("boom: the disk is on fire\n")
                sys.stderr.flush()
                return 3
            if mode == "slow":
                time.sleep(30)
            x = msg["params"].get("arguments", {}).get("x")
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": f"done: {x}"}]}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
