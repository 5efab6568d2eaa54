"""Money: prices are dollars as floats on the surface and integer cents underneath.

Every comparison of two prices goes through :func:`cents`, so $18.70 and 18.7000000001 are the
same price and no rule depends on float rounding. The helpers here are the only place where a
price is rounded, floored, ceiled or rendered.
"""

from __future__ import annotations

import math


def cents(x: float) -> int:
    """A dollar amount as integer cents (round half to even, as ``round``)."""
    return round(x * 100)


def dollars(c: int) -> float:
    """Integer cents back to a dollar float."""
    return c / 100


def floor_cents(x: float) -> float:
    """``x`` rounded down to a whole cent (a bid that must not exceed ``x``)."""
    return math.floor(x * 100 + 1e-6) / 100


def ceil_cents(x: float) -> float:
    """``x`` rounded up to a whole cent (an ask that must not fall below ``x``)."""
    return math.ceil(x * 100 - 1e-6) / 100


def round_cents(x: float) -> float:
    """``x`` rounded to the nearest cent, as a float."""
    return round(float(x), 2)


def format_price(price: float) -> str:
    """``1299.5`` -> ``$1,299.50``: the canonical rendering of a price."""
    return f"${price:,.2f}"


MAX_LADDER_RUNGS = 9
"""A budget ladder goes down in tenths: 90% of the budget at most nine times, to 10%."""


def check_ladder(rungs: int) -> None:
    """The one check of a ladder setting (agents, scripted buyers, leagues): 0 to 9 rungs."""
    if isinstance(rungs, bool) or not isinstance(rungs, int) or not 0 <= rungs <= MAX_LADDER_RUNGS:
        raise ValueError(
            f"ladder={rungs!r} is out of range: a budget ladder has 0 (none) to "
            f"{MAX_LADDER_RUNGS} rungs"
        )


def budget_ladder(budget: float, rungs: int) -> tuple[float, ...]:
    """The offers at 90%, 80%, ... of a budget (``rungs`` tenths down), floored to cents.

    A buyer's ladder (the LLM agent option ``ladder=N``, the scripted buyers' ``ladder``): round
    shares of its own budget written out, so that a model which copies numbers but cannot
    multiply can still bid a share of its budget of its choosing.
    """
    check_ladder(rungs)
    return tuple(floor_cents(budget * (10 - k) / 10) for k in range(1, rungs + 1))


def ladder_bids(budget: float, rungs: int) -> tuple[float, ...]:
    """The bids a buyer on a ladder may make, highest first: its budget (floored to cents) and
    the ladder's ``rungs`` prices: what the scripted ladder buyers bid on and what the LLM
    option ``steer=ladder`` holds a model's bids to."""
    return (floor_cents(budget), *budget_ladder(budget, rungs))
