"""The reference pages' generated tables (docs/hooks/reference.py) list everything the code has."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from polpo.cli import COMMANDS
from polpo.config import Config
from polpo.events.catalog import PAYLOADS
from polpo.http.openapi import openapi_document

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", REPO / "docs" / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_page_has_every_command(hook: ModuleType) -> None:
    page = hook.cli()
    for name in COMMANDS:
        assert f"## `polpo {name}`" in page
    assert "`polpo schedules pause`" in page  # a group's subcommands too
    assert "`--archive-log`" in page


def test_events_page_has_every_event(hook: ModuleType) -> None:
    page = hook.events()
    assert all(f"| `{name}` |" in page for name in PAYLOADS)
    assert "`taskCount`" in page  # data fields in camelCase, as in events.jsonl


def test_http_page_has_every_route(hook: ModuleType) -> None:
    page = hook.http_api()
    for path in json.loads(openapi_document("x"))["paths"]:
        assert f"`{path}`" in page


def test_config_page_has_every_section_and_key(hook: ModuleType) -> None:
    page = hook.config_keys()
    for section in Config.model_fields:
        if section != "source":
            assert f"`[{section}" in page
    assert "| `shutdown_grace` | duration (seconds, or ISO-8601 such as PT30S) | `10` |" in page
    assert "| `force_polling` | bool | `false` |" in page


def test_metrics_page_names_every_metric_with_its_labels(hook: ModuleType) -> None:
    page = hook.metrics()
    assert "| `polpo_attempts_total` | counter | `kind`, `outcome` |" in page
    assert "| `polpo_tasks` | gauge | `status` |" in page
    assert "| `polpo_queue_depth` | gauge |  |" in page


def test_schema_page_has_the_whole_schema(hook: ModuleType) -> None:
    page = hook.mission_schema()
    assert "## Mission (top level)" in page and "| `tasks` |" in page and '"$defs"' in page


def test_an_unknown_marker_fails_the_build(hook: ModuleType) -> None:
    class Page:
        class file:  # the shape mkdocs passes
            src_uri = "reference/x.md"

    with pytest.raises(ValueError, match="no generator named 'nope'"):
        hook.on_page_markdown("<!-- generated: nope -->", Page(), None, None)
