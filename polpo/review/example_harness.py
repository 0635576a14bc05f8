"""Runs stated examples against a work's Python files, in a process of its own (``python3 -I -B example_harness.py``).

Not imported by polpo: :mod:`polpo.review.evidence_run` runs this file with the ``python3`` the agents' commands
use, in a scratch copy of the work (isolated mode: neither this folder nor ``PYTHON*`` variables on the path; no
bytecode written), reading ``{"root", "files", "examples", "per_example", "nonce"}`` as JSON on stdin and writing
lines on stdout: the nonce, a space, then ``{"start": i}`` as example ``i`` begins and ``{"i", "passed", "got",
"error"}`` when it ends (``i`` = -1: a file that did not load). Only lines that start with the nonce, which the work
never saw, are results; the work's own prints go to /dev/null. With ``reference`` (a file of the judge's own
implementation) and ``probes`` (calls), the stated examples are then run on the reference (``{"refExample", "passed"}``)
and each probe on both (``{"probeStart": k}``, then ``{"probe": k, "same", "work", "ref"}``; ``same`` is null when only one of them raised). It uses only the standard library, and syntax any Python 3.7 or newer reads.

The copy's root and its ``src/`` folder go first on ``sys.path``; a file inside packages (every folder up to the
root has ``__init__.py``) is imported by its dotted name, so its relative imports work, any other file by its
name from its own folder. The names the files define are gathered into one namespace, the way the task's text
refers to them. A doctest example is run by :mod:`doctest` itself (whitespace normalised, ``...`` allowed); a
one-line example passes when its result equals the stated value, or prints as it was written.

Bounds: each file's import and each example have a time limit (``SIGALRM``); the process may not grow past
:data:`MEMORY` of address space nor write a file larger than :data:`FILE_SIZE`; the caller kills the whole
process group at its own deadline.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import io
import json
import math
import os
import signal
import sys
import traceback
from typing import Any

GOT_CHARS = 500
MEMORY = 2 * 1024**3
FILE_SIZE = 16 * 1024**2


class _Timeout(BaseException):
    """Raised by the alarm: a BaseException, so a work that swallows ``Exception`` in a loop is still stopped."""


def _alarm(_signum: int, _frame: Any) -> None:
    raise _Timeout()


def _limits() -> None:
    try:
        import resource

        for which, value in ((resource.RLIMIT_AS, MEMORY), (resource.RLIMIT_FSIZE, FILE_SIZE)):
            _soft, hard = resource.getrlimit(which)
            if hard == resource.RLIM_INFINITY or hard > value:
                resource.setrlimit(which, (value, value))
    except (ImportError, ValueError, OSError):
        pass  # a platform without these limits: the caller's deadline still bounds the run


def _dotted(root: str, path: str) -> str | None:
    """The module name of ``path`` when every folder between it and the root (or ``src/``) is a package."""
    for base in (os.path.join(root, "src"), root):
        rel = os.path.relpath(path, base)
        if rel.startswith(".."):
            continue
        parts = rel[:-3].split(os.sep)
        folder = base
        for part in parts[:-1]:
            folder = os.path.join(folder, part)
            if not os.path.isfile(os.path.join(folder, "__init__.py")):
                break
        else:
            if all(p.isidentifier() for p in parts) and len(parts) > 1:
                return ".".join(parts)
    return None


def _load(root: str, paths: list[str], per: float) -> tuple[dict[str, Any], list[str]]:
    namespace: dict[str, Any] = {"__name__": "__polpo_examples__"}
    problems: list[str] = []
    for folder in (os.path.join(root, "src"), root):
        if os.path.isdir(folder) and folder not in sys.path:
            sys.path.insert(0, folder)
    for n, rel in enumerate(paths):
        path = os.path.join(root, rel)
        try:
            signal.setitimer(signal.ITIMER_REAL, per)
            dotted = _dotted(root, path)
            if dotted is not None:
                module = importlib.import_module(dotted)
            else:
                folder = os.path.dirname(path)
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                name = os.path.splitext(os.path.basename(path))[0]
                spec = importlib.util.spec_from_file_location(name if name.isidentifier() else f"m{n}", path)
                if spec is None or spec.loader is None:
                    raise ImportError("not a Python file")
                module = importlib.util.module_from_spec(spec)
                sys.modules[spec.name] = module
                spec.loader.exec_module(module)
        except _Timeout:
            problems.append(f"{rel}: its import did not finish within {per:g} s")
            continue
        except BaseException as exc:  # a file that does not load is itself evidence
            problems.append(f"{rel}: {type(exc).__name__}: {exc}")
            continue
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        namespace.update({k: v for k, v in vars(module).items() if not k.startswith("__")})
    return namespace, problems


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            return bool(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9))
        except TypeError:
            return False
    return False


def _value(example: dict[str, str], namespace: dict[str, Any]) -> tuple[bool, str]:
    got = eval(compile(example["source"], "<example>", "eval"), dict(namespace))
    want = eval(compile(example["want"], "<expected>", "eval"), dict(namespace))
    passed = bool(got == want) or _close(got, want) or repr(got) == example["want"].strip()
    return passed, repr(got)


class _Runner(doctest.DocTestRunner):
    """A runner that keeps what the example produced instead of printing a report."""

    got = ""

    def report_failure(self, out: Any, test: Any, example: Any, got: str) -> None:
        self.got = got

    def report_unexpected_exception(self, out: Any, test: Any, example: Any, exc_info: Any) -> None:
        self.got = "".join(traceback.format_exception_only(exc_info[0], exc_info[1])).strip()


def _as_value(example: dict[str, str]) -> bool:
    """A doctest that is one expression (not a ``print``) and no ``...``: compared as a value, so what the call
    prints on the way does not make a right result wrong."""
    source = example["source"].strip()
    if "..." in example["want"] or source.startswith("print("):
        return False
    try:
        compile(source, "<example>", "eval")
    except SyntaxError:
        return False
    return True


def _shown(example: dict[str, str], namespace: dict[str, Any]) -> tuple[bool, str]:
    """A one-expression doctest: its value, as repr prints it, against the stated output (whitespace aside), or
    equal to the stated output read as a value."""
    saved, sys.stdout = sys.stdout, io.StringIO()
    try:
        got = eval(compile(example["source"].strip(), "<example>", "eval"), dict(namespace))
    finally:
        sys.stdout = saved
    want = example["want"].strip()
    if not want:  # a doctest shows nothing for None (HumanEval's ``>>> longest([])`` with no line after it)
        return got is None, repr(got)
    if " ".join(repr(got).split()) == " ".join(want.split()):
        return True, want
    try:
        expected = eval(compile(want, "<expected>", "eval"), dict(namespace))
    except Exception:
        return False, repr(got)
    return bool(got == expected) or _close(got, expected), repr(got)


def _doctest(example: dict[str, str], namespace: dict[str, Any]) -> tuple[bool, str]:
    if _as_value(example):
        return _shown(example, namespace)
    test = doctest.DocTest([doctest.Example(example["source"] + "\n", example["want"] + "\n")],
                           dict(namespace), "example", None, 0, None)
    runner = _Runner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    runner.run(test, out=io.StringIO().write, clear_globs=False)
    passed = runner.failures == 0
    return passed, example["want"] if passed else runner.got


def _results_channel() -> Any:
    """The harness's own copy of stdout; the process's stdout (and the work's prints with it) goes to /dev/null,
    so what the work prints can neither crowd results out of the caller's tail nor pass for one."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 - the process's stdout, kept open
    return out


def _reference(root: str, rel: str, per: float) -> tuple[dict[str, Any] | None, str]:
    """The judge's own implementation (:mod:`polpo.review.probes`), loaded apart from the work."""
    path = os.path.join(root, rel)
    try:
        signal.setitimer(signal.ITIMER_REAL, per)
        spec = importlib.util.spec_from_file_location("_polpo_reference", path)
        if spec is None or spec.loader is None:
            return None, "not a Python file"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except BaseException as exc:
        return None, f"{type(exc).__name__}: {exc}"[:GOT_CHARS]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return {"__name__": "__polpo_reference__", **{k: v for k, v in vars(module).items() if not k.startswith("__")}}, ""


def _call(source: str, namespace: dict[str, Any], per: float) -> tuple[bool, Any]:
    """(returned normally, its value or the exception's type name); prints discarded; bounded in time."""
    saved, sys.stdout = sys.stdout, io.StringIO()
    try:
        signal.setitimer(signal.ITIMER_REAL, per)
        return True, eval(compile(source, "<probe>", "eval"), dict(namespace))
    except _Timeout:
        return False, "a time-out"
    except BaseException as exc:
        return False, type(exc).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout = saved


def _probes(request: dict[str, Any], work: dict[str, Any], per: float, emit: Any) -> None:
    """The stated examples on the reference (is it credible?), then each probe on both."""
    ref, problem = _reference(str(request["root"]), str(request["reference"]), per)
    if ref is None:
        emit({"reference": "unloadable", "error": problem})
        return
    for i, example in enumerate(request["examples"]):
        try:
            signal.setitimer(signal.ITIMER_REAL, per)
            run = _doctest if example["style"] == "doctest" else _value
            passed = run(example, ref)[0]
        except BaseException:
            passed = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"refExample": i, "passed": passed})
    for k, source in enumerate(request.get("probes") or []):
        emit({"probeStart": k})
        ok_w, got_w = _call(source, work, per)
        ok_r, got_r = _call(source, ref, per)
        try:  # one raising where the other returns says nothing: the input may be outside what the task takes
            same = None if ok_w != ok_r else (not ok_w) or bool(got_w == got_r) or _close(got_w, got_r)
        except BaseException:
            same = False
        emit({"probe": k, "same": same, "work": (repr(got_w) if ok_w else f"raised {got_w}")[:GOT_CHARS],
              "ref": (repr(got_r) if ok_r else f"raised {got_r}")[:GOT_CHARS]})


def main() -> None:
    request = json.load(sys.stdin)
    _limits()
    signal.signal(signal.SIGALRM, _alarm)
    per = float(request.get("per_example", 5))
    nonce = str(request.get("nonce") or "")
    out = _results_channel()

    def emit(record: dict[str, Any]) -> None:
        out.write(f"{nonce} {json.dumps(record)}\n")
        out.flush()

    namespace, problems = _load(str(request["root"]), list(request["files"]), per)
    for problem in problems:
        emit({"i": -1, "passed": False, "got": "", "error": problem[:GOT_CHARS]})
    for i, example in enumerate(request["examples"] if request.get("work_examples", True) else []):
        emit({"start": i})  # an example that started and never reported ended the run: it failed
        result: dict[str, Any] = {"i": i, "passed": False, "got": "", "error": None}
        try:
            signal.setitimer(signal.ITIMER_REAL, per)
            run = _doctest if example["style"] == "doctest" else _value
            result["passed"], result["got"] = run(example, namespace)
        except _Timeout:
            result["error"] = f"did not finish within {per:g} s"
        except BaseException as exc:  # the example's own exception is what it produced
            result["error"] = f"{type(exc).__name__}: {exc}"[:GOT_CHARS]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        result["got"] = str(result["got"])[:GOT_CHARS]
        emit(result)
    if request.get("reference"):
        _probes(request, namespace, per, emit)


if __name__ == "__main__":
    main()
