"""Run a command that never ends by design (``polpo tail -f``, an event stream) as a person does: let it print,
then press Ctrl-C. The docs' shell examples run through bash with such a line prefixed by this program, so the
rest of the block runs after it, as written.

Usage: python ctrl_c.py [--quiet S] [--within S] -- CMD [ARG...]

CMD runs in its own process group and its output is passed through. Once it printed something and then stayed
quiet for --quiet seconds (or, still printing, once --within seconds passed), its group gets SIGINT, as a
terminal's Ctrl-C does; it must end within 10 s of that, or it is killed. Exit status: 0 when the Ctrl-C ended
it (its own clean exit, or death by SIGINT as curl does); its own status when it failed first; 3 when it ended
by itself with 0 (it was meant to keep running); 4 when it printed nothing within --within seconds; 5 when it
outlived the Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import subprocess
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quiet", type=float, default=0.5, help="seconds without output before the Ctrl-C")
    ap.add_argument("--within", type=float, default=30.0, help="seconds it has to print something; then Ctrl-C at the latest")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        ap.error("no command")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, process_group=0)
    assert proc.stdout is not None

    def ended(signum: int, _frame: object) -> None:  # the test ending the block: CMD's own group goes too
        os.killpg(proc.pid, signal.SIGKILL)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, ended)
    fd = proc.stdout.fileno()
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    start = last = time.monotonic()
    printed = interrupted = False
    while True:
        now = time.monotonic()
        if not interrupted and printed and (now - last >= args.quiet or now - start >= args.within):
            os.killpg(proc.pid, signal.SIGINT)
            interrupted, last = True, now
        elif not interrupted and not printed and now - start >= args.within:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(f"ctrl_c.py: {cmd[0]} printed nothing in {args.within:g} s", file=sys.stderr)
            return 4
        elif interrupted and now - last >= 10:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(f"ctrl_c.py: {cmd[0]} did not end within 10 s of Ctrl-C", file=sys.stderr)
            return 5
        if not sel.select(timeout=0.05):
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()
        printed = True
        if not interrupted:
            last = time.monotonic()
    status = proc.wait(timeout=10)
    if interrupted:
        return 0 if status in (0, -signal.SIGINT, 128 + signal.SIGINT) else status
    if status == 0:
        print(f"ctrl_c.py: {cmd[0]} ended by itself; it was expected to keep running", file=sys.stderr)
        return 3
    return status


if __name__ == "__main__":
    sys.exit(main())
