"""``[store]``: SQLite unless a PostgreSQL URL is given; a password only ever comes from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from polpo.config import ConfigError, parse_config


def test_without_a_store_section_state_is_sqlite_in_the_state_folder(tmp_path: Path) -> None:
    cfg = parse_config({}, tmp_path / "polpo.toml")
    assert cfg.store.url is None and cfg.store.password_env is None and cfg.store.pool_size == 4
    assert cfg.db_path == tmp_path / ".polpo" / "polpo.db"


def test_a_postgresql_url_with_its_password_variable_and_pool_size(tmp_path: Path) -> None:
    cfg = parse_config({"store": {"url": "postgresql://polpo@db.internal:5433/polpo", "password_env": "PGPW",
                                  "pool_size": 8}}, tmp_path / "polpo.toml")
    assert (cfg.store.url, cfg.store.password_env, cfg.store.pool_size) == (
        "postgresql://polpo@db.internal:5433/polpo", "PGPW", 8)


@pytest.mark.parametrize("url", ["postgresql://polpo:Hunter2secret@db:5432/polpo",
                                 "postgresql://polpo@db:5432/polpo?password=Hunter2secret"])
def test_a_password_in_the_url_is_refused_without_repeating_it(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match="password_env") as err:
        parse_config({"store": {"url": url}}, tmp_path / "polpo.toml")
    assert "Hunter2secret" not in str(err.value)


@pytest.mark.parametrize(("store", "message"), [
    ({"url": "mysql://u@h/db"}, "only PostgreSQL"),
    ({"url": "sqlite:///x.db"}, "only PostgreSQL"),
    ({"url": "postgresql://u@h/db", "pool_size": 0}, "store.pool_size"),
    ({"url": "postgresql://u@h/db", "user": "u"}, "store.user"),
])
def test_store_settings_that_cannot_work_are_refused(tmp_path: Path, store: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"store": store}, tmp_path / "polpo.toml")
