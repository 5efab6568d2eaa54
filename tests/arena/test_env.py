"""The PettingZoo AEC wrapper: API conformance, seeding, rewards and sealed channels."""

from __future__ import annotations

import re

import pytest
from pettingzoo.test import api_test, seed_test

from agents import make_agent
from agents.base import EpisodeContext, agent_seed
from agents.driver import Match
from agents.engine import play_matches
from arena.catalog import Product
from arena.config import MarketConfig, get_preset, preset_names
from arena.env import FINISHED_TEXT, MarketEnv, env
from arena.protocol import MAX_MESSAGE_CHARS
from arena.scenarios import Scenario

PRESETS = preset_names()

LIST, COST = 34.99, 17.13
BUDGETS = (27.83, 41.17, 52.61)


@pytest.mark.parametrize("preset", PRESETS)
def test_pettingzoo_api_test_passes(preset: str):
    api_test(MarketEnv(config=get_preset(preset)), num_cycles=200)


@pytest.mark.parametrize("preset", PRESETS)
def test_pettingzoo_seed_test_passes(preset: str):
    seed_test(lambda: MarketEnv(config=get_preset(preset)), num_cycles=50)


def test_presets_cover_the_multi_product_markets():
    assert {"multi-product", "multi-product-2x6", "multi-product-5x3"} <= set(PRESETS)


def test_the_action_space_declares_the_parsers_length_cap():
    e = MarketEnv()
    assert all(e.action_space(a).max_length == MAX_MESSAGE_CHARS for a in e.possible_agents)


@pytest.mark.parametrize(
    ("action", "reason"),
    [
        (None, "not_text"),
        (42, "not_text"),
        ("Thought: a\nTarget: 1\nTalk: b\nAction: [SELL] $1" + "0" * 308, "price_too_large"),
        (" " * (MAX_MESSAGE_CHARS + 1), "too_long"),
    ],
)
def test_a_bad_seller_action_is_a_violation_with_its_reason_not_a_crash(action, reason):
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    for _, text in SCRIPT[:3]:
        e.step(text)
    e.step(action)
    result = e.result()
    assert (result.outcome, result.violation_reason) == ("violation", reason)
    assert e.terminations["seller"] and e.rewards["seller"] == -1.0
    assert result.turns[-1].text == (action if isinstance(action, str) else "")


@pytest.mark.parametrize("action", [None, "[BUY] $1" + "0" * 308, "x" * (MAX_MESSAGE_CHARS + 1)])
def test_a_bad_opening_is_intercepted_with_its_reason(action):
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    if isinstance(action, str) and action.startswith("["):
        action = f"Thought: t\nTalk: t\nAction: {action}"
    e.step(action)
    assert e.agent_selection == "buyer_1"
    assert "rejected (format: " in e.observe("buyer_1")["text"]
    assert e.market is not None and not e.market.turns[-1].valid


def test_every_agent_reads_the_closing_text_after_the_end():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    for _, text in SCRIPT:
        e.step(text)
    assert all(e.observe(a)["text"] == FINISHED_TEXT for a in e.possible_agents)


def test_env_constructor_and_agents_follow_the_config():
    e = env(config=get_preset("ood"))
    assert e.possible_agents == ["seller", "buyer_1", "buyer_2", "buyer_3", "buyer_4", "buyer_5"]
    e.reset(seed=3)
    assert e.agent_selection == "buyer_1"
    assert e.scenario.num_buyers == 5


def test_unknown_render_mode_is_rejected():
    with pytest.raises(ValueError, match="render_mode"):
        MarketEnv(render_mode="video")


def test_using_the_env_before_reset_is_an_error():
    with pytest.raises(RuntimeError, match="reset"):
        MarketEnv().view("seller")


def test_same_seed_gives_the_same_scenario_and_different_seeds_differ():
    a, b = MarketEnv(), MarketEnv()
    a.reset(seed=123)
    b.reset(seed=123)
    assert a.scenario == b.scenario
    scenarios = set()
    for seed in range(10):
        a.reset(seed=seed)
        scenarios.add((a.scenario.products[0].id, a.scenario.budgets))
    assert len(scenarios) == 10


def _hand_scenario() -> Scenario:
    product = Product("p_1", "baby-products", "Monitor", "A monitor.", "Wi-Fi", LIST, COST)
    return Scenario(
        seed=0,
        index=0,
        products=(product,),
        stock=(1,),
        valuations=tuple((b,) for b in BUDGETS),
        tiers=None,
        first_offers=(None, None, None),
        opening_products=(0, 0, 0),
        slot_draws=(0.1, 0.5, 0.9),
        episode_seed=1,
    )


def test_options_scenario_is_played_as_given():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    sc = _hand_scenario()
    e.reset(seed=5, options={"scenario": sc})
    assert e.scenario is sc


# --- sealed channels ----------------------------------------------------------------------------


def _seller(target: int, action: str, talk: str) -> str:
    thought = f"SELLER-THOUGHT-Q7 buyer {target}"
    return f"Thought: {thought}\nTarget: {target}\nTalk: {talk}\nAction: {action}"


def _buyer(i: int, action: str, talk: str) -> str:
    return f"Thought: B{i}-THOUGHT-SECRET\nTalk: {talk}\nAction: {action}"


SCRIPT = [
    ("buyer_1", _buyer(1, "[BUY] $9.95", "B1-TALK-OPEN")),
    ("buyer_2", _buyer(2, "[BUY] $10.45", "B2-TALK-OPEN")),
    ("buyer_3", _buyer(3, "[BUY] $9.28", "B3-TALK-OPEN")),
    ("seller", _seller(2, "[SELL] $34.99", "TALK-TO-B2-W8")),
    ("buyer_2", _buyer(2, "[BUY] $99.00", "B2-TALK-REJECTED")),
    ("buyer_2", _buyer(2, "[BUY] $18.00", "B2-TALK-REPLY")),
    ("seller", _seller(1, "[SELL] $34.99", "TALK-TO-B1-K3")),
    ("buyer_1", _buyer(1, "[BUY] $12.00", "B1-TALK-REPLY")),
    ("seller", _seller(3, "[SELL] $33.00", "TALK-TO-B3-M5")),
    ("buyer_3", _buyer(3, "[BUY] $20.00", "B3-TALK-REPLY")),
    ("seller", _seller(3, "[SELL] $31.00", "TALK-TO-B3-M6")),
    ("buyer_3", _buyer(3, "[DEAL]", "B3-TALK-DEAL")),
]


def _money_strings(x: float) -> list[str]:
    return [f"{x:.2f}", f"{x:,.2f}", repr(x)]


def _snapshot(e: MarketEnv) -> dict[str, str]:
    """Everything each agent could read now: its observe() text and its structured view."""
    return {a: e.observe(a)["text"] + "\n" + repr(e.view(a)) for a in e.possible_agents}


def _secrets_of(agent: str) -> list[str]:
    """Strings that must never reach ``agent``."""
    secrets = ["SELLER-THOUGHT-Q7", "THOUGHT-SECRET", "TALK-REJECTED"]
    if agent == "seller":
        return secrets + [s for b in BUDGETS for s in _money_strings(b)]
    i = int(agent.split("_")[1])
    secrets += _money_strings(COST)
    for j in (1, 2, 3):
        if j != i:
            secrets += [f"B{j}-TALK", f"TALK-TO-B{j}"]
            secrets += _money_strings(BUDGETS[j - 1])
    return secrets


def test_sealed_channels_never_leak_private_text_or_values():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    seen: dict[str, str] = dict.fromkeys(e.possible_agents, "")
    for agent, text in SCRIPT:
        assert e.agent_selection == agent
        e.step(text)
        for who, visible in _snapshot(e).items():
            seen[who] += visible
            for secret in _secrets_of(who):
                assert secret not in visible, f"{secret!r} reached {who}"
    assert e.result().outcome == "deal"
    # The channels do carry what they should: each party's public talk reaches its counterparty.
    assert "B2-TALK-REPLY" in seen["seller"] and "B3-TALK-OPEN" in seen["seller"]
    assert "17.13" in seen["seller"]
    assert "TALK-TO-B1-K3" in seen["buyer_1"] and "TALK-TO-B3-M5" in seen["buyer_3"]
    assert "27.83" in seen["buyer_1"]


def test_buyer_view_hides_the_cost():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    view = e.view("buyer_1")
    assert view.products[0].list_price == LIST
    assert view.products[0].cost != COST


def test_seller_observation_shows_board_and_no_budget():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    for _, text in SCRIPT[:3]:
        e.step(text)
    obs = e.observe("seller")["text"]
    assert "=== Standing offers ===" in obs
    assert "Buyer 2 says: B2-TALK-OPEN" in obs
    assert "Remaining seller messages: 7" in obs
    assert not re.search(r"27\.83|41\.17|52\.61", obs)


def test_rejected_buyer_is_told_why_and_asked_again():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    for _, text in SCRIPT[:5]:
        e.step(text)
    assert e.agent_selection == "buyer_2"
    obs = e.observe("buyer_2")["text"]
    assert "rejected (over_budget: bid_over_budget)" in obs
    assert "TALK-TO-B2-W8" in obs


def test_render_ansi_marks_rejected_messages():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"), render_mode="ansi")
    e.reset(options={"scenario": _hand_scenario()})
    for _, text in SCRIPT[:6]:
        e.step(text)
    out = e.render()
    assert out is not None
    assert "buyer_2 -> seller:  [rejected: bid_over_budget]" in out
    assert out.count("[rejected:") == 1


# --- rewards through the AEC loop ---------------------------------------------------------------


def test_terminal_rewards_and_infos_reach_every_agent():
    e = MarketEnv(config=MarketConfig(budget_mode="uniform"))
    e.reset(options={"scenario": _hand_scenario()})
    totals = dict.fromkeys(e.possible_agents, 0.0)
    script = iter(text for _, text in SCRIPT)
    for agent in e.agent_iter():
        _, reward, termination, truncation, _ = e.last()
        totals[agent] += reward
        e.step(None if termination or truncation else next(script))
    result = e.result()
    assert totals["seller"] == pytest.approx((31.00 - COST) / (LIST - COST))
    assert totals["buyer_3"] == pytest.approx((LIST - 31.00) / (LIST - COST))
    assert totals["buyer_1"] == totals["buyer_2"] == 0.0
    assert result.seller_reward == pytest.approx(totals["seller"])
    assert e.agents == []


def _scripted_env_episode(e: MarketEnv, seller_spec: str, buyer_spec: str):
    agents = {"seller": make_agent(seller_spec, "seller")}
    for i in range(e.config.num_buyers):
        agents[f"buyer_{i + 1}"] = make_agent(buyer_spec, "buyer")
    for slot, name in enumerate(e.possible_agents):
        seed = agent_seed(e.scenario, slot)
        agents[name].reset(EpisodeContext(name, slot, e.config, e.scenario, seed))
    for agent in e.agent_iter():
        _, _, termination, truncation, _ = e.last()
        e.step(None if termination or truncation else agents[agent].act(e.view(agent)))
    return e.result()


@pytest.mark.parametrize("preset", PRESETS)
def test_aec_loop_plays_exactly_like_the_match_runner(preset: str):
    config = get_preset(preset)
    e = MarketEnv(config=config)
    e.reset(seed=42)
    via_env = _scripted_env_episode(e, "scripted:prober", "scripted:time")
    n = config.num_buyers
    record = play_matches(
        config,
        [
            Match(
                e.scenario,
                make_agent("scripted:prober", "seller"),
                tuple([make_agent("scripted:time", "buyer") for _ in range(n)]),
            )
        ],
    )[0][0]
    assert [t.text for t in via_env.turns] == [t.text for t in record.result.turns]
    assert via_env.seller_reward == record.result.seller_reward
    assert via_env.outcome == record.result.outcome
