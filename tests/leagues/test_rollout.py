"""The rollout's contract with TRL: one token stream per learner seat, masks that line up with
the learner's own tokens, groups that share their scenario, rewards that are the environment's."""

from __future__ import annotations

import math
import shutil

import pytest

from agents import make_agent
from agents.driver import Match, Replay, Transcript
from agents.engine import play_matches
from agents.finetune import chat_examples
from agents.steering import explore_moves
from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from leagues.generators import Sample
from leagues.group_rewards import learner_reward, zero_advantage_groups
from leagues.rollout import LEARNER, GroupRow, Policy, assign_episodes, play_rollouts, rollout_batch
from leagues.streams import ChatFormat
from leagues.trainer import load_chat_tokenizer

MARKET = get_preset("in-distribution")
BILATERAL = get_preset("bilateral")
CATALOG = load_catalog()


def seller_rows(count: int, group: int, buyer: str = "scripted:time") -> list[GroupRow]:
    rows = []
    for i in range(count):
        scenario = make_scenario(MARKET, CATALOG, 3, i)
        rows += [GroupRow(f"s{i}", scenario, LEARNER, (buyer,) * 3, "seller")] * group
    return rows


def every_seat_vs_prober(scenario, per_seat: int, **fields) -> list[GroupRow]:
    """The learner in every buyer seat against prober: a group of ``per_seat`` entries a seat."""
    return [
        GroupRow(f"s0/{seat}", scenario, "scripted:prober", (LEARNER,) * 3, seat, **fields)
        for seat in ("buyer_1", "buyer_2", "buyer_3")
        for _ in range(per_seat)
    ]


def policy(tokenizer, generate, max_episode_tokens: int = 16384) -> Policy:
    return Policy("hf:learner", ChatFormat(tokenizer), generate, 64, max_episode_tokens)


def test_a_folder_without_a_chat_template_is_a_clear_error(tiny_model_dir, tmp_path):
    bare = tmp_path / "no-template"
    shutil.copytree(tiny_model_dir, bare)
    (bare / "chat_template.jinja").unlink()
    with pytest.raises(ValueError, match=r"no-template has no chat template; a learner needs one"):
        load_chat_tokenizer(bare)


def test_a_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"learner model folder .* does not exist"):
        load_chat_tokenizer(tmp_path / "nowhere")


def test_masks_line_up_with_the_learners_own_tokens(tiny_tokenizer, text_policy):
    tok = tiny_tokenizer
    rollouts = play_rollouts(seller_rows(3, 1), MARKET, policy(tok, text_policy(tok)), seed=5)
    assert any(len(r.streams["seller"].replies) >= 3 for r in rollouts)
    for rollout in rollouts:
        stream = rollout.streams["seller"]
        n = len(stream.completion_ids)
        assert len(stream.logprobs) == len(stream.env_mask) == n
        trained = [t for t, m in zip(stream.completion_ids, stream.env_mask, strict=True) if m]
        replies = tok.decode(trained, skip_special_tokens=False)
        assert replies == "".join(reply + tok.eos_token for reply in stream.replies)
        assert all(
            lp == 0.0 for lp, m in zip(stream.logprobs, stream.env_mask, strict=True) if not m
        )


def test_the_stream_is_the_chat_template_rendering_of_the_agents_conversation(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    (rollout,) = play_rollouts(seller_rows(1, 1), MARKET, policy(tok, text_policy(tok)), seed=2)
    examples = chat_examples([rollout.record], MARKET, roles=("seller",))
    assert len(examples) == len(rollout.streams["seller"].replies) >= 2
    chat = [*examples[-1].messages, ("assistant", examples[-1].reply)]
    expected = tok.apply_chat_template([{"role": r, "content": c} for r, c in chat], tokenize=False)
    stream = rollout.streams["seller"]
    decoded = tok.decode(stream.prompt_ids + stream.completion_ids, skip_special_tokens=False)
    assert decoded + "\n" == expected


def test_group_members_share_the_scenario_and_its_opening_prompt(tiny_tokenizer, text_policy):
    tok = tiny_tokenizer
    rows = seller_rows(2, 3)
    out = rollout_batch(rows, MARKET, policy(tok, text_policy(tok)), seed=11)
    assert len(out["prompt_ids"]) == len(rows)
    assert out["prompt_ids"][0] == out["prompt_ids"][1] == out["prompt_ids"][2]
    assert out["prompt_ids"][3] == out["prompt_ids"][4] == out["prompt_ids"][5]
    assert out["prompt_ids"][0] != out["prompt_ids"][3]
    assert len(set(out["episode"])) == len(rows)


def test_rewards_equal_the_environments_rewards_for_the_learners_messages(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    rows = seller_rows(4, 2, buyer="scripted:tit-for-tat")
    out = rollout_batch(rows, MARKET, policy(tok, text_policy(tok)), seed=7)
    rewards = set()
    for row, turns, reward in zip(rows, out["learner_turns"], out["learner_reward"], strict=True):
        buyers = [make_agent(spec, "buyer") for spec in row.buyers]
        replay = play_matches(
            MARKET,
            [
                Match(
                    row.scenario,
                    Replay(Transcript.of_texts("seller", turns.split("\n\n"))),
                    tuple(buyers),
                )
            ],
        )[0][0]
        assert math.isclose(replay.result.seller_reward, reward)
        rewards.add(round(reward, 6))
    assert len(rewards) > 1


def test_a_buyer_learner_in_the_bilateral_market_streams_its_own_turns(tiny_tokenizer, text_policy):
    tok = tiny_tokenizer
    rows = []
    for i in range(4):
        scenario = make_scenario(BILATERAL, CATALOG, 1, i)
        rows.append(GroupRow(f"b{i}", scenario, "scripted:prober", (LEARNER,), "buyer_1"))
    rollouts = play_rollouts(rows, BILATERAL, policy(tok, text_policy(tok)), seed=3)
    for row, rollout in zip(rows, rollouts, strict=True):
        stream = rollout.streams["buyer_1"]
        assert "You are a buyer" in tok.decode(stream.prompt_ids)
        seller = make_agent(row.seller, "seller")
        replay = play_matches(
            BILATERAL,
            [
                Match(
                    row.scenario,
                    seller,
                    tuple([Replay(Transcript.of_texts("buyer_1", stream.replies))]),
                )
            ],
        )[0][0]
        assert replay.result.buyer_rewards == rollout.record.result.buyer_rewards
        assert rollout.reward("buyer_1") == rollout.record.result.buyer_rewards[0]


def test_self_play_entries_of_both_roles_share_their_episodes(tiny_tokenizer, text_policy):
    tok = tiny_tokenizer
    scenario = make_scenario(BILATERAL, CATALOG, 2, 0)
    seller = GroupRow("s0/seller", scenario, LEARNER, (LEARNER,), "seller")
    buyer = GroupRow("s0/buyer_1", scenario, LEARNER, (LEARNER,), "buyer_1")
    rows = [seller, seller, buyer, buyer]
    to_play, serving = assign_episodes(rows)
    assert len(to_play) == 2 and serving == [0, 1, 0, 1]
    out = rollout_batch(rows, BILATERAL, policy(tok, text_policy(tok)), seed=4)
    assert out["episode"][0] == out["episode"][2] != out["episode"][1] == out["episode"][3]
    assert "You are the seller" in tok.decode(out["prompt_ids"][0])
    assert "You are a buyer" in tok.decode(out["prompt_ids"][2])


def test_a_buyer_in_every_seat_trains_each_seat_on_its_own_stream_and_reward(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    rows = every_seat_vs_prober(make_scenario(MARKET, CATALOG, 5, 0), 2)
    to_play, serving = assign_episodes(rows)
    assert len(to_play) == 2 and serving == [0, 1, 0, 1, 0, 1]  # the seats share 2 episodes
    gen = policy(tok, text_policy(tok))
    rollouts = play_rollouts(to_play, MARKET, gen, seed=6)
    out = rollout_batch(rows, MARKET, gen, seed=6)
    for k, (row, index) in enumerate(zip(rows, serving, strict=True)):
        rollout = rollouts[index]
        i = int(row.trained.split("_")[1])
        assert out["learner_reward"][k] == rollout.record.result.buyer_rewards[i - 1]
        assert out["completion_ids"][k] == list(rollout.streams[row.trained].completion_ids)
        assert out["episode"][k] == out["episode"][serving.index(index)]
    # Each seat's stream is its own: three different conversations of one episode.
    assert len({tuple(out["prompt_ids"][k]) for k in (0, 2, 4)}) == 3


def test_side_credit_scores_every_seat_with_the_mean_of_the_buyer_seats_rewards(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    scenario = make_scenario(MARKET, CATALOG, 0, 0)

    def rows(credit: str) -> list[GroupRow]:
        return every_seat_vs_prober(scenario, 2, credit=credit)

    gen = policy(tok, text_policy(tok))
    own = rollout_batch(rows("seat"), MARKET, gen, seed=1)
    side = rollout_batch(rows("side"), MARKET, gen, seed=1)
    assert side["completion_ids"] == own["completion_ids"]  # the same episodes, scored apart
    for k in range(2):  # the two episodes: seats k, k + 2, k + 4
        mean = sum(own["learner_reward"][k::2]) / 3
        assert side["learner_reward"][k::2] == pytest.approx([mean] * 3)
    # In one of the episodes the prober closes with one buyer: the seats' own rewards differ.
    assert len(set(own["learner_reward"])) > 1
    # Beside scripted buyers the side's reward counts theirs too: in this pair of episodes a
    # time buyer's deal outweighs the learner's own, and side credit orders them the other way.
    mixed = GroupRow("s0", scenario, "scripted:prober", (LEARNER, "scripted:time", "scripted:time"),
                     "buyer_1", "side")  # fmt: skip
    out = rollout_batch([mixed] * 2, MARKET, gen, seed=2)
    rollouts = play_rollouts(assign_episodes([mixed] * 2)[0], MARKET, gen, seed=2)
    rewards = [r.record.result.buyer_rewards for r in rollouts]
    assert out["learner_reward"] == pytest.approx([sum(r) / 3 for r in rewards])
    assert rewards[0][0] < rewards[1][0] and out["learner_reward"][0] > out["learner_reward"][1]
    with pytest.raises(ValueError, match="credit 'side' is not seat, or side on a buyer seat"):
        GroupRow("s0", scenario, LEARNER, ("scripted:time",) * 3, "seller", "side")


def replies_of(tokenizer, stream) -> list[list[tuple[int, int]]]:
    """A stream's replies, each as (token, trained mark) pairs: from where its turn's context
    ended to its end-of-turn token."""
    pairs = list(zip(stream.completion_ids, stream.env_mask, strict=True))
    out = []
    for end in stream.ends:
        start = end - len(stream.prompt_ids)
        stop = stream.completion_ids.index(tokenizer.eos_token_id, start)
        out.append(pairs[start : stop + 1])
    return out


def test_a_groups_episodes_share_their_first_replies_untrained_and_branch_after_them(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    scenario = make_scenario(MARKET, CATALOG, 5, 0)
    seats = [f"buyer_{i}" for i in (1, 2, 3)]

    def rows(shared: int) -> list[GroupRow]:
        return every_seat_vs_prober(scenario, 4, shared=shared)

    gen = policy(tok, text_policy(tok))
    plain = play_rollouts(assign_episodes(rows(0))[0], MARKET, gen, seed=3)
    tree = play_rollouts(assign_episodes(rows(4))[0], MARKET, gen, seed=3)

    def marked(rollout, trained: int) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """The episode's replies whose tokens all carry ``trained``, by (seat, reply number)."""
        out = {}
        for seat in seats:
            for k, reply in enumerate(replies_of(tok, rollout.streams[seat])):
                if {mark for _, mark in reply} == {trained}:
                    out[(seat, k)] = reply
        return out

    # Prober anchors on each buyer once (the regulated openings), then works one: the first four
    # replies, every seat's opening and one second reply, are the group's, trained on by none.
    shared = marked(tree[0], 0)
    assert len(shared) == 4 and {k for _, k in shared} == {0, 1}
    assert all(marked(rollout, 0) == shared for rollout in tree)
    later = [marked(rollout, 1) for rollout in tree]
    assert all(later) and not any(set(r) & set(shared) for r in later)  # the rest is trained
    assert len({tuple(map(tuple, r.values())) for r in later}) > 1  # and branches
    # Without sharing every reply is trained, and the second replies differ between episodes.
    assert all(not marked(rollout, 0) for rollout in plain)
    seconds = {tuple(replies_of(tok, r.streams[s])[1]) for r in plain for s in seats if
               len(replies_of(tok, r.streams[s])) > 1}  # fmt: skip
    assert len(seconds) > 1
    # The batcher samples a shared reply once per group and round: fewer prompts generated.
    prompts = []

    def counting(contexts, seed):
        prompts.append(len(contexts))
        return text_policy(tok)(contexts, seed)

    play_rollouts(assign_episodes(rows(4))[0], MARKET, policy(tok, counting), seed=3)
    assert prompts[:4] == [1, 1, 1, 1]  # the four episodes' first four replies, one prompt each
    assert prompts[4] == 4  # then each its own
    # Another rollout seed shares other replies.
    again = play_rollouts(assign_episodes(rows(4))[0], MARKET, gen, seed=4)
    assert marked(again[0], 0) != shared
    with pytest.raises(ValueError, match="shared replies must be >= 0, got -1"):
        GroupRow("s0", scenario, LEARNER, ("scripted:time",) * 3, "seller", shared=-1)


def test_an_episode_over_max_episode_tokens_errors_and_carries_no_reward(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    out = rollout_batch(seller_rows(1, 2), MARKET, policy(tok, text_policy(tok), 800), seed=1)
    assert out["learner_reward"] == [None, None]
    for completion, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(completion) == 1 and mask == [0]


def quitting_on(tokenizer, titles: set[str], text_policy):
    """A seller policy that quits at once (reward 0: a flat group) in episodes of the products
    named in ``titles`` ("*": every product) and plays ``text_policy``'s random moves otherwise."""
    text = "Thought: No.\nTarget: 1\nTalk: Bye.\nAction: [QUIT]"
    quit_ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    moves = text_policy(tokenizer)

    def generate(contexts, seed):
        out = moves(contexts, seed)
        for k, stream in enumerate(contexts):
            text = tokenizer.decode(stream.ids)
            if "*" in titles or any(title in text for title in titles):
                out[k] = Sample(quit_ids, [0.0] * len(quit_ids))
        return out

    return generate


def test_dynamic_sampling_replays_only_the_flat_groups_on_fresh_scenarios(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    rows = seller_rows(2, 4)
    flat_title = rows[0].scenario.products[0].title
    learner = policy(tok, quitting_on(tok, {flat_title}, text_policy))
    spares = [make_scenario(MARKET, CATALOG, 3, 100 + k) for k in range(2)]
    plain = rollout_batch(rows, MARKET, learner, seed=5)
    keys = [row.key for row in rows]
    assert zero_advantage_groups(keys, plain["learner_reward"]) == 1  # s0 quits: all rewards 0
    out = rollout_batch(rows, MARKET, learner, seed=5, spares=spares, rounds=1)
    assert out["resampled"] == [True] * 4 + [False] * 4
    assert zero_advantage_groups(keys, out["learner_reward"]) == 0
    # The flat group is played again, all four entries, on the first spare scenario ...
    for i in range(4):
        assert spares[0].products[0].title in tok.decode(out["prompt_ids"][i])
        assert flat_title not in tok.decode(out["prompt_ids"][i])
    assert out["prompt_ids"][0] == out["prompt_ids"][3]
    # ... and the group with a spread keeps its episodes exactly.
    for column in ("prompt_ids", "completion_ids", "learner_reward", "episode"):
        assert out[column][4:] == plain[column][4:]
    again = rollout_batch(rows, MARKET, learner, seed=5, spares=spares, rounds=1)
    assert again == out


def test_dynamic_sampling_stops_at_its_rounds_and_spares_and_counts_what_stays_flat(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    rows = seller_rows(2, 2)
    learner = policy(tok, quitting_on(tok, {"*"}, text_policy))
    spares = [make_scenario(MARKET, CATALOG, 3, 100 + k) for k in range(3)]
    out = rollout_batch(rows, MARKET, learner, seed=5, spares=spares, rounds=2)
    # Round 1 replays both groups (two spares), round 2 the first one (the one spare left).
    titles = [s.products[0].title for s in spares]
    assert titles[2] in tok.decode(out["prompt_ids"][0])
    assert titles[1] in tok.decode(out["prompt_ids"][2])
    assert out["resampled"] == [True] * 4
    logged: dict[str, float] = {}
    learner_reward(
        prompts=[row.key for row in rows],
        completions=[""] * 4,
        learner_reward=out["learner_reward"],
        episode=out["episode"],
        log_metric=logged.__setitem__,
        resampled=out["resampled"],
    )
    assert logged["resampled_groups"] == 2.0 and logged["zero_advantage_groups"] == 2.0
    off = rollout_batch(rows, MARKET, learner, seed=5, spares=spares, rounds=0)
    assert off["resampled"] == [False] * 4 and titles[0] not in tok.decode(off["prompt_ids"][0])


def test_each_episode_of_an_exploring_group_makes_its_own_move_at_the_groups_first_free_bid(
    tiny_tokenizer, text_policy
):
    tok = tiny_tokenizer
    scenario = make_scenario(MARKET, CATALOG, 5, 0)
    answer, held = text_policy(tok), []

    def exploring(contexts, seed):
        """The text policy, but a held reply makes its exploring start's move."""
        out = answer(contexts, seed)
        for i, context in enumerate(contexts):
            if context.steer is not None and context.steer.explore:
                held.append(context.steer)
                move = context.steer.explore  # a ladder price, or a share digit
                price = dict(context.steer.shares).get(move, move)
                action = "[DEAL]" if move == "DEAL" else f"[BUY] ${price}"
                text = f"Thought: Explored.\nTalk: Hm.\nAction: {action}"
                ids = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
                out[i] = Sample(ids, [0.0] * len(ids))
        return out

    laddered = Policy("hf:learner?steer=ladder&ladder=9", ChatFormat(tok), exploring, 64, 16384)
    shared_digit = Policy("hf:learner?steer=share&ladder=9", ChatFormat(tok), exploring, 64, 16384)
    runs = ((laddered, 0, "episode"), (laddered, 4, "episode"), (laddered, 0, "move"),
            (shared_digit, 0, "episode"), (shared_digit, 4, "move"))  # fmt: skip
    for policy, shared, explore in runs:
        held.clear()
        rows = every_seat_vs_prober(scenario, 5, shared=shared, explore=explore)
        rollouts = play_rollouts(assign_episodes(rows)[0], MARKET, policy, seed=3)
        places = set()
        for rollout in rollouts:
            mine = [(seat, k) for seat, stream in rollout.streams.items()
                    for k, text in enumerate(stream.replies) if "Explored." in text]  # fmt: skip
            assert len(mine) == 1  # one exploring start an episode
            seat, k = mine[0]
            assert k >= 1  # not the regulated opening
            marks = {(s, j): {mark for _, mark in reply} for s in rollout.streams
                     for j, reply in enumerate(replies_of(tok, rollout.streams[s]))}  # fmt: skip
            assert marks.pop((seat, k)) == {1}  # after the branch: trained
            # Under "move" the held reply is the only trained one; under "episode" the policy's
            # own replies after the branch are trained too.
            assert ({1} in marks.values()) == (explore == "episode")
            assert rollout.record.result.violation is None  # a move the market takes
            places.add(mine[0])
        assert len(places) == 1  # the same reply of the same seat in every episode
        moves = [steer.explore for steer in held]
        assert len(moves) == len(set(moves)) == 5  # five episodes, five moves
        assert set(moves) <= set(explore_moves(held[0]))
        assert bool(held[0].shares) == (policy is shared_digit)  # share digits, or ladder prices
    held.clear()
    play_rollouts(assign_episodes(every_seat_vs_prober(scenario, 5))[0], MARKET, laddered, 3)
    assert held == []  # a group without exploring starts holds no reply
    with pytest.raises(ValueError, match="explore must be one of none, episode, move, got True"):
        every_seat_vs_prober(scenario, 1, explore=True)
