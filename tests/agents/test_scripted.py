"""Scripted agents: individually rational, valid, deterministic; spec strings that build them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents import check_spec, make_agent, parse_spec
from agents.driver import Match
from agents.engine import play_matches, play_vs_pool
from agents.scripted.buyers import BUYERS
from agents.scripted.sellers import SELLERS
from agents.specs import SpecError
from arena.catalog import Product, default_catalog
from arena.config import get_preset, preset_names
from arena.money import budget_ladder, cents, floor_cents
from arena.protocol import parse_buyer, parse_seller
from arena.records import EpisodeRecord
from arena.scenarios import Scenario, make_scenarios

CATALOG = default_catalog()
SELLER_SPECS = [f"scripted:{name}" for name in sorted(SELLERS)]
BUYER_POOL = [f"scripted:{name}" for name in sorted(BUYERS)]


def assert_rational_and_valid(record: EpisodeRecord) -> None:
    """No violation, no re-sample, no price outside [cost, budget] anywhere in the transcript."""
    sc, result = record.scenario, record.result
    assert result.violation is None, (record.seller, result.violation, result.violation_reason)
    assert result.outcome in ("deal", "no_deal")
    assert result.buyer_resamples == (0,) * sc.num_buyers
    assert result.buyer_failures == (False,) * sc.num_buyers
    for turn in result.turns:
        assert turn.valid, (record.seller, turn.agent, turn.reason, turn.text)
        product = turn.product if turn.product is not None else 0
        if turn.agent == "seller" and turn.kind in ("SELL", "DEAL"):
            assert turn.price is not None
            assert cents(turn.price) >= cents(sc.costs[product]), (record.seller, turn.text)
        if turn.agent != "seller" and turn.kind == "BUY":
            i = int(turn.agent.split("_")[1]) - 1
            assert turn.price is not None
            assert cents(turn.price) <= cents(sc.valuations[i][product]), turn.text
    for deal in result.deals:
        assert cents(sc.costs[deal.product]) <= cents(deal.price)
        assert cents(deal.price) <= cents(sc.valuations[deal.buyer][deal.product])
    assert -1.0 < result.seller_reward <= 1.0
    assert all(0.0 <= r <= 1.0 for r in result.buyer_rewards)


def scripted_texts_parse(record: EpisodeRecord) -> None:
    multi = record.scenario.num_products > 1
    for turn in record.result.turns:
        parse = parse_seller if turn.agent == "seller" else parse_buyer
        msg = parse(turn.text, multi)
        assert (msg.kind.value, msg.price, msg.product) == (turn.kind, turn.price, turn.product)


@pytest.mark.parametrize("preset", preset_names())
@pytest.mark.parametrize("seller", SELLER_SPECS)
def test_scripted_play_is_individually_rational_in_every_preset(preset: str, seller: str):
    config = get_preset(preset)
    scenarios = make_scenarios(config, CATALOG, 2026, 30)
    for record in play_vs_pool(config, scenarios, seller, BUYER_POOL)[0]:
        assert_rational_and_valid(record)
        scripted_texts_parse(record)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    preset=st.sampled_from(["in-distribution", "ood", "bilateral"]),
    retries=st.integers(0, 3),
)
def test_scripted_play_never_violates_on_random_markets(seed: int, preset: str, retries: int):
    config = get_preset(preset, {"max_buyer_retries": retries})
    scenarios = make_scenarios(config, CATALOG, seed, 3)
    for seller in SELLER_SPECS:
        for record in play_vs_pool(config, scenarios, seller, BUYER_POOL)[0]:
            assert_rational_and_valid(record)


@pytest.mark.parametrize("buyer", BUYER_POOL)
def test_each_scripted_buyer_alone_stays_within_budget(buyer: str):
    config = get_preset("ood", {"max_buyer_retries": "0"})
    scenarios = make_scenarios(config, CATALOG, 77, 25)
    for seller in SELLER_SPECS:
        for record in play_vs_pool(config, scenarios, seller, [buyer])[0]:
            assert_rational_and_valid(record)


def test_scripted_transcripts_are_deterministic_per_seed():
    config = get_preset("ood")

    def transcript(seed: int) -> list[list[str]]:
        scenarios = make_scenarios(config, CATALOG, seed, 8)
        records = play_vs_pool(config, scenarios, "scripted:prober", BUYER_POOL)[0]
        return [[t.text for t in r.result.turns] for r in records]

    first = transcript(5)
    assert transcript(5) == first
    assert transcript(6) != first


def test_unregulated_openings_depend_on_the_scenario_seed_only():
    config = get_preset("ood")
    scenarios = make_scenarios(config, CATALOG, 3, 4)
    a = play_vs_pool(config, scenarios, "scripted:time", ["scripted:time"])[0]
    b = play_vs_pool(config, scenarios, "scripted:satisficer", ["scripted:time"])[0]
    assert [r.result.first_bids for r in a] == [r.result.first_bids for r in b]


# --- behaviour on a hand-made market -------------------------------------------------------------


def hand_scenario(budgets=(27.83, 41.17, 52.61), openings=(9.95, 10.45, 9.28)) -> Scenario:
    product = Product("baby-products_17", "baby-products", "Monitor", "", "", 34.99, 18.75)
    n = len(budgets)
    return Scenario(
        0,
        0,
        (product,),
        (1,),
        tuple((b,) for b in budgets),
        None,
        openings,
        (0,) * n,
        tuple((i + 0.5) / n for i in range(n)),
        1,
    )


def play(seller: str, buyer: str = "scripted:time") -> EpisodeRecord:
    config = get_preset("in-distribution")
    sc = hand_scenario()
    buyers = [make_agent(buyer, "buyer") for _ in range(3)]
    return play_matches(config, [Match(sc, make_agent(seller, "seller"), tuple(buyers))])[0][0]


def test_regulated_openings_are_followed_by_every_scripted_buyer():
    for buyer in BUYER_POOL:
        record = play("scripted:prober", buyer)
        assert record.result.first_bids == (9.95, 10.45, 9.28)


def test_prober_opens_by_anchoring_at_list_price():
    first = next(t for t in play("scripted:prober").result.turns if t.agent == "seller")
    assert (first.kind, first.price) == ("SELL", 34.99)


def test_oracle_works_only_the_richest_buyer():
    seller_turns = [t for t in play("scripted:oracle").result.turns if t.agent == "seller"]
    assert {t.to for t in seller_turns} == {"buyer_3"}


def test_satisficer_closes_on_a_standing_bid_at_or_above_cost_at_once():
    config = get_preset("in-distribution")
    sc = hand_scenario(openings=(9.95, 19.00, 9.28))
    buyers = [make_agent("scripted:time", "buyer") for _ in range(3)]
    record = play_matches(
        config, [Match(sc, make_agent("scripted:satisficer", "seller"), tuple(buyers))]
    )[0][0]
    deal = record.result.deal
    assert deal is not None
    assert (deal.buyer, deal.price, deal.closed_by, deal.turn) == (1, 19.00, "seller", 1)


def with_and_without(knob: str, buyer: str, seller: str, seed: int) -> list[tuple]:
    """The same 48 bilateral scenarios played against ``seller`` by ``buyer`` and by ``buyer``
    with ``knob`` added: (without, with) record pairs, so a test compares like with like."""
    config = get_preset("bilateral")
    scenarios = make_scenarios(config, CATALOG, seed, 48)
    plain = play_vs_pool(config, scenarios, seller, [buyer])[0]
    changed = play_vs_pool(config, scenarios, seller, [f"{buyer}&{knob}"])[0]
    return list(zip(plain, changed, strict=True))


def test_a_time_buyer_with_accept_takes_the_first_offer_at_or_below_that_share_of_its_budget():
    patient = "scripted:time?e=0.01&opening=0.1&jitter=0"
    earlier = 0
    for before, after in with_and_without("accept=0.9", patient, "scripted:time?e=0.5", 3):
        assert_rational_and_valid(after)
        limit = cents(floor_cents(0.9 * after.scenario.valuations[0][0]))
        offers = [t for t in after.result.turns if t.agent == "seller" and t.kind == "SELL"]
        first = next((t for t in offers if cents(t.price) <= limit), None)
        if first is not None:  # taken at once, at that offer
            assert after.result.deal is not None and after.result.deal.price == first.price
            assert after.result.deal.closed_by == "buyer"
        bids = [t.price for t in after.result.turns if t.agent == "buyer_1" and t.kind == "BUY"]
        assert len(set(bids)) <= 2  # it still holds its opening bid (its budget only at the end)
        if before.result.deal and after.result.deal:
            earlier += after.result.deal.turn < before.result.deal.turn
    assert earlier > 0


def test_a_time_buyer_on_a_ladder_bids_only_its_rungs_or_its_budget():
    climber = "scripted:time?e=1&opening=0.3&jitter=0"
    off_ladder = 0
    for before, after in with_and_without("ladder=9", climber, "scripted:prober", 5):
        assert_rational_and_valid(after)
        budget = after.scenario.valuations[0][0]
        allowed = {cents(p) for p in (floor_cents(budget), *budget_ladder(budget, 9))}
        bids = [cents(t.price) for t in after.result.turns if t.agent == "buyer_1" and t.price]
        assert set(bids) <= allowed, (bids, allowed)
        assert bids == sorted(bids)  # it still climbs
        mine = [cents(t.price) for t in before.result.turns if t.agent == "buyer_1" and t.price]
        off_ladder += not set(mine) <= allowed
    assert off_ladder > 0  # without the key the same buyer bids between the rungs


def test_a_random_buyer_makes_every_move_that_can_pay_and_no_other():
    """Each reply after the opening is a bid on a rung below its budget or a deal at an offer
    below it, drawn whatever it bid before: over many episodes every rung, deals, and lowered
    bids."""
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, CATALOG, 11, 64)
    records = []
    for seller in ("scripted:prober", "scripted:satisficer"):
        records += play_vs_pool(config, scenarios, seller, ["scripted:random?ladder=9"])[0]
    tenths, deals, lowered = set(), 0, 0
    for record in records:
        assert_rational_and_valid(record)
        standing: dict[str, float] = {}
        offer: dict[str, float] = {}
        for turn in record.result.turns:
            if turn.agent == "seller":
                if turn.kind == "SELL":
                    offer[turn.to] = turn.price
                continue
            budget = record.scenario.valuations[int(turn.agent.split("_")[1]) - 1][0]
            if turn.agent not in standing:  # the regulated opening
                standing[turn.agent] = turn.price
                continue
            if turn.kind == "DEAL":
                deals += 1
                assert cents(offer[turn.agent]) < cents(budget)
                continue
            assert turn.kind == "BUY", turn.text
            rungs = {cents(p): 10 - k for k, p in enumerate(budget_ladder(budget, 9), start=1)}
            assert cents(turn.price) in rungs, (turn.price, budget)  # never the budget itself
            lowered += cents(turn.price) < cents(standing[turn.agent])
            standing[turn.agent] = turn.price
            tenths.add(rungs[cents(turn.price)])
    assert deals > 0 and lowered > 0 and tenths == set(range(1, 10))  # every rung, 10%-90%


def test_a_random_buyer_repeats_its_moves_under_the_same_seed_only():
    config = get_preset("in-distribution")
    scenarios = make_scenarios(config, CATALOG, 12, 8)
    spec = "scripted:random?ladder=9"

    def texts(seed_shift: int) -> list[tuple[str, ...]]:
        shifted = [
            dataclasses.replace(s, episode_seed=s.episode_seed + seed_shift) for s in scenarios
        ]
        records = play_vs_pool(config, shifted, "scripted:prober", [spec])[0]
        return [tuple(t.text for t in r.result.turns) for r in records]

    assert texts(0) == texts(0)
    assert texts(0) != texts(1)


# --- spec strings --------------------------------------------------------------------------------


def test_parse_spec_splits_kind_name_and_parameters():
    spec = parse_spec(" scripted:prober?threshold=0.7 ")
    assert (spec.kind, spec.name, dict(spec.params), str(spec)) == (
        "scripted",
        "prober",
        {"threshold": "0.7"},
        "scripted:prober?threshold=0.7",
    )


def test_built_agent_carries_its_spec_and_typed_parameters():
    buyer = make_agent("scripted:time?e=0.5&opening=0.3", "buyer")
    assert buyer.spec == "scripted:time?e=0.5&opening=0.3"
    assert (buyer.config.e, buyer.config.opening) == (0.5, 0.3)
    assert (
        make_agent("scripted:greedy", "seller").config
        == make_agent("scripted:satisficer", "seller").config
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("foo:bar", "unknown agent kind 'foo'"),
        ("prober", "must look like kind:name"),
        ("scripted:", "must look like kind:name"),
        ("scripted:?threshold=1", "has no name"),
        ("scripted:prober?threshold", "bad parameters"),
        ("scripted:prober?threshold=0.5&threshold=0.6", "parameter 'threshold' given twice"),
    ],
)
def test_bad_spec_strings_are_rejected_with_the_reason(spec: str, message: str):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec)


@pytest.mark.parametrize(
    ("spec", "role", "message"),
    [
        ("scripted:nope", "seller", "unknown scripted seller 'nope'.*known: .*prober"),
        ("scripted:hardliner", "seller", "unknown scripted seller 'hardliner'"),
        ("scripted:oracle", "buyer", "unknown scripted buyer 'oracle'"),
        ("scripted:prober?speed=3", "seller", "unknown key 'speed'; known keys: threshold"),
        ("scripted:oracle?x=1", "seller", "known keys: none"),
        ("scripted:prober?threshold=high", "seller", r"threshold: expected a number, got 'high'"),
        ("scripted:time?e=", "buyer", "e: expected a number, got ''"),
        ("scripted:prober?threshold=2", "seller", "threshold must lie in"),
        ("scripted:time?e=-1", "seller", "e must be a positive number"),
        ("scripted:time?accept=1.5", "buyer", r"accept must lie in \[0, 1\]"),
        ("scripted:time?ladder=10", "buyer", r"ladder=10 is out of range"),
    ],
)
def test_bad_scripted_specs_fail_to_build_naming_the_problem(spec: str, role: str, message: str):
    with pytest.raises(SpecError, match=message):
        make_agent(spec, role)
    with pytest.raises(SpecError, match=message):
        check_spec(spec, role)


def test_a_spec_error_in_a_config_names_its_place():
    with pytest.raises(SpecError) as info:
        check_spec("scripted:prober?foo=1", "seller", "tournament.sellers[1]")
    assert str(info.value).startswith("tournament.sellers[1]: 'scripted:prober?foo=1': ")
    assert "unknown key 'foo'" in str(info.value)


def test_llm_agent_parameters_are_read_by_the_settings_dialect():
    with pytest.raises(SpecError, match="expected an integer, got 'all'"):
        make_agent("openai:m?base_url=http://127.0.0.1:9/v1&history=all", "seller")


def test_spec_error_is_a_value_error_and_bad_role_is_rejected():
    assert issubclass(SpecError, ValueError)
    with pytest.raises(ValueError, match="role must be 'seller' or 'buyer'"):
        make_agent("scripted:time", "referee")


def test_check_spec_returns_the_parsed_spec_without_building_llm_agents():
    spec = check_spec("openai:gpt-4o-mini?base_url=http://127.0.0.1:1/v1", "seller")
    assert (spec.kind, spec.name, spec.params["base_url"]) == (
        "openai",
        "gpt-4o-mini",
        "http://127.0.0.1:1/v1",
    )


def test_scripted_configs_are_frozen_dataclasses():
    agent = make_agent("scripted:prober", "seller")
    with pytest.raises(AttributeError):
        agent.config.threshold = 0.1  # type: ignore[misc]
