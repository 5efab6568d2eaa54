"""The text protocol (paper Section 3.1): parsing what models emit, rejecting what is ambiguous."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.protocol import (
    MAX_MESSAGE_CHARS,
    BuyerMessage,
    FormatViolation,
    Kind,
    SellerMessage,
    _fast_buyer,
    _fast_seller,
    _read_buyer,
    _read_seller,
    format_price,
    parse_buyer,
    parse_seller,
    public_part,
    render_buyer,
    render_seller,
    split_reasoning,
)


def seller_text(
    target: str | None = "2",
    action: str = "[SELL] $34.99",
    thought: str = "Anchor high.",
    talk: str = "It lists at $34.99.",
) -> str:
    lines = [f"Thought: {thought}"]
    if target is not None:
        lines.append(f"Target: {target}")
    lines += [f"Talk: {talk}", f"Action: {action}"]
    return "\n".join(lines)


def buyer_text(action: str = "[BUY] $10.45", thought: str = "Low.", talk: str = "Hi.") -> str:
    return f"Thought: {thought}\nTalk: {talk}\nAction: {action}"


def violation(result: object) -> str:
    assert isinstance(result, FormatViolation), result
    return result.reason


# --- canonical messages -------------------------------------------------------------------------


def test_canonical_seller_message_parses_to_zero_based_target():
    msg = parse_seller(seller_text("2", "[SELL] $34.99"))
    assert msg == SellerMessage("Anchor high.", 1, "It lists at $34.99.", Kind.SELL, 34.99, None)


def test_canonical_buyer_message_parses():
    msg = parse_buyer(buyer_text("[BUY] $10.45"))
    assert msg == BuyerMessage("Low.", "Hi.", Kind.BUY, 10.45, None)


@pytest.mark.parametrize(
    ("action", "kind", "price"),
    [
        ("[SELL] $30.00", Kind.SELL, 30.0),
        ("[DEAL] $32.50", Kind.DEAL, 32.5),
        ("[QUIT]", Kind.QUIT, None),
    ],
)
def test_each_seller_action_kind_parses(action: str, kind: Kind, price: float | None):
    msg = parse_seller(seller_text("1", action))
    assert isinstance(msg, SellerMessage)
    assert (msg.kind, msg.price) == (kind, price)


@pytest.mark.parametrize(
    ("action", "kind", "price"),
    [
        ("[BUY] $12.00", Kind.BUY, 12.0),
        ("[DEAL]", Kind.DEAL, None),
        ("[DEAL] $30.00", Kind.DEAL, 30.0),
        ("[QUIT]", Kind.QUIT, None),
    ],
)
def test_each_buyer_action_kind_parses(action: str, kind: Kind, price: float | None):
    msg = parse_buyer(buyer_text(action))
    assert isinstance(msg, BuyerMessage)
    assert (msg.kind, msg.price) == (kind, price)


def test_multiline_talk_keeps_its_continuation_lines():
    text = "Thought: t\nTarget: 1\nTalk: line one\nline two\nAction: [SELL] $5.00"
    msg = parse_seller(text)
    assert isinstance(msg, SellerMessage)
    assert msg.talk == "line one\nline two"


def test_product_field_is_one_based_and_required_only_in_multi_product_markets():
    text = "Thought: t\nTarget: 3\nProduct: 2\nTalk: x\nAction: [SELL] $20.00"
    msg = parse_seller(text, multi_product=True)
    assert isinstance(msg, SellerMessage)
    assert (msg.buyer, msg.product) == (2, 1)
    assert violation(parse_seller(seller_text("1"), multi_product=True)) == "missing_product"
    assert violation(parse_buyer(buyer_text(), multi_product=True)) == "missing_product"
    single = parse_seller(seller_text("1"))
    assert isinstance(single, SellerMessage) and single.product is None


def test_product_field_accepts_product_prefix_and_rejects_words():
    ok = parse_buyer("Thought: t\nProduct: product 3\nTalk: x\nAction: [BUY] $5.00", True)
    assert isinstance(ok, BuyerMessage) and ok.product == 2
    bad = parse_buyer("Thought: t\nProduct: the blue one\nTalk: x\nAction: [BUY] $5.00", True)
    assert violation(bad) == "non_integer_product"


# --- variants real chat models emit -------------------------------------------------------------


def test_markdown_emphasis_around_labels_is_accepted():
    text = (
        "**Thought:** Probe buyer two.\n**Target**: 2\n__Talk:__ Best I can do.\n"
        "*Action*: **[SELL] $30.00**"
    )
    assert parse_seller(text) == SellerMessage(
        "Probe buyer two.", 1, "Best I can do.", Kind.SELL, 30.0, None
    )


def test_lowercase_labels_and_bullets_are_accepted():
    text = "- thought: x\n- target: 1\n- talk: y\n- action: [quit]"
    assert parse_seller(text) == SellerMessage("x", 0, "y", Kind.QUIT, None, None)


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("$1,299.00", 1299.0),
        ("$ 34.99", 34.99),
        ("34.99", 34.99),
        ("$5", 5.0),
        ("$0", 0.0),
        ("$.50", 0.5),
        (".50", 0.5),
        ("$1,234,567.89", 1234567.89),
        ("$32.50.", 32.5),
    ],
)
def test_price_spellings_are_accepted(raw: str, value: float):
    msg = parse_buyer(buyer_text(f"[BUY] {raw}"))
    assert isinstance(msg, BuyerMessage), msg
    assert msg.price == value


def test_surrounding_whitespace_is_ignored():
    text = "\n\n   Thought:   calm  \n  Target:  1  \n Talk:  hello \n"
    text += "  Action:   [DEAL]   $20.00  \n\n"
    assert parse_seller(text) == SellerMessage("calm", 0, "hello", Kind.DEAL, 20.0, None)


def test_leading_think_block_is_split_off_and_ignored():
    text = "<think>\nMaybe Target: 3 and Action: [QUIT]?\n</think>\n" + seller_text("1")
    msg = parse_seller(text)
    assert isinstance(msg, SellerMessage)
    assert (msg.buyer, msg.kind) == (0, Kind.SELL)
    assert split_reasoning(text)[0] == "Maybe Target: 3 and Action: [QUIT]?"


def test_unclosed_think_block_is_a_violation():
    assert violation(parse_seller("<think>still thinking\n" + seller_text())) == "unclosed_think"


def test_code_fences_around_the_reply_are_ignored():
    text = "```text\n" + buyer_text("[BUY] $11.00") + "\n```"
    assert parse_buyer(text) == BuyerMessage("Low.", "Hi.", Kind.BUY, 11.0, None)


def test_target_spelled_as_buyer_name_is_accepted():
    for raw in ("Buyer 3", "buyer_3", "#3", "**3**"):
        msg = parse_seller(seller_text(raw))
        assert isinstance(msg, SellerMessage), raw
        assert msg.buyer == 2


def test_target_zero_parses_to_minus_one_for_the_rules_to_reject():
    msg = parse_seller(seller_text("0"))
    assert isinstance(msg, SellerMessage) and msg.buyer == -1


def test_fields_may_come_in_any_order_after_a_preamble():
    text = "Sure, here is my reply:\nAction: [SELL] $5.00\nTalk: b\nTarget: 1\nThought: a"
    assert parse_seller(text) == SellerMessage("a", 0, "b", Kind.SELL, 5.0, None)


def test_action_on_the_line_after_its_label_and_emphasised_parts_are_accepted():
    assert parse_buyer("Thought: a\nTalk: b\nAction:\n[BUY] $5.00") == BuyerMessage(
        "a", "b", Kind.BUY, 5.0, None
    )
    msg = parse_seller(seller_text("1", "**[SELL]** **$5**"))
    assert isinstance(msg, SellerMessage) and msg.price == 5.0


def test_unknown_label_lines_continue_the_previous_field():
    text = "Thought: a\nTarget: 1\nTalk: b\nNote: c\nAction: [QUIT]"
    msg = parse_seller(text)
    assert isinstance(msg, SellerMessage) and msg.talk == "b\nNote: c"
    assert violation(parse_seller(seller_text("1", "[QUIT]\nNote: c"))) == "text_after_action"


def test_think_tag_inside_a_field_is_rejected_as_unclosed():
    assert violation(parse_seller(seller_text("1", talk="I <think> so"))) == "unclosed_think"


# --- ambiguity is rejected with a reason code ---------------------------------------------------


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("[SELL] $30.00 [DEAL] $30.00", "multiple_actions"),
        ("[SELL] $30.00 or [QUIT]", "multiple_actions"),
        ("[SELL]", "missing_price"),
        ("[DEAL]", "missing_price"),
        ("[SELL] $-5.00", "negative_price"),
        ("[SELL] -$5.00", "negative_price"),
        ("[SELL] $nan", "non_finite_price"),
        ("[SELL] $inf", "non_finite_price"),
        ("[SELL] Infinity", "non_finite_price"),
        ("[SELL] $30.005", "sub_cent_price"),
        ("[SELL] $1.999", "sub_cent_price"),
        ("[SELL] thirty dollars", "bad_price"),
        ("[SELL] USD 30", "bad_price"),
        ("[SELL] $1,29.00", "bad_price"),
        ("[SELL] $3e1", "bad_price"),
        ("[QUIT] $5.00", "unexpected_price"),
        ("[BUY] $5.00", "action_not_allowed"),
        ("[HAGGLE] $5.00", "unknown_action"),
        ("sell at $30", "missing_action"),
        ("", "missing_action"),
        ("I say [SELL] $30.00", "text_before_action"),
        ("[SELL] $30.00\nand that is final", "text_after_action"),
    ],
)
def test_ambiguous_seller_actions_are_rejected(action: str, reason: str):
    assert violation(parse_seller(seller_text("1", action))) == reason


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        ("[BUY]", "missing_price"),
        ("[SELL] $5.00", "action_not_allowed"),
        ("[BUY] $5 [DEAL]", "multiple_actions"),
        ("[BUY] $-1", "negative_price"),
        ("[BUY] $0.001", "sub_cent_price"),
        ("[QUIT] now", "unexpected_price"),
    ],
)
def test_ambiguous_buyer_actions_are_rejected(action: str, reason: str):
    assert violation(parse_buyer(buyer_text(action))) == reason


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (None, "missing_target"),
        ("", "missing_target"),
        ("two", "non_integer_target"),
        ("1.5", "non_integer_target"),
        ("-1", "non_integer_target"),
        ("1 or 2", "non_integer_target"),
    ],
)
def test_missing_or_non_integer_target_is_a_target_error(target: str | None, reason: str):
    result = parse_seller(seller_text(target))
    assert violation(result) == reason
    assert isinstance(result, FormatViolation) and result.is_target_error


@pytest.mark.parametrize("label", ["Thought", "Target", "Talk", "Action"])
def test_duplicate_labels_are_rejected(label: str):
    text = seller_text("1") + f"\n{label}: again"
    assert violation(parse_seller(text)) == f"duplicate_{label.lower()}"


def test_duplicate_target_counts_as_target_error_and_other_duplicates_do_not():
    dup_target = parse_seller(seller_text("1") + "\nTarget: 2")
    dup_talk = parse_seller(seller_text("1") + "\nTalk: more")
    assert isinstance(dup_target, FormatViolation) and dup_target.is_target_error
    assert isinstance(dup_talk, FormatViolation) and not dup_talk.is_target_error


@pytest.mark.parametrize("label", ["Thought", "Talk", "Action"])
def test_each_missing_field_is_named(label: str):
    lines = [ln for ln in seller_text("1").splitlines() if not ln.startswith(label)]
    assert violation(parse_seller("\n".join(lines))) == f"missing_{label.lower()}"
    blines = [ln for ln in buyer_text().splitlines() if not ln.startswith(label)]
    assert violation(parse_buyer("\n".join(blines))) == f"missing_{label.lower()}"


def test_buyer_target_label_is_ignored_by_the_buyer_parser():
    msg = parse_buyer("Thought: t\nTarget: 1\nTalk: x\nAction: [BUY] $5.00")
    assert msg == BuyerMessage("t", "x", Kind.BUY, 5.0, None)


def test_non_text_input_is_a_violation_not_an_exception():
    assert violation(parse_seller(None)) == "not_text"  # type: ignore[arg-type]
    assert violation(parse_buyer(42)) == "not_text"  # type: ignore[arg-type]


# --- rendering ----------------------------------------------------------------------------------


def test_format_price_uses_thousands_separators_and_cents():
    assert format_price(1299.5) == "$1,299.50"
    assert format_price(0.0) == "$0.00"


def test_public_part_never_contains_the_thought_or_target():
    msg = SellerMessage("SECRET-PLAN", 1, "Best price.", Kind.SELL, 30.0, None)
    public = public_part(msg)
    assert "SECRET-PLAN" not in public
    assert "Target" not in public
    assert public == "Best price.\nAction: [SELL] $30.00"


def test_render_includes_product_line_only_when_set():
    with_product = render_seller(SellerMessage("t", 0, "x", Kind.SELL, 5.0, 1))
    assert "Product: 2" in with_product.splitlines()
    assert "Product" not in render_buyer(BuyerMessage("t", "x", Kind.BUY, 5.0, None))


# --- properties ---------------------------------------------------------------------------------

_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
single_line = (
    st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), max_size=60)
    .map(str.strip)
    .filter(lambda s: not any(c in s for c in _LINE_BREAKS) and "<think>" not in s.lower())
)
cents = st.integers(min_value=0, max_value=10**9).map(lambda c: c / 100)
products = st.one_of(st.none(), st.integers(min_value=0, max_value=20))


@settings(max_examples=300, deadline=None)
@given(
    thought=single_line,
    talk=single_line,
    buyer=st.integers(min_value=0, max_value=50),
    kind=st.sampled_from([Kind.SELL, Kind.DEAL, Kind.QUIT]),
    price=cents,
    product=products,
)
def test_seller_render_then_parse_returns_the_same_values(
    thought, talk, buyer, kind, price, product
):
    msg = SellerMessage(thought, buyer, talk, kind, None if kind is Kind.QUIT else price, product)
    assert parse_seller(render_seller(msg), multi_product=product is not None) == msg


@settings(max_examples=300, deadline=None)
@given(
    thought=single_line,
    talk=single_line,
    kind=st.sampled_from([Kind.BUY, Kind.DEAL, Kind.QUIT]),
    price=cents,
    with_price=st.booleans(),
    product=products,
)
def test_buyer_render_then_parse_returns_the_same_values(
    thought, talk, kind, price, with_price, product
):
    keep = kind is Kind.BUY or (kind is Kind.DEAL and with_price)
    msg = BuyerMessage(thought, talk, kind, price if keep else None, product)
    assert parse_buyer(render_buyer(msg), multi_product=product is not None) == msg


_PIECES = st.sampled_from(
    [
        "Thought:",
        "Target:",
        "Talk:",
        "Action:",
        "Product:",
        "**Action:**",
        "[SELL]",
        "[DEAL]",
        "[BUY]",
        "[QUIT]",
        "$",
        "1,299.00",
        ".5",
        "-",
        "nan",
        "inf",
        "\n",
        "<think>",
        "</think>",
        "```",
        "*",
        "_",
        "Buyer ",
        "#",
        "\u2028",
        "\x85",
        " ",
    ]
)
protocolish = st.lists(st.one_of(st.text(max_size=12), _PIECES), max_size=25).map("".join)


def _check_never_raises(text: str, multi: bool) -> None:
    seller = parse_seller(text, multi)
    buyer = parse_buyer(text, multi)
    assert isinstance(seller, SellerMessage | FormatViolation)
    assert isinstance(buyer, BuyerMessage | FormatViolation)
    for msg in (seller, buyer):
        if isinstance(msg, FormatViolation):
            assert msg.reason and msg.reason.isidentifier()
        elif msg.price is not None:
            assert math.isfinite(msg.price) and msg.price >= 0
            assert round(msg.price * 100) == pytest.approx(msg.price * 100, abs=1e-6)


@settings(max_examples=500, deadline=None)
@given(text=st.text(), multi=st.booleans())
def test_arbitrary_text_never_raises(text: str, multi: bool):
    _check_never_raises(text, multi)


@settings(max_examples=1500, deadline=None)
@given(text=protocolish, multi=st.booleans())
def test_protocol_like_noise_never_raises_and_prices_are_valid(text: str, multi: bool):
    _check_never_raises(text, multi)


# --- the examples in docs/protocol.md stay valid ------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
_HEADER = re.compile(r"^(seller|buyer_\d+) -> \S+:(.*)$", re.MULTILINE)


def _doc_messages() -> list[tuple[str, str, bool]]:
    """(agent, text, marked rejected) for every example message in docs/protocol.md."""
    text = DOC.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r"^```\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        parts = _HEADER.split(block)
        for agent, mark, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            found.append((agent, body.strip(), "rejected" in mark))
    return found


def test_every_example_message_in_the_protocol_doc_parses():
    messages = _doc_messages()
    assert len(messages) >= 12
    for agent, text, _ in messages:
        multi = "Product:" in text
        msg = parse_seller(text, multi) if agent == "seller" else parse_buyer(text, multi)
        assert not isinstance(msg, FormatViolation), (agent, text, msg)


def test_model_style_example_in_the_protocol_doc_parses():
    block = re.search(r"^````\n(.*?)^````$", DOC.read_text(encoding="utf-8"), re.M | re.S)
    assert block is not None
    msg = parse_seller(block.group(1), multi_product=True)
    assert msg == SellerMessage(
        "Anchor buyer 1 on the 4-slice.",
        0,
        "The 4-slice is $55.00, a great price.",
        Kind.SELL,
        55.0,
        1,
    )


# --- hostile input: huge numbers, floods, the length cap (issue 12) -----------------------------

HUGE = "1" + "0" * 308


@pytest.mark.parametrize(
    "text",
    [
        seller_text("1", f"[SELL] ${HUGE}"),
        seller_text("1", f"[DEAL] ${HUGE}.00"),
        buyer_text(f"[BUY] ${HUGE}"),
        buyer_text(f"[DEAL] ${HUGE}"),
        buyer_text("[BUY] $" + "9" * 5000),
    ],
)
def test_huge_prices_are_a_typed_violation_not_a_crash(text: str):
    msg = parse_seller(text) if "Target" in text else parse_buyer(text)
    assert violation(msg) == "price_too_large"


def test_prices_stay_below_a_trillion_dollars():
    top = parse_buyer(buyer_text("[BUY] $999,999,999,999.99"))
    assert isinstance(top, BuyerMessage) and top.price == 999_999_999_999.99
    assert violation(parse_buyer(buyer_text("[BUY] $1,000,000,000,000"))) == "price_too_large"
    leading = parse_buyer(buyer_text("[BUY] $0000000000000005.00"))
    assert isinstance(leading, BuyerMessage) and leading.price == 5.0


def test_huge_targets_and_products_are_out_of_range_not_a_crash():
    msg = parse_seller(seller_text("9" * 4000))
    assert isinstance(msg, SellerMessage) and msg.buyer >= 10**8
    multi = parse_buyer(f"Thought: t\nProduct: {'9' * 4000}\nTalk: x\nAction: [BUY] $5", True)
    assert isinstance(multi, BuyerMessage) and multi.product is not None and multi.product >= 10**8


def test_a_message_over_the_cap_is_refused_with_its_own_reason():
    fits = seller_text("1", talk="x" * (MAX_MESSAGE_CHARS - len(seller_text("1", talk=""))))
    assert len(fits) == MAX_MESSAGE_CHARS
    assert isinstance(parse_seller(fits), SellerMessage)
    assert violation(parse_seller(fits + " ")) == "too_long"
    assert violation(parse_buyer(" " * (MAX_MESSAGE_CHARS + 1))) == "too_long"


def _best_seconds(text: str, repeats: int = 3) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        parse_seller(text)
        parse_buyer(text, multi_product=True)
        best = min(best, time.perf_counter() - start)
    return best


def test_a_one_megabyte_message_is_refused_in_under_50_ms():
    for text in (" " * 1_000_000, seller_text("1", "[SELL] $" + "1" * 1_000_000)):
        assert violation(parse_seller(text)) == "too_long"
        assert _best_seconds(text) < 0.050


_HOSTILE = st.sampled_from(
    [
        " ",
        "\t",
        "\n",
        "\r\n",
        "\u2028",
        "\x85",
        "\x00",
        "\x1b",
        "[",
        "]",
        "[ ",
        "$",
        "-",
        "$ -",
        ",",
        ".",
        "0",
        "1",
        "9",
        "1,",
        "\uff13",
        "\u0663",
        "*",
        "_",
        "`",
        "```",
        ">",
        "#",
        "- ",
        "<think>",
        "</think>",
        "Talk:",
        "Action:",
        "Target:",
        "**Action:**",
        "[SELL]",
        "[BUY] $",
        "buyer",
        "nan",
        "inf",
        "e",
        "x",
    ]
)
_UNITS = st.lists(_HOSTILE, min_size=1, max_size=6).map("".join)
_PREFIXES = st.sampled_from(
    [
        "",
        "Thought: ",
        "Thought: a\nTarget: ",
        "Thought: a\nTarget: 1\nTalk: b\nAction: [SELL] ",
        "Thought: a\nTalk: b\nAction: [BUY] $",
        "Thought: a\nTalk: b\nAction: ",
        "<think>",
    ]
)


def _flood(prefix: str, unit: str, size: int) -> str:
    return (prefix + unit * (size // len(unit) + 1))[:size]


@settings(max_examples=60, deadline=None)
@given(prefix=_PREFIXES, unit=_UNITS)
def test_any_text_up_to_the_cap_parses_in_linear_time_without_raising(prefix: str, unit: str):
    small, big = _flood(prefix, unit, 2_048), _flood(prefix, unit, MAX_MESSAGE_CHARS)
    _check_never_raises(big, multi=False)
    # 16 times the text: linear work takes ~16 times as long, quadratic work ~256 times.
    assert _best_seconds(big) <= 64 * _best_seconds(small) + 0.002


@pytest.mark.parametrize(
    "text",
    [
        "Thought:" + " " * 30_000 + "x",
        " " * 30_000 + "Talk: x",
        seller_text("1", "[SELL] -" + " " * 30_000 + "x"),
        seller_text("buyer" + " " * 30_000 + "x"),
        seller_text("1", "[" * 30_000 + "]"),
        seller_text("1", "[ " * 15_000),
        "<think>" * 4_000,
    ],
)
def test_whitespace_and_bracket_floods_parse_in_milliseconds(text: str):
    _check_never_raises(text, multi=False)
    assert _best_seconds(text) < 0.050


# --- decisions of issue 12 point 7 --------------------------------------------------------------


@pytest.mark.parametrize("price", ["$\uff13\uff12.\uff15\uff10", "$\u0663\u0662.50", "\uff11,000"])
def test_prices_in_non_ascii_digits_are_refused(price: str):
    assert violation(parse_seller(seller_text("1", f"[SELL] {price}"))) == "non_ascii_price"
    assert violation(parse_buyer(buyer_text(f"[BUY] {price}"))) == "non_ascii_price"


def test_targets_and_products_in_non_ascii_digits_are_not_integers():
    assert violation(parse_seller(seller_text("\uff12"))) == "non_integer_target"
    text = "Thought: t\nProduct: \uff12\nTalk: x\nAction: [BUY] $5.00"
    assert violation(parse_buyer(text, multi_product=True)) == "non_integer_product"


@pytest.mark.parametrize("price", ["$18.7499999999", "$18.750000001", "$0.0000001"])
def test_sub_cent_precision_is_refused_however_close_to_a_cent(price: str):
    assert violation(parse_seller(seller_text("1", f"[DEAL] {price}"))) == "sub_cent_price"


@pytest.mark.parametrize(("price", "value"), [("$18.750", 18.75), ("$18.7500000", 18.75)])
def test_zeros_beyond_the_cent_are_accepted(price: str, value: float):
    msg = parse_seller(seller_text("1", f"[SELL] {price}"))
    assert isinstance(msg, SellerMessage) and msg.price == value


# --- the canonical fast path agrees with the general parser -------------------------------------

seller_messages = st.builds(
    SellerMessage,
    thought=single_line,
    buyer=st.integers(min_value=0, max_value=50),
    talk=single_line,
    kind=st.sampled_from([Kind.SELL, Kind.DEAL, Kind.QUIT]),
    price=cents,
    product=products,
).map(lambda m: dataclasses.replace(m, price=None) if m.kind is Kind.QUIT else m)
buyer_messages = st.builds(
    BuyerMessage,
    thought=single_line,
    talk=single_line,
    kind=st.sampled_from([Kind.BUY, Kind.DEAL, Kind.QUIT]),
    price=st.one_of(st.none(), cents),
    product=products,
).map(
    lambda m: (
        dataclasses.replace(m, price=m.price or 1.0)
        if m.kind is Kind.BUY
        else dataclasses.replace(m, price=None)
        if m.kind is Kind.QUIT
        else m
    )
)


def _mutations(text: str, data: st.DataObject) -> str:
    """``text`` with a few random characters inserted, deleted or replaced."""
    chars = list(text)
    for _ in range(data.draw(st.integers(min_value=0, max_value=3))):
        at = data.draw(st.integers(min_value=0, max_value=len(chars)))
        op = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        new = data.draw(st.sampled_from([" ", "\n", "0", "9", ",", ".", "$", "[", "*", "<", "x"]))
        if op == "insert":
            chars.insert(at, new)
        elif chars and at < len(chars):
            chars[at : at + 1] = [] if op == "delete" else [new]
    return "".join(chars)


@settings(max_examples=600, deadline=None)
@given(msg=seller_messages, multi=st.booleans(), data=st.data())
def test_seller_fast_path_agrees_with_the_general_parser(msg, multi, data):
    text = render_seller(msg)
    if "<" not in text and (msg.product is not None or not multi):
        assert _fast_seller(text, multi) == msg
    mutated = _mutations(text, data)
    fast = _fast_seller(mutated, multi)
    assert fast is None or fast == _read_seller(mutated, multi)


@settings(max_examples=600, deadline=None)
@given(msg=buyer_messages, multi=st.booleans(), data=st.data())
def test_buyer_fast_path_agrees_with_the_general_parser(msg, multi, data):
    text = render_buyer(msg)
    if "<" not in text and (msg.product is not None or not multi):
        assert _fast_buyer(text, multi) == msg
    mutated = _mutations(text, data)
    fast = _fast_buyer(mutated, multi)
    assert fast is None or fast == _read_buyer(mutated, multi)
