"""Run ``git``: the real program through :func:`polpo.tools.procs.run_process` (own process group, timeout,
whole-group kill), never a library, so what polpo does is what ``git`` on the command line does.

Every call gets a fixed environment: the minimal one (HOME stays, so the user's global config applies),
``LC_ALL=C`` (parsable messages), no terminal prompts, no pager, no optional locks (a ``git status`` of ours never
takes the user's index lock), and polpo as author and committer (commits are made by polpo on its own branches;
a repository without ``user.name`` still works). Hooks are off for polpo's commits and merges
(``core.hooksPath=/dev/null``): a user's pre-commit hook must not block or change an agent's commit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from polpo.clock import SystemClock
from polpo.fsfaults import errno_in
from polpo.tools.procs import minimal_env, run_process

__all__ = ["GIT_TIMEOUT", "GitError", "GitResult", "git", "git_env", "top_level"]

GIT_TIMEOUT = 120.0
"""Seconds one git command may take (a checkout of a big repository included)."""

_CLOCK = SystemClock()
_OUTPUT_LIMIT = 64 * 1024 * 1024  # whole outputs are parsed (status -z, merge-tree): keep them whole
_CONFIG = ("-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", "core.quotePath=false",
           "-c", "advice.detachedHead=false", "-c", "merge.conflictStyle=merge")


class GitError(Exception):
    """A git command failed (exit code not accepted, timeout, not startable)."""

    def __init__(self, args: Sequence[str], result: GitResult | None, message: str) -> None:
        super().__init__(message)
        self.args_ = tuple(args)
        self.result = result
        # a passing fault git met (read-only or full disk, no descriptors…; LC_ALL=C messages): callers wait it out
        self.errno = errno_in(message if result is None else f"{message}\n{result.err}")


@dataclass(frozen=True)
class GitResult:
    code: int | None
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0


def git_env() -> dict[str, str]:
    return minimal_env({
        "LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0", "GIT_AUTHOR_NAME": "polpo", "GIT_AUTHOR_EMAIL": "polpo@localhost",
        "GIT_COMMITTER_NAME": "polpo", "GIT_COMMITTER_EMAIL": "polpo@localhost", "GIT_EDITOR": "true",
        "GIT_MERGE_AUTOEDIT": "no"})


async def git(cwd: Path, *args: str, ok: Sequence[int] = (0,), stdin: bytes | None = None,
              timeout: float = GIT_TIMEOUT) -> GitResult:  # noqa: ASYNC109 - the timeout kills git
    """``git ARGS`` in ``cwd``; raises :class:`GitError` unless its exit code is in ``ok``."""
    argv = ["git", *_CONFIG, *args]
    r = await run_process(argv, cwd=cwd, env=git_env(), clock=_CLOCK, stdin=stdin, timeout=timeout,
                          output_limit=_OUTPUT_LIMIT, grace=2.0)
    result = GitResult(r.exit_code, r.stdout_tail, r.stderr_tail)
    if r.error is not None:
        raise GitError(args, None, f"git {' '.join(args[:3])}: {r.error}")
    if r.timed_out:
        raise GitError(args, result, f"git {' '.join(args[:3])} took more than {timeout:g} s")
    if r.exit_code not in ok:
        err = (r.stderr_tail or r.stdout_tail).strip().splitlines()
        raise GitError(args, result, f"git {' '.join(args[:3])} failed (exit {r.exit_code}): "
                                     f"{err[-1] if err else 'no message'}")
    return result


def top_level(path: Path) -> bool:
    """Whether ``path`` is the top folder of a git working tree (it holds a ``.git`` folder or file).

    A folder *inside* a repository is not: polpo's default workspaces lie in the state folder, which may sit in a
    clone (the quick start), and that clone is not the mission's repository.
    """
    return os.path.lexists(path / ".git")
