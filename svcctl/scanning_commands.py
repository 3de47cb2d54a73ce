"""``svcctl secret-scanning pattern``: what to register with a secret scanner (docs/operations.md "Secret
scanning").

Prints the regular expression of this deployment's keys (every brand of ``--key-prefixes``, the same list
authsvc and the edge are given; svckit.apikeys) -- the pattern GitHub's partner program and GitLab are
given -- then, with ``--edge-url``, the endpoints they post to. Nothing is called: the pattern follows
from the key format alone.
"""

from __future__ import annotations

import argparse
from typing import Any

from svckit.apikeys import DEFAULT_BRAND, KEY_PREFIXES_HELP, key_pattern, parse_brands

GITHUB_PATH = "/v1/secret-scanning/github"
GITLAB_PATH = "/v1/secret-scanning/gitlab"


async def _pattern(args: argparse.Namespace) -> int:
    try:
        brands = parse_brands(args.key_prefixes)
    except ValueError as exc:
        print(f"error: --key-prefixes: {exc}")
        return 2
    print(key_pattern(brands))
    if args.edge_url:
        base = args.edge_url.rstrip("/")
        print(f"GitHub secret scanning endpoint: {base}{GITHUB_PATH}")
        print(f"GitLab token types: {base}{GITLAB_PATH}/revocable_token_types")
        print(f"GitLab token revocation: {base}{GITLAB_PATH}/revoke_tokens")
    return 0


def register(groups: Any) -> None:
    group = groups.add_parser("secret-scanning", help="what to register with secret scanners")
    commands = group.add_subparsers(dest="command", required=True, metavar="COMMAND")
    pattern = commands.add_parser("pattern", help="print the regular expression of this deployment's keys")
    pattern.add_argument("--key-prefixes", default=DEFAULT_BRAND, help=KEY_PREFIXES_HELP)
    pattern.add_argument(
        "--edge-url", default="", help="the live host's public URL: also print the endpoints"
    )
    pattern.set_defaults(handler=_pattern)
