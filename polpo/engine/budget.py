"""A task's limits: its retry and fix budget, its escalation ladder, its time limit. Pure.

Each comes from the task's own field, else the mission's ``settings``, else the config's ``[defaults]``, so a
mission file can tighten or relax what the operator set without repeating it on every task.
"""

from __future__ import annotations

from polpo.config import Defaults
from polpo.engine import policy
from polpo.mission.schema import MissionSpec, TaskSpec

__all__ = ["budget", "escalation", "timeout_seconds"]


def budget(task: TaskSpec, mission: MissionSpec, defaults: Defaults) -> policy.Budget:
    """(max retries, max fix attempts) for the task."""
    s = mission.settings
    max_retries = task.max_retries if task.max_retries is not None else (
        s.max_retries if s.max_retries is not None else defaults.max_retries)
    max_fix = task.max_fix_attempts if task.max_fix_attempts is not None else (
        s.max_fix_attempts if s.max_fix_attempts is not None else defaults.max_fix_attempts)
    return policy.Budget(max_retries, max_fix)


def escalation(task: TaskSpec, *, first_agent_is_llm: bool) -> policy.Escalation:
    """The task's escalation ladder (``retryPolicy``): a model step only when its first agent is an LLM agent."""
    rp = task.retry_policy
    if rp is None:
        return policy.NO_ESCALATION
    targets = policy.escalation_targets(escalate_model=rp.escalate_model, fallback_agent=rp.fallback_agent,
                                        agent_is_llm=first_agent_is_llm)
    return policy.Escalation(targets, rp.escalate_after)


def timeout_seconds(task: TaskSpec, agent_timeout: float | None) -> float | None:
    """The attempt's time limit: the task's ``maxDuration``, else its agent's timeout."""
    if task.max_duration is not None:
        return task.max_duration.total_seconds()
    return agent_timeout
