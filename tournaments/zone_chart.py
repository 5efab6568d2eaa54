"""The bargaining-zone chart of one episode as inline SVG: what each side could accept, and every
offer and counter-offer over the turns.

One chart per product. Horizontal lines mark the seller's cost (red), the list price (grey) and
each buyer's budget (dotted, in the buyer's colour): the zone of possible agreement lies between
the cost and a budget. Every priced message is a mark at its seller turn (x) and price (y): the
seller's [SELL]/[DEAL] to a buyer as a square, the buyer's [BUY] as a circle, both in that
buyer's colour and joined per channel and side (the seller's line dashed); the buyers' openings
sit at turn 0 and a buyer's reply just after the seller message it answers. A rejected message
is a grey cross at the price it named; the deal is a star. Every mark carries ``data-*``
attributes (kind, speaker, buyer, price, turn) and a ``<title>`` tooltip. Text is escaped.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from arena.money import format_price
from arena.records import EpisodeRecord
from arena.seats import SELLER, buyer_index, buyer_seat, channel_of

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
"""Buyer colours, by slot (repeating after eight buyers)."""
WIDTH, HEIGHT = 680, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 24, 44
REPLY_OFFSET = 0.4
"""How far right of the seller's message a buyer's reply is drawn (in turns)."""


def color(buyer: int) -> str:
    return COLORS[buyer % len(COLORS)]


@dataclass(frozen=True)
class Mark:
    """One priced message as the chart places it."""

    turn: int
    """Seller turn (0: the buyers' openings)."""
    x: float
    speaker: str
    """"seller" or "buyer"."""
    buyer: int
    """0-based channel: the buyer addressed or speaking."""
    kind: str
    price: float
    product: int
    valid: bool
    reason: str | None


def marks(record: EpisodeRecord) -> list[Mark]:
    """Every message with a price, placed: seller turn, channel, product (a buyer's opening
    without a Product line bids on its opening product, as the game reads it)."""
    openings = record.scenario.opening_products
    out, turn = [], 0
    for t in record.result.turns:
        if t.agent == SELLER:
            turn += 1
            channel = channel_of(t.to, len(record.buyers))
            if channel is None:
                continue
            speaker, buyer, x = SELLER, channel, float(turn)
        else:
            speaker, buyer = "buyer", buyer_index(t.agent)
            x = turn + REPLY_OFFSET if turn else 0.0
        if t.price is None or t.kind is None:
            continue
        product = t.product if t.product is not None else (openings[buyer] if turn == 0 else 0)
        out.append(Mark(turn, x, speaker, buyer, t.kind, t.price, product, t.valid, t.reason))
    return out


def _nudge(ys: list[float], gap: float = 14.0) -> list[float]:
    """Label positions near ``ys`` at least ``gap`` apart (labels of close lines stay legible)."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    placed = list(ys)
    for prev, cur in itertools.pairwise(order):
        placed[cur] = max(placed[cur], placed[prev] + gap)
    return placed


def _attrs(**values: object) -> str:
    return " ".join(
        f'{k.rstrip("_").replace("_", "-")}="{html.escape(str(v), quote=True)}"'
        for k, v in values.items()
    )


def product_chart(record: EpisodeRecord, product: int, placed: Sequence[Mark]) -> str:
    """The SVG of one product's chart."""
    sc, res = record.scenario, record.result
    item = sc.products[product]
    budgets = [values[product] for values in sc.valuations]
    mine = [m for m in placed if m.product == product]
    deals = [d for d in res.deals if d.product == product]
    prices = [item.cost, item.list_price, *budgets, *(m.price for m in mine)]
    low, high = max(0.0, min(prices) * 0.9), max(prices) * 1.06
    last = max(1, res.seller_turns)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return round(LEFT + plot_w * x / (last + REPLY_OFFSET + 0.2), 1)

    def py(price: float) -> float:
        return round(TOP + plot_h * (high - price) / (high - low or 1.0), 1)

    title = f"{item.title}: cost {format_price(item.cost)}, list {format_price(item.list_price)}"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f"{_attrs(class_='zone-chart', data_product=product + 1, role='img', aria_label=title)}>",
        f"<title>{html.escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafafa" '
        'stroke="#ccc"/>',
    ]
    for k in range(5):
        price = low + (high - low) * k / 4
        parts.append(f'<text x="{LEFT - 6}" y="{py(price) + 4}" text-anchor="end" '
                     f'class="tick">{html.escape(format_price(price))}</text>')  # fmt: skip
    for turn in range(last + 1):
        parts.append(f'<text x="{px(turn)}" y="{TOP + plot_h + 16}" text-anchor="middle" '
                     f'class="tick">{turn}</text>')  # fmt: skip
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 8}" text-anchor="middle" '
                 'class="axis">seller turn (0: openings)</text>')  # fmt: skip
    refs = [
        ("cost", -1, item.cost, "#d62728", "6 3", f"cost {format_price(item.cost)}"),
        ("list", -1, item.list_price, "#777", "", f"list {format_price(item.list_price)}"),
    ]
    refs += [("budget", i, b, color(i), "2 3", f"{buyer_seat(i)} budget {format_price(b)}")
             for i, b in enumerate(budgets)]  # fmt: skip
    label_ys = _nudge([py(price) + 4 for _, _, price, *_ in refs])
    for (kind, buyer, price, stroke, dash, label), label_y in zip(refs, label_ys, strict=True):
        who = {} if buyer < 0 else {"data_buyer": buyer + 1}
        parts.append(
            f"<line {_attrs(class_=f'ref {kind}', data_price=f'{price:.2f}', **who)} "
            f'x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(price)}" y2="{py(price)}" '
            f'stroke="{stroke}" stroke-width="1.5" stroke-dasharray="{dash}"/>'
        )
        parts.append(f'<text x="{LEFT + plot_w + 6}" y="{label_y}" fill="{stroke}" '
                     f'class="label">{html.escape(label)}</text>')  # fmt: skip
    for buyer in sorted({m.buyer for m in mine}):
        for speaker, dash in ((SELLER, "5 3"), ("buyer", "")):
            line = [m for m in mine if m.buyer == buyer and m.speaker == speaker and m.valid]
            if len(line) > 1:
                points = " ".join(f"{px(m.x)},{py(m.price)}" for m in line)
                parts.append(
                    f'<polyline points="{points}" fill="none" stroke="{color(buyer)}" '
                    f'stroke-width="1.2" stroke-dasharray="{dash}" opacity="0.7"/>'
                )
    for m in mine:
        x, y = px(m.x), py(m.price)
        data = _attrs(class_="mark" if m.valid else "mark rejected", data_kind=m.kind,
                      data_speaker=m.speaker, data_buyer=m.buyer + 1,
                      data_price=f"{m.price:.2f}", data_turn=m.turn)  # fmt: skip
        who = SELLER + " to " + buyer_seat(m.buyer) if m.speaker == SELLER else buyer_seat(m.buyer)
        tip = f"turn {m.turn}: {who} [{m.kind}] {format_price(m.price)}"
        tip += "" if m.valid else f" (rejected: {m.reason})"
        tooltip = f"<title>{html.escape(tip)}</title>"
        if not m.valid:
            cross = f"M{x - 5},{y - 5}L{x + 5},{y + 5}M{x - 5},{y + 5}L{x + 5},{y - 5}"
            parts.append(f'<path {data} d="{cross}" stroke="#888" stroke-width="2">'
                         f"{tooltip}</path>")  # fmt: skip
        elif m.speaker == SELLER:
            parts.append(f'<rect {data} x="{x - 5}" y="{y - 5}" width="10" height="10" '
                         f'fill="white" stroke="{color(m.buyer)}" stroke-width="2">'
                         f"{tooltip}</rect>")  # fmt: skip
        else:
            parts.append(f'<circle {data} cx="{x}" cy="{y}" r="5" fill="{color(m.buyer)}">'
                         f"{tooltip}</circle>")  # fmt: skip
    for deal in deals:
        x = px(deal.turn + (REPLY_OFFSET if deal.closed_by == "buyer" else 0.0))
        y = py(deal.price)
        star = " ".join(f"{x + dx:.1f},{y + dy:.1f}" for dx, dy in _STAR)
        label = f"deal {format_price(deal.price)} with {buyer_seat(deal.buyer)}"
        parts.append(
            f"<polygon {_attrs(class_='deal', data_buyer=deal.buyer + 1)} "
            f'{_attrs(data_price=f"{deal.price:.2f}", data_turn=deal.turn)} points="{star}" '
            f'fill="gold" stroke="#222"><title>{html.escape(label)}</title></polygon>'
        )
        parts.append(f'<text x="{x + 12}" y="{y - 10}" class="deal-label">'
                     f"{html.escape(label)}</text>")  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


_STAR = [(0.0, -11.0), (3.0, -3.5), (10.5, -3.4), (4.6, 1.4), (6.8, 9.0), (0.0, 4.6),
         (-6.8, 9.0), (-4.6, 1.4), (-10.5, -3.4), (-3.0, -3.5)]  # fmt: skip


def zone_charts(record: EpisodeRecord) -> list[str]:
    """One SVG chart per product of the episode."""
    placed = marks(record)
    return [product_chart(record, p, placed) for p in range(record.scenario.num_products)]
