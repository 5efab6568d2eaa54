"""Seat names: one conversion between protocol numbers (from 1) and indices (from 0)."""

from __future__ import annotations

import pytest

from arena.seats import (
    SELLER,
    buyer_index,
    buyer_seat,
    buyer_seats,
    channel_of,
    seat_role,
    seat_slot,
    seats,
    slot_seat,
)


def test_buyer_seats_are_numbered_from_one() -> None:
    assert buyer_seat(0) == "buyer_1"
    assert buyer_index("buyer_3") == 2
    assert buyer_seats(2) == ["buyer_1", "buyer_2"]
    assert seats(2) == [SELLER, "buyer_1", "buyer_2"]


def test_slots_and_seats_round_trip() -> None:
    for slot, seat in enumerate(seats(5)):
        assert seat_slot(seat) == slot
        assert slot_seat(slot) == seat
    assert seat_role("seller") == "seller"
    assert seat_role("buyer_2") == "buyer"


@pytest.mark.parametrize("bad", ["buyer_0", "buyer_", "buyer_x", "seller_1", "Buyer_1", ""])
def test_a_bad_seat_name_is_refused_by_name(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a buyer seat"):
        buyer_index(bad)


def test_channel_of_names_only_the_seats_a_market_has() -> None:
    assert [channel_of(f"buyer_{n}", 3) for n in (1, 2, 3)] == [0, 1, 2]
    assert [channel_of(s, 3) for s in ("buyer_0", "buyer_4", "buyer_x", "seller", "")] == [None] * 5
