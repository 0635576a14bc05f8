"""The model that stands in for a person who did not answer (``[questions] on_timeout = "answer"``, Polpo's
behaviour), and that tells a command agent's question from output that only looks like one (``classify``).

Its model is ``[questions] model``, else the judge's, else ``[defaults]``', each with its own endpoint and key. The
prompts are Polpo's in substance: answer concisely from the mission and the task, without follow-up questions;
classify the end of the output as JSON ``{"isQuestion", "question"}`` (an answer that is not that JSON: not a
question).
"""

from __future__ import annotations

import logging

from polpo.config import Config
from polpo.llm import lenient_json
from polpo.llm.client import LLMClient, ModelSettings
from polpo.model.records import Mission, Task

log = logging.getLogger("polpo.questions")

__all__ = ["CLASSIFIED_CHARS", "Answerer", "answerer_from_config"]

CLASSIFIED_CHARS = 1_500  # the end of the output the classifier reads (Polpo's)
ANSWER_TOKENS = 600

_ANSWER = ("An agent working on a task asked the person who runs the mission a question, and that person did not "
           "answer in time. Answer it in their place: concisely and decisively, from what you are told of the "
           "mission and the task; where nothing says, choose what a careful engineer would. No follow-up "
           "questions, no preamble: only the answer.")
_CLASSIFY = ("You read the end of what a program wrote when it finished a task. Decide whether it stops to ask a "
             "person something it needs before it can go on (not a rhetorical question, not a question it answers "
             "itself). Answer with JSON only: {\"isQuestion\": true or false, \"question\": \"the question, "
             "complete on its own\"}.")


class Answerer:
    def __init__(self, client: LLMClient, settings: ModelSettings) -> None:
        self.client = client
        self.settings = settings

    @property
    def model(self) -> str:
        return self.settings.model

    async def answer(self, m: Mission, task: Task, question: str) -> str:
        """The model's answer to ``question`` (an :class:`~polpo.llm.client.LLMError` when the call fails)."""
        siblings = "\n".join(f"- {t.title}: {t.status}" for t in list(m.tasks.values())[:40] if t.id != task.id)
        user = (f"Mission: {m.name}\n{m.spec.description or ''}\n\nThe task: {task.title}\n{task.spec.description}"
                + (f"\n\nThe mission's other tasks:\n{siblings}" if siblings else "")
                + f"\n\nThe agent's question:\n{question}")
        reply = await self.client.chat(self.settings, [{"role": "system", "content": _ANSWER},
                                                       {"role": "user", "content": user}])
        return (reply.content or "").strip()

    async def is_question(self, output: str) -> str | None:
        """The question ``output`` ends with, or None when it asks nothing (or the reply cannot be read)."""
        reply = await self.client.chat(self.settings, [{"role": "system", "content": _CLASSIFY},
                                                       {"role": "user", "content": output[-CLASSIFIED_CHARS:]}])
        try:
            verdict = lenient_json.loads(reply.content or "")
        except ValueError:
            return None
        if not isinstance(verdict, dict) or verdict.get("isQuestion") is not True:
            return None
        question = verdict.get("question")
        return question.strip() if isinstance(question, str) and question.strip() else output.strip()


def answerer_from_config(cfg: Config, client: LLMClient) -> Answerer | None:
    """The answering model the config names (None: none at all, so nobody answers for a person)."""
    q, judge, d = cfg.questions, cfg.judge, cfg.defaults
    if q.model:
        model, base, key = q.model, q.api_base, q.api_key_env
    elif judge.panel_models():
        model, base, key = judge.panel_models()[0], judge.api_base, judge.api_key_env
    elif d.model:
        model, base, key = d.model, d.api_base, d.api_key_env
    else:
        return None
    return Answerer(client, ModelSettings(model, api_base=base, api_key_env=key, max_tokens=ANSWER_TOKENS,
                                          timeout=cfg.llm.request_timeout.total_seconds()))
