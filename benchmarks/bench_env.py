"""Scripted episodes per second: the full PettingZoo AEC environment vs the pure game core.

Both paths render every message as protocol text and parse it back. The environment path also
renders each acting agent's text observation (``env.last()``), as an LLM loop would.

    python benchmarks/bench_env.py --episodes 2000 --preset in-distribution
"""

from __future__ import annotations

import argparse
import time

from agents import make_agent
from agents.base import EpisodeContext, agent_seed
from arena.catalog import default_catalog
from arena.config import get_preset
from arena.env import MarketEnv
from arena.scenarios import make_scenarios
from tournaments.match import play_episode


def run_core(config, scenarios, seller, buyers) -> float:
    start = time.perf_counter()
    for scenario in scenarios:
        play_episode(config, scenario, seller, buyers)
    return time.perf_counter() - start


def run_env(config, scenarios, seller, buyers) -> float:
    env = MarketEnv(config=config)
    agents = {"seller": seller, **{f"buyer_{i + 1}": b for i, b in enumerate(buyers)}}
    start = time.perf_counter()
    for scenario in scenarios:
        env.reset(options={"scenario": scenario})
        for slot, (name, agent) in enumerate(agents.items()):
            agent.reset(EpisodeContext(name, slot, config, scenario, agent_seed(scenario, slot)))
        for name in env.agent_iter():
            _obs, _reward, terminated, truncated, _info = env.last()
            if terminated or truncated:
                env.step(None)
            else:
                env.step(agents[name].act(env.view(name)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--preset", default="in-distribution")
    parser.add_argument("--seller", default="scripted:prober")
    parser.add_argument("--buyer", default="scripted:time")
    parser.add_argument("--repeats", type=int, default=3, help="Best of this many runs.")
    args = parser.parse_args()
    config = get_preset(args.preset)
    scenarios = make_scenarios(config, default_catalog(), 0, args.episodes)
    seller = make_agent(args.seller, "seller")
    buyers = [make_agent(args.buyer, "buyer") for _ in range(config.num_buyers)]
    core = min(run_core(config, scenarios, seller, buyers) for _ in range(args.repeats))
    env = min(run_env(config, scenarios, seller, buyers) for _ in range(args.repeats))
    n = args.episodes
    print(
        f"{args.preset} {args.seller} vs {args.buyer}: core {n / core:,.0f} eps/s, "
        f"AEC env {n / env:,.0f} eps/s, env/core time ratio {env / core:.2f}"
    )


if __name__ == "__main__":
    main()
