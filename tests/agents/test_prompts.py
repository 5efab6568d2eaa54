"""Prompt templates: what each role is told, and what it must never be told (planted secrets)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from agents.prompts import (
    buyer_system_prompt,
    fill,
    narration_note,
    observation,
    persona_text,
    personas,
    seller_system_prompt,
    system_prompt,
    template,
    template_names,
)
from arena.catalog import Product, load_catalog
from arena.config import MarketConfig, get_preset
from arena.game import BuyerView, Market, SellerView
from arena.money import budget_ladder, format_price
from arena.protocol import BuyerMessage, Kind, SellerMessage, parse_buyer, parse_seller
from arena.scenarios import Scenario, make_scenario

PRODUCT = Product(
    id="planted-widget_9",
    category="planted",
    title="Planted Widget",
    description="A widget used to plant secrets.",
    features="Shiny\nSturdy",
    list_price=1234.56,
    cost=987.65,
)
COST_TEXT = "987.65"
BUDGETS = (1111.11, 1313.13, 1090.90)
OPENINGS = (321.09, 333.33, 345.67)


def planted_scenario(config: MarketConfig) -> Scenario:
    return Scenario(
        seed=0,
        index=0,
        products=(PRODUCT,),
        stock=(1,),
        valuations=tuple((b,) for b in BUDGETS),
        tiers=(2, 0, 1),
        first_offers=OPENINGS,
        opening_products=(0, 0, 0),
        slot_draws=(0.1, 0.5, 0.9),
        episode_seed=7,
    )


def example_block(prompt: str) -> str:
    return prompt.split("Example:\n", 1)[1]


def market_scenario(config: MarketConfig, seed: int = 3) -> tuple[Market, Scenario]:
    from arena.catalog import load_catalog

    scenario = make_scenario(config, load_catalog(None), seed, 0)
    return Market(config, scenario), scenario


def open_market(market: Market) -> None:
    """Play every buyer's opening with its regulated (or a small) bid."""
    scenario = market.scenario
    for i in range(scenario.num_buyers):
        price = scenario.first_offers[i] or round(0.3 * scenario.budgets[i], 2)
        product = "" if not market.multi else f"Product: {scenario.opening_products[i] + 1}\n"
        market.step(f"Thought: open\n{product}Talk: hello\nAction: [BUY] ${price:.2f}")


def test_seller_prompt_states_n_k_t_cost_list_price_and_the_four_line_format() -> None:
    config = get_preset("in-distribution")
    market, scenario = market_scenario(config)
    open_market(market)
    prompt = seller_system_prompt(market.seller_view(), config.total_turns)
    product = scenario.products[0]
    assert "with 3 buyers at once" in prompt
    assert "one of your 7 messages in total" in prompt
    assert "at most 3 messages to any one buyer" in prompt
    assert f"Your private cost for this product is ${product.cost:,.2f}" in prompt
    assert f"List price: ${product.list_price:,.2f}" in prompt
    assert f"codename {product.id}" in prompt
    for label in ("Thought:", "Target:", "Talk:", "Action:"):
        assert f"\n{label} <" in prompt
    assert "Product:" not in prompt


def test_seller_prompt_example_is_a_valid_message_above_cost() -> None:
    config = get_preset("in-distribution")
    market, scenario = market_scenario(config)
    open_market(market)
    message = parse_seller(example_block(seller_system_prompt(market.seller_view(), 7)))
    assert isinstance(message, SellerMessage)
    assert message.kind is Kind.SELL
    assert message.price is not None and message.price >= scenario.costs[0]
    assert 0 <= message.buyer < 3


def test_buyer_prompt_example_is_a_valid_bid_within_budget() -> None:
    config = get_preset("in-distribution")
    market, scenario = market_scenario(config)
    for i in range(3):
        message = parse_buyer(example_block(buyer_system_prompt(market.buyer_view(i))))
        assert isinstance(message, BuyerMessage)
        assert message.kind is Kind.BUY
        assert message.price is not None and 0 < message.price <= scenario.budgets[i]


def test_regulated_buyer_prompt_names_its_required_opening_price() -> None:
    config = get_preset("in-distribution")
    market, scenario = market_scenario(config)
    prompt = buyer_system_prompt(market.buyer_view(1))
    assert f"it must be exactly [BUY] ${scenario.first_offers[1]:,.2f}." in prompt
    assert f"Your private budget for this product is ${scenario.budgets[1]:,.2f}" in prompt
    assert "at most 3 messages" in prompt


def test_unregulated_buyer_prompt_leaves_the_opening_free() -> None:
    config = get_preset("ood")
    market, _ = market_scenario(config)
    prompt = buyer_system_prompt(market.buyer_view(0))
    assert "you choose its price" in prompt
    assert "must be exactly" not in prompt


def test_multi_product_prompts_add_the_product_field_and_single_product_ones_do_not() -> None:
    multi = dataclasses.replace(get_preset("in-distribution"), num_products=2, stock=1)
    market, scenario = market_scenario(multi, seed=11)
    buyer = buyer_system_prompt(market.buyer_view(0))
    open_market(market)
    seller = seller_system_prompt(market.seller_view(), multi.total_turns)
    for prompt in (seller, buyer):
        assert "\nProduct: <the number of the product, 1 to 2>" in prompt
        assert "Product 1 (codename" in prompt and "Product 2 (codename" in prompt
    for p, product in enumerate(scenario.products):
        assert f"- Product {p + 1}: cost ${product.cost:,.2f}, stock 1" in seller
        assert f"- Product {p + 1}: ${scenario.valuations[0][p]:,.2f}" in buyer
    assert parse_seller(example_block(seller), multi_product=True).product == 0  # type: ignore[union-attr]
    example = parse_buyer(example_block(buyer), multi_product=True)
    assert example.product == scenario.opening_products[0]  # type: ignore[union-attr]


def test_buyer_prompts_never_contain_the_cost_or_other_buyers_secrets() -> None:
    """Planted secrets: a distinctive cost, budgets, openings, a seller Thought and Talk to
    another buyer. Every buyer's system prompt and every observation it gets is checked."""
    config = get_preset("in-distribution")
    market = Market(config, planted_scenario(config))
    seen: dict[int, list[str]] = {0: [], 1: [], 2: []}

    def buyer_turn(text: str) -> None:
        i = market.buyer
        view = market.buyer_view(i)
        seen[i] += [buyer_system_prompt(view, "deceptive"), observation(view)]
        market.step(text)

    for i in range(3):
        buyer_turn(f"Thought: BUYER{i}-THOUGHT\nTalk: BUYER{i}-TALK\nAction: [BUY] ${OPENINGS[i]}")
    for target, thought, talk in ((2, "SELLER-THOUGHT-A", "TALK-TO-2"),
                                   (1, "SELLER-THOUGHT-B", "TALK-TO-1")):  # fmt: skip
        market.step(f"Thought: {thought}\nTarget: {target}\nTalk: {talk}\nAction: [SELL] $1,200.00")
        buyer_turn(f"Thought: BUYER{target - 1}-REPLY\nTalk: ok\nAction: [BUY] $1,000.00")

    for i, texts in seen.items():
        joined = "\n".join(texts)
        assert COST_TEXT not in joined
        assert "SELLER-THOUGHT" not in joined and "Target" not in joined
        for j in range(3):
            if j != i:
                assert f"{BUDGETS[j]:,.2f}" not in joined
                assert f"{OPENINGS[j]:.2f}" not in joined
                assert f"BUYER{j}-" not in joined
        assert f"${BUDGETS[i]:,.2f}" in joined
    assert "TALK-TO-2" in "\n".join(seen[1]) and "TALK-TO-2" not in "\n".join(seen[0])
    assert "TALK-TO-1" in "\n".join(seen[0]) and "TALK-TO-1" not in "\n".join(seen[1])


def test_seller_prompt_never_contains_buyer_budgets_or_buyer_thoughts() -> None:
    config = get_preset("in-distribution")
    market = Market(config, planted_scenario(config))
    for i in range(3):
        market.step(f"Thought: BUYER{i}-THOUGHT\nTalk: hi\nAction: [BUY] ${OPENINGS[i]}")
    view = market.seller_view()
    text = seller_system_prompt(view, config.total_turns) + observation(view)
    for budget in BUDGETS:
        assert f"{budget:,.2f}" not in text
    assert "THOUGHT" not in text
    assert COST_TEXT in text


def test_every_placeholder_of_every_system_prompt_is_filled() -> None:
    for name in ("in-distribution", "ood", "bilateral"):
        config = get_preset(name)
        market, _ = market_scenario(config)
        buyer = buyer_system_prompt(market.buyer_view(0), "hostile")
        open_market(market)
        seller = seller_system_prompt(market.seller_view(), config.total_turns, "cooperative")
        for prompt in (buyer, seller):
            assert re.search(r"\{[a-z_]+\}", prompt) is None
            assert "\n\n\n" not in prompt


def test_personas_are_fragments_selected_by_name() -> None:
    assert set(personas()) == {"cooperative", "hostile", "deceptive"}
    config = get_preset("in-distribution")
    market, _ = market_scenario(config)
    plain = buyer_system_prompt(market.buyer_view(0))
    hostile = buyer_system_prompt(market.buyer_view(0), "hostile")
    assert persona_text("hostile") in hostile and "Persona:" not in plain
    assert persona_text("") == ""
    with pytest.raises(ValueError, match="unknown persona 'grumpy'"):
        persona_text("grumpy")


def test_fill_names_a_missing_placeholder_and_unknown_templates_are_errors() -> None:
    with pytest.raises(KeyError, match="budget"):
        fill("Your budget is {budget}.", {"cost": 1})
    with pytest.raises(ValueError, match="no prompt template 'nope'"):
        template("nope")
    assert {"seller_system", "buyer_system", "narration"} <= set(template_names())


def test_narration_note_shows_the_fixed_move() -> None:
    note = narration_note("Target: 2\nAction: [SELL] $10.00")
    assert "Target: 2\nAction: [SELL] $10.00" in note
    assert "unchanged" in note


# --- the compact style -------------------------------------------------------------------------


def compact_views(seed: int = 0) -> tuple[SellerView, BuyerView]:
    """The seller's first view (openings made) and buyer 1's view once the seller has made it an
    offer, in a scripted episode."""
    from agents.driver import Episode
    from agents.scripted import make_scripted
    from agents.specs import parse_spec

    config = get_preset("in-distribution")
    scenario = make_scenario(config, load_catalog(None), seed, 0)
    players = [make_scripted(parse_spec("scripted:prober"), "seller")]
    players += [make_scripted(parse_spec("scripted:time"), "buyer") for _ in range(3)]
    episode = Episode(config, scenario, players)
    market = episode.market
    episode.advance(stop_at=3)  # the three openings
    seller = market.seller_view()
    episode.advance(stop_at=5)  # the prober probed buyer 1, who replied
    return seller, market.buyer_view(0)


def test_compact_prompts_carry_the_rules_and_values_in_far_fewer_characters() -> None:
    seller, buyer = compact_views()
    product = seller.products[0]
    compact = system_prompt(seller, 7, style="compact") + observation(seller, "compact")
    full = system_prompt(seller, 7) + observation(seller)
    rules = ("7 messages", "at most 3 per buyer", "Thought:", "Target:", "Talk:", "Action:")
    for needed in (format_price(product.list_price), format_price(product.cost), *rules):
        assert needed in compact, needed
    for channel in seller.channels:
        assert all(format_price(b) in compact for b in channel.bids.values())
    assert len(compact) < len(full) / 2
    buyer_text = system_prompt(buyer, 7, style="compact") + observation(buyer, "compact")
    assert format_price(buyer.valuations[0]) in buyer_text
    assert format_price(product.cost) not in buyer_text  # the seller's cost stays sealed
    assert "Seller action: [SELL]" in buyer_text


def test_the_compact_style_is_refused_for_several_products_and_unknown_styles() -> None:
    config = get_preset("multi-product")
    scenario = make_scenario(config, load_catalog(None), 0, 0)
    view = Market(config, scenario).view("buyer_1")
    with pytest.raises(ValueError, match="single-product"):
        system_prompt(view, config.total_turns, style="compact")
    with pytest.raises(ValueError, match="prompt='tiny' is unknown"):
        system_prompt(view, config.total_turns, style="tiny")


@pytest.mark.parametrize("style", ["full", "compact"])
def test_a_buyer_ladder_lists_shares_of_its_own_budget_and_a_seller_prompt_has_none(style: str):
    seller, buyer = compact_views()
    budget = buyer.valuations[0]
    plain = system_prompt(buyer, 7, style=style)
    laddered = system_prompt(buyer, 7, style=style, ladder=3)
    assert laddered.startswith(plain)
    offers = budget_ladder(budget, 3)
    assert laddered[len(plain) :] == (
        f"\nOffers under your budget: 90% {format_price(offers[0])}, "
        f"80% {format_price(offers[1])}, 70% {format_price(offers[2])}."
    )
    assert format_price(seller.products[0].cost) not in laddered  # its own budget only
    assert system_prompt(seller, 7, style=style, ladder=3) == system_prompt(seller, 7, style=style)


def test_a_ladder_or_budget_hint_is_refused_with_several_products_and_out_of_range():
    config = get_preset("multi-product")
    scenario = make_scenario(config, load_catalog(None), 0, 0)
    view = Market(config, scenario).view("buyer_1")
    with pytest.raises(ValueError, match="ladder is written for single-product markets"):
        system_prompt(view, config.total_turns, ladder=2)
    with pytest.raises(ValueError, match="budget_hint is written for single-product markets"):
        observation(view, budget_hint=True)
    with pytest.raises(ValueError, match="list_hint is written for single-product markets"):
        observation(view, list_hint=True)
    _, buyer = compact_views()
    with pytest.raises(ValueError, match=r"ladder=10 is out of range"):
        system_prompt(buyer, 7, style="compact", ladder=10)


@pytest.mark.parametrize("style", ["full", "compact"])
def test_a_budget_hint_says_each_buyer_turn_whether_its_budget_covers_the_offer(style: str):
    seller, buyer = compact_views()
    offer = buyer.offers[0]  # the prober's list-price anchor
    plain = observation(buyer, style)
    at_offer = buyer._replace(valuations=(offer,))  # a budget of exactly the offer covers it
    assert (
        observation(at_offer, style, budget_hint=True) == f"{plain}\nYour budget covers this offer."
    )
    below = buyer._replace(valuations=(offer - 0.01,))
    assert observation(below, style, budget_hint=True).endswith(
        "\nThis offer is above your budget."
    )
    assert observation(buyer._replace(offers={}), style, budget_hint=True) == observation(
        buyer._replace(offers={}), style
    )  # nothing to compare before the seller's first offer
    assert observation(seller, style, budget_hint=True) == observation(seller, style)


@pytest.mark.parametrize("style", ["full", "compact"])
def test_a_round_hint_says_in_words_when_the_sellers_next_message_is_its_last(style: str):
    seller, buyer = compact_views()  # prober has sent buyer 1 one message of its cap K = 3
    assert buyer.seller_messages == sum(e.speaker == "seller" for e in buyer.events) == 1
    assert buyer.max_rounds == 3
    plain = observation(buyer, style)
    assert observation(buyer, style, round_hint=True) == plain  # two messages left: nothing
    one_left = buyer._replace(max_rounds=2)
    assert observation(one_left, style, round_hint=True) == (
        f"{observation(one_left, style)}\nThe seller's next message to you is its last."
    )
    none_left = buyer._replace(max_rounds=1)
    assert observation(none_left, style, round_hint=True).endswith(
        "\nThat was the seller's last message to you."
    )
    opening = buyer._replace(opening=True, events=(), max_rounds=1)
    assert observation(opening, style, round_hint=True) == observation(opening, style)
    every = observation(one_left, style, budget_hint=True, list_hint=True, round_hint=True)
    assert every.split("\n")[-3:] == [
        last_hint(one_left, style, budget_hint=True),
        last_hint(one_left, style, list_hint=True),
        "The seller's next message to you is its last.",
    ]  # budget, list, round: the order of the options
    assert observation(seller, style, round_hint=True) == observation(seller, style)


def last_hint(view: BuyerView, style: str, **hint: bool) -> str:
    """The one line a single hint adds to ``view``'s observation."""
    return observation(view, style, **hint).split("\n")[-1]


@pytest.mark.parametrize("style", ["full", "compact"])
def test_a_list_hint_tells_an_anchor_at_list_from_a_concession_in_whole_percent(style: str):
    seller, buyer = compact_views()
    list_price = buyer.products[0].list_price
    plain = observation(buyer, style)
    at_list = buyer._replace(offers={0: list_price})
    assert observation(at_list, style, list_hint=True) == f"{plain}\nThis offer is the list price."
    conceded = buyer._replace(offers={0: round(list_price * 0.64, 2)})
    assert observation(conceded, style, list_hint=True).endswith("\nThis offer is 36% below list.")
    both = observation(conceded, style, budget_hint=True, list_hint=True).split("\n")[-2:]
    assert both[1] == "This offer is 36% below list." and "budget" in both[0]
    assert observation(buyer._replace(offers={}), style, list_hint=True) == observation(
        buyer._replace(offers={}), style
    )  # nothing to compare before the seller's first offer
    assert observation(seller, style, list_hint=True) == observation(seller, style)
