"""The file tools on real folders: bounded reads, Python glob/grep, safe writes, edits (dispatch: test_tool_registry)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from polpo.tools import walk
from polpo.tools.edit import edit_file, write_file
from polpo.tools.globbing import MAX_GLOB_RESULTS, glob
from polpo.tools.grep import MAX_GREP_FILE_BYTES, MAX_GREP_MATCHES, grep
from polpo.tools.listing import list_dir
from polpo.tools.output import ToolOutput
from polpo.tools.read import MAX_LINE_CHARS, MAX_READ_BYTES, read_file
from polpo.tools.sandbox import Sandbox

pytestmark = pytest.mark.anyio

SECRET = "TOP-SECRET-DO-NOT-READ"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(f"{SECRET}\n")
    (out / "more.py").write_text(f"# {SECRET}\n")
    return out


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "main.py").write_text("import pkg\n\ndef main():\n    return 42\n")
    (root / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "src" / "pkg" / "util.ts").write_text("export const x = 1;\n")
    (root / "README.md").write_text("# Title\nSome text.\n")
    return root


@pytest.fixture
def sb(ws: Path) -> Sandbox:
    return Sandbox(ws)


def _err(out: ToolOutput, kind: str | None = None) -> str:
    assert not out.ok, out.text
    assert out.text.startswith("Error: ")
    if kind is not None:
        assert out.data["error"] == kind, out.data
    return out.text


# ---------------------------------------------------------------------------------------------- escapes


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "../outside/secret.txt", "src/../../x"])
async def test_read_file_refuses_paths_out_of_the_workspace(sb: Sandbox, path: str) -> None:
    text = _err(await read_file(sb, path), "sandbox")
    assert "root:" not in text and SECRET not in text


async def test_symlink_to_etc_then_link_passwd_is_refused(sb: Sandbox, ws: Path) -> None:
    (ws / "link").symlink_to("/etc")
    text = _err(await read_file(sb, "link/passwd"), "sandbox")
    assert "outside the workspace" in text
    _err(await list_dir(sb, "link"), "sandbox")
    _err(await write_file(sb, "link/evil.conf", "x"), "sandbox")
    _err(await edit_file(sb, "link/passwd", "root", "toor"), "sandbox")


async def test_symlinked_parent_directory_is_refused(sb: Sandbox, ws: Path, outside: Path) -> None:
    (ws / "src" / "vendor").symlink_to(outside, target_is_directory=True)
    text = _err(await read_file(sb, "src/vendor/secret.txt"), "sandbox")
    assert SECRET not in text
    _err(await write_file(sb, "src/vendor/planted.txt", "x"), "sandbox")
    assert not (outside / "planted.txt").exists()


async def test_write_through_symlink_leading_outside_is_refused(sb: Sandbox, ws: Path, outside: Path) -> None:
    (ws / "notes.txt").symlink_to(outside / "secret.txt")
    (ws / "dangling.txt").symlink_to(outside / "created-by-model.txt")
    _err(await write_file(sb, "notes.txt", "overwritten"), "sandbox")
    _err(await write_file(sb, "dangling.txt", "planted"), "sandbox")
    assert (outside / "secret.txt").read_text() == f"{SECRET}\n"
    assert not (outside / "created-by-model.txt").exists()


async def test_glob_refuses_escaping_patterns(sb: Sandbox) -> None:
    for pattern in ("../*", "../**/*.txt", "src/../../*", "/etc/*", "~/*"):
        text = _err(await glob(sb, pattern), "sandbox")
        assert "secret" not in text


async def test_glob_and_grep_never_read_through_a_symlink_out(sb: Sandbox, ws: Path, outside: Path) -> None:
    (ws / "src" / "vendor").symlink_to(outside, target_is_directory=True)
    (ws / "leak.txt").symlink_to(outside / "secret.txt")
    (ws / "etc").symlink_to("/etc")

    out = await grep(sb, "SECRET|root")
    assert out.ok, out.text
    assert SECRET not in out.text
    assert not any(m.startswith(("src/vendor", "leak.txt", "etc")) for m in out.data["matches"])

    out = await grep(sb, "SECRET", include="*.py")
    assert out.ok and SECRET not in out.text

    _err(await grep(sb, "SECRET", path="src/vendor"), "sandbox")
    _err(await grep(sb, "SECRET", path="leak.txt"), "sandbox")

    for pattern in ("**/*", "src/vendor/*", "etc/*", "**/*.txt"):
        out = await glob(sb, pattern)
        assert out.ok, out.text
        assert "secret.txt" not in out.text and "passwd" not in out.text, (pattern, out.text)
        assert "leak.txt" not in out.text  # a link leading out is not even listed


async def test_list_dir_marks_links_leading_out(sb: Sandbox, ws: Path) -> None:
    (ws / "etc").symlink_to("/etc")
    out = await list_dir(sb)
    assert out.ok
    assert "etc (symbolic link leading outside the workspace; not accessible)" in out.data["entries"]


# ---------------------------------------------------------------------------------------------- read_file


async def test_read_file_numbers_lines(sb: Sandbox) -> None:
    out = await read_file(sb, "src/main.py")
    assert out.ok
    assert out.text.splitlines() == ["   1| import pkg", "   2| ", "   3| def main():", "   4|     return 42"]
    assert out.data == {
        "path": "src/main.py",
        "offset": 1,
        "lines": 4,
        "next_offset": None,
        "truncated": False,
        "total_lines": 4,
    }


async def test_read_file_offset_limit_and_truncation_marker(sb: Sandbox, ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1201)))
    out = await read_file(sb, "big.txt")
    lines = out.text.splitlines()
    assert lines[0] == "   1| line 1"
    assert lines[499] == " 500| line 500"
    assert lines[-1].startswith("[truncated: showing lines 1-500")
    assert "offset=501" in lines[-1]
    assert out.data["truncated"] and out.data["next_offset"] == 501

    out = await read_file(sb, "big.txt", offset=1195, limit=100)
    assert out.text.splitlines() == [f"{i:>4}| line {i}" for i in range(1195, 1201)]
    assert not out.data["truncated"] and out.data["total_lines"] == 1200

    out = await read_file(sb, "big.txt", offset=10, limit=2)
    assert out.text.splitlines()[:2] == ["  10| line 10", "  11| line 11"]
    assert "offset=12" in out.text


async def test_read_file_exactly_limit_lines_is_not_truncated(sb: Sandbox, ws: Path) -> None:
    (ws / "three.txt").write_text("a\nb\nc\n")
    out = await read_file(sb, "three.txt", limit=3)
    assert out.ok and not out.data["truncated"] and "truncated" not in out.text


async def test_read_file_byte_budget(sb: Sandbox, ws: Path) -> None:
    line = "x" * 1000
    (ws / "wide.txt").write_text((line + "\n") * 400)
    out = await read_file(sb, "wide.txt", limit=2000)
    assert out.ok and out.data["truncated"]
    assert len(out.text) < MAX_READ_BYTES + 20_000
    assert "output limit" in out.text.splitlines()[-1]
    assert out.data["lines"] < 400


async def test_read_file_cuts_long_lines(sb: Sandbox, ws: Path) -> None:
    (ws / "min.js").write_text("a" * (MAX_LINE_CHARS * 5) + "\nsecond\n")
    out = await read_file(sb, "min.js")
    first, second = out.text.splitlines()
    assert first.endswith(f"[line cut at {MAX_LINE_CHARS} characters]")
    assert len(first) < MAX_LINE_CHARS + 100
    assert second == "   2| second"


async def test_read_file_errors(sb: Sandbox, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x89PNG\x00\x00\x01binary")
    (ws / "empty.txt").write_text("")
    assert "binary" in _err(await read_file(sb, "blob.bin"), "binary")
    assert "does not exist" in _err(await read_file(sb, "nope.txt"), "not_found")
    assert "directory" in _err(await read_file(sb, "src"), "is_a_directory")
    assert "past the end" in _err(await read_file(sb, "src/main.py", offset=99))
    _err(await read_file(sb, "src/main.py", offset=0), "invalid_arguments")
    _err(await read_file(sb, "src/main.py", limit=0), "invalid_arguments")
    out = await read_file(sb, "empty.txt")
    assert out.ok and "empty" in out.text


async def test_read_file_refuses_a_fifo_without_blocking(sb: Sandbox, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    out = await read_file(sb, "pipe")
    _err(out, "not_a_file")


# ---------------------------------------------------------------------------------------------- list_dir


async def test_list_dir(sb: Sandbox) -> None:
    out = await list_dir(sb)
    assert out.ok
    assert out.text.splitlines() == ["README.md", "src/"]
    out = await list_dir(sb, "src")
    assert out.data["entries"] == ["main.py", "pkg/"]
    assert "not a directory" in _err(await list_dir(sb, "README.md"))


async def test_list_dir_is_bounded(sb: Sandbox, ws: Path) -> None:
    many = ws / "many"
    many.mkdir()
    for i in range(1005):
        (many / f"f{i:04d}").touch()
    out = await list_dir(sb, "many")
    assert len(out.data["entries"]) == 1000
    assert out.data["total"] == 1005 and out.data["truncated"]
    assert out.text.splitlines()[-1].startswith("[truncated: 1000 of 1005 entries")


# ---------------------------------------------------------------------------------------------- glob


async def test_glob_patterns(sb: Sandbox, ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config.py").write_text("x")
    (ws / "node_modules" / "lib").mkdir(parents=True)
    (ws / "node_modules" / "lib" / "index.py").write_text("x")

    assert (await glob(sb, "**/*.py")).data["paths"] == ["src/main.py", "src/pkg/__init__.py"]
    assert (await glob(sb, "*.md")).data["paths"] == ["README.md"]
    assert (await glob(sb, "src/*")).data["paths"] == ["src/main.py", "src/pkg/"]
    assert (await glob(sb, "./src/**/*.{py,ts}")).data["paths"] == [
        "src/main.py",
        "src/pkg/__init__.py",
        "src/pkg/util.ts",
    ]
    assert (await glob(sb, "src/p?g/[u]*")).data["paths"] == ["src/pkg/util.ts"]
    # skipped folders are not searched, unless the pattern names them
    assert (await glob(sb, "node_modules/**/*.py")).data["paths"] == ["node_modules/lib/index.py"]
    out = await glob(sb, "*.rs")
    assert out.ok and out.data["paths"] == [] and "no paths match" in out.text


async def test_glob_is_bounded_in_results(sb: Sandbox, ws: Path) -> None:
    d = ws / "gen"
    d.mkdir()
    for i in range(MAX_GLOB_RESULTS + 50):
        (d / f"f{i:04d}.txt").touch()
    out = await glob(sb, "gen/*.txt")
    assert len(out.data["paths"]) == MAX_GLOB_RESULTS
    assert out.data["truncated"]
    assert "[truncated: first 200 matches" in out.text


async def test_glob_time_budget_gives_a_partial_result(sb: Sandbox, ws: Path) -> None:
    for i in range(300):
        (ws / "tree" / f"d{i}").mkdir(parents=True)
    out = await glob(sb, "**/nothing-matches", time_budget=0.0)
    assert out.ok and out.data["partial"]
    assert "[partial:" in out.text


# ---------------------------------------------------------------------------------------------- grep


async def test_grep_reports_file_line_text(sb: Sandbox) -> None:
    out = await grep(sb, r"VALUE|return \d+")
    assert out.ok
    assert out.text.splitlines() == ["src/main.py:4:     return 42", "src/pkg/__init__.py:1: VALUE = 1"]
    out = await grep(sb, "(?i)title", path="README.md")
    assert out.data["matches"] == ["README.md:1: # Title"]
    out = await grep(sb, "export", path="src", include="*.ts")
    assert out.data["matches"] == ["src/pkg/util.ts:1: export const x = 1;"]
    out = await grep(sb, "nothing-like-this")
    assert out.ok and "no matches" in out.text


async def test_grep_invalid_regex_and_bad_paths(sb: Sandbox) -> None:
    assert "invalid regular expression" in _err(await grep(sb, "(unclosed"), "invalid_arguments")
    _err(await grep(sb, "x", path="../"), "sandbox")
    _err(await grep(sb, "x", path="missing"), "not_found")
    _err(await grep(sb, "x", include="../*.py"), "sandbox")


async def test_grep_skips_large_and_binary_files(sb: Sandbox, ws: Path) -> None:
    (ws / "huge.txt").write_bytes(b"needle\n" + b"x" * (MAX_GREP_FILE_BYTES + 10))
    (ws / "bin.dat").write_bytes(b"needle\x00\x01")
    (ws / "ok.txt").write_text("a needle here\n")
    out = await grep(sb, "needle")
    assert out.data["matches"] == ["ok.txt:1: a needle here"]
    assert out.data["skipped_large"] == 1 and out.data["skipped_binary"] == 1
    assert "skipped 1 file(s) over 2 MB and 1 binary file(s)" in out.text


async def test_grep_is_bounded_in_matches_and_line_width(sb: Sandbox, ws: Path) -> None:
    (ws / "many.txt").write_text("hit\n" * (MAX_GREP_MATCHES + 30))
    (ws / "wide.txt").write_text("y" * 5000 + "HIT" + "z" * 5000 + "\n")
    out = await grep(sb, "hit", path="many.txt")
    assert len(out.data["matches"]) == MAX_GREP_MATCHES and out.data["truncated"]
    assert "[truncated: first 100 matches" in out.text
    out = await grep(sb, "HIT", path="wide.txt")
    (match,) = out.data["matches"]
    assert "HIT" in match and len(match) < 500


async def test_grep_time_budget(sb: Sandbox, ws: Path) -> None:
    out = await grep(sb, "x", time_budget=0.0)
    assert out.ok and out.data["partial"] and "[partial:" in out.text


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(?:\s*\w+)*x", r"(x|(ab*)+)+", r"((a){1,5})*"])
async def test_grep_refuses_nested_repeats(sb: Sandbox, ws: Path, pattern: str) -> None:
    (ws / "evil.txt").write_text("a" * 40 + "!\n")
    assert "exponential" in _err(await grep(sb, pattern, path="evil.txt"), "unsafe_regex")


@pytest.mark.parametrize("pattern", [r"a+b*", r"(\d{3}-)+", r"(foo|bar)+", r"(ab?)+", r"def \w+\("])
async def test_grep_accepts_ordinary_repeats(sb: Sandbox, pattern: str) -> None:
    assert (await grep(sb, pattern)).ok


async def test_a_search_worker_that_stalls_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hard stop around every glob/grep worker: a worker that ignores its stop flag is left behind."""
    release = threading.Event()

    def stalled(stop: threading.Event) -> ToolOutput:
        release.wait(10)  # ignores `stop`, like a worker stuck in a slow read
        return ToolOutput(True, "late")

    monkeypatch.setattr(walk, "HARD_STOP_GRACE", 0.2)
    out = await walk.bounded_search("grep", stalled, 0.1)
    release.set()
    assert "did not finish" in _err(out, "timeout")


# ---------------------------------------------------------------------------------------------- write / edit


async def test_write_then_read(sb: Sandbox, ws: Path) -> None:
    out = await write_file(sb, "new/deep/hello.py", "print('hello')\nprint('bye')\n")
    assert out.ok, out.text
    assert out.data == {"path": "new/deep/hello.py", "bytes": 28, "lines": 2, "created": True}
    assert "(new file)" in out.text
    assert (ws / "new" / "deep" / "hello.py").read_text() == "print('hello')\nprint('bye')\n"
    out = await read_file(sb, "new/deep/hello.py")
    assert out.text.splitlines() == ["   1| print('hello')", "   2| print('bye')"]
    out = await write_file(sb, "new/deep/hello.py", "x")
    assert out.ok and out.data["created"] is False and "(overwritten)" in out.text
    assert (ws / "new" / "deep" / "hello.py").read_text() == "x"


async def test_write_file_errors(sb: Sandbox, ws: Path, outside: Path) -> None:
    _err(await write_file(sb, "src", "x"), "is_a_directory")
    _err(await write_file(sb, ".", "x"), "is_a_directory")
    _err(await write_file(sb, "README.md/child.txt", "x"))
    _err(await write_file(sb, str(outside / "escape.txt"), "x"), "sandbox")
    assert not (outside / "escape.txt").exists()


async def test_write_through_an_inside_symlink_writes_the_target(sb: Sandbox, ws: Path) -> None:
    (ws / "alias.md").symlink_to(ws / "README.md")
    out = await write_file(sb, "alias.md", "replaced\n")
    assert out.ok and out.data["path"] == "README.md"
    assert (ws / "README.md").read_text() == "replaced\n"


async def test_edit_file(sb: Sandbox, ws: Path) -> None:
    out = await edit_file(sb, "src/main.py", "return 42", "return 43")
    assert out.ok, out.text
    assert out.data == {"path": "src/main.py", "line": 4, "replacements": 1}
    assert (ws / "src" / "main.py").read_text() == "import pkg\n\ndef main():\n    return 43\n"


async def test_edit_file_not_found_and_not_unique(sb: Sandbox, ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\nx = 1\nx = 1\n")
    text = _err(await edit_file(sb, "dup.txt", "x = 1", "x = 2"), "not_unique")
    assert "found 3 times" in text and "include more context" in text
    text = _err(await edit_file(sb, "dup.txt", "y = 1", "y = 2"), "not_found")
    assert "not found" in text
    text = _err(await edit_file(sb, "src/main.py", "return 42   ", "x"), "not_found")
    assert "whitespace" in text
    _err(await edit_file(sb, "dup.txt", "", "x"), "invalid_arguments")
    _err(await edit_file(sb, "missing.txt", "a", "b"), "not_found")
    assert (ws / "dup.txt").read_text() == "x = 1\nx = 1\nx = 1\n"


async def test_edit_file_overlapping_occurrences_are_not_unique(sb: Sandbox, ws: Path) -> None:
    (ws / "aaa.txt").write_text("aaa")
    assert "found 2 times" in _err(await edit_file(sb, "aaa.txt", "aa", "b"), "not_unique")


async def test_edit_file_keeps_crlf_and_hints_about_it(sb: Sandbox, ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    assert "CRLF" in _err(await edit_file(sb, "win.txt", "one\ntwo", "x"))
    assert (await edit_file(sb, "win.txt", "two", "2")).ok
    assert (ws / "win.txt").read_bytes() == b"one\r\n2\r\n"
