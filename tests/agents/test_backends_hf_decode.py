"""The decoding loop's batch bookkeeping: finished rows leave a batch by filling holes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.backends.hf_decode import drop_rows, fill_holes


@pytest.mark.parametrize(
    ("keep", "count", "order"),
    [
        ([0, 1, 2], 3, [0, 1, 2]),  # nothing finished: nothing moves
        ([0, 1], 3, [0, 1]),  # the last row finished: cut, no copy
        ([0, 2, 4], 5, [0, 4, 2]),  # row 4 moves into row 1's place
        ([3, 4], 5, [3, 4]),  # both survivors move down
        ([], 4, []),
    ],
)
def test_kept_rows_below_the_new_size_stay_and_the_rest_fill_the_holes(keep, count, order):
    assert fill_holes(keep, count) == order


@given(st.sets(st.integers(0, 63)), st.integers(64, 80))
def test_the_new_order_holds_each_kept_row_once_and_moves_only_into_holes(kept, count):
    keep = sorted(kept)
    order = fill_holes(keep, count)
    assert sorted(order) == keep
    moved = [new for new, old in enumerate(order) if new != old]
    assert all(new not in kept for new in moved)  # a row moves only into a finished row's place
    assert len(moved) == sum(place >= len(keep) for place in keep)


def test_dropping_rows_keeps_their_keys_and_values_in_the_new_order_without_a_new_cache():
    import torch

    keys = torch.arange(5 * 2 * 3, dtype=torch.float32).reshape(5, 1, 2, 3)
    layer = SimpleNamespace(keys=keys.clone(), values=-keys.clone(), batch_size=5)
    storage = layer.keys.data_ptr()
    order = fill_holes([0, 2, 4], 5)
    drop_rows(SimpleNamespace(layers=[layer]), order)
    assert torch.equal(layer.keys, keys[order]) and torch.equal(layer.values, -keys[order])
    assert layer.batch_size == 3 and layer.keys.shape[0] == 3
    # The same memory, cut: a step after a row finishes copies that row, not the cache.
    assert layer.keys.data_ptr() == storage and layer.keys.is_contiguous()
