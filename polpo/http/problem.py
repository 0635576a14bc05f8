"""Error answers as RFC 9457 problem details (``application/problem+json``), one shape for every refusal the
API makes: ``type`` ``about:blank`` with the status's own phrase as ``title``, the reason and what to do next
as ``detail``, and extension members: ``error`` (a short code, as before) and, for an invalid mission, the
``errors`` list (a JSON path and a message each)."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["PROBLEM_JSON", "problem", "problem_response"]

PROBLEM_JSON = "application/problem+json"


def problem(status: int, error: str, detail: str | None = None, **extensions: Any) -> bytes:
    """The body of a problem answer: ``error`` is the short code clients already match on."""
    body: dict[str, Any] = {"type": "about:blank", "title": HTTPStatus(status).phrase, "status": status,
                            "error": error}
    if detail:
        body["detail"] = detail
    body.update(extensions)
    return orjson.dumps(body)


def problem_response(status: int, error: str, detail: str | None = None, *,
                     headers: Mapping[str, str] | None = None, **extensions: Any) -> Response:
    return Response(problem(status, error, detail, **extensions), status_code=status, headers=headers,
                    media_type=PROBLEM_JSON)
