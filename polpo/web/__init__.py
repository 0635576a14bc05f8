"""The live web view: static HTML, CSS and JavaScript served by the daemon at ``/`` (no build step, no CDN).

The page reads the JSON API and follows ``/api/events/stream``; everything it shows comes from there.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["STATIC"]

STATIC = Path(__file__).parent / "static"
