"""The docs, served on both hosts with no key: GET /openapi.json, the OpenAPI 3.1 document of the whole
edge, and GET /docs, /docs/<page>: the partner docs (docs/*.md) as HTML (edge.docsite), where every
error's docUrl points by default (edge.docurls)."""

from __future__ import annotations

from sanic import Blueprint
from sanic.response import HTTPResponse

from edge.context import EdgeRequest
from edge.docsite import CSP, STYLE_PATH, DocSite
from edge.docurls import DOCS_PATH
from edge.exceptions import EdgeError
from edge.negotiation import check_accept
from edge.openapi import build_openapi
from edge.responses import EdgeResponse, json_response

bp = Blueprint("docs")

# Every docs answer: nothing but the page and its stylesheet may load; kept a while by browsers.
DOC_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "public, max-age=300",
}


@bp.get("/openapi.json")
async def openapi(request: EdgeRequest) -> HTTPResponse:
    app_ctx = request.app.ctx
    gate = app_ctx.gate
    rid = gate.request_id(request)
    env = gate.hosts.environment(request.headers.get("host"))
    check_accept(request.headers.get("accept"))
    doc = app_ctx.openapi
    if doc is None:
        doc = app_ctx.openapi = build_openapi(app_ctx.config)
    host = request.headers.get("host")
    out = dict(doc)
    out["servers"] = [{"url": f"{request.scheme}://{host}", "description": f"this host ({env.value})"}]
    return json_response(out, headers={"X-Request-Id": rid})


def _site(request: EdgeRequest) -> tuple[DocSite, str]:
    """The docs and the request id, on a host of this edge (421 misdirected_request on any other)."""
    app_ctx = request.app.ctx
    gate = app_ctx.gate
    rid = gate.request_id(request)
    gate.hosts.environment(request.headers.get("host"))
    site = app_ctx.docs
    if site is None:
        site = app_ctx.docs = DocSite(app_ctx.config.docs_dir)
    return site, rid


def _answer(body: bytes, content_type: str, rid: str) -> HTTPResponse:
    return EdgeResponse(body, headers={**DOC_HEADERS, "X-Request-Id": rid}, content_type=content_type)


@bp.get(DOCS_PATH)
async def docs_index(request: EdgeRequest) -> HTTPResponse:
    site, rid = _site(request)
    return _answer(site.index(), "text/html; charset=utf-8", rid)


@bp.get(STYLE_PATH)
async def docs_style(request: EdgeRequest) -> HTTPResponse:
    site, rid = _site(request)
    return _answer(site.style(), "text/css; charset=utf-8", rid)


@bp.get(f"{DOCS_PATH}/<page:str>")
async def docs_page(request: EdgeRequest, page: str) -> HTTPResponse:
    site, rid = _site(request)
    body = site.page(page)
    if body is None:
        raise EdgeError(f"no docs page {page!r}; {DOCS_PATH} lists them", type="not_found")
    return _answer(body, "text/html; charset=utf-8", rid)
