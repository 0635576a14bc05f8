"""Per-task isolation: each task of a mission in a git repository in its own worktree and branch.

When a task's isolation is ``"worktree"`` (task ``isolation``, else the mission's ``settings.isolation``, else
``"worktree"`` for a team agent with Polpo's ``enableGit``, else ``"none"``) and the workspace is the top folder
of a git repository:

* the mission gets a base — the repository's ``HEAD`` when its first such task starts (kept as
  ``refs/polpo/<mission>/base``) — and a result branch ``polpo/<mission>/result`` made there;
* each task works in ``<state>/worktrees/<mission>/<n-title>`` on branch ``polpo/<mission>/<n-title>``, made from
  the base with its dependencies' branches merged in first (from the result branch if they conflict);
* when the task passes, its work is committed (the message names the task; agents' own files and git-ignored
  files are left out) and merged into the result branch, in dependency order since a task only starts once its
  dependencies passed. A merge conflict sends the task back to a fix: the result branch is merged into its
  worktree, the conflict markers are left for the agent and the conflicting files are its feedback;
* the worktree is removed when the task ends (work that did not pass is committed on its branch, kept for a
  look); when the mission ends, branches already merged are deleted and the report names the result branch,
  for the user to review and merge. Nothing is ever checked out, committed or merged in the user's own tree.

After a ``kill -9``, :meth:`Isolation.reconcile` (a recovery hook) finds the worktrees of ``<state>/worktrees``:
those of open tasks are adopted again (stale git lock files of polpo's worktrees and branches removed, half-made
worktrees re-made), the rest are cleaned up as at the end of their mission.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import orjson

from polpo.config import Config
from polpo.events.catalog import TaskMergeConflict, TaskMerged, TaskWorktree
from polpo.model.doc import MissionDoc
from polpo.model.records import Mission, Task
from polpo.model.status import TaskStatus
from polpo.store.protocol import Store
from polpo.store.tx import Tx
from polpo.vcs import worktrees as wt
from polpo.vcs.git import GitError, git, top_level

log = logging.getLogger("polpo.isolation")

__all__ = ["Isolation", "Landing", "isolation_of", "isolation_warnings"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(text: str, limit: int = 40) -> str:
    s = _UNSAFE.sub("-", text)[:limit].strip("-.")
    return re.sub(r"\.lock$", "-lock", s).replace("..", ".") or "x"


def isolation_of(spec_task: Any, settings: Any, agent_isolation: str | None) -> str:
    """The isolation a task asks for: its own, the mission's, its team agent's (``enableGit``), else none."""
    return str(spec_task.isolation or settings.isolation or agent_isolation or "none")


def isolation_warnings(doc: MissionDoc, workspace: Path) -> list[str]:
    """A warning when tasks ask for worktrees but the workspace is not a repository's top folder (read from the
    mission's document: no task spec is parsed)."""
    spec = doc.head
    git_agents = {a.name for a in spec.team if a.enable_git}
    wanting = [title for i, title in enumerate(doc.titles)
               if str(doc.isolation(i) or spec.settings.isolation
                      or ("worktree" if doc.assignees[i] in git_agents else None) or "none") == "worktree"]
    if not wanting or top_level(workspace):
        return []
    names = ", ".join(wanting[:3]) + (f" and {len(wanting) - 3} more" if len(wanting) > 3 else "")
    return [f'isolation "worktree" (tasks {names}) needs the workspace to be a git repository; {workspace} is not '
            "one, so these tasks share it"]


@dataclass(frozen=True)
class Landing:
    """What landing a passed task did: merged, or a conflict to fix (files + git's CONFLICT lines)."""

    merged: bool
    files: list[str] = field(default_factory=list)
    message: str = ""


@dataclass(eq=False)
class _MissionRepo:
    mission_id: str
    repo: Path
    slug: str
    base: str
    branches: dict[str, str] = field(default_factory=dict)  # task id → its branch
    dirty_checked: bool = False

    @property
    def result(self) -> str:
        return f"polpo/{self.slug}/result"

    @property
    def base_ref(self) -> str:
        return f"refs/polpo/{self.slug}/base"


class Isolation:
    """Worktrees, branches and merges of isolated tasks; see the module docstring."""

    def __init__(self, cfg: Config, store: Store, *, forget_root: Any = None) -> None:
        self.cfg = cfg
        self.store = store
        self.root = cfg.state_dir / "worktrees"
        self.forget_root = forget_root  # called with a worktree's path before it is removed (stop watching it)
        self.missions: dict[str, _MissionRepo] = {}
        self.worktrees: dict[str, Path] = {}  # task id → its worktree, while it has one
        self._locks: dict[str, anyio.Lock] = {}
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)

    # -- which workspace ------------------------------------------------------------------------------------
    def wants(self, m: Mission, task: Task, agent_isolation: str | None) -> bool:
        return (isolation_of(task.spec, m.spec.settings, agent_isolation) == "worktree"
                and top_level(m.workspace))

    def workspace_of(self, m: Mission, task: Task) -> Path:
        """Where ``task`` works and is checked: its worktree, or the mission's workspace."""
        return self.worktrees.get(task.id, m.workspace)

    def _lock(self, repo: Path) -> anyio.Lock:
        return self._locks.setdefault(os.fspath(repo), anyio.Lock())

    def _dir(self, mr: _MissionRepo) -> Path:
        return self.root / mr.slug

    def _names(self, mr: _MissionRepo, task: Task) -> tuple[Path, str]:
        name = f"{task.idx + 1}-{_slug(task.title)}"
        return self._dir(mr) / name, f"polpo/{mr.slug}/{name}"

    # -- a task's worktree ----------------------------------------------------------------------------------
    async def prepare(self, m: Mission, task: Task, agent_isolation: str | None) -> Path:
        """The folder ``task`` works in: its worktree (made now if needed) when it is isolated, else the
        mission's workspace."""
        if task.id in self.worktrees:
            return self.worktrees[task.id]
        if not self.wants(m, task, agent_isolation):
            return m.workspace
        mr = await self._mission_repo(m)
        path, branch = self._names(mr, task)
        async with self._lock(mr.repo):
            if not await self._usable(path):
                note = await self._make(mr, m, task, path, branch)
            else:
                note = None
        mr.branches[task.id] = branch
        self.worktrees[task.id] = path
        if note is not None:
            start = await wt.head(path) or ""
            self.store.submit(self.store.tx().event(TaskWorktree(
                path=str(path), branch=branch, start=start, repository=str(mr.repo), note=note or None),
                mission_id=m.id, task_id=task.id))
        return path

    @staticmethod
    async def _usable(path: Path) -> bool:
        return await anyio.Path(path / ".git").is_file() and await wt.head(path) is not None

    async def _make(self, mr: _MissionRepo, m: Mission, task: Task, path: Path, branch: str) -> str:
        """Create the worktree (its branch too, unless it exists); returns a note for the event ("" = none)."""
        await wt.remove_worktree(mr.repo, path)  # a half-made one of a killed daemon, if any
        if await wt.branch_exists(mr.repo, branch):
            await wt.add_worktree(mr.repo, path, branch, None)
            return "its branch existed: earlier work kept"
        deps = [mr.branches[d] for d in task.deps if d in mr.branches]
        missing = len(deps) < len(task.deps)
        start = deps[0] if deps and not missing else (mr.result if missing else mr.base)
        await wt.add_worktree(mr.repo, path, branch, start)
        note = ""
        for dep in deps[1:] if not missing else []:
            try:
                if await wt.start_merge(path, dep, f"polpo: merge {dep} (dependency)"):
                    raise GitError(("merge",), None, "conflict")
            except GitError:
                await git(path, "merge", "--abort", ok=(0, 128))
                await git(path, "reset", "-q", "--hard", mr.result)
                note = "its dependencies' branches conflict with each other: started from the mission branch"
                break
        if not mr.dirty_checked:  # once per mission: a whole git status of a big repository takes a while
            mr.dirty_checked = True
            uncommitted = await git(mr.repo, "status", "--porcelain", "-uno", ok=(0, 128))
            if uncommitted.out.strip():
                note = (note + "; " if note else "") + ("the repository has uncommitted changes: the tasks' "
                                                        "worktrees do not have them")
        return note

    async def _mission_repo(self, m: Mission) -> _MissionRepo:
        mr = self.missions.get(m.id)
        if mr is not None:
            return mr
        repo = m.workspace
        async with self._lock(repo):
            if m.id in self.missions:
                return self.missions[m.id]
            mr = _MissionRepo(m.id, repo, _slug(m.id.replace("#", "-"), 80), "")
            base = await wt.rev(repo, mr.base_ref)
            if base is None:
                base = await wt.head(repo) or await wt.root_commit(repo, "polpo: empty base")
                await wt.update_ref(repo, mr.base_ref, base, "")
            mr.base = base
            if not await wt.branch_exists(repo, mr.result):
                await wt.update_ref(repo, f"refs/heads/{mr.result}", base, "")
            await self._save(mr)
            self.missions[m.id] = mr
        return mr

    async def _save(self, mr: _MissionRepo) -> None:
        d = anyio.Path(self._dir(mr))
        await d.mkdir(parents=True, exist_ok=True)
        data = {"missionId": mr.mission_id, "repository": str(mr.repo), "slug": mr.slug, "base": mr.base}
        tmp = d / "mission.json.tmp"
        await tmp.write_bytes(orjson.dumps(data))
        await tmp.rename(d / "mission.json")

    # -- a passed task lands --------------------------------------------------------------------------------
    async def land(self, m: Mission, task: Task, attempt_number: int, agent: str,
                   ignore: tuple[str, ...]) -> Landing | None:
        """Commit a passed task's work and merge it into the mission's branch (None: the task is not isolated)."""
        path = self.worktrees.get(task.id)
        mr = self.missions.get(m.id)
        if path is None or mr is None:
            return None
        branch = mr.branches[task.id]
        async with self._lock(mr.repo):
            if await wt.merge_in_progress(path):
                marked = await wt.files_with_markers(path, await wt.conflicted_files(path))
                if marked:
                    return Landing(False, marked, "conflict markers are still in these files")
            message = (f"{task.title}\n\npolpo task {task.id} (mission {m.id}), attempt {attempt_number}, "
                       f"agent {agent}")
            commit = await wt.commit_all(path, message, ignore)
            tip = await wt.head(path) or ""
            merge = await wt.merge_into(mr.repo, mr.result, tip, f"polpo: merge task {task.id}: {task.title}")
            if merge.merged:
                self.store.submit(self.store.tx().event(TaskMerged(
                    branch=branch, into=mr.result, commit=commit, merge=merge.commit),
                    mission_id=m.id, task_id=task.id))
                return Landing(True)
            files = await wt.start_merge(path, mr.result, f"polpo: merge {mr.result} into {branch}")
            if not files:  # git's own merge went through in the worktree: the branch now holds the result
                tip = await wt.head(path) or ""
                merge = await wt.merge_into(mr.repo, mr.result, tip, f"polpo: merge task {task.id}: {task.title}")
                if merge.merged:
                    self.store.submit(self.store.tx().event(TaskMerged(
                        branch=branch, into=mr.result, commit=commit, merge=merge.commit),
                        mission_id=m.id, task_id=task.id))
                    return Landing(True)
        self.store.submit(self.store.tx().event(TaskMergeConflict(
            branch=branch, into=mr.result, files=files or merge.conflicts), mission_id=m.id, task_id=task.id))
        return Landing(False, files or merge.conflicts, merge.messages)

    async def release(self, m: Mission, task: Task, ignore: tuple[str, ...] = ()) -> None:
        """The task ended: keep work that did not land on its branch, remove its worktree."""
        path = self.worktrees.pop(task.id, None)
        mr = self.missions.get(m.id)
        if path is None or mr is None:
            return
        async with self._lock(mr.repo):
            await self._remove(mr, path, None if task.status is TaskStatus.DONE else
                               f"{task.title} (unfinished: task {task.id} {task.status})", ignore)
            if m.id not in self.missions:
                await self._drop_dir(mr)

    async def _remove(self, mr: _MissionRepo, path: Path, keep_message: str | None, ignore: tuple[str, ...]) -> None:
        if keep_message is not None and await self._usable(path):
            try:
                await wt.commit_all(path, keep_message, ignore)
            except GitError as exc:
                log.warning("could not keep the work in %s: %s", path, exc)
        if self.forget_root is not None:
            self.forget_root(path)
        await wt.remove_worktree(mr.repo, path)

    # -- the end of a mission -------------------------------------------------------------------------------
    def on_mission_complete(self, tx: Tx, m: Mission) -> None:
        """Name the result branch in the mission's report; the clean-up runs in :meth:`janitor`."""
        mr = self.missions.get(m.id)
        if mr is None:
            return
        done = [t.id for t in m.tasks.values() if t.status is TaskStatus.DONE and t.id in mr.branches]
        if m.report is not None:
            m.report["branch"] = {"name": mr.result, "base": mr.base, "repository": str(mr.repo), "tasks": done}
            tx.mission(m)  # the row the board put in ``tx`` was made before this; the later one is stored
        try:
            self._send.send_nowait(m.id)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the daemon is stopping: the next start's
            log.info("mission %s: its worktrees are cleaned up at the next start", m.id)  # reconcile does it

    async def janitor(self) -> None:
        """Clean up after finished missions, one at a time (runs for the daemon's lifetime; both ends of its
        queue close with it)."""
        async with self._send, self._receive:
            async for mid in self._receive:
                try:
                    await self.finish(mid)
                except Exception:
                    log.exception("could not clean up the worktrees of mission %s", mid)

    async def finish(self, mid: str) -> None:
        """Remove the mission's worktrees (keeping unmerged work on its branches) and its merged branches."""
        mr = self.missions.get(mid)
        if mr is None:
            return
        async with self._lock(mr.repo):
            for tid in [t for t in self.worktrees if t.startswith(f"{mid}:")]:
                del self.worktrees[tid]
            folder = self._dir(mr)
            left = await anyio.to_thread.run_sync(lambda: sorted(p for p in folder.glob("*") if p.is_dir()))
            for path in left:  # worktrees of tasks that did not end by themselves (cancelled, or a crash)
                await self._remove(mr, path, f"unfinished work left in {path.name}", ())
            result = await wt.rev(mr.repo, f"refs/heads/{mr.result}")
            for branch in await wt.branches(mr.repo, f"polpo/{mr.slug}/"):
                if branch != mr.result and result and await wt.is_ancestor(mr.repo, f"refs/heads/{branch}", result):
                    await wt.delete_branch(mr.repo, branch)
            await git(mr.repo, "worktree", "prune", ok=(0, 128))
        self.missions.pop(mid, None)
        await self._drop_dir(mr)

    async def _drop_dir(self, mr: _MissionRepo) -> None:
        """The mission's folder of worktrees, once it holds no worktree (a task's release may still be running)."""
        d = self._dir(mr)
        with contextlib.suppress(OSError):
            (d / "mission.json").unlink(missing_ok=True)
            d.rmdir()

    # -- after a crash --------------------------------------------------------------------------------------
    async def reconcile(self, missions: dict[str, Mission]) -> None:
        """Recovery hook: adopt the worktrees of open tasks, clean up the rest (see the module docstring)."""
        if not await anyio.Path(self.root).is_dir():
            return
        for d in sorted(await anyio.to_thread.run_sync(lambda: list(self.root.iterdir()))):
            try:
                data = orjson.loads(await anyio.Path(d / "mission.json").read_bytes())
                mr = _MissionRepo(data["missionId"], Path(data["repository"]), data["slug"], data["base"])
            except (OSError, ValueError, KeyError):
                await anyio.to_thread.run_sync(partial(shutil.rmtree, d, ignore_errors=True))
                continue
            try:
                await self._adopt(mr, missions.get(mr.mission_id))
            except (GitError, OSError) as exc:
                log.warning("could not reconcile the worktrees of mission %s: %s", mr.mission_id, exc)

    async def _adopt(self, mr: _MissionRepo, m: Mission | None) -> None:
        await wt.clear_stale_locks(mr.repo, self._dir(mr), mr.slug)
        self.missions[mr.mission_id] = mr
        await git(mr.repo, "worktree", "prune", ok=(0, 128))
        if m is None:
            await self.finish(mr.mission_id)
            return
        known = {self._names(mr, t)[1]: t for t in m.tasks.values()}
        for branch in await wt.branches(mr.repo, f"polpo/{mr.slug}/"):
            if branch in known:
                mr.branches[known[branch].id] = branch
        for task in m.tasks.values():
            path, branch = self._names(mr, task)
            if not await anyio.Path(path).exists():
                continue
            if task.terminal or not await self._usable(path):
                await self._remove(mr, path, None if task.terminal and task.status is TaskStatus.DONE
                                   else f"unfinished work of task {task.id}", ())
                continue
            self.worktrees[task.id] = path
            mr.branches[task.id] = branch
