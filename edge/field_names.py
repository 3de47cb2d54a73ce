"""The partner's names of fields a service's error names by their proto names: webhookd refuses
``receiver_auth.oauth2.token_url``, the partner sent ``receiverAuth.oauth2.tokenUrl``. ``edge_error``
rewrites a peer's message with them (only these dotted paths, longest first, so nothing else changes)."""

from __future__ import annotations

JSON_NAMES: tuple[tuple[str, str], ...] = (
    ("receiver_auth.client_certificate.certificate_pem", "receiverAuth.clientCertificate.certificate"),
    ("receiver_auth.client_certificate.private_key_pem", "receiverAuth.clientCertificate.privateKey"),
    ("receiver_auth.client_certificate.sha256_fingerprint", "receiverAuth.clientCertificate.sha256"),
    (
        "receiver_auth.client_certificate.issued_by_platform",
        "receiverAuth.clientCertificate.issuedByPlatform",
    ),
    ("receiver_auth.client_certificate", "receiverAuth.clientCertificate"),
    ("receiver_auth.oauth2.token_url", "receiverAuth.oauth2.tokenUrl"),
    ("receiver_auth.oauth2.client_id", "receiverAuth.oauth2.clientId"),
    ("receiver_auth.oauth2.client_secret", "receiverAuth.oauth2.clientSecret"),
    ("receiver_auth", "receiverAuth"),
)


def partner_names(text: str) -> str:
    """``text`` with every proto field path of ``JSON_NAMES`` in the partner's spelling."""
    for proto, json_name in JSON_NAMES:
        if proto in text:
            text = text.replace(proto, json_name)
    return text
