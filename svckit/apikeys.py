"""The API key secret format, shared by authsvc (which issues keys) and the edge (which refuses a
malformed one before asking anybody) -- decisions.md "Names and wire formats".

``<brand>_live_`` / ``<brand>_test_`` + 32 base62 random characters (190.5 bits) + a 6-character base62
CRC32 of everything before it. The checksum is not a secret: it lets a typo, a truncated copy, a scanner hit
or a flood of made-up keys be recognised with no database look-up and no call to authsvc.

The brand is a deployment's setting (``--key-prefixes``, ``configure_prefixes``): a list of brands, the
first naming new keys, every one accepted -- so a deployment moving from ``svc`` to ``acme`` lists
``acme,svc`` and the keys issued before keep working. Default: ``svc`` alone. ``key_pattern`` is the
regular expression a secret scanner is given (``svcctl secret-scanning pattern``).
"""

from __future__ import annotations

import hmac
import re
import zlib
from collections.abc import Iterable
from typing import Literal

from svckit.ids import BASE62, encode_base62

Environment = Literal["live", "sandbox"]

DEFAULT_BRAND = "svc"
# The words after the brand, by environment.
_ENV_WORDS: dict[Environment, str] = {"live": "live", "sandbox": "test"}
BRAND_PATTERN = re.compile(r"[a-z][a-z0-9]{0,15}")
RANDOM_LENGTH = 32
CHECKSUM_LENGTH = 6
_BASE62_SET = frozenset(BASE62)
# The one message of invalid_api_key, whether the key is malformed, unknown, revoked or expired: a caller
# holding a leaked or guessed key learns nothing about which keys exist or once did (docs/authentication.md).
INVALID_API_KEY_MESSAGE = "Invalid API key provided."


def prefixes_of(brand: str) -> dict[Environment, str]:
    return {env: f"{brand}_{word}_" for env, word in _ENV_WORDS.items()}


def parse_brands(value: str | Iterable[str]) -> tuple[str, ...]:
    """``acme,svc`` -> ("acme", "svc"); ValueError naming a brand that is not 1-16 of a-z0-9 (a letter
    first). Empty: the default."""
    items = value.split(",") if isinstance(value, str) else list(value)
    brands = tuple(dict.fromkeys(b.strip() for b in items if b.strip()))
    for brand in brands:
        if not BRAND_PATTERN.fullmatch(brand):
            raise ValueError(
                f"key prefix {brand!r}: 1 to 16 lower-case letters and digits, starting with a letter"
            )
    return brands or (DEFAULT_BRAND,)


class _Prefixes:
    """The configured brands: ``issue`` (prefix of new keys per environment) and every accepted prefix."""

    def __init__(self, brands: tuple[str, ...]) -> None:
        self.brands = brands
        self.issue = prefixes_of(brands[0])
        self.accepted: dict[str, Environment] = {
            prefix: env for brand in brands for env, prefix in prefixes_of(brand).items()
        }


_current = _Prefixes((DEFAULT_BRAND,))
KEY_PREFIXES_HELP = (
    "comma-separated key prefixes (brands), e.g. 'acme,svc': new keys are <first>_live_... and "
    "<first>_test_...; keys of every listed brand are accepted (list an earlier brand to keep its keys "
    f"working). Every authsvc and edge of a deployment must list the same; default {DEFAULT_BRAND}"
)
# The prefixes of the default brand (kept for readers of the default format, e.g. tests and scripts).
PREFIXES: dict[Environment, str] = prefixes_of(DEFAULT_BRAND)
PREFIX_LENGTH = 9  # of the default brand's prefixes
SECRET_LENGTH = PREFIX_LENGTH + RANDOM_LENGTH + CHECKSUM_LENGTH  # of the default brand's keys


def configure_prefixes(brands: str | Iterable[str]) -> tuple[str, ...]:
    """Set this process's brands (the first issues new keys; all are accepted). Returns them."""
    global _current
    parsed = parse_brands(brands)
    _current = _Prefixes(parsed)
    return parsed


def brands() -> tuple[str, ...]:
    return _current.brands


def issue_prefix(environment: Environment) -> str:
    """The prefix of a new key of ``environment``."""
    return _current.issue[environment]


def accepted_prefixes() -> dict[str, Environment]:
    return dict(_current.accepted)


def prefix_of(secret: str) -> str:
    """The ``<brand>_<word>_`` head of ``secret`` (up to its second underscore), or "" when it has none."""
    first = secret.find("_", 0, 18)
    second = secret.find("_", first + 1, first + 7) if first > 0 else -1
    return secret[: second + 1] if second > 0 else ""


def prefix_environment(secret: str) -> Environment | None:
    """The environment ``secret``'s prefix names when it is an accepted one (no other check)."""
    return _current.accepted.get(prefix_of(secret))


def checksum(body: str) -> str:
    return encode_base62(zlib.crc32(body.encode("ascii")), CHECKSUM_LENGTH)


def environment_of(secret: str) -> Environment | None:
    """The environment of a well-formed secret (an accepted prefix, length, alphabet, checksum), else None."""
    prefix = prefix_of(secret)
    env = _current.accepted.get(prefix)
    if env is None or len(secret) != len(prefix) + RANDOM_LENGTH + CHECKSUM_LENGTH:
        return None
    if not _BASE62_SET.issuperset(secret[len(prefix) :]):
        return None
    body, check = secret[:-CHECKSUM_LENGTH], secret[-CHECKSUM_LENGTH:]
    if not hmac.compare_digest(checksum(body), check):
        return None
    return env


def key_pattern(brands_: Iterable[str] | None = None) -> str:
    """The regular expression of a key of any accepted brand (what a secret scanner searches for)."""
    names = "|".join(re.escape(b) for b in (brands_ or _current.brands))
    brand = f"(?:{names})" if "|" in names else names
    return rf"\b{brand}_(?:live|test)_[0-9A-Za-z]{{{RANDOM_LENGTH + CHECKSUM_LENGTH}}}\b"
