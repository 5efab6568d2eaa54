"""Steps per second of the PettingZoo environment and of the game core, beside TextArena.

Scripted agents (default: prober seller vs time buyers, in-distribution) first play every scenario
through the environment; their messages are recorded. The timed runs replay those exact messages,
so they time the environment without the agents' decisions, as TextArena's loop with fixed
actions does. Every replay is first checked to end exactly as the agents' episodes did.

- ``env``: ``MarketEnv`` through the standard loop, ``agent_iter()`` / ``last(observe=False)`` /
  ``view(agent)`` / ``step()``: each acting agent reads its structured observation, the view a
  scripted agent reads (TextArena's raw ``get_observation()`` likewise returns raw messages).
- ``env_text``: the same loop with ``last()``, which renders the acting agent's text observation
  (the seller's standing-offers board), the text an LLM reads.
- ``core``: the same messages straight into ``arena.game.Market``, reading the acting seat's view
  each step, then the episode's payoffs. ``env / core`` is the cost of the PettingZoo wrapper.
- ``agents_env``: the ``env_text`` loop with the scripted agents deciding every move (the loop of
  issue 9's first measurement: the agents' own time is included).
- ``textarena``: TextArena's SimpleNegotiation (``SimpleNegotiation-v0-raw``: two players,
  ``get_observation()`` / ``step()`` with a fixed cycle of offers, denials and acceptances,
  ``close()``), when ``textarena`` is importable. It is not a project dependency
  (``pip install textarena``); without it the output says so.

Times are CPU seconds of this process (``time.process_time``), each run starting after a full
garbage collection; the runs are interleaved and each figure is the best of ``--repeats``: the
machine is shared, so compare the ratios of one run.

    python benchmarks/bench_env.py --episodes 2000 --repeats 5 --json
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.util
import json
import os
import platform
import time
from collections.abc import Sequence

from agents import make_agent
from agents.base import EpisodeContext, agent_seed
from arena.catalog import default_catalog
from arena.config import MarketConfig, get_preset
from arena.env import MarketEnv
from arena.game import Market
from arena.scenarios import Scenario, make_scenarios

TEXTARENA_ENV = "SimpleNegotiation-v0-raw"
TEXTARENA_ACTIONS = (
    "I could use some ore. [Offer: 3 Wheat, 2 Wood -> 1 Ore]",
    "Not enough for me. [Deny]",
    "Then take this instead. [Offer: 2 Sheep -> 1 Brick]",
    "Fair enough. [Accept]",
)


def record_with_agents(
    config: MarketConfig, scenarios: Sequence[Scenario], seller_spec: str, buyer_spec: str
) -> tuple[float, list[list[str]], list[object]]:
    """Play every scenario through the env with scripted agents: (seconds, messages, results)."""
    env = MarketEnv(config=config)
    agents = {"seller": make_agent(seller_spec, "seller")}
    for i in range(config.num_buyers):
        agents[f"buyer_{i + 1}"] = make_agent(buyer_spec, "buyer")
    scripts, results = [], []
    start = time.process_time()
    for scenario in scenarios:
        env.reset(options={"scenario": scenario})
        for slot, (name, agent) in enumerate(agents.items()):
            agent.reset(EpisodeContext(name, slot, config, scenario, agent_seed(scenario, slot)))
        for name in env.agent_iter():
            _obs, _reward, terminated, truncated, _info = env.last()
            env.step(None if terminated or truncated else agents[name].act(env.view(name)))
        result = env.result()
        scripts.append([turn.text for turn in result.turns])
        results.append(result)
    return time.process_time() - start, scripts, results


def replay_env(
    config: MarketConfig,
    scenarios: Sequence[Scenario],
    scripts: Sequence[Sequence[str]],
    text: bool = False,
    keep: list[Market] | None = None,
) -> float:
    """The PettingZoo loop, reading each acting agent's view (``text``: its rendered text)."""
    env = MarketEnv(config=config)
    start = time.process_time()
    for scenario, script in zip(scenarios, scripts, strict=True):
        env.reset(options={"scenario": scenario})
        messages = iter(script)
        for name in env.agent_iter():
            _obs, _reward, terminated, truncated, _info = env.last(observe=text)
            if terminated or truncated:
                env.step(None)
            else:
                if not text:
                    env.view(name)
                env.step(next(messages))
        if keep is not None:
            keep.append(env.market)  # type: ignore[arg-type]
    return time.process_time() - start


def replay_env_text(
    config: MarketConfig,
    scenarios: Sequence[Scenario],
    scripts: Sequence[Sequence[str]],
    keep: list[Market] | None = None,
) -> float:
    return replay_env(config, scenarios, scripts, text=True, keep=keep)


def replay_core(
    config: MarketConfig,
    scenarios: Sequence[Scenario],
    scripts: Sequence[Sequence[str]],
    keep: list[Market] | None = None,
) -> float:
    """The same messages into the game core, reading the acting seat's view, then the rewards."""
    start = time.process_time()
    for scenario, script in zip(scenarios, scripts, strict=True):
        market = Market(config, scenario)
        for text in script:
            market.view()
            market.step(text)
        market.settlement()
        if keep is not None:
            keep.append(market)
    return time.process_time() - start


def run_textarena(episodes: int) -> tuple[float, int]:
    """(seconds, steps) of ``episodes`` SimpleNegotiation games with the fixed action cycle."""
    import textarena

    env = textarena.make(TEXTARENA_ENV)
    steps = 0
    start = time.process_time()
    for episode in range(episodes):
        env.reset(num_players=2, seed=episode)
        done, turn = False, 0
        while not done:
            _player, _observation = env.get_observation()
            done, _info = env.step(TEXTARENA_ACTIONS[turn % len(TEXTARENA_ACTIONS)])
            turn += 1
        env.close()
        steps += turn
    return time.process_time() - start, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2000)
    parser.add_argument("--preset", default="in-distribution")
    parser.add_argument("--seller", default="scripted:prober")
    parser.add_argument("--buyer", default="scripted:time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="Best of this many runs.")
    parser.add_argument("--json", action="store_true", help="Print one JSON object.")
    args = parser.parse_args()
    if args.episodes < 1 or args.repeats < 1:
        parser.error("--episodes and --repeats must be at least 1")

    config = get_preset(args.preset)
    scenarios = make_scenarios(config, default_catalog(), args.seed, args.episodes)
    with_textarena = importlib.util.find_spec("textarena") is not None
    replays = {"core": replay_core, "env": replay_env, "env_text": replay_env_text}
    _, scripts, expected = record_with_agents(config, scenarios, args.seller, args.buyer)
    steps = sum(len(s) for s in scripts)
    for name, replay in replays.items():
        markets: list[Market] = []
        replay(config, scenarios, scripts, keep=markets)
        if [market.result() for market in markets] != expected:
            raise SystemExit(f"error: the {name} replay ended differently from the agents")
    del markets, expected
    best: dict[str, float] = {}
    textarena_steps = 0
    for _ in range(args.repeats):
        # Each run starts after a full collection, so none pays for another's garbage.
        gc.collect()
        timings = {"agents_env": record_with_agents(config, scenarios, args.seller, args.buyer)[0]}
        for name, replay in replays.items():
            gc.collect()
            timings[name] = replay(config, scenarios, scripts)
        if with_textarena:
            gc.collect()
            timings["textarena"], textarena_steps = run_textarena(args.episodes)
        for name, seconds in timings.items():
            best[name] = min(best.get(name, float("inf")), seconds)

    n = args.episodes
    out: dict[str, object] = {
        "preset": args.preset,
        "seller": args.seller,
        "buyer": args.buyer,
        "episodes": n,
        "steps": steps,
        "repeats": args.repeats,
        "env_eps_per_s": round(n / best["env"], 1),
        "env_steps_per_s": round(steps / best["env"], 1),
        "core_eps_per_s": round(n / best["core"], 1),
        "core_steps_per_s": round(steps / best["core"], 1),
        "env_core_time_ratio": round(best["env"] / best["core"], 3),
        "env_text_eps_per_s": round(n / best["env_text"], 1),
        "env_text_steps_per_s": round(steps / best["env_text"], 1),
        "env_text_core_time_ratio": round(best["env_text"] / best["core"], 3),
        "agents_env_eps_per_s": round(n / best["agents_env"], 1),
        "agents_env_steps_per_s": round(steps / best["agents_env"], 1),
    }
    if with_textarena:
        ta_steps_per_s = textarena_steps / best["textarena"]
        out |= {
            "textarena_env": TEXTARENA_ENV,
            "textarena_steps": textarena_steps,
            "textarena_eps_per_s": round(n / best["textarena"], 1),
            "textarena_steps_per_s": round(ta_steps_per_s, 1),
            "env_textarena_steps_ratio": round(steps / best["env"] / ta_steps_per_s, 3),
            "env_text_textarena_steps_ratio": round(steps / best["env_text"] / ta_steps_per_s, 3),
        }
    else:
        out["textarena"] = "not installed (pip install textarena to compare)"
    out |= {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "clock": "process CPU time, best of repeats",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(out))
        return
    for key, value in out.items():
        print(f"{key:>28}: {value}")


if __name__ == "__main__":
    main()
