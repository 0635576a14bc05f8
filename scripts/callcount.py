"""Run a Python module counting every function invocation, in every thread (for bench_profile.py).

Usage: python scripts/callcount.py OUT.json -m MODULE [ARGS...]
Writes {"path:qualname": calls} to OUT.json when the module returns or raises SystemExit. A coroutine or
generator counts once per invocation, not once per resumption (cProfile counts resumptions); C functions
are counted as "c:module.qualname". Slows the program several times: use the counts, not the times.
"""

from __future__ import annotations

import dis
import json
import runpy
import sys
import threading
from collections import Counter
from types import CodeType, FrameType
from typing import Any

_counts: Counter[str] = Counter()
_first: dict[CodeType, int] = {}


def _first_offset(code: CodeType) -> int:
    """Offset of the first RESUME: where a fresh frame of ``code`` stands on its 'call' event."""
    off = _first.get(code)
    if off is None:
        off = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
        _first[code] = off
    return off


def _c_name(fn: Any) -> str:
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, type(sys)):
        return f"c:{type(owner).__module__}.{getattr(fn, '__qualname__', fn.__name__)}"
    return f"c:{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', '?')}"


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if event == "call":
        code = frame.f_code
        if frame.f_lasti <= _first_offset(code):
            _counts[f"{code.co_filename}:{code.co_qualname}"] += 1
    elif event == "c_call":
        _counts[_c_name(arg)] += 1


def main() -> None:
    out, flag, module, *rest = sys.argv[1:]
    if flag != "-m":
        raise SystemExit(__doc__)
    sys.argv = [module, *rest]
    threading.setprofile(_profile)
    sys.setprofile(_profile)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        with open(out, "w") as f:
            json.dump(dict(_counts.most_common()), f, indent=0)


if __name__ == "__main__":
    main()
