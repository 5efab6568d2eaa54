"""The game core driven with hand-written protocol texts (paper Sections 3.1 and 3.2).

Every test builds its scenario by hand, so cost, list price and budgets are exact:
list $34.99, cost $18.75 (the paper's baby-products_17) and budgets $27.83 / $41.17 / $52.61.
"""

from __future__ import annotations

import pytest

from agents import make_agent
from agents.base import EpisodeContext, agent_seed
from arena.catalog import Product, default_catalog
from arena.config import MarketConfig, get_preset
from arena.game import Market
from arena.rules import Status
from arena.scenarios import Scenario, make_scenario

LIST, COST = 34.99, 18.75
BUDGETS = (27.83, 41.17, 52.61)
OPENINGS = (9.95, 10.45, 9.28)


def product(list_price: float = LIST, cost: float = COST, pid: str = "baby-products_17") -> Product:
    return Product(
        pid, "baby-products", "Baby monitor", "A monitor.", "Two cameras", list_price, cost
    )


def scenario(
    budgets: tuple[float, ...] = BUDGETS,
    first_offers: tuple[float | None, ...] | None = None,
    products: tuple[Product, ...] | None = None,
    valuations: tuple[tuple[float, ...], ...] | None = None,
    stock: tuple[int, ...] | None = None,
) -> Scenario:
    products = products or (product(),)
    n = len(valuations) if valuations is not None else len(budgets)
    return Scenario(
        seed=0,
        index=0,
        products=products,
        stock=stock or (1,) * len(products),
        valuations=valuations or tuple((b,) for b in budgets),
        tiers=None,
        first_offers=first_offers or (None,) * n,
        opening_products=(0,) * n,
        slot_draws=tuple((i + 0.5) / n for i in range(n)),
        episode_seed=7,
    )


def config(n: int = 3, T: int = 7, K: int = 3, **kw) -> MarketConfig:
    return MarketConfig(
        num_buyers=n,
        total_turns=T,
        per_buyer_cap=K,
        budget_mode="uniform",
        allow_full_coverage=n * K <= T,
        **kw,
    )


def seller(
    target: int | str | None, action: str, thought: str = "plan", talk: str = "hello"
) -> str:
    """A seller turn; ``target`` is the 1-based text value, None leaves the line out."""
    lines = [f"Thought: {thought}"]
    if target is not None:
        lines.append(f"Target: {target}")
    return "\n".join([*lines, f"Talk: {talk}", f"Action: {action}"])


def buyer(action: str, thought: str = "think", talk: str = "hi") -> str:
    return f"Thought: {thought}\nTalk: {talk}\nAction: {action}"


def opened(
    cfg: MarketConfig | None = None,
    sc: Scenario | None = None,
    openings: tuple[float, ...] = OPENINGS,
) -> Market:
    """A market after every buyer posted its opening [BUY]: the seller's first turn."""
    sc = sc or scenario()
    market = Market(cfg or config(n=sc.num_buyers), sc)
    for price in openings[: sc.num_buyers]:
        market.step(buyer(f"[BUY] ${price:.2f}"))
    assert market.current == "seller"
    return market


def exchange(market: Market, target: int, ask: str, reply: str) -> None:
    """One seller [SELL] to ``target`` (1-based) and that buyer's reply."""
    market.step(seller(target, ask))
    assert market.current == f"buyer_{target}"
    market.step(buyer(reply))


# --- openings -----------------------------------------------------------------------------------


def test_openings_come_from_buyer_1_to_n_and_cost_no_turns():
    market = Market(config(), scenario())
    order = []
    for price in OPENINGS:
        order.append(market.current)
        market.step(buyer(f"[BUY] ${price:.2f}"))
    assert order == ["buyer_1", "buyer_2", "buyer_3"]
    assert market.current == "seller"
    view = market.seller_view()
    assert view.remaining_turns == 7
    assert [c.used for c in view.channels] == [0, 0, 0]
    assert [c.bid for c in view.channels] == list(OPENINGS)
    assert view.turn == 1


def test_regulated_opening_is_accepted_and_recorded_as_first_bid():
    market = opened(sc=scenario(first_offers=OPENINGS))
    market.step(seller(1, "[QUIT]"))
    assert market.result().first_bids == OPENINGS


def test_unregulated_opening_in_regulated_market_is_resampled():
    market = Market(config(), scenario(first_offers=OPENINGS))
    market.step(buyer("[BUY] $10.00"))
    assert market.current == "buyer_1"
    assert "unregulated_opening" in (market.buyer_view(0).rejected or "")
    market.step(buyer("[BUY] $9.95"))
    assert market.current == "buyer_2"
    assert market.buyer_view(0).rejected is None


@pytest.mark.parametrize("action", ["[DEAL]", "[QUIT]", "[DEAL] $9.95"])
def test_opening_that_is_not_a_buy_is_resampled(action: str):
    market = Market(config(), scenario())
    market.step(buyer(action))
    assert market.current == "buyer_1"
    assert (market.buyer_view(0).rejected or "").startswith("opening_must_bid")
    market.step(buyer("[BUY] $9.95"))
    assert market.current == "buyer_2"


def test_opening_over_budget_is_resampled():
    market = Market(config(), scenario())
    market.step(buyer("[BUY] $27.84"))
    assert market.current == "buyer_1"
    assert (market.buyer_view(0).rejected or "").startswith("over_budget")


def test_failed_opening_closes_the_channel_as_quit_without_costing_turns():
    market = Market(config(max_buyer_retries=2), scenario())
    for _ in range(3):
        assert market.current == "buyer_1"
        market.step("no idea")
    for price in OPENINGS[1:]:
        market.step(buyer(f"[BUY] ${price:.2f}"))
    view = market.seller_view()
    assert [c.status for c in view.channels] == [Status.QUIT, Status.ACTIVE, Status.ACTIVE]
    assert view.remaining_turns == 7
    assert view.active == [1, 2]
    market.step(seller(1, "[SELL] $30.00"))
    result = market.result()
    assert (result.violation, result.violation_reason) == ("inactive_target", "target_quit")
    assert result.buyer_failures == (True, False, False)
    assert result.buyer_resamples == (2, 0, 0)
    assert result.first_bids == (None, 10.45, 9.28)


def test_every_opening_failing_exhausts_the_market_before_the_seller_acts():
    market = Market(config(max_buyer_retries=0), scenario())
    for _ in range(3):
        market.step("garbage")
    assert market.done
    result = market.result()
    assert (result.outcome, result.termination) == ("no_deal", "market_exhausted")
    assert result.seller_turns == 0
    assert result.buyer_failures == (True, True, True)
    assert result.statuses == ("quit", "quit", "quit")


# --- termination conditions ---------------------------------------------------------------------


def test_seller_deal_on_the_standing_bid_closes_the_episode():
    market = opened()
    exchange(market, 2, "[SELL] $34.99", "[BUY] $32.50")
    market.step(seller(2, "[DEAL] $32.50"))
    assert market.done
    result = market.result()
    assert (result.outcome, result.termination) == ("deal", "deal")
    deal = result.deal
    assert deal is not None
    assert (deal.buyer, deal.price, deal.closed_by, deal.turn) == (1, 32.50, "seller", 2)
    assert result.seller_reward == pytest.approx(0.847, abs=5e-4)
    assert result.buyer_rewards[1] == pytest.approx((LIST - 32.50) / (LIST - COST))
    assert result.buyer_rewards[0] == result.buyer_rewards[2] == 0.0
    assert result.messages_per_buyer == (0, 2, 0)
    assert result.statuses == ("active", "closed", "active")
    assert market.remaining == 5


def test_seller_deal_on_an_opening_bid_closes_at_once():
    market = opened(openings=(19.00, 10.45, 9.28))
    market.step(seller(1, "[DEAL] $19.00"))
    result = market.result()
    assert result.termination == "deal"
    assert result.seller_reward == pytest.approx(0.015, abs=5e-4)
    assert result.messages_per_buyer == (1, 0, 0)


@pytest.mark.parametrize("reply", ["[DEAL]", "[DEAL] $30.00"])
def test_buyer_deal_on_the_seller_sell_closes_the_episode(reply: str):
    market = opened()
    exchange(market, 3, "[SELL] $30.00", reply)
    result = market.result()
    assert (result.outcome, result.termination) == ("deal", "deal")
    deal = result.deal
    assert deal is not None
    assert (deal.buyer, deal.price, deal.closed_by) == (2, 30.00, "buyer")
    assert result.seller_reward == pytest.approx((30.00 - COST) / (LIST - COST))
    assert result.messages_per_buyer == (0, 0, 1)


def test_buyer_deal_accepts_the_latest_sell_not_an_earlier_one():
    market = opened()
    exchange(market, 3, "[SELL] $34.99", "[BUY] $20.00")
    exchange(market, 3, "[SELL] $31.00", "[DEAL]")
    deal = market.result().deal
    assert deal is not None and deal.price == 31.00


def test_seller_quit_ends_the_episode_without_a_deal():
    market = opened()
    exchange(market, 1, "[SELL] $34.99", "[BUY] $12.00")
    market.step(seller(2, "[QUIT]"))
    result = market.result()
    assert (result.outcome, result.termination) == ("no_deal", "seller_quit")
    assert result.seller_reward == 0.0
    assert result.buyer_rewards == (0.0, 0.0, 0.0)
    assert result.seller_turns == 2
    assert market.remaining == 6  # [QUIT] is not an exchange


def test_market_exhaustion_when_every_buyer_quits():
    market = opened()
    exchange(market, 1, "[SELL] $34.99", "[QUIT]")
    exchange(market, 2, "[SELL] $34.99", "[QUIT]")
    assert not market.done
    exchange(market, 3, "[SELL] $34.99", "[QUIT]")
    result = market.result()
    assert (result.outcome, result.termination) == ("no_deal", "market_exhausted")
    assert result.statuses == ("quit", "quit", "quit")
    assert market.remaining == 4


def test_market_exhaustion_when_channels_are_quit_or_capped():
    market = opened(config(n=2, T=5, K=2), scenario(budgets=BUDGETS[:2]))
    exchange(market, 1, "[SELL] $34.99", "[QUIT]")
    exchange(market, 2, "[SELL] $34.99", "[BUY] $11.00")
    exchange(market, 2, "[SELL] $34.00", "[BUY] $12.00")
    result = market.result()
    assert result.termination == "market_exhausted"
    assert result.statuses == ("quit", "capped")
    assert market.remaining == 2


def test_market_exhaustion_when_every_channel_is_capped():
    market = opened(config(n=1, T=5, K=2), scenario(budgets=(41.17,)))
    exchange(market, 1, "[SELL] $34.99", "[BUY] $11.00")
    exchange(market, 1, "[SELL] $34.00", "[BUY] $12.00")
    result = market.result()
    assert (result.outcome, result.termination) == ("no_deal", "market_exhausted")
    assert result.statuses == ("capped",)


def test_turn_limit_ends_the_episode_after_t_exchanges():
    market = opened()
    targets = [1, 2, 3, 1, 2, 3, 1]
    for k, target in enumerate(targets):
        assert not market.done
        exchange(market, target, "[SELL] $34.99", f"[BUY] ${11 + k:.2f}")
    result = market.result()
    assert (result.outcome, result.termination) == ("no_deal", "turn_limit")
    assert result.seller_turns == 7
    assert result.messages_per_buyer == (3, 2, 2)
    assert result.statuses == ("capped", "active", "active")
    assert market.remaining == 0


def test_a_step_after_the_end_is_refused_and_result_needs_the_end():
    market = opened()
    with pytest.raises(RuntimeError, match="not over"):
        market.result()
    market.step(seller(1, "[QUIT]"))
    with pytest.raises(RuntimeError, match="over"):
        market.step(seller(1, "[QUIT]"))


def test_scenario_and_config_must_agree_on_the_number_of_buyers():
    with pytest.raises(ValueError, match="num_buyers"):
        Market(config(n=3), scenario(budgets=(30.0, 40.0)))


def test_fail_records_an_error_outcome():
    market = opened()
    market.fail("backend timed out")
    result = market.result()
    assert (result.outcome, result.termination, result.error) == (
        "error",
        "error",
        "backend timed out",
    )
    assert result.seller_reward == 0.0


# --- seller violations --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "violation", "reason"),
    [
        (seller(1, "[SELL] $18.74"), "below_cost", "sell_below_cost"),
        (seller(None, "[SELL] $30.00"), "bad_target", "missing_target"),
        (seller("", "[SELL] $30.00"), "bad_target", "missing_target"),
        (seller("two", "[SELL] $30.00"), "bad_target", "non_integer_target"),
        (seller("2.0", "[SELL] $30.00"), "bad_target", "non_integer_target"),
        (seller(4, "[SELL] $30.00"), "bad_target", "target_out_of_range"),
        (seller(0, "[SELL] $30.00"), "bad_target", "target_out_of_range"),
        (seller(1, "[SELL]"), "format", "missing_price"),
        (seller(1, "[SELL] $30.00 [DEAL] $30.00"), "format", "multiple_actions"),
        ("Target: 1\nTalk: hi\nAction: [SELL] $30.00", "format", "missing_thought"),
        ("Thought: t\nTarget: 1\nAction: [SELL] $30.00", "format", "missing_talk"),
        ("Thought: t\nTarget: 1\nTalk: hi", "format", "missing_action"),
        ("I'll sell it to buyer 2 for $30.", "format", "missing_thought"),
        (seller(1, "[BUY] $30.00"), "format", "action_not_allowed"),
        (seller(1, "[DEAL] $19.01"), "deal_mismatch", "deal_not_standing_bid"),
    ],
)
def test_seller_violation_ends_the_episode_with_reward_minus_one(text, violation, reason):
    market = opened(openings=(19.00, 10.45, 9.28))
    market.step(text)
    assert market.done
    result = market.result()
    assert (result.outcome, result.termination) == ("violation", "seller_violation")
    assert (result.violation, result.violation_reason, result.violation_by) == (
        violation,
        reason,
        "seller",
    )
    assert result.seller_reward == -1.0
    assert result.buyer_rewards == (0.0, 0.0, 0.0)
    assert result.turns[-1].valid is False
    assert result.turns[-1].reason == reason


def test_sell_exactly_at_cost_is_legal():
    market = opened()
    market.step(seller(1, "[SELL] $18.75"))
    assert not market.done and market.current == "buyer_1"


def test_deal_below_cost_is_violation_i_even_on_a_standing_bid():
    market = opened()
    market.step(seller(1, "[DEAL] $9.95"))
    result = market.result()
    assert (result.violation, result.violation_reason) == ("below_cost", "deal_below_cost")
    assert result.seller_reward == -1.0


@pytest.mark.parametrize("price", ["$25.01", "$24.99"])
def test_deal_one_cent_off_the_standing_bid_is_a_mismatch(price: str):
    market = opened()
    exchange(market, 2, "[SELL] $34.99", "[BUY] $25.00")
    market.step(seller(2, f"[DEAL] {price}"))
    result = market.result()
    assert (result.violation, result.violation_reason) == ("deal_mismatch", "deal_not_standing_bid")
    assert result.seller_reward == -1.0
    assert result.deals == ()


def test_deal_must_match_the_latest_bid_not_an_earlier_one():
    market = opened()
    exchange(market, 2, "[SELL] $34.99", "[BUY] $25.00")
    exchange(market, 2, "[SELL] $33.00", "[BUY] $26.00")
    market.step(seller(2, "[DEAL] $25.00"))
    assert market.result().violation == "deal_mismatch"


def test_targeting_a_quit_buyer_is_violation_ii():
    market = opened()
    exchange(market, 1, "[SELL] $34.99", "[QUIT]")
    market.step(seller(1, "[SELL] $30.00"))
    result = market.result()
    assert (result.violation, result.violation_reason) == ("inactive_target", "target_quit")
    assert result.seller_reward == -1.0


def test_targeting_a_capped_buyer_is_violation_ii():
    market = opened()
    for k in range(3):
        exchange(market, 1, "[SELL] $34.99", f"[BUY] ${11 + k:.2f}")
    assert market.seller_view().channels[0].status is Status.CAPPED
    market.step(seller(1, "[DEAL] $13.00"))
    result = market.result()
    assert (result.violation, result.violation_reason) == ("inactive_target", "target_capped")


def test_quit_with_any_integer_target_is_legal_but_needs_a_target():
    market = opened()
    market.step(seller(9, "[QUIT]"))
    assert market.result().termination == "seller_quit"
    market = opened()
    market.step(seller(None, "[QUIT]"))
    assert market.result().violation == "bad_target"


# --- buyer interception and re-sampling ---------------------------------------------------------


@pytest.mark.parametrize(
    ("ask", "reply", "error"),
    [
        ("[SELL] $34.99", "[BUY] $27.84", "over_budget"),
        ("[SELL] $30.00", "[DEAL]", "deal_over_budget"),
        ("[SELL] $27.84", "[DEAL] $27.84", "deal_over_budget"),
        ("[SELL] $25.00", "[DEAL] $24.00", "deal_price_mismatch"),
        ("[SELL] $34.99", "ok I'll pay 20", "format"),
        ("[SELL] $34.99", "[BUY]", "format"),
    ],
)
def test_invalid_buyer_reply_is_intercepted_and_resampled(ask: str, reply: str, error: str):
    market = opened()
    market.step(seller(1, ask))
    market.step(buyer(reply))
    assert market.current == "buyer_1"
    view = market.buyer_view(0)
    assert view.rejected is not None and view.rejected.startswith(error)
    assert market.remaining == 7
    assert market.seller_view().channels[0].used == 0
    market.step(buyer("[BUY] $27.83"))
    assert market.current == "seller"
    assert market.buyer_view(0).rejected is None
    assert market.remaining == 6
    assert market.seller_view().channels[0].bid == 27.83
    assert not market.done
    market.step(seller(1, "[QUIT]"))
    result = market.result()
    assert result.buyer_resamples == (1, 0, 0)
    assert result.buyer_failures == (False, False, False)
    assert [t.valid for t in result.turns if t.agent == "buyer_1"] == [True, False, True]


def test_rejected_reply_is_not_shown_to_the_seller():
    market = opened()
    market.step(seller(1, "[SELL] $34.99"))
    market.step(buyer("[BUY] $27.84", talk="REJECTED-TALK"))
    market.step(buyer("[BUY] $20.00", talk="kept talk"))
    view = market.seller_view()
    assert [e.talk for _, e in view.new_events] == ["kept talk"]
    assert view.channels[0].bid == 20.00


def test_buyer_closes_as_quit_after_max_buyer_retries():
    market = opened(config(max_buyer_retries=2))
    market.step(seller(2, "[SELL] $34.99"))
    for _ in range(3):
        assert market.current == "buyer_2"
        market.step(buyer("[BUY] $99.00"))
    assert market.current == "seller"
    view = market.seller_view()
    assert view.channels[1].status is Status.QUIT
    assert view.channels[1].used == 1
    assert view.remaining_turns == 6
    assert view.channels[1].events[-1].kind == "QUIT"
    market.step(seller(1, "[QUIT]"))
    result = market.result()
    assert result.buyer_resamples == (0, 2, 0)
    assert result.buyer_failures == (False, True, False)
    assert result.statuses == ("active", "quit", "active")


def test_zero_retries_closes_the_channel_on_the_first_invalid_reply():
    market = opened(config(max_buyer_retries=0))
    exchange(market, 3, "[SELL] $34.99", "[BUY] $60.00")
    result_view = market.seller_view()
    assert result_view.channels[2].status is Status.QUIT
    market.step(seller(1, "[QUIT]"))
    assert market.result().buyer_failures == (False, False, True)
    assert market.result().buyer_resamples == (0, 0, 0)


def test_last_buyer_failing_exhausts_the_market():
    market = opened(config(n=1, T=5, K=5, max_buyer_retries=1), scenario(budgets=(27.83,)))
    market.step(seller(1, "[SELL] $34.99"))
    market.step("???")
    market.step("???")
    result = market.result()
    assert result.termination == "market_exhausted"
    assert result.buyer_failures == (True,)


# --- bilateral preset: buyer violations are penalised -------------------------------------------


def bilateral_market() -> Market:
    return Market(get_preset("bilateral"), scenario(budgets=(27.83,)))


@pytest.mark.parametrize("reply", ["[BUY] $27.84", "[DEAL]", "no format at all"])
def test_bilateral_buyer_violation_ends_the_episode_with_buyer_reward_minus_one(reply: str):
    market = bilateral_market()
    market.step(buyer("[BUY] $10.00"))
    market.step(seller(1, "[SELL] $30.00"))
    market.step(buyer(reply) if reply.startswith("[") else reply)
    assert market.done
    result = market.result()
    assert (result.outcome, result.termination) == ("violation", "buyer_violation")
    assert result.violation == "buyer"
    assert result.violation_by == "buyer_1"
    assert result.buyer_rewards == (-1.0,)
    assert result.seller_reward == 0.0
    assert result.buyer_resamples == (0,)


def test_bilateral_opening_violation_is_penalised_too():
    market = bilateral_market()
    market.step(buyer("[DEAL]"))
    result = market.result()
    assert result.termination == "buyer_violation"
    assert result.violation_reason == "opening_must_bid:opening_deal"
    assert result.seller_turns == 0


def test_bilateral_deal_pays_both_sides():
    market = bilateral_market()
    market.step(buyer("[BUY] $10.00"))
    exchange(market, 1, "[SELL] $26.00", "[DEAL]")
    result = market.result()
    assert result.outcome == "deal"
    assert result.seller_reward == pytest.approx((26.00 - COST) / (LIST - COST))
    assert result.buyer_rewards == (pytest.approx((LIST - 26.00) / (LIST - COST)),)


# --- turn accounting ----------------------------------------------------------------------------


def test_each_exchange_costs_one_of_t_and_one_of_the_targets_k_only():
    market = opened()
    plan = [(2, 1), (2, 1), (1, 1), (3, 1)]
    used = [0, 0, 0]
    for step, (target, _) in enumerate(plan, start=1):
        exchange(market, target, "[SELL] $34.99", f"[BUY] ${12 + step:.2f}")
        used[target - 1] += 1
        view = market.seller_view()
        assert view.remaining_turns == 7 - step
        assert [c.used for c in view.channels] == used
        assert [c.remaining for c in view.channels] == [3 - u for u in used]
        assert view.turn == step + 1


def test_buyer_is_capped_after_k_exchanges_and_leaves_the_active_set():
    market = opened()
    for k in range(2):
        exchange(market, 2, "[SELL] $34.99", f"[BUY] ${11 + k:.2f}")
        assert market.seller_view().channels[1].status is Status.ACTIVE
    exchange(market, 2, "[SELL] $34.99", "[BUY] $13.00")
    view = market.seller_view()
    assert view.channels[1].status is Status.CAPPED
    assert view.active == [0, 2]


def test_seller_deal_costs_one_exchange():
    market = opened(config(n=2, T=5, K=3, stock=2), scenario(budgets=BUDGETS[:2], stock=(2,)))
    market.step(seller(2, "[SELL] $30.00"))
    market.step(buyer("[BUY] $20.00"))
    market.step(seller(2, "[DEAL] $20.00"))
    view = market.seller_view()
    assert not market.done
    assert view.remaining_turns == 3
    assert view.channels[1].used == 2
    assert view.channels[1].status is Status.CLOSED
    assert view.stock == (1,)


def test_new_events_show_only_what_arrived_since_the_last_seller_turn():
    market = opened()
    first = market.seller_view().new_events
    assert [(i, e.kind, e.price) for i, e in first] == [
        (0, "BUY", 9.95),
        (1, "BUY", 10.45),
        (2, "BUY", 9.28),
    ]
    exchange(market, 3, "[SELL] $34.99", "[BUY] $15.00")
    assert [(i, e.price) for i, e in market.seller_view().new_events] == [(2, 15.00)]


def test_engaged_marks_buyers_the_seller_addressed():
    market = opened()
    exchange(market, 3, "[SELL] $34.99", "[BUY] $15.00")
    market.step(seller(1, "[QUIT]"))
    assert market.result().engaged == (False, False, True)


def test_keep_turns_false_records_no_transcript_but_the_same_outcome():
    texts = [
        buyer("[BUY] $9.95"),
        buyer("[BUY] $10.45"),
        buyer("[BUY] $9.28"),
        seller(2, "[SELL] $30.00"),
        buyer("[DEAL]"),
    ]
    results = []
    for keep in (True, False):
        market = Market(config(), scenario(), keep_turns=keep)
        for text in texts:
            market.step(text)
        results.append(market.result())
    assert len(results[0].turns) == 5 and results[1].turns == ()
    assert results[0].deals == results[1].deals


# --- several products ---------------------------------------------------------------------------


def multi_market() -> Market:
    products = (product(40.00, 20.00, "a_1"), product(60.00, 30.00, "a_2"))
    sc = scenario(products=products, valuations=((35.00, 55.00), (38.00, 45.00)))
    return Market(config(n=2, T=5, K=2), sc)


def test_multi_product_market_needs_the_product_field_and_sells_each_unit_once():
    market = multi_market()
    market.step(buyer("[BUY] $10.00"))
    assert (market.buyer_view(0).rejected or "").startswith("format")
    market.step("Thought: t\nProduct: 1\nTalk: hi\nAction: [BUY] $10.00")
    market.step("Thought: t\nProduct: 1\nTalk: hi\nAction: [BUY] $25.00")
    market.step("Thought: t\nTarget: 2\nProduct: 1\nTalk: ok\nAction: [DEAL] $25.00")
    assert not market.done
    assert market.seller_view().stock == (0, 1)
    market.step("Thought: t\nTarget: 1\nProduct: 1\nTalk: x\nAction: [SELL] $30.00")
    result = market.result()
    assert (result.violation, result.violation_reason) == ("sold_out", "product_sold_out")


def test_multi_product_market_ends_when_every_unit_is_sold():
    market = multi_market()
    market.step("Thought: t\nProduct: 2\nTalk: hi\nAction: [BUY] $40.00")
    market.step("Thought: t\nProduct: 1\nTalk: hi\nAction: [BUY] $25.00")
    market.step("Thought: t\nTarget: 2\nProduct: 1\nTalk: ok\nAction: [DEAL] $25.00")
    market.step("Thought: t\nTarget: 1\nProduct: 2\nTalk: ok\nAction: [DEAL] $40.00")
    result = market.result()
    assert (result.outcome, result.termination) == ("deal", "deal")
    assert [(d.buyer, d.product, d.price) for d in result.deals] == [(1, 0, 25.0), (0, 1, 40.0)]
    assert result.seller_reward == pytest.approx((5.0 + 10.0) / (20.0 + 30.0))


# --- settlement, lazy transcript, cached views ----------------------------------------------------


def test_the_settlement_is_the_results_outcome_and_rewards_without_the_transcript():
    market = opened()
    exchange(market, 2, "[SELL] $30.00", "[DEAL]")
    paid, result = market.settlement(), market.result()
    assert paid.outcome == result.outcome == "deal"
    assert (paid.seller_reward, paid.buyer_rewards) == (result.seller_reward, result.buyer_rewards)
    assert (paid.violation, paid.violation_reason, paid.violation_by) == (None, None, None)
    assert market.result() is result


def test_the_settlement_of_a_penalised_buyer_violation_names_the_buyer():
    market = opened(config(n=1, T=6, K=6, penalize_buyer_violations=True), scenario((27.83,)))
    market.step(seller(1, "[SELL] $30.00"))
    market.step(buyer("[BUY] $99.00"))
    paid = market.settlement()
    assert (paid.outcome, paid.violation_by, paid.buyer_rewards) == (
        "violation",
        "buyer_1",
        (-1.0,),
    )


def test_the_transcript_is_built_when_read_and_numbered_in_order():
    market = opened()
    assert [t.index for t in market.turns] == [0, 1, 2]
    market.step(seller(1, "[SELL] $30.00"))
    market.step(buyer("[BUY] $99.00"))
    turns = market.turns
    assert [t.index for t in turns] == [0, 1, 2, 3, 4]
    assert (turns[3].agent, turns[3].to, turns[3].kind, turns[3].valid) == (
        "seller",
        "buyer_1",
        "SELL",
        True,
    )
    assert (turns[4].valid, turns[4].reason) == (False, "bid_over_budget")
    assert market.turns is turns


def test_out_of_range_targets_are_recorded_with_their_seat_name():
    market = opened()
    market.step(seller(0, "[SELL] $30.00"))
    assert market.turns[-1].to == "buyer_0"


@pytest.mark.parametrize("preset", ["in-distribution", "multi-product"])
def test_seller_views_equal_a_fresh_replay_at_every_step(preset: str):
    """The core keeps unchanged channels' views between turns; they must equal fresh ones."""
    cfg = get_preset(preset)
    sc = make_scenario(cfg, default_catalog(), 21, 0)
    agents = [make_agent("scripted:prober", "seller")]
    agents += [make_agent("scripted:time", "buyer") for _ in range(cfg.num_buyers)]
    for slot, agent in enumerate(agents):
        seat = "seller" if slot == 0 else f"buyer_{slot}"
        agent.reset(EpisodeContext(seat, slot, cfg, sc, agent_seed(sc, slot)))
    market, texts = Market(cfg, sc), []
    while not market.done:
        view = market.view()
        if market.current == "seller":
            fresh = Market(cfg, sc)
            for text in texts:
                fresh.step(text)
            assert view == fresh.seller_view()
        text = agents[0 if market.current == "seller" else market.buyer + 1].act(view)
        texts.append(text)
        market.step(text)
