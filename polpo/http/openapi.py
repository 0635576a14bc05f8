"""``GET /openapi.json``: the API described in OpenAPI 3.1, built from one table of the routes.

The request body of ``POST /api/missions`` is the mission file's own JSON Schema (``polpo schema``), its
definitions moved under ``components/schemas``. A test checks that every route the app serves is described here.
"""

from __future__ import annotations

from typing import Any

import orjson

from polpo.http.problem import PROBLEM_JSON
from polpo.mission.schema import mission_json_schema

__all__ = ["ROUTES", "openapi_document"]

_JSON = "application/json"


def _obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


# RFC 9457 problem details (application/problem+json); error and errors are extension members
_ERROR = _obj(type={"type": "string"}, title={"type": "string"}, status={"type": "integer"},
              detail={"type": "string"}, error={"type": "string"})
_PROBLEMS = _obj(type={"type": "string"}, title={"type": "string"}, status={"type": "integer"},
                 detail={"type": "string"}, error={"type": "string"}, errors={"type": "array", "items": _obj(
    path={"type": "string", "description": "JSON path in the mission document, e.g. $.tasks[0].assignTo"},
    message={"type": "string"})})
_REFUSED = _obj(type={"type": "string"}, title={"type": "string"}, status={"type": "integer"},
                detail={"type": "string"}, error={"type": "string"}, message={"type": "string"},
                target={"type": "string"})
_COMMAND = _obj(status={"type": "string", "enum": ["done", "refused"]}, message={"type": "string"},
                target={"type": "string"})
_EVENT = {"type": "object", "description": "One event, as a line of events.jsonl", "properties": {
    "seq": {"type": "integer"}, "ts": {"type": "string"}, "event": {"type": "string"},
    "missionId": {"type": "string"}, "taskId": {"type": "string"}, "node": {"type": "string"},
    "data": {"type": "object"}}}
_ANY = {"type": "object", "additionalProperties": True}
# every route: the browser guard (polpo/http/guard.py); every POST: JSON only
_GUARD = {403: ("a web page of another origin (not in [http] allowed_origins)", _ERROR),
          421: ("Host is not a name of this API (see [http] hosts)", _ERROR)}
_JSON_ONLY = {415: ("the request is not Content-Type: application/json", _ERROR)}

# (method, path, summary, parameters, responses {status: (description, schema | None)})
ROUTES: list[tuple[str, str, str, list[tuple[str, str, str]], dict[int, tuple[str, Any]]]] = [
    ("get", "/healthz", "Liveness: version, uptime, whether the store answers (no token needed)", [],
     {200: ("ok", _obj(status={"type": "string"}, version={"type": "string"},
                       uptimeSeconds={"type": "number"}, store=_obj(ok={"type": "boolean"}))),
      503: ("the store does not answer", _ANY)}),
    ("get", "/openapi.json", "This document", [], {200: ("OpenAPI 3.1", _ANY)}),
    ("get", "/metrics", "Prometheus metrics (text exposition format)", [], {200: ("metrics", None)}),
    ("get", "/api/missions", "The latest missions, oldest first, with task counts and their state as people read it",
     [("query", "status", "only missions of this status (a,b: of either); open: running or cancelling; waiting: "
                          "those with something waiting for a person"),
      ("query", "q", "only missions whose name or id contains this (any case)"),
      ("query", "finished", "false: only running and cancelling missions (as status=open)"),
      ("query", "limit", "how many (default 200)"),
      ("query", "before", "only missions accepted before the one numbered so (seq): the next page"),
      ("query", "offset", "skip the newest N (paging by position; before= costs the same whatever the history)")],
     {200: ("missions", _obj(missions={"type": "array", "items": _ANY}, total={"type": "integer"},
                             offset={"type": "integer"}, limit={"type": "integer"},
                             next={"type": ["integer", "null"],
                                   "description": "before= for the page of older missions; null: none"}))}),
    ("get", "/api/attention", "What waits for a person: approvals, checkpoints, tasks on hold, rejected files",
     [], {200: ("the items, most urgent kinds first", _obj(count={"type": "integer"}, items={
         "type": "array", "items": _obj(kind={"type": "string"}, state={"type": "string"},
                                        title={"type": "string"}, todo={"type": "string"},
                                        commands={"type": "array", "items": {"type": "string"}},
                                        missionId={"type": "string"}, taskId={"type": "string"},
                                        since={"type": "string"}, detail={"type": "string"},
                                        actions={"type": "array", "items": _ANY})}))}),
    ("post", "/api/missions", "Submit a mission document (validated as `polpo validate` does)",
     [("query", "name", "file name in the missions folder (default: from the mission's name)")],
     {201: ("accepted", _obj(missionId={"type": "string"}, file={"type": "string"},
                             warnings={"type": "array", "items": {"type": "string"}})),
      202: ("written, not yet taken in", _ANY), 422: ("invalid: every problem with its path", _PROBLEMS),
      413: ("larger than [http] max_body", _PROBLEMS)}),
    ("get", "/api/missions/{mission_id}", "One mission (id or name): tasks, gates, quality, spec",
     [("path", "mission_id", "mission id or name")], {200: ("the mission", _ANY), 404: ("unknown", _ERROR)}),
    ("post", "/api/missions/{mission_id}/cancel", "Cancel a running mission",
     [("path", "mission_id", "mission id or name")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("get", "/api/tasks/{task_id}", "One task (MISSION:N): attempts, checks, reviewer traces, transcripts",
     [("path", "task_id", "task id, e.g. calculator:2")], {200: ("the task", _ANY), 404: ("unknown", _ERROR)}),
    ("post", "/api/tasks/{task_id}/retry",
     "Retry a failed task with a fresh retry budget (optional body: usd, tokens: its LLM budget from now on)",
     [("path", "task_id", "task id")],
     {200: ("done", _COMMAND), 400: ("a budget that is not a positive number", _ERROR), 404: ("unknown", _ERROR),
      409: ("refused, with the reason", _REFUSED)}),
    ("post", "/api/tasks/{task_id}/approve",
     "Let a task awaiting approval go on (its first run, its fix or retry, or its agent's tool call), or pass one "
     "awaiting review (optional body: note, score 1..5 for a review, by)",
     [("path", "task_id", "task id")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("get", "/api/schedules", "Scheduled missions with their next run (docs/how-to/schedules.md)", [],
     {200: ("schedules", _obj(schedules={"type": "array", "items": _ANY}))}),
    ("post", "/api/schedules/{schedule_id}/{action}", "Pause, resume or remove a schedule (optional body: by)",
     [("path", "schedule_id", "schedule id (the mission file's name)"), ("path", "action", "pause | resume | remove")],
     {200: ("done", _COMMAND), 404: ("unknown action", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("post", "/api/missions/{mission_id}/resume",
     "Release a checkpoint (body: checkpoint (none: every reached one), note, by)",
     [("path", "mission_id", "mission id or name")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("post", "/api/tasks/{task_id}/reject",
     "Reject a task awaiting approval before it starts, its agent's tool call, or fail one awaiting review (body: "
     "reason, score 1..5 for a review, by)",
     [("path", "task_id", "task id")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("post", "/api/tasks/{task_id}/answer", "Answer the question a task's agent asked (body: answer, by)",
     [("path", "task_id", "task id")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("post", "/api/tasks/{task_id}/override",
     "Override a finished task's verdict, or give one awaiting review (body: passed, reason, score, by)",
     [("path", "task_id", "task id")],
     {200: ("done", _COMMAND), 404: ("unknown", _ERROR), 409: ("refused, with the reason", _REFUSED)}),
    ("get", "/api/events", "Stored events after a number, oldest first",
     [("query", "after", "seq to start after (default 0)"), ("query", "mission", "one mission's events"),
      ("query", "limit", "page size (default 1000, at most 5000)")],
     {200: ("a page", _obj(events={"type": "array", "items": _EVENT}, last={"type": "integer"},
                           more={"type": "boolean"}))}),
    ("get", "/api/events/stream", "Live events as Server-Sent Events (id = seq; resumable with Last-Event-ID)",
     [("header", "Last-Event-ID", "resume after this seq"), ("query", "after", "start after this seq"),
      ("query", "mission", "one mission's events")],
     {200: ("text/event-stream", None), 503: ("[http] max_stream_clients streams are open (see Retry-After)", _ERROR)}),
    ("get", "/", "The web view", [], {200: ("HTML", None)}),
    ("get", "/favicon.ico", "The web view's icon (SVG)", [], {200: ("image/svg+xml", None)}),
]


def openapi_document(version: str) -> bytes:
    schema = mission_json_schema()
    defs = schema.pop("$defs", {})
    for key in ("$schema", "$id"):
        schema.pop(key, None)
    components = {name: d for name, d in defs.items()}
    components["Mission"] = schema
    paths: dict[str, dict[str, Any]] = {}
    for method, path, summary, params, listed in ROUTES:
        responses = {**listed, **_GUARD, **(_JSON_ONLY if method == "post" else {})}
        op: dict[str, Any] = {"summary": summary, "responses": {
            str(code): {"description": desc, **({"content": {_JSON if code < 400 else PROBLEM_JSON: {"schema": s}}}
                                                if s is not None else {})}
            for code, (desc, s) in responses.items()}}
        if params:
            op["parameters"] = [{"in": where, "name": name, "description": desc, "required": where == "path",
                                 "schema": {"type": "string"}} for where, name, desc in params]
        if path == "/api/missions" and method == "post":
            op["requestBody"] = {"required": True, "content": {_JSON: {"schema": {"$ref": "#/components/schemas/Mission"}}}}
        elif method == "post":  # a command: no body, or {}, but always sent as JSON
            op["requestBody"] = {"required": False, "content": {_JSON: {"schema": {"type": "object"}}}}
        if path not in ("/healthz",):
            op["security"] = [{"bearer": []}, {"basic": []}]
        paths.setdefault(path, {})[method] = op
    doc = {"openapi": "3.1.0", "info": {"title": "polpo", "version": version,
                                        "description": "The polpo daemon's API. JSON keys are camelCase, like the events. "
                                                       "Every POST is sent as Content-Type: application/json."},
           "paths": paths,
           "components": {"schemas": components, "securitySchemes": {
               "bearer": {"type": "http", "scheme": "bearer", "description": "the token in [http] token_env"},
               "basic": {"type": "http", "scheme": "basic", "description": "any user name, the token as password"}}}}
    text = orjson.dumps(doc).replace(b'"#/$defs/', b'"#/components/schemas/')
    return text
