"""The Insights pages' charts: inline SVG rendered on the server (no script, no inline style: CSP-clean),
each with an ``aria-label`` that says what it shows; every page also has the numbers in a table."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

W, H = 720, 200  # plot area
LEFT, BOTTOM, TOP = 70, 22, 8


def _frame(label: str, top_value: float, unit: str) -> list[str]:
    width, height = LEFT + W + 8, TOP + H + BOTTOM
    parts = [
        f'<svg class="chart insight" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(label)}">',
        f'<line x1="{LEFT}" y1="{TOP + H}" x2="{LEFT + W}" y2="{TOP + H}" stroke="#9aa3b2"/>',
    ]
    for frac in (0.5, 1.0):
        y = TOP + H - frac * H
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + W}" y2="{y:.1f}" stroke="#e3e6ec"/>')
        parts.append(
            f'<text x="{LEFT - 4}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
            f"{escape(_num(top_value * frac))}{escape(unit)}</text>"
        )
    return parts


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"


def _nice(v: float) -> float:
    """A round top for an axis at or above ``v``."""
    if v <= 0:
        return 1.0
    step = 1.0
    while step * 10 <= v:
        step *= 10
    for m in (1, 2, 2.5, 5, 10):
        if m * step >= v:
            return m * step
    return 10 * step


def _x_labels(labels: Sequence[str], slot: float, every: int) -> list[str]:
    return [
        f'<text x="{LEFT + i * slot + slot / 2:.1f}" y="{TOP + H + 15}" font-size="11" '
        f'text-anchor="middle">{escape(t)}</text>'
        for i, t in enumerate(labels)
        if i % every == 0
    ]


def stacked_bars(
    labels: Sequence[str],
    stacks: Sequence[Sequence[int]],
    layers: Sequence[tuple[str, str, str]],
    label: str,
    every: int = 3,
) -> Markup:
    """One bar per label, its layers (name, legend, colour) stacked bottom-up."""
    top = _nice(max((sum(s) for s in stacks), default=0))
    slot = W / max(len(labels), 1)
    parts = _frame(label, top, "")
    for i, stack in enumerate(stacks):
        y = float(TOP + H)
        for (_name, legend, colour), n in zip(layers, stack, strict=True):
            if n <= 0:
                continue
            h = H * n / top
            y -= h
            parts.append(
                f'<rect x="{LEFT + i * slot + 1:.1f}" y="{y:.1f}" width="{max(slot - 2, 1):.1f}" '
                f'height="{h:.1f}" fill="{colour}"><title>{escape(labels[i])}: {n:,} '
                f"{escape(legend)}</title></rect>"
            )
    parts += _x_labels(labels, slot, every)
    parts.append("</svg>")
    return Markup("".join(parts))


def lines(
    labels: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float | None]]],
    label: str,
    unit: str = "",
    every: int = 3,
    limit: float | None = None,
) -> Markup:
    """One polyline per series (name, colour, values; None: no point); ``limit`` a dashed level."""
    peak = max((v for _, _, vs in series for v in vs if v is not None), default=0.0)
    top = _nice(max(peak, limit or 0.0))
    slot = W / max(len(labels), 1)
    parts = _frame(label, top, unit)
    if limit is not None:
        y = TOP + H - H * limit / top
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + W}" y2="{y:.1f}" stroke="#b42318" '
            f'stroke-dasharray="6 4"><title>{escape(_num(limit))}{escape(unit)}</title></line>'
        )
    for name, colour, values in series:
        points = [
            f"{LEFT + i * slot + slot / 2:.1f},{TOP + H - H * v / top:.1f}"
            for i, v in enumerate(values)
            if v is not None
        ]
        if points:
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(points)}">'
                f"<title>{escape(name)}</title></polyline>"
            )
    parts += _x_labels(labels, slot, every)
    parts.append("</svg>")
    return Markup("".join(parts))


def legend(items: Sequence[tuple[str, str]]) -> Markup:
    """Colour keys (label, colour) as small SVG swatches beside their text."""
    return Markup(
        '<ul class="legend">'
        + "".join(
            f'<li><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" '
            f'fill="{colour}"/></svg> {escape(text)}</li>'
            for text, colour in items
        )
        + "</ul>"
    )


def ratio_gauge(ratio: float | None, target: int, label: str) -> Markup:
    """A horizontal bar of a look-to-book ratio with the target as a marked line (none without one)."""
    width, height = LEFT + W + 8, 46
    top = _nice(max(ratio or 0.0, float(target)) * 1.15)
    parts = [
        f'<svg class="chart insight" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="{escape(label)}">',
        f'<rect x="{LEFT}" y="6" width="{W}" height="20" fill="#e6e6e6"/>',
    ]
    if ratio is not None:
        past = target > 0 and ratio > target
        parts.append(
            f'<rect x="{LEFT}" y="6" width="{W * min(ratio, top) / top:.1f}" height="20" '
            f'fill="{"#b42318" if past else "#2e7d32"}"/>'
        )
    if target:
        x = LEFT + W * target / top
        parts.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="32" stroke="#1d2330" stroke-width="2"/>')
        parts.append(
            f'<text x="{x:.1f}" y="44" font-size="11" text-anchor="middle">target {target:,}:1</text>'
        )
    parts.append(f'<text x="{LEFT - 4}" y="20" font-size="11" text-anchor="end">0</text>')
    parts.append(
        f'<text x="{LEFT + W}" y="44" font-size="11" text-anchor="end">{escape(_num(top))}:1</text></svg>'
    )
    return Markup("".join(parts))
