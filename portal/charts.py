"""Small charts as inline SVG rendered on the server (no script, no inline style: CSP-clean)."""

from __future__ import annotations

from markupsafe import Markup, escape

from svckit.quota import THRESHOLD_PERCENT

WIDTH = 320


def usage_bar(used: int, allowance: int) -> Markup:
    share = 0.0 if allowance <= 0 else min(1.0, used / allowance)
    # Red from the share at which authsvc sends search_quota.threshold.
    fill = "#c0392b" if allowance > 0 and used * 100 >= THRESHOLD_PERCENT * allowance else "#2e7d32"
    label = f"{used:,} of {allowance:,} searches today ({share:.0%})"
    return Markup(
        f'<svg class="chart" width="{WIDTH}" height="22" role="img" aria-label="{escape(label)}">'
        f'<rect width="{WIDTH}" height="22" fill="#e6e6e6"/>'
        f'<rect width="{round(WIDTH * share)}" height="22" fill="{fill}"/></svg>'
        f'<span class="chart-label">{escape(label)}</span>'
    )


def success_rates(rows: list[tuple[str, int, int]]) -> Markup:
    """One bar per (label, succeeded, attempts)."""
    parts = [f'<svg class="chart" width="{WIDTH + 120}" height="{len(rows) * 30}" role="img" '
             'aria-label="webhook delivery success rate">']  # fmt: skip
    for i, (label, ok, total) in enumerate(rows):
        y = i * 30
        share = ok / total if total else 0.0
        text = f"{share:.0%} of {total}" if total else "no attempts"
        parts.append(
            f'<text x="0" y="{y + 16}" font-size="12">{escape(label)}</text>'
            f'<rect x="60" y="{y + 4}" width="{WIDTH - 60}" height="16" fill="#e6e6e6"/>'
            f'<rect x="60" y="{y + 4}" width="{round((WIDTH - 60) * share)}" height="16" fill="#2e7d32"/>'
            f'<text x="{WIDTH + 6}" y="{y + 16}" font-size="12">{escape(text)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
