"""The docs the edge serves (edge.docsite) and the docUrl bases pointing at them (edge.docurls), by table:
the heading slug rule, link rewriting, the rendering's escaping, and that every anchor a docUrl or a
link between the served pages names exists."""

from __future__ import annotations

import pathlib
import re

import pytest

from edge.config import DEFAULT_DOCS_DIR, EdgeConfig
from edge.docsite import PAGES, DocSite, href, render, slug, unique
from edge.docurls import MAX_KEPT, DocBases
from edge.environments import HostMap
from edge.responses import error_body
from svckit.errors import ERROR_KINDS
from tests.support import ROOT


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("missing_scope", "missing_scope"),
        ("Rate limits", "rate-limits"),
        ("booking.confirmed", "bookingconfirmed"),  # ## `booking.confirmed`: markup already removed
        ("search_quota.threshold", "search_quotathreshold"),
        ("Webhooks (webhookd)", "webhooks-webhookd"),
        (
            "Five minutes: from scripts/run to a verified webhook",
            "five-minutes-from-scriptsrun-to-a-verified-webhook",
        ),
        ("Travellers (X-Partner-Customer-Ref)", "travellers-x-partner-customer-ref"),
        ("  Padded  ", "padded"),
        ("Two  spaces", "two--spaces"),  # GitHub's rule: each space is a hyphen
        ("Ünïcode letters", "ünïcode-letters"),
        ("<script>alert(1)</script>", "scriptalert1script"),
        ("a\"b'c", "abc"),
    ],
)
def test_slug(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_repeated_headings_get_numbered_ids() -> None:
    seen: dict[str, int] = {}
    assert [unique(s, seen) for s in ["errors", "a", "errors", "errors", "a"]] == [
        "errors",
        "a",
        "errors-1",
        "errors-2",
        "a-1",
    ]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("errors.md", "/docs/errors"),
        ("errors.md#missing_scope", "/docs/errors#missing_scope"),
        ("./events.md#bookingconfirmed", "/docs/events#bookingconfirmed"),
        ("sandbox.md", "/docs/sandbox"),
        ("#rate-limits", "#rate-limits"),  # same page: as is
        ("operations.md", "operations.md"),  # not a served page
        ("../README.md", "../README.md"),
        ("docs/errors.md", "docs/errors.md"),  # not a sibling page
        ("https://example.com/errors.md", "https://example.com/errors.md"),
        ("mailto:ops@example.com", "mailto:ops@example.com"),
        ("errors.md?x=1", "errors.md?x=1"),
        ("/openapi.json", "/openapi.json"),
        ("", ""),
    ],
)
def test_links_between_pages_are_rewritten(target: str, expected: str) -> None:
    assert href(target, PAGES) == expected


def test_render_ids_links_and_escaping() -> None:
    page = render(
        "x",
        "# Title *here*\n\n## `booking.confirmed`\n\n## Errors\n\n## Errors\n\n"
        "See [the errors](errors.md#missing_scope), [below](#errors-1) and [out](https://example.com).\n\n"
        "<script>alert(1)</script>\n\n<b onclick=x>hi</b> & `<i>`\n",
    )
    assert page.title == "Title here"
    assert page.ids == ("title-here", "bookingconfirmed", "errors", "errors-1")
    assert '<h2 id="bookingconfirmed"><code>booking.confirmed</code></h2>' in page.body
    assert 'href="/docs/errors#missing_scope"' in page.body and 'href="#errors-1"' in page.body
    assert 'href="https://example.com"' in page.body
    assert "<script>" not in page.body and "&lt;script&gt;" in page.body
    assert "<b " not in page.body and "&lt;b onclick=x&gt;" in page.body
    assert "<code>&lt;i&gt;</code>" in page.body


def test_every_error_type_has_its_anchor_on_the_rendered_errors_page() -> None:
    site = DocSite(ROOT / "docs")
    errors = site.rendered("errors")
    assert errors is not None
    for etype in ERROR_KINDS:
        anchor = error_body(etype, "m", "req_x", "")["error"]["docUrl"].split("#", 1)[1]  # type: ignore[index]
        assert anchor == slug(etype) and anchor in errors.ids, etype
        assert f'<h2 id="{anchor}">{etype}</h2>' in errors.body.replace("\n", "")


def test_every_link_of_the_served_pages_resolves() -> None:
    site = DocSite(ROOT / "docs")
    for name in PAGES:
        page = site.rendered(name)
        assert page is not None, name
        for target in re.findall(r'href="([^"]*)"', page.body):
            if target.startswith(("http://", "https://", "mailto:")) or target == "/openapi.json":
                continue
            if target.startswith("#"):
                assert target[1:] in page.ids, (name, target)
                continue
            assert target.startswith("/docs/"), (name, target)  # no relative .md link left dangling
            other, _, fragment = target.removeprefix("/docs/").partition("#")
            linked = site.rendered(other)
            assert linked is not None, (name, target)
            assert not fragment or fragment in linked.ids, (name, target)


def test_site_pages_are_rendered_once_and_unknown_ones_are_none() -> None:
    site = DocSite(ROOT / "docs")
    first = site.page("errors")
    assert first is not None and site.page("errors") is first
    assert first.startswith(b"<!doctype html>") and b'href="/docs/style.css"' in first
    assert site.page("architecture") is None and site.page("../pyproject") is None
    assert site.page("nothing") is None
    index = site.index()
    assert all(f'href="/docs/{n}"'.encode() in index for n in PAGES)
    assert site.style().startswith(b"/*")


def test_missing_docs_dir_serves_an_empty_index(tmp_path: pathlib.Path) -> None:
    site = DocSite(str(tmp_path))
    assert site.page("errors") is None
    assert b"No docs are installed" in site.index()


def test_default_docs_dir_is_the_repositorys() -> None:
    assert EdgeConfig().docs_dir == DEFAULT_DOCS_DIR == str(ROOT / "docs")
    assert EdgeConfig().docs_base == ""


HOSTS = HostMap(["localhost:8080", "api.example.com"], ["localhost:8081", "sandbox.example.com"])


@pytest.mark.parametrize(
    ("configured", "scheme", "host", "expected"),
    [
        ("", "http", "localhost:8081", "http://localhost:8081/docs"),
        ("", "https", "sandbox.example.com", "https://sandbox.example.com/docs"),
        ("", "https", "API.example.com", "https://API.example.com/docs"),  # a served host, as sent
        ("", "ws", "localhost:8081", "http://localhost:8081/docs"),  # a WebSocket handshake's refusal
        ("", "wss", "api.example.com", "https://api.example.com/docs"),
        # Not a host of this edge: never echoed.
        ("", "http", "evil.example", "http://localhost:8080/docs"),
        ("", "https", 'x"><script>', "https://localhost:8080/docs"),
        ("", "http", None, "http://localhost:8080/docs"),
        ("", "http", "", "http://localhost:8080/docs"),
        # --docs-base: that, whatever the host.
        ("https://docs.example.com/api", "http", "localhost:8081", "https://docs.example.com/api"),
        ("https://docs.example.com/api/", "http", "evil.example", "https://docs.example.com/api"),
    ],
)
def test_doc_bases(configured: str, scheme: str, host: str | None, expected: str) -> None:
    bases = DocBases(configured, HOSTS, ["localhost:8080", "api.example.com"])
    assert bases.base(scheme, host) == expected
    assert bases.base(scheme, host) == expected  # kept


def test_doc_bases_keep_a_bounded_number() -> None:
    bases = DocBases("", HOSTS, [])
    for i in range(MAX_KEPT * 3):
        assert bases.base("http", f"made-up-{i}.example") == "http://localhost/docs"
    assert len(bases._kept) == MAX_KEPT


def test_partner_text_leaves_out_operator_sections_and_comments() -> None:
    from edge.docsite import partner_text

    md = (
        "<!-- Generated by a script; do not edit. -->\n# Page\n\n## For partners\n\nkept\n\n"
        "```\n## Benchmark (in a code block: kept)\n```\n\n## Operating it\n\ngone `x/y.py`\n\n### Sub\n\n"
        "gone too\n\n## Errors\n\nkept again\n\n## Benchmark\n\ngone\n"
    )
    out = partner_text(md)
    assert "<!--" not in out and "gone" not in out
    assert "kept" in out and "kept again" in out and "## Benchmark (in a code block: kept)" in out
    page = render("p", md)
    assert page.ids == ("page", "for-partners", "errors")
