"""polpo.tools.sandbox: every path a model gives stays inside the workspace, symlinks included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from polpo.tools.sandbox import Sandbox, SandboxError


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hi')\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("top secret\n")
    return root


def test_root_is_resolved_once(tmp_path: Path, ws: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    sb = Sandbox(alias)
    assert sb.root == ws.resolve()
    assert sb.resolve("src/main.py") == ws.resolve() / "src" / "main.py"


@pytest.mark.parametrize("path", ["src/main.py", "./src/main.py", "src//main.py", "src/./main.py"])
def test_plain_relative_paths_resolve_inside(ws: Path, path: str) -> None:
    sb = Sandbox(ws)
    assert sb.resolve(path, must_exist=True) == ws.resolve() / "src" / "main.py"


def test_dot_is_the_root_and_new_files_are_allowed(ws: Path) -> None:
    sb = Sandbox(ws)
    assert sb.resolve(".") == sb.root
    assert sb.resolve("new/dir/file.txt") == sb.root / "new" / "dir" / "file.txt"


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/etc/passwd", "absolute"),
        ("//etc/passwd", "absolute"),
        ("../outside/secret.txt", "'..'"),
        ("../../etc/passwd", "'..'"),
        ("src/../../outside/secret.txt", "'..'"),
        ("src/..", "'..'"),
        ("..", "'..'"),
        ("src/main.py\x00.txt", "NUL"),
    ],
)
def test_refused_before_touching_the_file_system(ws: Path, path: str, needle: str) -> None:
    with pytest.raises(SandboxError) as info:
        Sandbox(ws).resolve(path)
    message = str(info.value)
    assert needle in message
    assert "relative paths inside the workspace" in message  # the model is told what is allowed
    assert str(ws) not in message  # the absolute workspace location is not shown


def test_non_string_is_refused(ws: Path) -> None:
    with pytest.raises(SandboxError):
        Sandbox(ws).resolve(123)  # type: ignore[arg-type]


def test_symlink_to_outside_directory_is_refused(tmp_path: Path, ws: Path) -> None:
    (ws / "link").symlink_to("/etc")
    sb = Sandbox(ws)
    for path in ("link", "link/passwd", "link/does-not-exist"):
        with pytest.raises(SandboxError, match="outside the workspace"):
            sb.resolve(path)


def test_symlinked_parent_directory_is_refused(tmp_path: Path, ws: Path) -> None:
    (ws / "src" / "vendor").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(SandboxError, match="outside"):
        Sandbox(ws).resolve("src/vendor/secret.txt")
    with pytest.raises(SandboxError, match="outside"):
        Sandbox(ws).resolve("src/vendor/new-file.txt")


def test_symlinked_file_and_dangling_link_pointing_outside_are_refused(tmp_path: Path, ws: Path) -> None:
    (ws / "secret").symlink_to(tmp_path / "outside" / "secret.txt")
    (ws / "dangling").symlink_to(tmp_path / "outside" / "not-yet")
    sb = Sandbox(ws)
    with pytest.raises(SandboxError):
        sb.resolve("secret")
    with pytest.raises(SandboxError):
        sb.resolve("dangling")  # writing through it would create a file outside


def test_symlink_staying_inside_is_followed(ws: Path) -> None:
    (ws / "alias.py").symlink_to(ws / "src" / "main.py")
    (ws / "code").symlink_to("src")
    sb = Sandbox(ws)
    assert sb.resolve("alias.py", must_exist=True) == sb.root / "src" / "main.py"
    assert sb.resolve("code/main.py", must_exist=True) == sb.root / "src" / "main.py"


def test_sibling_with_common_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws-evil").mkdir()
    (tmp_path / "ws" / "link").symlink_to(tmp_path / "ws-evil")
    with pytest.raises(SandboxError):
        Sandbox(tmp_path / "ws").resolve("link")


def test_must_exist(ws: Path) -> None:
    sb = Sandbox(ws)
    with pytest.raises(SandboxError, match="does not exist"):
        sb.resolve("nope.txt", must_exist=True)
    assert sb.resolve("nope.txt") == sb.root / "nope.txt"


def test_symlink_loop_does_not_escape(ws: Path) -> None:
    (ws / "a").symlink_to("b")
    (ws / "b").symlink_to("a")
    sb = Sandbox(ws)
    with pytest.raises(SandboxError):
        sb.resolve("a", must_exist=True)


def test_relative(ws: Path) -> None:
    sb = Sandbox(ws)
    assert sb.relative(sb.root) == "."
    assert sb.relative(sb.root / "src" / "main.py") == "src/main.py"
    assert sb.relative(Path("src/main.py")) == "src/main.py"
    with pytest.raises(SandboxError):
        sb.relative(Path("/etc/passwd"))


def test_contains_is_lexical_and_prefix_safe(ws: Path) -> None:
    sb = Sandbox(ws)
    assert sb.contains(sb.root)
    assert sb.contains(sb.root / "x")
    assert not sb.contains(str(sb.root) + "-other")
    assert not sb.contains(os.path.dirname(sb.root))


def test_every_path_resolves_as_realpath_would(tmp_path: Path, ws: Path) -> None:
    """The walk that skips ``realpath`` for paths without links gives what ``realpath`` gives, for every kind of
    component: plain, missing, through a file, through a link inside, through a link out, a loop."""
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "inner").symlink_to("src")
    (ws / "out").symlink_to(tmp_path / "outside")
    (ws / "loop").symlink_to("loop")
    sb = Sandbox(ws)
    paths = ["src", "src/main.py", "src/pkg/mod.py", "./src//pkg/./mod.py", "src/", "missing", "src/missing.py",
             "src/main.py/x", "inner/main.py", "inner/pkg/mod.py", "out/secret.txt", "out", "loop", "loop/x"]
    for path in paths:
        real = os.path.realpath(os.path.join(sb.root, path))
        inside = real == str(sb.root) or real.startswith(str(sb.root) + os.sep)
        for must_exist in (False, True):
            if inside and (os.path.exists(real) or not must_exist):
                assert sb.resolve(path, must_exist=must_exist) == Path(real), path
            else:
                with pytest.raises(SandboxError):
                    sb.resolve(path, must_exist=must_exist)


def test_a_root_given_through_a_link_and_dot_dot_is_where_the_link_leads(tmp_path: Path) -> None:
    (tmp_path / "deep" / "target").mkdir(parents=True)
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "link").symlink_to(tmp_path / "deep" / "target")
    assert Sandbox(tmp_path / "here" / "link" / "..").root == (tmp_path / "deep").resolve()
    assert Sandbox(tmp_path / "here" / "." / "link").root == (tmp_path / "deep" / "target").resolve()
    assert Sandbox(tmp_path / "not-yet" / "ws").root == tmp_path.resolve() / "not-yet" / "ws"
