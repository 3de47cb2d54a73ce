"""Command-line flags with environment fallbacks, written one way for every ``serve`` command and CLI.

``add_flag(parser, "--batch-size", env="WEBHOOKD_BATCH_SIZE", type=int, default=Config.batch_size)``:
the flag wins, then the environment variable, then the default (stated once, on the config dataclass:
``config_default``). The environment's text is converted when the command line is parsed, never when
the parser is built, so ``--help`` works whatever the environment holds, and a bad value ends in
argparse's one-line usage error naming the flag and its variable (exit 2), never a traceback:

    webhookd serve: error: argument --batch-size: invalid value 'abc' from WEBHOOKD_BATCH_SIZE
    (expected int)

A parser given flags this way also takes ``--config FILE`` (or ``<SERVICE>_CONFIG``): a TOML file of
``flag-name = value`` lines (the flag without its dashes, ``-`` or ``_``), read when the command line is
parsed. Precedence: the flag, then the environment, then the file, then the default. A key that names no
flag, or a value of the wrong kind, is the same one-line usage error naming the file.

One file serves every command of a service: each sub-command of a FlagParser (``serve``, ``migrate``,
``reseal``, a key generator) takes ``--config`` and reads from it the keys of its own flags, ignoring the
keys of its sibling commands' flags (``migrate`` needs ``database`` from the file ``serve`` reads, not
``listen``); a key that names no flag of any of them is still an error (a typo).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from typing import Any

from svckit.fileerrors import cannot_read

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")


def env_name(service: str, flag: str) -> str:
    """``<SERVICE>_<FLAG>``: ``env_name("edge", "authsvc-timeout")`` -> ``EDGE_AUTHSVC_TIMEOUT``."""
    return f"{service.upper()}_{flag.upper().replace('-', '_')}"


def or_default(default: str) -> Callable[[str], str]:
    """A flag's text, an empty one meaning ``default``: for flags whose empty environment variable has
    always meant "not set" (the database URL, the TLS files)."""

    def text(value: str) -> str:
        return value or default

    return text


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
    _add_config_flag(parser, env)
    _specs(parser).append(_Spec(flag, switch, repeat, type, raw is not None))
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


@dataclasses.dataclass(frozen=True)
class _Spec:
    flag: str
    switch: bool
    repeat: bool
    convert: Callable[[str], Any]
    from_env: bool

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def _specs(parser: Any) -> list[_Spec]:
    if not hasattr(parser, "_svc_specs"):
        parser._svc_specs = []
    out: list[_Spec] = parser._svc_specs
    return out


def _add_config_flag(parser: Any, env: str) -> None:
    """``--config`` on a FlagParser, once, its variable named for the service of its first flag."""
    if not isinstance(parser, FlagParser) or hasattr(parser, "_svc_config_env"):
        return
    variable = f"{env.split('_', 1)[0]}_CONFIG"
    setattr(parser, "_svc_config_env", variable)  # noqa: B010 - FlagParser's own mark, read by getattr
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get(variable, ""),
        help=f"TOML file of flag-name = value settings; flags and the environment win (env {variable})",
    )


def _config_path(parser: FlagParser, args: list[str]) -> str:
    """``--config`` of the command line (the last one given), else the parser's variable."""
    path = ""
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--config" and i + 1 < len(args):
            path = args[i + 1]
        elif arg.startswith("--config="):
            path = arg[len("--config=") :]
    variable: str = getattr(parser, "_svc_config_env", "")
    return path or os.environ.get(variable, "")


def _config_text(value: Any, key: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return ",".join(str(v) for v in value)
    raise ArgumentError(f"{key}: expected a string, number, boolean or list, not {type(value).__name__}")


def _load_config(parser: FlagParser, path: str) -> dict[str, Any]:
    import tomllib  # here: most commands are never given a file

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        parser.error(f"argument --config: {cannot_read(exc, path)}")
    except tomllib.TOMLDecodeError as exc:
        parser.error(f"argument --config: {path} is not TOML ({exc})")
    known = {spec.flag[2:]: spec for spec in _specs(parser)}
    siblings = {spec.flag[2:] for member in _family(parser) for spec in _specs(member)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = key.replace("_", "-")
        if name in known:
            out[name] = value
        elif name not in siblings:  # another command's setting (``listen`` for migrate) is left to it
            parser.error(f"argument --config: {path}: {key!r} names no flag of this command")
    return out


def _family(parser: Any) -> list[Any]:
    """The sub-commands made by the same ``add_subparsers`` as ``parser`` (itself included), else []."""
    family: list[Any] = getattr(parser, "_svc_family", [])
    return family


def _join_config(parser: FlagParser) -> None:
    """``--config`` on a sub-command that has no flag of its own to bring it (a key generator), named as
    its siblings name it: every command of a service takes the service's file."""
    if hasattr(parser, "_svc_config_env"):
        return
    variable = next((v for m in _family(parser) if (v := getattr(m, "_svc_config_env", ""))), "")
    if variable:
        _add_config_flag(parser, variable)


def _apply_config(parser: FlagParser, args: list[str]) -> Callable[[], None]:
    """Set the defaults of the flags the environment left alone to the config file's values; returns
    what puts the defaults back (a parser may parse again)."""
    path = _config_path(parser, args)
    if not path:
        return lambda: None
    config = _load_config(parser, path)
    actions = {a.dest: a for a in parser._actions}
    repeats = _repeat_defaults(parser)
    saved = [(a, a.default) for a in actions.values()]
    saved_repeats = dict(repeats)
    for spec in _specs(parser):
        name = spec.flag[2:]
        if name not in config or spec.from_env:
            continue
        origin = f"{path} ({name})"
        try:
            text = _config_text(config[name], name)
        except ArgumentError as exc:
            parser.error(f"argument --config: {path}: {exc}")
        if spec.repeat:
            try:
                repeats[spec.flag] = [_typed(spec.convert)(_FromEnv(e, origin)) for e in csv_list(text)]
            except argparse.ArgumentTypeError as exc:
                parser.error(f"argument {spec.flag}: {exc}")
        else:
            actions[spec.dest].default = _FromEnv(text, origin)

    def restore() -> None:
        for action, default in saved:
            action.default = default
        repeats.clear()
        repeats.update(saved_repeats)

    return restore


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


def _after(parser: Any) -> list[Callable[[argparse.Namespace], None]]:
    if not hasattr(parser, "_svc_after"):
        parser._svc_after = []
    out: list[Callable[[argparse.Namespace], None]] = parser._svc_after
    return out


def after_parse(parser: Any, finish: Callable[[argparse.Namespace], None]) -> None:
    """``finish(namespace)`` once the command line is parsed (a FlagParser's), e.g. to fold one flag into
    another; an ArgumentError it raises is the parser's usage error."""
    _after(parser).append(finish)


def _errors(parser: Any) -> list[str]:
    if not hasattr(parser, "_svc_errors"):
        parser._svc_errors = []
    out: list[str] = parser._svc_errors
    return out


class FlagParser(argparse.ArgumentParser):
    """An ArgumentParser that finishes what ``add_flag`` started: switches and repeatable flags whose
    value came from the environment are converted (or refused) when the command line is parsed.
    Sub-parsers made with ``add_subparsers`` are FlagParsers too."""

    def add_subparsers(self, **kwargs: Any) -> Any:
        """As argparse's, and each sub-command made by it knows the others (``_family``): a config file
        key one of them takes is no error for the rest."""
        action = super().add_subparsers(**kwargs)
        family: list[FlagParser] = []
        add = action.add_parser

        def add_parser(name: str, **options: Any) -> Any:
            child = add(name, **options)
            child._svc_family = family
            family.append(child)
            return child

        setattr(action, "add_parser", add_parser)  # noqa: B010 - argparse has no hook for it
        return action

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        _join_config(self)
        restore = (
            _apply_config(self, list(sys.argv[1:] if args is None else args))
            if hasattr(self, "_svc_config_env")
            else (lambda: None)
        )
        try:
            ns, rest = super().parse_known_args(args, namespace)
            self._finish(ns)
        finally:
            restore()
        return ns, rest

    def _finish(self, ns: argparse.Namespace) -> None:
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
        for finish in _after(self):
            try:
                finish(ns)
            except ArgumentError as exc:
                self.error(str(exc))


def config_default(config: type, name: str) -> Any:
    """The default of field ``name`` of a config dataclass: flags say it by reference, never again."""
    for f in dataclasses.fields(config):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise ValueError(f"{config.__name__}.{name} has no default")
    raise ValueError(f"{config.__name__} has no field {name!r}")
