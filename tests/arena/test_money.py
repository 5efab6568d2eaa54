"""Money helpers: cents are exact, floors and ceilings never cross the value."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arena.money import (
    budget_ladder,
    ceil_cents,
    cents,
    dollars,
    floor_cents,
    format_price,
    round_cents,
)


def test_cents_treats_float_noise_as_the_same_price() -> None:
    assert cents(18.7) == cents(18.700000000001) == 1870
    assert cents(0.1 + 0.2) == 30


def test_format_price_uses_thousands_separators_and_two_decimals() -> None:
    assert format_price(1299.5) == "$1,299.50"
    assert format_price(3) == "$3.00"


@given(st.integers(min_value=0, max_value=10**9))
def test_whole_cents_round_trip(c: int) -> None:
    assert cents(dollars(c)) == c
    assert floor_cents(dollars(c)) == dollars(c) == ceil_cents(dollars(c))


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_floor_and_ceil_bracket_the_value(x: float) -> None:
    assert floor_cents(x) <= x + 1e-6
    assert ceil_cents(x) >= x - 1e-6
    assert ceil_cents(x) - floor_cents(x) <= 0.01 + 1e-9
    assert abs(round_cents(x) - x) <= 0.005 + 1e-9


@given(st.floats(min_value=0.01, max_value=1e5, allow_nan=False), st.integers(0, 9))
def test_a_budget_ladder_steps_down_in_tenths_of_the_budget_never_above_it(
    budget: float, rungs: int
) -> None:
    ladder = budget_ladder(budget, rungs)
    assert len(ladder) == rungs
    for k, price in enumerate(ladder, start=1):
        share = (10 - k) / 10
        assert price == floor_cents(budget * share)  # whole cents, rounded down: affordable
        assert budget * share - 0.01 < price <= budget * share + 1e-6
    assert list(ladder) == sorted(ladder, reverse=True)


def test_a_budget_ladder_refuses_rungs_it_cannot_write() -> None:
    assert budget_ladder(8.77, 3) == (7.89, 7.01, 6.13)
    for rungs in (-1, 10):
        with pytest.raises(ValueError, match=r"0 \(none\) to 9 rungs"):
            budget_ladder(8.77, rungs)
