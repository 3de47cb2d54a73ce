"""The endpoint page's "Receiver authentication" form, pure: what the form's fields ask webhookd for
(``receiver_auth_of_form``), and what the page and the audit trail show of it (``receiver_auth_summary``:
public parts only, never a private key or a client secret, which the portal never receives back)."""

from __future__ import annotations

from typing import Any, Protocol

from svckit.clients import ClientError
from travel.webhooks.v1 import webhooks_pb2 as wpb

# The certificate choices of the form: none, keep the current one, one issued by the platform, an upload.
CERTIFICATE_CHOICES: tuple[tuple[str, str], ...] = (
    ("none", "no client certificate"),
    ("keep", "keep the current one"),
    ("platform", "a new one issued for this account by the platform's CA"),
    ("upload", "upload a certificate and its private key (PEM)"),
)


class Form(Protocol):
    def get(self, name: str, default: str = "", /) -> str: ...


def headers_of(text: str) -> dict[str, str]:
    """``Name: value`` lines (blank lines skipped) as a map; a line without a colon is refused."""
    headers: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise ClientError(
                "invalid_request", f"{line.strip()[:64]!r} is not Name: value", field="receiver_auth.headers"
            )
        headers[name.strip()] = value.strip()
    return headers


def receiver_auth_of_form(form: Form, current: wpb.Endpoint) -> wpb.ReceiverAuth | None:
    """The form as webhookd's ``ReceiverAuth`` (None: remove it all). An empty client secret keeps the
    current one (webhookd's rule); "keep" sends the current certificate's fingerprint."""
    out = wpb.ReceiverAuth(headers=headers_of(form.get("headers", "")))
    choice = form.get("certificate", "none")
    if choice == "keep" and current.receiver_auth.HasField("client_certificate"):
        fingerprint = current.receiver_auth.client_certificate.sha256_fingerprint
        out.client_certificate.CopyFrom(wpb.ClientCertificate(sha256_fingerprint=fingerprint))
    elif choice == "platform":
        out.client_certificate.CopyFrom(wpb.ClientCertificate(issued_by_platform=True))
    elif choice == "upload":
        out.client_certificate.CopyFrom(
            wpb.ClientCertificate(
                certificate_pem=form.get("certificate_pem", ""),
                private_key_pem=form.get("private_key_pem", ""),
            )
        )
    token_url = form.get("token_url", "").strip()
    if token_url:
        out.oauth2.CopyFrom(
            wpb.OAuth2ClientCredentials(
                token_url=token_url,
                client_id=form.get("client_id", "").strip(),
                client_secret=form.get("client_secret", ""),
                scope=form.get("scope", "").strip(),
                audience=form.get("audience", "").strip(),
            )
        )
    empty = not out.headers and not out.HasField("client_certificate") and not out.HasField("oauth2")
    return None if empty else out


def receiver_auth_summary(endpoint: wpb.Endpoint) -> dict[str, Any]:
    """What the page and the audit trail show: the certificate's fingerprint, subject, expiry and origin,
    the token URL (``url``: the audit trail refuses a field named like a token), client id, scope and
    audience, the headers. Empty when there is none."""
    if not endpoint.HasField("receiver_auth"):
        return {}
    auth = endpoint.receiver_auth
    out: dict[str, Any] = {}
    if auth.HasField("client_certificate"):
        c = auth.client_certificate
        out["client_certificate"] = {
            "sha256": c.sha256_fingerprint,
            "subject": c.subject,
            "not_after": c.not_after.ToDatetime().strftime("%Y-%m-%d %H:%M UTC"),
            "issued_by_platform": c.issued_by_platform,
        }
    if auth.HasField("oauth2"):
        o = auth.oauth2
        out["oauth2"] = {
            "url": o.token_url,
            "client_id": o.client_id,
            "scope": o.scope,
            "audience": o.audience,
        }
    if auth.headers:
        out["headers"] = dict(sorted(auth.headers.items()))
    return out


def headers_text(endpoint: wpb.Endpoint) -> str:
    """The headers as the form's text area spells them."""
    return "\n".join(f"{k}: {v}" for k, v in sorted(endpoint.receiver_auth.headers.items()))
