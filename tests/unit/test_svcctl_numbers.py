"""svcctl's number flags (issue 34): a number a proto field cannot hold is a usage error naming the flag,
never a traceback (``--rate-limit 99999999999999999999`` ended in ``ValueError: Value out of range``)."""

from __future__ import annotations

import pytest

from svcctl.__main__ import build_parser

FLAGS = [
    ["keys", "create", "--account", "acct_1", "--environment", "sandbox", "--rate-limit"],
    ["keys", "update", "key_1", "--rate-limit"],
    ["keys", "list", "--account", "acct_1", "--page-size"],
]


@pytest.mark.parametrize("argv", FLAGS, ids=[" ".join(a[:2]) + " " + a[-1] for a in FLAGS])
@pytest.mark.parametrize("value", ["99999999999999999999", "2147483648", "-1", "1e3", "\u00b2", "x"])
def test_a_number_out_of_range_is_a_usage_error(
    argv: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*argv, value])
    assert exited.value.code == 2
    assert argv[-1] in capsys.readouterr().err


@pytest.mark.parametrize("argv", FLAGS, ids=[" ".join(a[:2]) + " " + a[-1] for a in FLAGS])
def test_numbers_in_range_are_taken(argv: list[str]) -> None:
    for value, want in (("0", 0), ("2147483647", 2**31 - 1), ("25", 25)):
        args = vars(build_parser().parse_args([*argv, value]))
        assert want in args.values()
