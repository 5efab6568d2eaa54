"""Copy pretraining of the tiny model: the synthetic task, and training that is reproducible."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from agents.testing.pretrain import PretrainConfig, copy_example, pretrain_copying, random_price


def test_every_copy_example_repeats_a_price_from_its_prompt() -> None:
    rng = np.random.default_rng(0)
    lengths = set()
    for _ in range(200):
        chat, reply = copy_example(rng)
        price = re.fullmatch(r"Action: \[(SELL|DEAL)\] (\$[\d,]+\.\d\d)", reply)
        assert price is not None
        prompt = "\n".join(content for _, content in chat)
        if price.group(1) == "SELL":
            assert f"List price {price.group(2)}." in prompt
        else:
            wanted = re.search(r"Take buyer (\d+)\.", prompt)
            assert wanted is not None
            assert f"Buyer {wanted.group(1)}: bids {price.group(2)}" in prompt
        lengths.add(len(price.group(2).split(".")[0]))
    assert lengths == {2, 3, 4, 6}  # $1 .. $9,999: one to four digits (a comma from 1,000)


def test_random_prices_have_cents_and_no_leading_zero() -> None:
    rng = np.random.default_rng(1)
    for _ in range(100):
        assert re.fullmatch(r"\$[1-9][\d,]*\.\d\d", random_price(rng))


def test_pretraining_is_reproducible_and_moves_the_weights(
    tiny_model_dir: Path, tmp_path: Path, one_thread: None
) -> None:
    from safetensors.torch import load_file

    config = PretrainConfig(steps=3, batch_size=4, seed=5)
    for name in ("a", "b"):
        pretrain_copying(tiny_model_dir, tmp_path / name, config)
    a = load_file(str(tmp_path / "a" / "model.safetensors"))
    b = load_file(str(tmp_path / "b" / "model.safetensors"))
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    assert all((a[k] == b[k]).all() for k in a)
    assert any(not (a[k] == before[k]).all() for k in a)
