"""The text protocol: typed messages, a strict parser and a renderer (paper Section 3.1).

Seller messages carry Thought, Target, Talk and Action (``[SELL] $M``, ``[DEAL] $M`` or
``[QUIT]``); buyer messages carry Thought, Talk and Action (``[BUY] $M``, ``[DEAL]`` or
``[QUIT]``). A multi-product market adds a ``Product:`` field (1-based), absent otherwise.

The parser accepts what chat models really emit (markdown emphasis around labels, ``$1,299.00``,
surrounding whitespace, code fences, a leading ``<think>...</think>`` block) but never guesses:
anything ambiguous is a :class:`FormatViolation` with a machine-readable ``reason``. It never
raises on any input, and its work is linear in the length of the text: it is written with string
methods and with patterns whose adjacent repetitions cannot match the same character, and a text
longer than :data:`MAX_MESSAGE_CHARS` is refused before it is read. See docs/protocol.md for the
grammar with examples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from arena.money import format_price

MAX_MESSAGE_CHARS = 32_768
"""The longest message, a leading ``<think>`` block included (reason ``too_long``).

Reasoning models leave their think block in the text (``max_tokens=4096`` is about 16k
characters); anything longer is a model stuck in a loop, refused without being read."""

MAX_PRICE_DIGITS = 12
"""Digits before the decimal point: prices stay below $1,000,000,000,000 (``price_too_large``),
so every price is an exact number of cents in a float."""


class Kind(str, Enum):
    """The transactional move of a message."""

    SELL = "SELL"
    BUY = "BUY"
    DEAL = "DEAL"
    QUIT = "QUIT"


SELLER_KINDS = frozenset({Kind.SELL, Kind.DEAL, Kind.QUIT})
BUYER_KINDS = frozenset({Kind.BUY, Kind.DEAL, Kind.QUIT})
_KINDS = {k.value: k for k in Kind}


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

# --- lexical pieces -----------------------------------------------------------------------------
# A label line: optional bullet/quote/heading marks (stripped before matching), optional emphasis,
# the label, then a colon inside or outside the emphasis: "- **Talk:** hi", "__Action__: [QUIT]".
# No two adjacent repetitions here can match the same character, so a failing match is linear.
_MARKS = " \t>#-"
_LABEL_RE = re.compile(
    r"(?:(?P<em>\*\*|__|\*|_)[ \t]*)?(?P<label>thought|target|talk|action|product)[ \t]*"
    r"(?:(?(em)(?P=em)):|:(?(em)(?P=em)))[ \t]?",
    re.IGNORECASE | re.ASCII,
)
_THINK_OPEN = re.compile(r"<think>", re.IGNORECASE | re.ASCII)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE | re.ASCII)
_TARGET_RE = re.compile(r"(?:buyer[\s_#-]*|#)?([0-9]+)$", re.IGNORECASE)
_PRODUCT_RE = re.compile(r"(?:product[\s_#-]*|p|#)?([0-9]+)$", re.IGNORECASE)
_EMPHASIS = "*_` \t"
# The canonical rendering (render_seller / render_buyer) of a valid message, read in one match.
# Only a fast path: a text it does not match, or matches without being a valid message, is read
# by the general parser below, which decides every case (tests check that both agree).
_LINE = r"[^\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029<]*"
_NUMBER = r"[1-9][0-9]{0,8}"
_CANONICAL_TAIL = (
    rf"(?:Product: (?P<product>{_NUMBER})\n)?Talk: (?P<talk>{_LINE})\n"
    r"Action: \[(?P<kind>[A-Z]+)\](?: \$(?P<price>(?:[1-9][0-9]{0,2}(?:,[0-9]{3}){1,3}"
    r"|[1-9][0-9]{0,11}|0)\.[0-9]{2}))?"
)
_CANONICAL_SELLER = re.compile(
    rf"Thought: (?P<thought>{_LINE})\nTarget: (?P<target>{_NUMBER})\n{_CANONICAL_TAIL}"
)
_CANONICAL_BUYER = re.compile(rf"Thought: (?P<thought>{_LINE})\n{_CANONICAL_TAIL}")
_SELLER_PRICED = frozenset({Kind.SELL, Kind.DEAL})
_BUYER_PRICED = frozenset({Kind.BUY})
_NON_FINITE = frozenset({"nan", "inf", "infinity"})
_INDEX_DIGITS = 9
"""A Target or Product with more digits is out of every range; it is read as 10**9."""


def _shown(raw: str) -> str:
    """``raw`` as it appears in a violation's detail: quoted, and cut when long."""
    raw = raw.strip()
    return repr(raw if len(raw) <= 60 else raw[:60] + "...")


def split_reasoning(text: str) -> tuple[str, str]:
    """Split a leading ``<think>...</think>`` block off ``text``: (reasoning, rest)."""
    start = len(text) - len(text.lstrip())
    tag = text[start : start + 7]
    if not (tag.isascii() and tag.lower() == "<think>"):
        return "", text
    close = _THINK_CLOSE.search(text, start + 7)
    if close is None:
        return "", text
    return text[start + 7 : close.start()].strip(), text[close.end() :]


def _is_fence(line: str) -> bool:
    """A code-fence line: three backticks, optionally followed by a language word (json)."""
    stripped = line.strip()
    if not stripped.startswith("```"):
        return False
    tag = stripped[3:].replace("-", "").replace("_", "")
    return not tag or tag.isalnum()


def label_line(line: str) -> tuple[str, str] | None:
    """``(label, rest)`` when ``line`` opens a protocol field ("- **Talk:** hi" ->
    ``("talk", "hi")``), else None; linear in the line's length."""
    match = _LABEL_RE.match(line.lstrip(_MARKS))
    if match is None:
        return None
    return match.group("label").lower(), match.string[match.end() :]


def _fields(body: str) -> dict[str, str] | FormatViolation:
    """Label -> value, continuation lines joined with newlines; duplicates are violations."""
    fields: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        if "```" in line and _is_fence(line):
            continue
        opened = label_line(line)
        if opened is not None:
            label, rest = opened
            if label in fields:
                return FormatViolation(f"duplicate_{label}", f"the {label} field appears twice")
            current = fields[label] = [rest]
        elif current is not None:
            current.append(line)
    return {k: (v[0] if len(v) == 1 else "\n".join(v)).strip() for k, v in fields.items()}


def _action_tags(text: str) -> list[tuple[int, int, str]]:
    """Every ``[WORD]`` tag (ASCII letters, optional inner whitespace) as (start, end, word).

    A tag holds no bracket, so only the last ``[`` before each ``]`` can open one: one pass."""
    tags = []
    after = 0
    close = text.find("]")
    while close >= 0:
        open_ = text.rfind("[", after, close)
        if open_ >= 0:
            word = text[open_ + 1 : close].strip()
            if word.isalpha() and word.isascii():
                tags.append((open_, close + 1, word))
        after = close + 1
        close = text.find("]", after)
    return tags


def _parse_price(raw: str) -> float | FormatViolation:
    """``$1,299.00`` -> 1299.0. Exact: the value is read from the digits as integer cents."""
    text = raw.strip().strip(_EMPHASIS)
    negative = text.startswith("-")
    text = text[negative:].lstrip()
    text = text[text.startswith("$") :].lstrip()
    if text.startswith("-"):
        negative, text = True, text[1:].lstrip()
    number = text.rstrip()
    if number.lower() in _NON_FINITE:
        return FormatViolation("non_finite_price", f"price {_shown(raw)} is not a finite number")
    whole, dot, fraction = number.partition(".")
    if "," in whole:
        groups = whole.split(",")
        grouped = 1 <= len(groups[0]) <= 3 and all(len(g) == 3 for g in groups[1:])
        whole = "".join(groups) if grouped else "?"
    if not (whole or fraction) or (dot and not fraction):
        return FormatViolation("bad_price", f"cannot read a price from {_shown(raw)}")
    digits = whole + fraction
    if not digits.isdecimal():
        return FormatViolation("bad_price", f"cannot read a price from {_shown(raw)}")
    if not digits.isascii():
        return FormatViolation("non_ascii_price", f"write the price {_shown(raw)} with digits 0-9")
    if negative:
        return FormatViolation("negative_price", f"price {_shown(raw)} is negative")
    whole = whole.lstrip("0")
    if len(whole) > MAX_PRICE_DIGITS:
        return FormatViolation(
            "price_too_large", f"price {_shown(raw)} is $1,000,000,000,000 or more"
        )
    if fraction[2:].strip("0"):
        return FormatViolation("sub_cent_price", f"price {_shown(raw)} has fractions of a cent")
    return (int(whole or "0") * 100 + int(fraction[:2].ljust(2, "0"))) / 100


def _parse_action(
    raw: str, allowed: frozenset[Kind], price_required: frozenset[Kind]
) -> tuple[Kind, float | None] | FormatViolation:
    text = raw.strip()
    if not text:
        return FormatViolation("missing_action", "the Action field is empty")
    if "\n" in text and "\n" in text.strip(_EMPHASIS + "\n"):
        lines = [ln for ln in text.splitlines() if ln.strip(_EMPHASIS)]
        if len(lines) > 1:
            return FormatViolation("text_after_action", "the Action field spans several lines")
        text = lines[0] if lines else ""
    text = text.strip(_EMPHASIS)
    tags = _action_tags(text)
    if not tags:
        return FormatViolation("missing_action", f"no [ACTION] tag in {_shown(raw)}")
    if len(tags) > 1:
        return FormatViolation("multiple_actions", f"{len(tags)} action tags in {_shown(raw)}")
    start, end, word = tags[0]
    kind = _KINDS.get(word.upper())
    if kind is None:
        return FormatViolation("unknown_action", f"[{word}] is not an action")
    if kind not in allowed:
        return FormatViolation("action_not_allowed", f"[{kind.value}] is not allowed here")
    before = text[:start].strip(_EMPHASIS)
    # A trailing full stop is punctuation; a leading one is a decimal point (".50" is 50 cents).
    after = text[end:].lstrip(_EMPHASIS).rstrip(_EMPHASIS + ".")
    if before:
        return FormatViolation(
            "text_before_action", f"unexpected {_shown(before)} before the action"
        )
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
    """A 1-based number (``2``, ``Buyer 2``, ``#2``) as a 0-based index."""
    text = raw.strip().strip(_EMPHASIS)
    if not text:
        return FormatViolation(f"missing_{name}", f"the {name.capitalize()} field is empty")
    if text.isdigit() and text.isascii():
        digits = text
    else:
        match = pattern.match(text)
        if match is None:
            return FormatViolation(
                f"non_integer_{name}", f"{name} {_shown(raw)} is not an integer (digits 0-9)"
            )
        digits = match.group(1)
    digits = digits.lstrip("0") or "0"
    return (int(digits) if len(digits) <= _INDEX_DIGITS else 10**_INDEX_DIGITS) - 1


def _common(
    text: str, required: tuple[str, ...], product_required: bool
) -> dict[str, str] | FormatViolation:
    if not isinstance(text, str):
        return FormatViolation("not_text", f"expected text, got {type(text).__name__}")
    if len(text) > MAX_MESSAGE_CHARS:
        return FormatViolation(
            "too_long", f"{len(text):,} characters; a message has at most {MAX_MESSAGE_CHARS:,}"
        )
    if "<" in text:
        _, text = split_reasoning(text)
        if _THINK_OPEN.search(text):
            return FormatViolation(
                "unclosed_think", "a <think> block is not closed before the reply"
            )
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


def _canonical_move(
    word: str,
    price: str | None,
    product: str | None,
    multi_product: bool,
    allowed: frozenset[Kind],
    priced: frozenset[Kind],
) -> tuple[Kind, float | None, int | None] | None:
    """(kind, price, product) of a canonical Action (and Product) line, if valid; else None."""
    kind = _KINDS.get(word)
    if kind not in allowed or (product is None and multi_product):
        return None
    index = None if product is None else int(product) - 1
    if price is None:
        return None if kind in priced else (kind, None, index)  # type: ignore[return-value]
    if kind is Kind.QUIT:
        return None
    whole, _, fraction = price.partition(".")
    return kind, (int(whole.replace(",", "")) * 100 + int(fraction)) / 100, index  # type: ignore


def _fast_seller(text: str, multi_product: bool) -> SellerMessage | None:
    """A valid seller message in canonical form, read in one match; else None."""
    match = _CANONICAL_SELLER.fullmatch(text)
    if match is None:
        return None
    thought, target, product, talk, word, price = match.groups()
    move = _canonical_move(word, price, product, multi_product, SELLER_KINDS, _SELLER_PRICED)
    if move is None:
        return None
    kind, value, index = move
    return SellerMessage(thought.strip(), int(target) - 1, talk.strip(), kind, value, index)


def _fast_buyer(text: str, multi_product: bool) -> BuyerMessage | None:
    """A valid buyer message in canonical form, read in one match; else None."""
    match = _CANONICAL_BUYER.fullmatch(text)
    if match is None:
        return None
    thought, product, talk, word, price = match.groups()
    move = _canonical_move(word, price, product, multi_product, BUYER_KINDS, _BUYER_PRICED)
    if move is None:
        return None
    kind, value, index = move
    return BuyerMessage(thought.strip(), talk.strip(), kind, value, index)


def _read_seller(text: str, multi_product: bool) -> SellerMessage | FormatViolation:
    """The general seller parser: every variant of docs/protocol.md, every violation."""
    fields = _common(text, ("thought", "target", "talk", "action"), multi_product)
    if isinstance(fields, FormatViolation):
        return fields
    target = _parse_index(fields["target"], _TARGET_RE, "target")
    if isinstance(target, FormatViolation):
        return target
    action = _parse_action(fields["action"], SELLER_KINDS, _SELLER_PRICED)
    if isinstance(action, FormatViolation):
        return action
    product = _product(fields)
    if isinstance(product, FormatViolation):
        return product
    kind, price = action
    return SellerMessage(fields["thought"], target, fields["talk"], kind, price, product)


def _read_buyer(text: str, multi_product: bool) -> BuyerMessage | FormatViolation:
    """The general buyer parser: every variant of docs/protocol.md, every violation."""
    fields = _common(text, ("thought", "talk", "action"), multi_product)
    if isinstance(fields, FormatViolation):
        return fields
    action = _parse_action(fields["action"], BUYER_KINDS, _BUYER_PRICED)
    if isinstance(action, FormatViolation):
        return action
    product = _product(fields)
    if isinstance(product, FormatViolation):
        return product
    kind, price = action
    return BuyerMessage(fields["thought"], fields["talk"], kind, price, product)


def parse_seller(text: str, multi_product: bool = False) -> SellerMessage | FormatViolation:
    """Parse a seller turn; never raises. Target range is checked by the rules, not here."""
    fast = _fast_seller(text, multi_product) if isinstance(text, str) else None
    return fast if fast is not None else _read_seller(text, multi_product)


def parse_buyer(text: str, multi_product: bool = False) -> BuyerMessage | FormatViolation:
    """Parse a buyer turn; never raises. Budget and acceptance checks belong to the rules."""
    fast = _fast_buyer(text, multi_product) if isinstance(text, str) else None
    return fast if fast is not None else _read_buyer(text, multi_product)


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
