"""The docs agree with each other and with the code: a port means one thing on every page (the HTTP API's is never
a model server's: with both set up as the pages say, the daemon could not listen), the scripted model server is
where every page points at it, with the model names it serves, one variable holds the API's token everywhere, and
every message of polpo's the docs quote is one the code can print."""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache

from tests.support.doc_examples import REPO, blocks, doc_files

PAGES = [*doc_files(), REPO / "config" / "polpo.toml", *sorted((REPO / "examples").rglob("*.toml")),
         *sorted((REPO / "docs").glob("*.toml"))]
MODEL_URL = re.compile(r"(?:127\.0\.0\.1|localhost):(\d+)/v1\b")
API_URL = re.compile(r"""listen\s*=\s*"[^"]*:(\d+)"|(?:127\.0\.0\.1|localhost):(\d+)/api\b|http://(?:127\.0\.0\.1|localhost):(\d+)/(?![\w/])""")


def _ports(pattern: re.Pattern[str]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for page in PAGES:
        for m in pattern.finditer(page.read_text()):
            port = int(next(g for g in m.groups() if g))
            if port:
                out.setdefault(port, set()).add(str(page.relative_to(REPO)))
    return out


def test_the_http_apis_port_is_never_a_model_servers() -> None:
    api, models = _ports(API_URL), _ports(MODEL_URL)
    assert 8765 in api and 8766 in models, (api, models)
    both = {p: (sorted(api[p]), sorted(models[p])) for p in set(api) & set(models)}
    assert not both, f"a port used for the HTTP API and for a model server: {both}"


def _script_port() -> int:
    found = re.search(r"^PORT = (\d+)$", (REPO / "scripts" / "fake_llm_server.py").read_text(), re.M)
    assert found
    return int(found.group(1))


def test_every_page_points_at_the_scripted_server_where_it_listens_with_models_it_serves() -> None:
    port, script = _script_port(), (REPO / "scripts" / "fake_llm_server.py").read_text()
    pointed = 0
    for b in blocks("toml"):
        doc = tomllib.loads(b.body)
        for section in (doc.get("judge") or {}, *(doc.get("agents") or {}).values()):
            models = [section.get("model"), *(section.get("models") or [])]
            if not any(str(m).startswith("openai/fake-") for m in models if m):
                continue
            pointed += 1
            assert section.get("api_base") == f"http://127.0.0.1:{port}/v1", f"{b.where}: {section}"
            for m in models:
                if m:
                    assert f'"{m.split("/", 1)[1]}"' in script, f"{b.where}: the scripted server does not serve {m}"
    assert pointed >= 3  # the tutorial's agent and judge, the providers guide's judge
    for page in doc_files():
        for m in re.finditer(r"fake_llm_server\.py[^\n`]*--port (\d+)", page.read_text()):
            assert int(m.group(1)) == port, f"{page}: --port {m.group(1)}, while the pages point at {port}"


def test_one_variable_holds_the_api_token_on_every_page() -> None:
    names = {m.group(1): str(p.relative_to(REPO)) for p in PAGES
             for m in re.finditer(r'token_env\s*=\s*"([A-Z_]+)"', p.read_text())}
    assert set(names) == {"POLPO_HTTP_TOKEN"}, names


# -- the messages the docs quote --------------------------------------------------------------------------------

CUE = re.compile(r"\b(?:says?|prints?|answers?|rejected with|refused with|the reason|one line,)\b[^`.;]{0,40}$", re.I)
NOT_A_MESSAGE = re.compile(r"^(?:\[|GET |POST |polpo [a-z]|\.venv/|bash |Content-Type)|[={*]|[A-Za-z_]\(")
PLAIN = re.compile(r"^[A-Za-z']+[:,;]?$")


def quoted_messages(text: str) -> list[str]:
    """The spans in backticks a page presents as what polpo says or prints (outside code blocks)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for m in re.finditer(r"`([^`\n]+)`", text):
        span, before = m.group(1), text[max(0, m.start() - 80):m.start()].replace("\n", " ")
        if (CUE.search(before) or span.startswith("polpo: ")) and not NOT_A_MESSAGE.search(span) and runs(span):
            out.append(span)
    return out


@cache
def _code_texts() -> tuple[str, ...]:
    """Every string constant of polpo's code, and every constant part of its f-strings."""
    out: list[str] = []
    for path in (REPO / "polpo").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.append(" ".join(node.value.split()))
    return tuple(out)


def runs(message: str) -> list[str]:
    """The runs of two or more plain words of ``message``, between values (ids, numbers, paths, "…")."""
    out, run = [], []
    for token in message.replace("…", " … ").split():
        if PLAIN.match(token):
            run.append(token)
            continue
        if len(run) >= 2:
            out.append(" ".join(run))
        run = []
    if len(run) >= 2:
        out.append(" ".join(run))
    return out


def printable(message: str) -> bool:
    """Every run of plain words of ``message`` is in a string of the code: the message is one polpo can print."""
    texts = _code_texts()
    return all(any(r in t for t in texts) for r in runs(message))


def test_every_message_the_docs_quote_is_one_polpo_can_print() -> None:
    found = {(str(p.relative_to(REPO)), q) for p in doc_files() for q in quoted_messages(p.read_text())}
    assert len(found) >= 5, found
    wrong = sorted((page, q) for page, q in found if not printable(q))
    assert not wrong, "quoted in the docs, but no string of polpo's code says it:\n" + "\n".join(
        f"{page}: `{q}`" for page, q in wrong)


def test_a_made_up_message_is_caught() -> None:
    page = "The daemon says `polpo: the moon is made of cheese …` when asked.\n"
    assert quoted_messages(page) == ["polpo: the moon is made of cheese …"]
    assert not printable("polpo: the moon is made of cheese …")
    assert printable("waiting for node …") and printable("accepted: mission my-mission (2 tasks)")
    assert quoted_messages("`polpo status` says `waiting for node …`") == ["waiting for node …"]
