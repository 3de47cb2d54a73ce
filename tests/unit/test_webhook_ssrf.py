from __future__ import annotations

import ipaddress

import pytest

from webhookd import InvalidRequest, Policy, UnsafeTarget, check_target, check_url, forbidden_reason

STRICT = Policy()
DEV = Policy(allow_http=True, allow_private=True)


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("8.8.8.8", False),
        ("2606:4700:4700::1111", False),
        ("93.184.216.34", False),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.1.1", True),
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("169.254.169.254", True),
        ("169.254.1.1", True),
        ("fe80::1", True),
        ("fd00:ec2::254", True),
        ("fc00::1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:127.0.0.1", True),
        ("::ffff:8.8.8.8", False),
        ("2002:7f00:1::", True),
        ("64:ff9b::a00:1", True),
        ("100.64.0.1", True),
        ("100.127.255.254", True),
        ("224.0.0.1", True),
        ("ff02::1", True),
        ("0.0.0.0", True),
        ("::", True),
        ("255.255.255.255", True),
        ("192.0.2.10", True),
        ("198.18.0.1", True),
    ],
)
def test_forbidden_addresses(address: str, refused: bool) -> None:
    assert (forbidden_reason(ipaddress.ip_address(address)) is not None) is refused


@pytest.mark.parametrize(
    ("url", "policy", "error"),
    [
        ("https://example.com/hook", STRICT, None),
        ("https://8.8.8.8:8443/hook", STRICT, None),
        ("http://example.com/hook", STRICT, UnsafeTarget),
        ("ftp://example.com/hook", STRICT, UnsafeTarget),
        ("example.com/hook", STRICT, UnsafeTarget),
        ("https://127.0.0.1/hook", STRICT, UnsafeTarget),
        ("https://[::1]/hook", STRICT, UnsafeTarget),
        ("https://[::ffff:192.168.0.1]/hook", STRICT, UnsafeTarget),
        ("https://169.254.169.254/latest/meta-data", STRICT, UnsafeTarget),
        ("https://[fd00:ec2::254]/", STRICT, UnsafeTarget),
        ("https://user:pw@example.com/", STRICT, InvalidRequest),
        ("https://example.com/#frag", STRICT, InvalidRequest),
        ("https:///nohost", STRICT, InvalidRequest),
        ("https://example.com:99999/", STRICT, InvalidRequest),
        ("https://exa mple.com/", STRICT, InvalidRequest),
        ("", STRICT, InvalidRequest),
        ("http://127.0.0.1:8000/hook", DEV, None),
        ("http://127.0.0.1:8000/hook", Policy(allow_private=True), UnsafeTarget),
        ("https://127.0.0.1:8000/hook", Policy(allow_http=True), UnsafeTarget),
    ],
)
def test_check_url_table(url: str, policy: Policy, error: type[Exception] | None) -> None:
    if error is None:
        check_url(url, policy)
    else:
        with pytest.raises(error) as info:
            check_url(url, policy)
        assert "url" in info.value.message


def _resolver(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"no such host {host}")
        return table[host]

    return resolve


@pytest.mark.parametrize(
    ("host", "addresses", "policy", "refused"),
    [
        ("public.test", ["93.184.216.34"], STRICT, False),
        ("private.test", ["10.0.0.7"], STRICT, True),
        ("mixed.test", ["93.184.216.34", "127.0.0.1"], STRICT, True),
        ("meta.test", ["169.254.169.254"], STRICT, True),
        ("mapped.test", ["::ffff:10.0.0.1"], STRICT, True),
        ("private.test", ["10.0.0.7"], DEV, False),
        ("missing.test", None, STRICT, True),
    ],
)
async def test_resolved_names_are_checked(
    host: str, addresses: list[str] | None, policy: Policy, refused: bool
) -> None:
    resolver = _resolver({host: addresses} if addresses is not None else {})
    if refused:
        with pytest.raises(UnsafeTarget):
            await check_target(f"https://{host}/hook", policy, resolver)
    else:
        assert (await check_target(f"https://{host}/hook", policy, resolver)).host == host
