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


# (address, refused strictly, refused with --allow-private-targets, words the reason contains)
@pytest.mark.parametrize(
    ("address", "strict", "dev", "why"),
    [
        # Cloud metadata: refused whatever the flags, in every spelling.
        ("169.254.169.254", True, True, "metadata"),
        ("169.254.170.2", True, True, "metadata"),
        ("169.254.170.23", True, True, "metadata"),
        ("100.100.100.200", True, True, "metadata"),
        ("168.63.129.16", True, True, "metadata"),
        ("192.0.0.192", True, True, "metadata"),
        ("169.254.0.23", True, True, "metadata"),
        ("169.254.42.42", True, True, "metadata"),
        ("fd00:ec2::254", True, True, "metadata"),
        ("fd00:ec2::23", True, True, "metadata"),
        ("::ffff:169.254.169.254", True, True, "metadata"),
        ("::a9fe:a9fe", True, True, "metadata"),  # IPv4-compatible
        ("64:ff9b::6464:64c8", True, True, "metadata"),  # NAT64 of 100.100.100.200
        ("2002:a9fe:a9fe::1", True, True, "metadata"),  # 6to4
        ("169.254.169.253", True, False, "link-local"),
        # IPv6 forms embedding a refused IPv4 address.
        ("::7f00:1", True, False, "embedding 127.0.0.1, a loopback"),  # IPv4-compatible
        ("::ffff:0:7f00:1", True, False, "embedding 127.0.0.1, a loopback"),  # IPv4-translated
        ("::ffff:0:a00:1", True, False, "embedding 10.0.0.1, a private"),
        ("64:ff9b::7f00:1", True, False, "embedding 127.0.0.1"),  # well-known NAT64
        ("64:ff9b::a9fe:101", True, False, "embedding 169.254.1.1, a link-local"),
        ("2002:c0a8:101::1", True, False, "embedding 192.168.1.1"),  # 6to4
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", True, False, "embedding 127.0.0.1"),  # Teredo client
        ("64:ff9b:1::7f00:1", True, True, "local-use NAT64"),
        ("64:ff9b:1::808:808", True, True, "local-use NAT64"),
        ("fec0::1", True, False, "site-local"),
        ("fec0:1234::5", True, False, "site-local"),
        # The same forms of a public IPv4 address are only other spellings of it.
        ("::808:808", False, False, ""),
        ("::ffff:0:808:808", False, False, ""),
        ("64:ff9b::808:808", False, False, ""),
        ("2002:808:808::1", False, False, ""),
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", True, False, "private"),  # Teredo itself: 2001::/23
        # The IPv6 loopback and unspecified addresses are not IPv4-compatible forms.
        ("::1", True, False, "loopback"),
        ("::", True, False, "unspecified"),
        ("127.0.0.1", True, False, "loopback"),
        ("8.8.8.8", False, False, ""),
        ("2606:4700:4700::1111", False, False, ""),
    ],
)
def test_forbidden_reason_table(address: str, strict: bool, dev: bool, why: str) -> None:
    ip = ipaddress.ip_address(address)
    reason = forbidden_reason(ip)
    assert (reason is not None) is strict
    assert (forbidden_reason(ip, allow_private=True) is not None) is dev
    if reason is not None:
        assert why in reason


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
        ("http://169.254.169.254/latest", DEV, UnsafeTarget),
        ("http://[fd00:ec2::254]/latest", DEV, UnsafeTarget),
        ("http://100.100.100.200/latest/meta-data", DEV, UnsafeTarget),
        ("https://[::7f00:1]/hook", STRICT, UnsafeTarget),
        ("https://[::ffff:0:7f00:1]/hook", STRICT, UnsafeTarget),
        ("https://[64:ff9b:1::7f00:1]/hook", STRICT, UnsafeTarget),
        ("https://[64:ff9b::a00:1]/hook", STRICT, UnsafeTarget),
        ("https://[2002:7f00:1::1]/hook", STRICT, UnsafeTarget),
        ("https://[fec0::1]/hook", STRICT, UnsafeTarget),
        ("http://127.0.0.1:8000/hook", Policy(allow_private=True), UnsafeTarget),
        ("https://127.0.0.1:8000/hook", Policy(allow_http=True), UnsafeTarget),
    ],
)
def test_check_url_table(url: str, policy: Policy, error: type[InvalidRequest] | None) -> None:
    if error is None:
        check_url(url, policy)
    else:
        with pytest.raises(error) as info:
            check_url(url, policy)
        assert "url" in info.value.message


def _resolver(table: dict[str, list[str]]):
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
        ("metadata.google.internal", ["169.254.169.254"], DEV, True),
        ("meta6.test", ["fd00:ec2::254"], DEV, True),
        ("compat.test", ["::7f00:1"], STRICT, True),
        ("sitelocal.test", ["fec0::1"], STRICT, True),
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
