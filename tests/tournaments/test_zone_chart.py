"""The bargaining-zone chart: the reference lines at the episode's private values, one mark per
priced message at its turn and price, the deal starred, one chart per product."""

from __future__ import annotations

import dataclasses
import io
import xml.etree.ElementTree as ET

import pytest

from agents import make_agent
from agents.driver import Episode
from agents.engine import play_vs_pool
from agents.human import HumanAgent, MoveReader
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.records import EpisodeRecord
from arena.scenarios import make_scenario, make_scenarios
from tournaments.zone_chart import marks, zone_charts

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def by_class(root: ET.Element, name: str) -> list[ET.Element]:
    return [e for e in root.iter() if name in (e.get("class") or "").split()]


def longest(preset: str = "in-distribution", **overrides) -> EpisodeRecord:
    config = get_preset(preset, overrides or None)
    scenarios = make_scenarios(config, load_catalog(), 0, 12)
    records = play_vs_pool(config, scenarios, "scripted:prober", ["scripted:time"])[0]
    return max(records, key=lambda r: (r.result.outcome == "deal", r.result.seller_turns))


def test_reference_lines_sit_at_the_cost_list_price_and_every_budget() -> None:
    record = longest()
    (svg,) = zone_charts(record)
    root = parse(svg)
    sc = record.scenario
    assert [e.get("data-price") for e in by_class(root, "cost")] == [f"{sc.costs[0]:.2f}"]
    assert [e.get("data-price") for e in by_class(root, "list")] == [f"{sc.list_prices[0]:.2f}"]
    budgets = {e.get("data-buyer"): e.get("data-price") for e in by_class(root, "budget")}
    assert budgets == {str(i + 1): f"{v[0]:.2f}" for i, v in enumerate(sc.valuations)}
    ys = {e.get("data-price"): float(e.get("y1")) for e in by_class(root, "ref")}
    ordered = sorted(ys, key=float)
    assert [ys[p] for p in ordered] == sorted(ys.values(), reverse=True)  # higher price, higher up


def test_every_priced_message_is_a_mark_at_its_turn_and_the_deal_is_starred() -> None:
    record = longest()
    root = parse(zone_charts(record)[0])
    shown = by_class(root, "mark")
    priced = [t for t in record.result.turns if t.price is not None]
    assert len(shown) == len(priced) > 6
    assert [m.get("data-price") for m in shown] == [f"{t.price:.2f}" for t in priced]
    assert [m.get("data-kind") for m in shown] == [t.kind for t in priced]
    seller_turns = [int(m.get("data-turn")) for m in shown if m.get("data-speaker") == "seller"]
    assert seller_turns == list(range(1, record.result.seller_turns + 1))
    openings = [m for m in shown if m.get("data-turn") == "0"]
    assert {m.get("data-speaker") for m in openings} == {"buyer"} and len(openings) == 3
    (deal,) = by_class(root, "deal")
    assert deal.get("data-price") == f"{record.result.deal.price:.2f}"
    assert deal.get("data-buyer") == str(record.result.deal.buyer + 1)
    assert all(m.find(f"{SVG}title") is not None for m in shown)


def test_a_rejected_message_is_a_grey_cross_with_its_reason() -> None:
    config = get_preset("in-distribution")
    scenario = make_scenario(config, load_catalog(), 0, 5)
    low = "Thought: t\nTalk: Hi.\nAction: [BUY] $0.01\n\n"
    person = HumanAgent("human:ann", MoveReader(io.StringIO(low)), lambda _text: None)
    players = [make_agent("scripted:prober", "seller"), person,
               *(make_agent("scripted:time", "buyer") for _ in range(2))]  # fmt: skip
    episode = Episode(config, scenario, players)
    episode.advance()
    record = episode.record()
    root = parse(zone_charts(record)[0])
    (rejected,) = by_class(root, "rejected")
    assert rejected.tag == f"{SVG}path" and rejected.get("data-price") == "0.01"
    assert "rejected:" in rejected.find(f"{SVG}title").text


@pytest.mark.parametrize("target", ["0", "9"])
def test_a_seller_message_to_a_buyer_nobody_holds_is_left_out_of_the_chart(target: str) -> None:
    config = get_preset("in-distribution")
    scenario = make_scenario(config, load_catalog(), 0, 5)
    move = f"Thought: t\nTarget: {target}\nTalk: Hi.\nAction: [SELL] $50.00\n\n"
    person = HumanAgent("human:ann", MoveReader(io.StringIO(move)), lambda _text: None)
    players = [person, *(make_agent("scripted:time", "buyer") for _ in range(3))]
    episode = Episode(config, scenario, players)
    episode.advance()
    record = episode.record()
    assert record.result.turns[-1].to == f"buyer_{target}"
    assert [m.speaker for m in marks(record)] == ["buyer"] * 3
    assert by_class(parse(zone_charts(record)[0]), "mark")


def test_several_products_get_one_chart_each_with_their_own_values() -> None:
    record = longest(num_products=2, stock=1)
    charts = [parse(svg) for svg in zone_charts(record)]
    assert [c.get("data-product") for c in charts] == ["1", "2"]
    placed = marks(record)
    for p, chart in enumerate(charts):
        sc = record.scenario
        assert by_class(chart, "cost")[0].get("data-price") == f"{sc.costs[p]:.2f}"
        budgets = [e.get("data-price") for e in by_class(chart, "budget")]
        assert budgets == [f"{v[p]:.2f}" for v in sc.valuations]
        assert len(by_class(chart, "mark")) == sum(m.product == p for m in placed)
    assert sum(len(by_class(c, "mark")) for c in charts) == len(placed)
    assert {m.product for m in placed} == {0, 1}


def test_text_in_the_chart_is_escaped() -> None:
    record = longest()
    product = record.scenario.products[0]
    evil = dataclasses.replace(product, title='<script>alert("x")</script> & co')
    scenario = dataclasses.replace(record.scenario, products=(evil,))
    (svg,) = zone_charts(dataclasses.replace(record, scenario=scenario))
    assert "<script>" not in svg
    assert parse(svg).find(f"{SVG}title").text.startswith('<script>alert("x")</script> & co')
