"""Command-line flags with environment fallbacks, written one way for every ``serve`` command and CLI.

``add_flag(parser, "--batch-size", env="WEBHOOKD_BATCH_SIZE", type=int, default=Config.batch_size)``:
the flag wins, then the environment variable, then the default (stated once, on the config dataclass:
``config_default``). The environment's text is converted when the command line is parsed, never when
the parser is built, so ``--help`` works whatever the environment holds, and a bad value ends in
argparse's one-line usage error naming the flag and its variable (exit 2), never a traceback:

    webhookd serve: error: argument --batch-size: invalid value 'abc' from WEBHOOKD_BATCH_SIZE
    (expected int)
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")


def env_name(service: str, flag: str) -> str:
    """``<SERVICE>_<FLAG>``: ``env_name("edge", "authsvc-timeout")`` -> ``EDGE_AUTHSVC_TIMEOUT``."""
    return f"{service.upper()}_{flag.upper().replace('-', '_')}"


class _FromEnv(str):
    """A default taken from the environment: argparse converts string defaults with the flag's type
    after parsing, and the conversion then knows which variable to name."""

    env: str

    def __new__(cls, value: str, env: str) -> _FromEnv:
        out = super().__new__(cls, value)
        out.env = env
        return out


def _typed(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    name = getattr(convert, "__name__", "value")

    def parse(text: str) -> Any:
        try:
            return convert(text)
        except (TypeError, ValueError) as exc:
            origin = f" from {text.env}" if isinstance(text, _FromEnv) else ""
            detail = str(exc) if isinstance(exc, ArgumentError) else f"expected {name}"
            raise argparse.ArgumentTypeError(f"invalid value {str(text)!r}{origin} ({detail})") from None

    parse.__name__ = name
    return parse


class ArgumentError(ValueError):
    """Raised by a flag's own converter when its message says more than 'expected <type>'."""


def boolean(text: str) -> bool:
    """An on/off word: 1, true, yes, on (or 0, false, no, off, empty), any case."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    offs = ", ".join(w for w in FALSE_WORDS if w)
    raise ArgumentError(f"expected one of {', '.join(TRUE_WORDS)} or {offs}")


def csv_list(text: str) -> list[str]:
    """Comma-separated entries, blanks dropped."""
    return [part.strip() for part in text.split(",") if part.strip()]


def add_flag(
    parser: argparse.ArgumentParser | Any,
    flag: str,
    *,
    env: str,
    help: str,
    default: Any = None,
    type: Callable[[str], Any] = str,
    switch: bool = False,
    repeat: bool = False,
    also_env: tuple[str, ...] = (),
    **kwargs: Any,
) -> None:
    """One flag with its environment fallback ``env`` (then each of ``also_env``, e.g. DATABASE_URL).

    ``switch``: an on/off flag (``--insecure-dev``), on when given or when ``env`` holds an on-word.
    ``repeat``: the flag may be given several times and the variable holds a comma-separated list;
    the value is a list of converted entries.
    """
    # An empty variable gives way to the next one in ``also_env``; alone, it is a value ("" turns a
    # listener off).
    variable = next((name for name in (env, *also_env) if os.environ.get(name)), None)
    if variable is None and env in os.environ:
        variable = env
    raw = None if variable is None else os.environ[variable]
    variable = variable or env
    shown_env = " or ".join((env, *also_env))
    if switch:
        parser.add_argument(
            flag,
            action="store_true",
            default=_FromEnv(raw, variable) if raw is not None else bool(default),
            help=f"{help} (env {shown_env})",
            **kwargs,
        )
        # store_true gives no type: the environment's word is converted after parsing (FlagParser).
        _pending(parser).append((flag, _typed(boolean)))
        return
    if repeat:
        if raw is not None:
            default = [convert_or_exit(parser, flag, _FromEnv(e, variable), type) for e in csv_list(raw)]
        parser.add_argument(
            flag,
            action="append",
            type=_typed(type),
            default=None,
            help=f"{help} (repeatable; env {shown_env}, comma-separated)",
            **kwargs,
        )
        _repeat_defaults(parser)[flag] = list(default or [])
        return
    shown = "" if default in (None, "") else f"; default {default}"
    parser.add_argument(
        flag,
        type=_typed(type),
        default=_FromEnv(raw, variable) if raw is not None else default,
        help=f"{help} (env {shown_env}{shown})",
        **kwargs,
    )


def convert_or_exit(parser: Any, flag: str, text: str, convert: Callable[[str], Any]) -> Any:
    """``text`` converted, or the parser's usage error (exit 2) when the command line is parsed."""
    try:
        return _typed(convert)(text)
    except argparse.ArgumentTypeError as exc:
        _errors(parser).append(f"argument {flag}: {exc}")
        return None


def _pending(parser: Any) -> list[tuple[str, Callable[[str], Any]]]:
    if not hasattr(parser, "_svc_switches"):
        parser._svc_switches = []
    out: list[tuple[str, Callable[[str], Any]]] = parser._svc_switches
    return out


def _repeat_defaults(parser: Any) -> dict[str, list[Any]]:
    if not hasattr(parser, "_svc_repeats"):
        parser._svc_repeats = {}
    out: dict[str, list[Any]] = parser._svc_repeats
    return out


def _errors(parser: Any) -> list[str]:
    if not hasattr(parser, "_svc_errors"):
        parser._svc_errors = []
    out: list[str] = parser._svc_errors
    return out


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that finishes what ``add_flag`` started: switches and repeatable flags whose
    value came from the environment are converted (or refused) when the command line is parsed.
    Sub-parsers made with ``add_subparsers`` are FlagParsers too."""

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        ns, rest = super().parse_known_args(args, namespace)
        for message in _errors(self):
            self.error(message)
        for flag, convert in _pending(self):
            dest = flag.lstrip("-").replace("-", "_")
            value = getattr(ns, dest, None)
            if isinstance(value, _FromEnv):
                try:
                    setattr(ns, dest, convert(value))
                except argparse.ArgumentTypeError as exc:
                    self.error(f"argument {flag}: {exc}")
        for flag, default in _repeat_defaults(self).items():
            dest = flag.lstrip("-").replace("-", "_")
            if getattr(ns, dest, None) is None:
                setattr(ns, dest, list(default))
        return ns, rest


def config_default(config: type, name: str) -> Any:
    """The default of field ``name`` of a config dataclass: flags say it by reference, never again."""
    import dataclasses  # here: the partners' CLI imports this module and never needs it

    for f in dataclasses.fields(config):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise ValueError(f"{config.__name__}.{name} has no default")
    raise ValueError(f"{config.__name__} has no field {name!r}")
