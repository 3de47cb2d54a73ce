"""The partner docs as HTML: the Markdown pages of ``docs/`` (``EdgeConfig.docs_dir``) rendered with
markdown-it (raw HTML in the Markdown is escaped, never passed through), each heading given an ``id`` by
``slug`` (GitHub's rule, so ``errors.md#missing_scope`` and ``events.md#bookingconfirmed`` mean the same
here as on GitHub), and links between the pages rewritten to the served paths (``href``). A page is
rendered once, on its first request, and kept (``DocSite``); edge.blueprints.docs serves them.

Served is what partners read (``partner_text``): a page's sections for whoever runs the service
(``NOT_SERVED``: a level-2 heading starting with one of them, up to the next level-1 or level-2 heading)
and its HTML comments (authors' notes) are left out, so a partner page holds no repository path and every
link on it resolves on the served site (tests/integration/test_edge_docs_links.py walks them).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from markdown_it import MarkdownIt
from markdown_it.token import Token

from edge.docurls import DOCS_PATH

log = logging.getLogger(__name__)

__all__ = [
    "CSP",
    "NOT_SERVED",
    "PAGES",
    "STYLE_PATH",
    "DocSite",
    "Page",
    "href",
    "partner_text",
    "render",
    "slug",
    "unique",
]

# The partner-facing pages, in the index's order (docs/architecture.md and operations.md are for
# whoever runs the service, portal.md for the portal's users: not served here).
PAGES: tuple[str, ...] = ("edge", "authentication", "errors", "webhooks", "events", "sandbox")
STYLE_PATH = f"{DOCS_PATH}/style.css"
INDEX_TITLE = "Partner API docs"
STYLE_FILE = Path(__file__).resolve().parent / "static" / "docs.css"
# Nothing but the page itself and its one stylesheet; no script at all.
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

_NOT_SLUG = re.compile(r"[^\w\- ]")
# Level-2 sections for operators and maintainers, left out of the served pages (the Markdown keeps them).
NOT_SERVED: tuple[str, ...] = (
    "For internal services",
    "For operators",
    "Operating ",
    "Running it",
    "Benchmark",
)
_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)


def partner_text(markdown: str) -> str:
    """``markdown`` as served: without its ``NOT_SERVED`` sections and its HTML comments."""
    kept: list[str] = []
    fence = ""
    cut = False
    for line in _COMMENT.sub("", markdown).split("\n"):
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = ""
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif line.startswith("# ") or line.startswith("## "):
            cut = line.startswith("## ") and line[3:].strip().startswith(NOT_SERVED)
        if not cut:
            kept.append(line)
    return "\n".join(kept)


def slug(text: str) -> str:
    """The ``id`` of a heading whose text (markup removed) is ``text``: GitHub's rule, lower case,
    every character but letters, digits, ``_``, ``-`` and spaces dropped, spaces made ``-``."""
    return _NOT_SLUG.sub("", text.strip().lower()).replace(" ", "-")


def unique(base: str, seen: dict[str, int]) -> str:
    """``base``, or ``base-1``, ``base-2``... when a heading of the page already has it (GitHub's rule)."""
    n = seen.get(base)
    seen[base] = 0 if n is None else n + 1
    return base if n is None else f"{base}-{n + 1}"


def href(target: str, pages: Collection[str]) -> str:
    """A link of a page, as served: ``errors.md#y`` (or ``./errors.md``) -> ``/docs/errors#y`` when
    ``errors`` is one of ``pages``; anything else (an absolute URL, ``#fragment``, another file) as is."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.endswith(".md") or parts.query:
        return target
    name = parts.path.removeprefix("./").removesuffix(".md")
    if name not in pages:
        return target
    return f"{DOCS_PATH}/{name}" + (f"#{parts.fragment}" if parts.fragment else "")


def _text(inline: Token) -> str:
    return "".join(c.content for c in inline.children or () if c.type in ("text", "code_inline"))


@dataclass(frozen=True)
class Page:
    name: str
    title: str
    body: str  # the Markdown as HTML
    ids: tuple[str, ...]  # the headings' ids, in order


_md = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable(["table", "strikethrough"])


def render(name: str, markdown: str, pages: Collection[str] = PAGES) -> Page:
    """``markdown`` (the page ``name``) as HTML: headings with ids, links to ``pages`` rewritten."""
    tokens = _md.parse(partner_text(markdown))
    seen: dict[str, int] = {}
    ids: list[str] = []
    title = name
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            text = _text(tokens[i + 1])
            if token.tag == "h1" and title == name:
                title = text
            anchor = unique(slug(text), seen)
            token.attrSet("id", anchor)
            ids.append(anchor)
        elif token.type == "inline":
            for child in token.children or ():
                if child.type == "link_open":
                    child.attrSet("href", href(str(child.attrGet("href") or ""), pages))
    return Page(name, title, _md.renderer.render(tokens, _md.options, {}), tuple(ids))


def _nav(pages: Iterable[tuple[str, str]], current: str) -> str:
    links = [f'<a href="{DOCS_PATH}"{_here(current == "")}>Docs</a>']
    links += [f'<a href="{DOCS_PATH}/{n}"{_here(n == current)}>{html.escape(t)}</a>' for n, t in pages]
    return "<nav>" + " ".join(links) + "</nav>"


def _here(yes: bool) -> str:
    return ' aria-current="page"' if yes else ""


def document(title: str, nav: str, body: str) -> bytes:
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        f'<link rel="stylesheet" href="{STYLE_PATH}"></head>\n'
        f"<body>{nav}<main>\n{body}</main></body></html>\n"
    ).encode()


class DocSite:
    """The pages of ``directory``, each rendered on its first request and kept as the bytes served."""

    def __init__(self, directory: str | Path, pages: Collection[str] = PAGES) -> None:
        self.directory = Path(directory)
        self.pages = tuple(pages)
        self._rendered: dict[str, Page] = {}
        self._served: dict[str, bytes] = {}
        self._style: bytes | None = None

    def available(self) -> list[str]:
        return [n for n in self.pages if (self.directory / f"{n}.md").is_file()]

    def rendered(self, name: str) -> Page | None:
        page = self._rendered.get(name)
        if page is None and name in self.pages:
            try:
                text = (self.directory / f"{name}.md").read_text(encoding="utf-8")
            except OSError:
                return None
            page = self._rendered[name] = render(name, text, self.pages)
        return page

    def titles(self) -> list[tuple[str, str]]:
        return [(n, p.title) for n in self.available() if (p := self.rendered(n)) is not None]

    def page(self, name: str) -> bytes | None:
        """The HTML of page ``name``; None when it is not one of the docs (or its file is missing)."""
        served = self._served.get(name)
        if served is None:
            page = self.rendered(name)
            if page is None:
                return None
            title = f"{page.title} · {INDEX_TITLE}"
            served = self._served[name] = document(title, _nav(self.titles(), name), page.body)
        return served

    def index(self) -> bytes:
        served = self._served.get("")
        if served is None:
            titles = self.titles()
            items = "".join(f'<li><a href="{DOCS_PATH}/{n}">{html.escape(t)}</a></li>\n' for n, t in titles)
            body = (
                f"<h1>{INDEX_TITLE}</h1>\n"
                + (f"<ul>\n{items}</ul>\n" if items else "<p>No docs are installed with this edge.</p>\n")
                + '<p>Also: the OpenAPI document, <a href="/openapi.json">/openapi.json</a>, and the event '
                "catalog, <code>GET /v1/event-types</code> (with an API key).</p>\n"
            )
            served = self._served[""] = document(INDEX_TITLE, _nav(titles, ""), body)
        return served

    def style(self) -> bytes:
        if self._style is None:
            self._style = STYLE_FILE.read_bytes()
        return self._style
