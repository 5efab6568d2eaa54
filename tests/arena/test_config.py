"""Market configuration: presets, cross-field validation and CLI overrides."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from arena.catalog import default_catalog
from arena.config import (
    PAPER_TIERS,
    PRESETS,
    MarketConfig,
    apply_overrides,
    config_to_dict,
    get_preset,
    parse_assignments,
    preset_names,
)
from arena.scenarios import make_scenarios
from arena.seats import buyer_seats


def test_in_distribution_preset_is_the_paper_market():
    cfg = get_preset("in-distribution")
    assert (cfg.num_buyers, cfg.total_turns, cfg.per_buyer_cap) == (3, 7, 3)
    assert cfg.budget_mode == "tiers" and cfg.budget_tiers == PAPER_TIERS
    assert cfg.regulate_first_offer and cfg.first_offer_range == (0.25, 0.30)
    assert not cfg.penalize_buyer_violations


def test_ood_preset_has_five_uniform_buyers_and_free_openings():
    cfg = get_preset("ood")
    assert (cfg.num_buyers, cfg.total_turns, cfg.per_buyer_cap) == (5, 9, 3)
    assert cfg.budget_mode == "uniform" and not cfg.regulate_first_offer


def test_bilateral_preset_penalises_buyer_violations():
    cfg = get_preset("bilateral")
    assert cfg.num_buyers == 1 and cfg.penalize_buyer_violations and cfg.allow_full_coverage


def test_every_preset_is_named_after_its_key():
    assert preset_names() == sorted(PRESETS)
    for name in preset_names():
        assert get_preset(name).name == name


def test_agents_are_seller_then_one_based_buyers():
    assert get_preset("ood").agents == ["seller", *buyer_seats(5)]
    assert buyer_seats(2) == ["buyer_1", "buyer_2"]


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown preset 'nope'.*in-distribution"):
        get_preset("nope")


# --- cross-field validation: every message names the field -------------------------------------


def test_t_at_least_n_times_k_is_an_error_naming_total_turns():
    with pytest.raises(ValueError, match=r"total_turns=9 must be < num_buyers\*per_buyer_cap=9"):
        MarketConfig(total_turns=9)
    with pytest.raises(ValueError, match="allow_full_coverage"):
        MarketConfig(total_turns=12)


def test_allow_full_coverage_lifts_the_scarcity_condition():
    cfg = MarketConfig(total_turns=12, allow_full_coverage=True)
    assert cfg.total_turns == 12


@pytest.mark.parametrize(
    "field", ["num_buyers", "total_turns", "per_buyer_cap", "num_products", "stock"]
)
@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_counts_must_be_positive_integers(field: str, value):
    kwargs = {field: value, "budget_mode": "uniform", "allow_full_coverage": True}
    with pytest.raises(ValueError, match=f"{field} must be an integer >= 1"):
        MarketConfig(**kwargs)


def test_negative_retries_are_an_error():
    with pytest.raises(ValueError, match="max_buyer_retries"):
        MarketConfig(max_buyer_retries=-1)


@pytest.mark.parametrize("field", ["budget_range", "first_offer_range"])
def test_interval_with_low_above_high_is_an_error_naming_the_field(field: str):
    with pytest.raises(ValueError, match=f"{field} has low 0.9 > high 0.5"):
        MarketConfig(**{field: (0.9, 0.5)})


@pytest.mark.parametrize("field", ["budget_range", "first_offer_range"])
def test_interval_with_a_negative_ratio_is_an_error_naming_the_field(field: str):
    with pytest.raises(ValueError, match=f"{field} has a negative ratio"):
        MarketConfig(**{field: (-0.1, 0.5)})


def test_bad_tier_interval_is_named_by_index():
    tiers = ((0.4, 0.55), (0.8, 0.65), (1.0, 1.15))
    with pytest.raises(ValueError, match=r"budget_tiers\[1\] has low 0.8 > high 0.65"):
        MarketConfig(budget_tiers=tiers)


def test_interval_must_be_a_finite_pair():
    with pytest.raises(ValueError, match="budget_range must be a pair"):
        MarketConfig(budget_range=(0.4,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget_range must be finite"):
        MarketConfig(budget_range=(0.4, float("inf")))


def test_tier_count_must_match_the_number_of_buyers():
    with pytest.raises(ValueError, match="budget_tiers has 3 intervals but num_buyers=2"):
        MarketConfig(num_buyers=2, total_turns=5)
    assert MarketConfig(num_buyers=2, total_turns=5, budget_mode="uniform").num_buyers == 2


def test_unknown_budget_mode_is_an_error():
    with pytest.raises(ValueError, match="budget_mode"):
        MarketConfig(budget_mode="normal")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("valuation_correlation", 1.5),
        ("product_spread", 1.0),
        ("price_scale", 0.0),
        ("seller_temperature", -0.1),
        ("buyer_temperature", float("nan")),
    ],
)
def test_out_of_range_numbers_are_errors_naming_the_field(field: str, value: float):
    with pytest.raises(ValueError, match=field):
        MarketConfig(**{field: value})


# --- overrides ----------------------------------------------------------------------------------


def test_string_overrides_are_converted_to_the_field_types():
    cfg = get_preset(
        "ood",
        {
            "total_turns": "10",
            "penalize_buyer_violations": "yes",
            "budget_range": "0.5,1.0",
            "buyer_temperature": "0.2",
            "name": "mine",
        },
    )
    assert cfg.total_turns == 10 and cfg.penalize_buyer_violations is True
    assert cfg.budget_range == (0.5, 1.0) and cfg.buyer_temperature == 0.2 and cfg.name == "mine"


def test_budget_tiers_override_accepts_both_spellings():
    a = get_preset("in-distribution", {"budget_tiers": "0.4-0.5;0.6-0.7;0.9-1.0"})
    b = get_preset("in-distribution", {"budget_tiers": "0.4,0.5;0.6,0.7;0.9,1.0"})
    assert a.budget_tiers == b.budget_tiers == ((0.4, 0.5), (0.6, 0.7), (0.9, 1.0))


def test_non_string_overrides_from_toml_are_accepted():
    cfg = get_preset(
        "in-distribution",
        {"budget_tiers": [[0.3, 0.4], [0.5, 0.6], [0.7, 0.8]], "first_offer_range": [0.2, 0.25]},
    )
    assert cfg.budget_tiers == ((0.3, 0.4), (0.5, 0.6), (0.7, 0.8))
    assert cfg.first_offer_range == (0.2, 0.25)


def test_overrides_do_not_change_the_preset():
    get_preset("in-distribution", {"total_turns": "5"})
    assert PRESETS["in-distribution"].total_turns == 7


def test_unknown_override_field_is_an_error_naming_it():
    with pytest.raises(ValueError, match=r"market: unknown key 'num_buyer'.*known keys"):
        get_preset("in-distribution", {"num_buyer": "4"})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_buyers", "three"),
        ("total_turns", "7.5"),
        ("regulate_first_offer", "maybe"),
        ("price_scale", "big"),
        ("budget_range", "0.4;x"),
    ],
)
def test_bad_override_value_names_the_field(field: str, value: str):
    with pytest.raises(ValueError, match=rf"^market\.{field}: expected .*{re.escape(repr(value))}"):
        get_preset("ood", {field: value})


def test_override_that_breaks_a_cross_field_check_fails_the_same_way():
    with pytest.raises(ValueError, match="total_turns=15 must be <"):
        get_preset("ood", {"total_turns": "15"})


def test_changing_num_buyers_in_tiers_mode_needs_tiers_too():
    with pytest.raises(ValueError, match="num_buyers=5 needs 5 budget_tiers"):
        get_preset("in-distribution", {"num_buyers": "5", "total_turns": "9"})


def test_changing_num_buyers_with_budget_mode_uniform_is_accepted():
    """The error above suggests budget_mode=uniform; following that advice must work."""
    cfg = get_preset(
        "in-distribution", {"num_buyers": "5", "total_turns": "9", "budget_mode": "uniform"}
    )
    assert (cfg.num_buyers, cfg.budget_mode) == (5, "uniform")


def test_parse_assignments_splits_and_normalises_keys():
    assert parse_assignments(["num-buyers=5", " budget_range = 0.4,1.15 "]) == {
        "num_buyers": "5",
        "budget_range": "0.4,1.15",
    }
    with pytest.raises(ValueError, match="must look like field=value"):
        parse_assignments(["num_buyers"])
    with pytest.raises(ValueError, match="must look like field=value"):
        parse_assignments(["=5"])


def test_apply_overrides_on_a_custom_base():
    base = MarketConfig(budget_mode="uniform")
    assert apply_overrides(base, {"num_buyers": "4"}).num_buyers == 4


def test_config_to_dict_is_json_ready_and_round_trips():
    cfg = get_preset("in-distribution")
    data = json.loads(json.dumps(config_to_dict(cfg)))
    assert data["budget_tiers"] == [list(t) for t in PAPER_TIERS]
    rebuilt = apply_overrides(MarketConfig(), data)
    assert rebuilt == cfg
    assert dataclasses.asdict(rebuilt) == config_to_dict(cfg)


# --- regulated openings must fit the budgets (issue 12) -----------------------------------------


def test_regulated_openings_above_the_lowest_tier_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"first_offer_range=\(0.5, 0.6\)") as info:
        get_preset("in-distribution", parse_assignments(["first_offer_range=0.5,0.6"]))
    message = str(info.value)
    assert "as low as 0.4 x list price" in message
    assert "Lower first_offer_range to at most 0.4" in message
    assert "regulate_first_offer=false" in message


def test_regulated_openings_above_the_uniform_range_are_refused():
    with pytest.raises(ValueError, match=r"budget_range starts at 0\.5"):
        MarketConfig(budget_mode="uniform", budget_range=(0.5, 1.0), first_offer_range=(0.4, 0.6))


def test_several_products_leave_room_for_the_valuation_spread():
    cfg = get_preset("multi-product")
    floor = cfg.budget_range[0] * (1 - cfg.product_spread)
    with pytest.raises(ValueError, match="product_spread"):
        apply_overrides(cfg, {"first_offer_range": f"0.3,{floor + 0.01:.4f}"})
    assert (
        apply_overrides(cfg, {"first_offer_range": f"0.3,{floor:.4f}"}).first_offer_range[1]
        <= floor
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"first_offer_range": "0.4,0.4"},
        {"first_offer_range": "0.5,0.6", "regulate_first_offer": "false"},
        {"first_offer_range": "0.5,0.6", "budget_tiers": "0.6,0.7;0.8,0.9;1,1.1"},
    ],
)
def test_openings_that_fit_or_are_not_regulated_are_accepted(overrides: dict[str, str]):
    assert get_preset("in-distribution", overrides).first_offer_range[1] >= 0.4


def test_every_preset_keeps_its_openings_within_its_budgets():
    for name in preset_names():
        cfg = get_preset(name)
        if cfg.regulate_first_offer:
            sc = make_scenarios(cfg, default_catalog(), 0, 50)
            for s in sc:
                for i, offer in enumerate(s.first_offers):
                    assert offer is not None
                    assert offer <= s.valuations[i][s.opening_products[i]]


def test_the_rewards_are_set_by_name_like_any_field_and_an_unknown_name_lists_the_known():
    config = get_preset("bilateral", parse_assignments(["buyer_reward=budget_surplus"]))
    assert config.rewards == ("surplus_extraction", "budget_surplus")
    assert get_preset("bilateral").rewards == ("surplus_extraction", "surplus_extraction")
    known = (
        r"buyer_reward must name .* surplus_extraction, budget_surplus, reservation_surplus; "
        r"got 'surplus'"
    )
    with pytest.raises(ValueError, match=known):
        get_preset("bilateral", {"buyer_reward": "surplus"})
