"""The signed certification report: authsvc signs with cryptography, the partner tool verifies with the
standard library alone (svckit.ed25519verify), offline; every single changed byte of the file fails."""

from __future__ import annotations

import base64
import datetime as dt
import json
import pathlib

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from authsvc import _certify_report as signer
from authsvc._certify_rules import CheckResult
from svccli.__main__ import main
from svckit import certreport, ed25519verify

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.UTC)
RESULTS = (
    CheckResult("idempotency_key_present", True, "all 9 POSTs carried an Idempotency-Key"),
    CheckResult(
        "honours_retry_after", False, "a request came sooner than the 429's Retry-After", ("req_1", "req_2")
    ),
)


def report() -> dict[str, object]:
    return signer.build(
        run_id="crun_1",
        account_id="acct_1",
        key_id="key_1",
        started_at=T0,
        ended_at=T0 + dt.timedelta(minutes=5),
        results=RESULTS,
    )


@pytest.fixture(scope="module")
def signing_key() -> str:
    return signer.new_signing_key()


def test_the_standard_library_verifier_agrees_with_cryptography() -> None:
    for i in range(8):
        private = Ed25519PrivateKey.generate()
        public = private.public_key().public_bytes_raw()
        message = f"message {i}".encode() * i
        signature = private.sign(message)
        assert ed25519verify.verify(public, message, signature)
        assert not ed25519verify.verify(public, message + b"x", signature)
        flipped = bytes([signature[0] ^ 1]) + signature[1:]
        assert not ed25519verify.verify(public, message, flipped)
        other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
        assert not ed25519verify.verify(other, message, signature)
    assert not ed25519verify.verify(b"\x00" * 31, b"m", b"\x00" * 64)
    assert not ed25519verify.verify(b"\x00" * 32, b"m", b"\x00" * 63)


def test_rfc8032_test_vector_1() -> None:
    # RFC 8032 section 7.1, TEST 1 (the empty message).
    public = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    signature = bytes.fromhex(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )
    assert ed25519verify.verify(public, b"", signature)


def test_a_report_verifies_and_reads_back(signing_key: str) -> None:
    data = signer.sign(report(), signing_key)
    back = certreport.verify(data, [signer.public_key(signing_key)])
    assert back == report()
    assert back["passed"] is False
    assert back["checks"][1]["evidence"] == ["req_1", "req_2"]


def test_every_single_changed_byte_fails(signing_key: str) -> None:
    data = signer.sign(report(), signing_key)
    keys = [signer.public_key(signing_key)]
    for i in range(len(data)):
        for changed in (data[i] ^ 0x01, ord(" ") if data[i] != ord(" ") else ord("\t")):
            altered = data[:i] + bytes([changed]) + data[i + 1 :]
            with pytest.raises(certreport.ReportError):
                certreport.verify(altered, keys)


def test_a_report_rewritten_and_resigned_by_another_key_fails(signing_key: str) -> None:
    forged = dict(report(), passed=True)
    data = signer.sign(forged, signer.new_signing_key())
    with pytest.raises(certreport.ReportError, match="unknown key"):
        certreport.verify(data, [signer.public_key(signing_key)])


def test_a_forged_signature_under_the_published_key_id_fails(signing_key: str) -> None:
    forged = dict(report(), passed=True)
    other = Ed25519PrivateKey.generate().sign(certreport.signed_bytes(forged))
    data = certreport.render(forged, signer.public_key(signing_key).key_id, other)
    with pytest.raises(certreport.ReportError, match="does not verify"):
        certreport.verify(data, [signer.public_key(signing_key)])


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"keys": "x"}, "expected"),
        ({"keys": [{"algorithm": "rsa"}]}, "ed25519"),
        ({"keys": [{"algorithm": "ed25519", "publicKey": "crpk_AAAA"}]}, "32 bytes"),
        ({"keys": [{"algorithm": "ed25519", "publicKey": "whpk_" + "A" * 44}]}, "starts with"),
        (
            {"keys": [{"algorithm": "ed25519", "keyId": "crk_0", "publicKey": "crpk_" + "A" * 43 + "="}]},
            "keyId",
        ),
    ],
)
def test_malformed_key_documents_are_refused(document: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        certreport.parse_keys(document)


def test_published_key_round_trips(signing_key: str) -> None:
    key = signer.public_key(signing_key)
    assert certreport.parse_keys({"keys": [key.as_json()]}) == [key]
    assert key.text.startswith("crpk_") and len(base64.b64decode(key.text[5:])) == 32


def test_svc_certify_verify_offline(
    signing_key: str,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SVC_API_KEY", raising=False)
    path = tmp_path / "report.json"
    path.write_bytes(signer.sign(report(), signing_key))
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"keys": [signer.public_key(signing_key).as_json()]}))

    assert main(["certify", "verify", str(path), "--keys", str(keys)]) == 0
    out = capsys.readouterr().out
    assert "report verified" in out and "FAILED" in out
    assert "FAIL  honours_retry_after" in out and "req_1, req_2" in out
    assert main(["certify", "verify", str(path), "--key", signer.public_key(signing_key).text]) == 0
    capsys.readouterr()

    data = path.read_bytes()
    i = data.index(b'"passed": false')
    path.write_bytes(data[:i] + b'"passed": true ' + data[i + len(b'"passed": false') :])
    assert main(["certify", "verify", str(path), "--keys", str(keys)]) == 1
    assert "does NOT verify" in capsys.readouterr().out

    assert main(["certify", "verify", str(tmp_path / "missing.json"), "--keys", str(keys)]) == 2
    assert main(["certify", "verify", str(path), "--key", "crpk_nope"]) == 2
