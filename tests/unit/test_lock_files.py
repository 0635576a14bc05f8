"""The lock files work on any machine: no index, link or local folder of the machine that made them, and every
pinned package carries its hashes (pip then checks each download)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["requirements.lock", "requirements-dev.lock"])
def test_a_lock_file_is_portable_and_hashed(name: str) -> None:
    text = (ROOT / name).read_text()
    options = [line for line in text.splitlines() if line.startswith("-")]
    assert options == [], options  # --extra-index-url, --find-links, -e …: none
    assert "file://" not in text and "/opt/" not in text
    pins = re.findall(r"^([A-Za-z0-9._-]+)==(\S+) \\$", text, re.M)
    assert len(pins) > 50
    blocks = re.split(r"^(?=[A-Za-z0-9._-]+==)", text, flags=re.M)[1:]
    unhashed = [b.split("==")[0] for b in blocks if "--hash=sha256:" not in b]
    assert unhashed == []
