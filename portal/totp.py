"""The TOTP enrolment shown on the own page: the QR code (inline SVG, CSP-clean) and its setup key."""

from __future__ import annotations

import pyotp
import qrcode
import qrcode.image.svg
from markupsafe import Markup


def enrolment(provisioning_uri: str) -> tuple[Markup, str]:
    """(the QR code of ``provisioning_uri``, the key to type instead of scanning it)."""
    image = qrcode.make(provisioning_uri, image_factory=qrcode.image.svg.SvgPathImage)
    return Markup(image.to_string(encoding="unicode")), pyotp.parse_uri(provisioning_uri).secret
