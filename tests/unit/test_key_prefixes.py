"""svckit.apikeys: a deployment's brands -- the first names new keys, every one is accepted, the checksum
holds for each; the scanner pattern matches exactly the keys of the configured brands."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from authsvc._keys import generate_secret, hint
from svckit import apikeys
from svckit.apikeys import checksum, configure_prefixes, environment_of, key_pattern, parse_brands
from svckit.ids import random_base62
from svckit.vocabulary import Environment


@pytest.fixture(autouse=True)
def default_after() -> Iterator[None]:
    yield
    configure_prefixes(apikeys.DEFAULT_BRAND)


def key(prefix: str) -> str:
    body = prefix + random_base62(32)
    return body + checksum(body)


def test_the_default_is_svc() -> None:
    assert generate_secret(Environment.LIVE).startswith("svc_live_")
    assert environment_of(key("svc_test_")) == "sandbox"
    assert environment_of(key("acme_test_")) is None


def test_new_keys_take_the_first_brand_and_earlier_brands_keep_working() -> None:
    configure_prefixes("acme,svc")
    live, test = generate_secret(Environment.LIVE), generate_secret(Environment.SANDBOX)
    assert live.startswith("acme_live_") and test.startswith("acme_test_")
    assert environment_of(live) == "live" and environment_of(test) == "sandbox"
    assert environment_of(key("svc_live_")) == "live"
    assert environment_of(key("other_live_")) is None
    assert hint(live) == f"acme_live_...{live[-4:]}"
    # A changed character breaks the checksum under every brand.
    for secret in (live, key("svc_test_")):
        assert environment_of(secret[:-7] + ("x" if secret[-7] != "x" else "y") + secret[-6:]) is None


@pytest.mark.parametrize("bad", ["Acme", "a-b", "1acme", "a" * 17, "ac me", "acme_x"])
def test_brands_are_short_lower_case_words(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_brands(bad)


def test_parse_brands_keeps_order_and_drops_repeats() -> None:
    assert parse_brands("acme, svc,acme") == ("acme", "svc")
    assert parse_brands("") == ("svc",)


def test_the_pattern_finds_keys_of_every_brand_and_nothing_else() -> None:
    pattern = re.compile(key_pattern(("acme", "svc")))
    text = f"x = '{key('acme_live_')}'; y = \"{key('svc_test_')}\"; z = {key('other_live_')}"
    assert len(pattern.findall(text)) == 2
    assert not pattern.search(key("acme_live_") + "X")  # longer than a key
    assert re.fullmatch(key_pattern(), key("svc_live_"))


def test_svcctl_prints_the_pattern_to_register(capsys: pytest.CaptureFixture[str]) -> None:
    from svcctl.__main__ import main

    assert main(["secret-scanning", "pattern", "--key-prefixes", "acme,svc"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == key_pattern(("acme", "svc"))
    assert re.fullmatch(printed, key("acme_live_")) and re.fullmatch(printed, key("svc_test_"))
    assert main(["secret-scanning", "pattern", "--key-prefixes", "Bad!"]) == 2
