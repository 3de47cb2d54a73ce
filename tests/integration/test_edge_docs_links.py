"""Every link on the docs the edge serves resolves there, and no served page shows a repository path: a
crawl over real HTTP of /docs and every page it links, on both hosts. An internal link must answer 200 and
its #anchor must be an id of the page it names; the text of every served page (code included) must hold
nothing shaped like a repository path (``webhookd/_queue_sql.py``, ``docs/operations.md``)."""

# ruff: noqa: F811 (the tests take the fixtures imported below as arguments)

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
import pytest

from edge.testing import LIVE_HOST, SANDBOX_HOST
from tests.integration.edge_stack import Stack, http, stack  # noqa: F401 (the fixtures)

# A path of the repository: directories, then a file with one of its extensions, not part of a URL.
REPO_PATH = re.compile(
    r"(?<![\w/.:-])(?:[\w.-]+/)+[\w.-]+\.(?:py|md|proto|toml|ya?ml|json|sh|txt|cfg|ini|key|css|html|j2)\b"
)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag in ("a", "link") and found.get("href"):
            self.links.append(str(found["href"]))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(body: str) -> _Page:
    page = _Page()
    page.feed(body)
    return page


def test_the_path_pattern() -> None:
    found = REPO_PATH.findall(
        "see docs/operations.md and `webhookd/_queue_sql.py`, svckit/eventkinds.py; not https://x.example/a/b.json"
        " nor /v1/webhooks/endpoints nor events.md nor svckit.signing"
    )
    assert found == ["docs/operations.md", "webhookd/_queue_sql.py", "svckit/eventkinds.py"]


@pytest.mark.parametrize("host", [SANDBOX_HOST, LIVE_HOST])
async def test_every_served_link_resolves_and_no_page_shows_a_repository_path(
    stack: Stack, http: httpx.AsyncClient, host: str
) -> None:
    base = stack.url("sandbox" if host == SANDBOX_HOST else "live")
    pages: dict[str, _Page] = {}
    todo = ["/docs"]
    anchors: list[tuple[str, str, str]] = []  # (from page, to path, fragment)
    broken: list[str] = []
    while todo:
        path = todo.pop()
        if path in pages:
            continue
        resp = await http.get(
            base + path, headers={"Host": host, "Accept": "text/html,application/json;q=0.9"}
        )
        if resp.status_code != 200:
            broken.append(f"{path}: {resp.status_code}")
            continue
        if not resp.headers["content-type"].startswith("text/html"):
            pages[path] = _Page()
            continue
        page = pages[path] = parse(resp.text)
        for link in page.links:
            target, fragment = urldefrag(urljoin(f"http://{host}{path}", link))
            parts = urlsplit(target)
            if parts.netloc != host:
                continue  # another site's page
            anchors.append((path, parts.path, fragment))
            todo.append(parts.path)
    assert not broken, broken
    missing = [f"{f} -> {to}#{frag}" for f, to, frag in anchors if frag and frag not in pages[to].ids]
    assert not missing, missing
    docs = [p for p in pages if p.startswith("/docs") and p != "/docs/style.css"]
    assert len(docs) >= 7  # the index and its six pages at least
    shown = {p: REPO_PATH.findall("".join(pages[p].text)) for p in docs}
    assert {p: found for p, found in shown.items() if found} == {}
