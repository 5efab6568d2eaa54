"""The text protocol: typed messages, a strict parser and a renderer (paper Section 3.1).

Seller messages carry Thought, Target, Talk and Action (``[SELL] $M``, ``[DEAL] $M`` or
``[QUIT]``); buyer messages carry Thought, Talk and Action (``[BUY] $M``, ``[DEAL]`` or
``[QUIT]``). A multi-product market adds a ``Product:`` field (1-based), absent otherwise.

The parser accepts what chat models really emit (markdown emphasis around labels, ``$1,299.00``,
surrounding whitespace, code fences, a leading ``<think>...</think>`` block) but never guesses:
anything ambiguous is a :class:`FormatViolation` with a machine-readable ``reason``. It never
raises on any input. See docs/protocol.md for the grammar with examples.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum

from arena.money import format_price


class Kind(str, Enum):
    """The transactional move of a message."""

    SELL = "SELL"
    BUY = "BUY"
    DEAL = "DEAL"
    QUIT = "QUIT"


SELLER_KINDS = frozenset({Kind.SELL, Kind.DEAL, Kind.QUIT})
BUYER_KINDS = frozenset({Kind.BUY, Kind.DEAL, Kind.QUIT})


@dataclass(frozen=True)
class SellerMessage:
    """A parsed seller turn. ``buyer`` and ``product`` are 0-based (the text is 1-based)."""

    thought: str
    buyer: int
    talk: str
    kind: Kind
    price: float | None = None
    product: int | None = None


@dataclass(frozen=True)
class BuyerMessage:
    """A parsed buyer turn. ``price`` is required for BUY and optional for DEAL."""

    thought: str
    talk: str
    kind: Kind
    price: float | None = None
    product: int | None = None


@dataclass(frozen=True)
class FormatViolation:
    """Why a message could not be parsed: ``reason`` is a stable code, ``detail`` is for humans."""

    reason: str
    detail: str = ""

    @property
    def is_target_error(self) -> bool:
        """Target missing, unparseable or out of range: violation (iii) of Section 3.2."""
        return self.reason in ("missing_target", "non_integer_target", "duplicate_target")


Message = SellerMessage | BuyerMessage

_LABELS = ("thought", "target", "talk", "action", "product")
_LABEL_RE = re.compile(
    r"^[ \t>#-]*(?P<em>\*\*|__|\*|_)?[ \t]*(?P<label>thought|target|talk|action|product)[ \t]*"
    r"(?:(?(em)(?P=em)):|:(?(em)(?P=em)))[ \t]?(?P<rest>.*)$",
    re.IGNORECASE,
)
_THINK_RE = re.compile(r"^\s*<think>(?P<think>.*?)</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"^\s*```[\w-]*\s*$")
_TAG_RE = re.compile(r"\[\s*([A-Za-z]+)\s*\]")
_PRICE_RE = re.compile(
    r"^(?P<neg>-)?\s*\$?\s*(?P<neg2>-)?\s*"
    r"(?P<num>(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+|nan|inf(?:inity)?)\s*$",
    re.IGNORECASE,
)
_TARGET_RE = re.compile(r"^(?:buyer[\s_#-]*|#)?(\d+)$", re.IGNORECASE)
_PRODUCT_RE = re.compile(r"^(?:product[\s_#-]*|p|#)?(\d+)$", re.IGNORECASE)
_EMPHASIS = "*_` \t"


def split_reasoning(text: str) -> tuple[str, str]:
    """Split a leading ``<think>...</think>`` block off ``text``: (reasoning, rest)."""
    match = _THINK_RE.match(text)
    if match is None:
        return "", text
    return match.group("think").strip(), text[match.end() :]


def _fields(text: str) -> dict[str, str] | FormatViolation:
    """Label -> value, continuation lines joined with newlines; duplicates are violations."""
    _, body = split_reasoning(text)
    if re.search(r"<think>", body, re.IGNORECASE):
        return FormatViolation("unclosed_think", "a <think> block is not closed before the reply")
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for line in body.splitlines():
        if _FENCE_RE.match(line):
            continue
        match = _LABEL_RE.match(line)
        if match is not None:
            label = match.group("label").lower()
            if label in fields:
                return FormatViolation(f"duplicate_{label}", f"the {label} field appears twice")
            fields[label] = [match.group("rest")]
            current = label
        elif current is not None:
            fields[current].append(line)
    return {k: "\n".join(v).strip() for k, v in fields.items()}


def _parse_price(raw: str) -> float | FormatViolation:
    text = raw.strip().strip(_EMPHASIS)
    match = _PRICE_RE.match(text)
    if match is None:
        return FormatViolation("bad_price", f"cannot read a price from {raw!r}")
    number = match.group("num").replace(",", "")
    value = float(number)
    if not math.isfinite(value):
        return FormatViolation("non_finite_price", f"price {raw!r} is not a finite number")
    if match.group("neg") or match.group("neg2"):
        return FormatViolation("negative_price", f"price {raw!r} is negative")
    if abs(value * 100 - round(value * 100)) > 1e-6:
        return FormatViolation("sub_cent_price", f"price {raw!r} has fractions of a cent")
    return round(value, 2)


def _parse_action(
    raw: str, allowed: frozenset[Kind], price_required: frozenset[Kind]
) -> tuple[Kind, float | None] | FormatViolation:
    text = raw.strip()
    if not text:
        return FormatViolation("missing_action", "the Action field is empty")
    if "\n" in text.strip(_EMPHASIS + "\n"):
        lines = [ln for ln in text.splitlines() if ln.strip(_EMPHASIS)]
        if len(lines) > 1:
            return FormatViolation("text_after_action", "the Action field spans several lines")
        text = lines[0] if lines else ""
    text = text.strip(_EMPHASIS)
    tags = _TAG_RE.findall(text)
    if not tags:
        return FormatViolation("missing_action", f"no [ACTION] tag in {raw.strip()!r}")
    if len(tags) > 1:
        return FormatViolation("multiple_actions", f"{len(tags)} action tags in {raw.strip()!r}")
    try:
        kind = Kind(tags[0].upper())
    except ValueError:
        return FormatViolation("unknown_action", f"[{tags[0]}] is not an action")
    if kind not in allowed:
        return FormatViolation("action_not_allowed", f"[{kind.value}] is not allowed here")
    match = _TAG_RE.search(text)
    assert match is not None
    before = text[: match.start()].strip(_EMPHASIS)
    # A trailing full stop is punctuation; a leading one is a decimal point (".50" is 50 cents).
    after = text[match.end() :].lstrip(_EMPHASIS).rstrip(_EMPHASIS + ".")
    if before:
        return FormatViolation("text_before_action", f"unexpected {before!r} before the action")
    if not after:
        if kind in price_required:
            return FormatViolation("missing_price", f"[{kind.value}] needs a price")
        return kind, None
    if kind is Kind.QUIT:
        return FormatViolation("unexpected_price", "[QUIT] takes no price")
    price = _parse_price(after)
    if isinstance(price, FormatViolation):
        return price
    return kind, price


def _parse_index(raw: str, pattern: re.Pattern[str], name: str) -> int | FormatViolation:
    text = raw.strip().strip(_EMPHASIS)
    if not text:
        return FormatViolation(f"missing_{name}", f"the {name.capitalize()} field is empty")
    match = pattern.match(text)
    if match is None:
        return FormatViolation(f"non_integer_{name}", f"{name} {raw.strip()!r} is not an integer")
    return int(match.group(1)) - 1


def _common(
    text: str, required: tuple[str, ...], product_required: bool
) -> dict[str, str] | FormatViolation:
    if not isinstance(text, str):
        return FormatViolation("not_text", f"expected text, got {type(text).__name__}")
    fields = _fields(text)
    if isinstance(fields, FormatViolation):
        return fields
    for label in required:
        if label not in fields:
            return FormatViolation(f"missing_{label}", f"no {label.capitalize()}: field")
    if product_required and "product" not in fields:
        return FormatViolation("missing_product", "no Product: field in a multi-product market")
    return fields


def _product(fields: dict[str, str]) -> int | FormatViolation | None:
    if "product" not in fields:
        return None
    return _parse_index(fields["product"], _PRODUCT_RE, "product")


def parse_seller(text: str, multi_product: bool = False) -> SellerMessage | FormatViolation:
    """Parse a seller turn; never raises. Target range is checked by the rules, not here."""
    fields = _common(text, ("thought", "target", "talk", "action"), multi_product)
    if isinstance(fields, FormatViolation):
        return fields
    target = _parse_index(fields["target"], _TARGET_RE, "target")
    if isinstance(target, FormatViolation):
        return target
    action = _parse_action(fields["action"], SELLER_KINDS, frozenset({Kind.SELL, Kind.DEAL}))
    if isinstance(action, FormatViolation):
        return action
    product = _product(fields)
    if isinstance(product, FormatViolation):
        return product
    kind, price = action
    return SellerMessage(fields["thought"], target, fields["talk"], kind, price, product)


def parse_buyer(text: str, multi_product: bool = False) -> BuyerMessage | FormatViolation:
    """Parse a buyer turn; never raises. Budget and acceptance checks belong to the rules."""
    fields = _common(text, ("thought", "talk", "action"), multi_product)
    if isinstance(fields, FormatViolation):
        return fields
    action = _parse_action(fields["action"], BUYER_KINDS, frozenset({Kind.BUY}))
    if isinstance(action, FormatViolation):
        return action
    product = _product(fields)
    if isinstance(product, FormatViolation):
        return product
    kind, price = action
    return BuyerMessage(fields["thought"], fields["talk"], kind, price, product)


def render_action(kind: Kind, price: float | None) -> str:
    return f"[{kind.value}]" if price is None else f"[{kind.value}] {format_price(price)}"


def render_seller(msg: SellerMessage) -> str:
    """The canonical text of a seller turn; ``parse_seller(render_seller(m)) == m``."""
    lines = [f"Thought: {msg.thought}", f"Target: {msg.buyer + 1}"]
    if msg.product is not None:
        lines.append(f"Product: {msg.product + 1}")
    lines += [f"Talk: {msg.talk}", f"Action: {render_action(msg.kind, msg.price)}"]
    return "\n".join(lines)


def render_buyer(msg: BuyerMessage) -> str:
    """The canonical text of a buyer turn; ``parse_buyer(render_buyer(m)) == m``."""
    lines = [f"Thought: {msg.thought}"]
    if msg.product is not None:
        lines.append(f"Product: {msg.product + 1}")
    lines += [f"Talk: {msg.talk}", f"Action: {render_action(msg.kind, msg.price)}"]
    return "\n".join(lines)


def public_part(msg: Message) -> str:
    """What the counterparty sees of a message: Talk and Action (and Product), never Thought."""
    product = "" if msg.product is None else f" (product {msg.product + 1})"
    return f"{msg.talk}\nAction: {render_action(msg.kind, msg.price)}{product}"
