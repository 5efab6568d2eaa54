"""leagues.group_rewards: TRL's reward function and the groups that train nothing."""

from __future__ import annotations

import pytest

from leagues.group_rewards import learner_reward, zero_advantage_groups


def test_the_reward_function_logs_each_metric_over_distinct_episodes():
    logged: dict[str, float] = {}
    rewards = learner_reward(
        prompts=["a"] * 4,
        completions=["x"] * 4,
        learner_reward=[0.5, None, 0.5, 0.25],
        episode=["e1", "e2", "e1", "e3"],
        log_metric=logged.__setitem__,
        deal_rate=[1.0, 0.0, 1.0, 1.0],
        surplus_extraction_ratio=[0.5, None, 0.5, 0.25],
    )
    assert rewards == [0.5, None, 0.5, 0.25]
    assert logged == {
        "deal_rate": pytest.approx(2 / 3),
        "surplus_extraction_ratio": 0.375,
        "zero_advantage_groups": 0.0,  # one group of four, rewards 0.5 and 0.25: it trains
        "resampled_groups": 0.0,
    }


def test_groups_with_equal_rewards_are_counted_as_training_nothing():
    prompts = ["g1", "g1", "g2", "g2", "g3", "g3", "g4", "g4"]
    rewards = [0.5, 0.5, -1.0, 0.25, None, 0.3, None, None]
    # g1: equal rewards; g2: different; g3: one scored reward; g4: none scored.
    assert zero_advantage_groups(prompts, rewards) == 3
    assert zero_advantage_groups(["a", "a"], [0.0, 1e-9]) == 0
