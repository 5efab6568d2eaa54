"""League configuration: TOML parsing, defaults from the paper, errors that name the key."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agents.specs import parse_spec
from leagues.config import LeagueConfig
from leagues.learner_config import LearnerConfig
from leagues.models import base_folder, base_settings, check_starts, warm_start_records
from leagues.plan import learner_params
from leagues.side_train import SIDE_LEAGUE_KEYS
from leagues.train_config import GRPO_DEFAULTS, LEAGUE_SETS, TrainConfig
from tournaments.config import read_toml_table

ISSUE_CONFIG = """
[league]
name = "tiny-demo"
preset = "in-distribution"
generations = 2
seed = 0
sellers = ["scripted:satisficer", "scripted:prober"]
buyers = ["scripted:time", "scripted:tit-for-tat"]
[league.learner]
model = "path/to/a/local/causal-lm"   # any local transformers model folder
side = "seller"                       # seller | buyer | both
steps_per_generation = 4
opponents = "pfsp"                    # uniform | latest | pfsp | nash
eval_episodes = 64
"""

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tiny-league.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "league.toml"
    path.write_text(text)
    return path


def test_the_config_of_the_issue_parses_with_its_values(tmp_path):
    config = LeagueConfig.from_toml(write(tmp_path, ISSUE_CONFIG))
    assert config.name == "tiny-demo"
    assert config.sellers == ("scripted:satisficer", "scripted:prober")
    assert config.learner.side == "seller"
    assert config.learner.steps_per_generation == 4
    assert config.learner.opponents == "pfsp"
    assert config.learner.eval_episodes == 64
    assert config.market_config().num_buyers == 3


def test_the_example_league_parses_and_builds_the_tiny_model():
    config = LeagueConfig.from_toml(EXAMPLE)
    assert config.learner.model == "tiny"
    train = config.learner.train
    assert (train.num_generations, train.episodes_per_step, train.scenarios_per_step) == (4, 16, 4)
    assert train.max_completion_length == 64 and train.grpo["learning_rate"] == 5e-4


def test_train_defaults_follow_table_5():
    train = TrainConfig()
    assert train.grpo["loss_type"] == "cispo"
    assert train.grpo["learning_rate"] == 3e-5
    assert train.grpo["beta"] == 0.0
    assert (train.episodes_per_step, train.num_generations) == (64, 8)
    assert train.grpo["epsilon_high"] == 6.0  # the paper's CISPO clip high; unset caps at 0.2
    assert train.temperature == 1.0  # Table 6: seller temperature in training
    bounds = (train.grpo["vllm_importance_sampling_clip_min"],
              train.grpo["vllm_importance_sampling_clip_max"])  # fmt: skip
    assert bounds == (0.8, 6.0)  # the paper's clip pair, on the sampler ratio with vLLM


def test_the_project_defaults_are_what_trl_builds_and_where_they_differ_from_trls():
    from trl import GRPOConfig

    args = GRPOConfig(output_dir="x", use_cpu=True, report_to="none", **GRPO_DEFAULTS)
    assert args.learning_rate == 3e-5 and args.loss_type == "cispo"
    assert args.generation_batch_size == 64  # 8 x 8: Table 5's 64 episodes, 8 scenarios
    trl = GRPOConfig(output_dir="x", use_cpu=True, report_to="none")
    assert (trl.learning_rate, trl.loss_type, trl.max_completion_length) != (3e-5, "cispo", 256)


@pytest.mark.parametrize(
    ("table", "line", "message"),
    [
        ("[league]", "colour = 1", r"league: unknown key 'colour'; known keys: name"),
        ("[league.learner]", "speed = 2", r"league\.learner: unknown key 'speed'"),
        ("[league.learner.train]", "lr = 0.1", r"league\.learner\.train: unknown key 'lr'"),
        ("[league.learner.train]", "group_size = 4", r"'group_size': neither.*now num_generat"),
        ("[league.learner.train]", "top_k = 'x'", r"train\.top_k: expected an integer, got 'x'"),
        ("[league.learner.train.lora]", "rank = 8", r"league\.learner\.train\.lora: unknown key"),
        ("[league.learner.train]", "use_vllm = 'tru'", r"train\.use_vllm: expected true or false"),
        ("[league.market]", "stock = 'x'", r"league\.market\.stock: expected an integer, got 'x'"),
    ],
)
def test_unknown_keys_are_errors_that_name_them(tmp_path, table, line, message):
    text = ISSUE_CONFIG + "\n[league.learner.train]\n[league.learner.train.lora]\n[league.market]\n"
    text = text.replace(f"{table}\n", f"{table}\n{line}\n", 1)
    with pytest.raises(ValueError, match=message):
        LeagueConfig.from_toml(write(tmp_path, text))


def test_bad_values_name_the_field_and_the_fix():
    with pytest.raises(ValueError, match="side must be one of seller, buyer, both, self-play"):
        LearnerConfig(model="tiny", side="referee")
    with pytest.raises(ValueError, match="opponents must be one of uniform, latest, pfsp, nash"):
        LearnerConfig(model="tiny", opponents="best")
    with pytest.raises(ValueError, match=r"self-play.*must be even"):
        LearnerConfig(model="tiny", side="self-play",
                      train=TrainConfig(grpo={"gradient_accumulation_steps": 1}))  # fmt: skip


def test_overlap_evaluation_refuses_placements_where_it_would_not_run_beside_training(tmp_path):
    overlap = ISSUE_CONFIG.replace(
        "[league.learner]", "overlap_evaluation = true\n[league.learner]"
    )
    assert LeagueConfig.from_toml(write(tmp_path, overlap)).overlap_evaluation is True
    with pytest.raises(ValueError, match="overlap_evaluation: expected true or false, got 1"):
        LeagueConfig.from_toml(write(tmp_path, overlap.replace("= true", "= 1")))
    ray = overlap.replace("[league.learner]", 'executor = "ray"\n[league.learner]')
    with pytest.raises(ValueError, match="executor = 'ray' the actors already play beside"):
        LeagueConfig.from_toml(write(tmp_path, ray))
    vllm = overlap + "[league.learner.train]\nuse_vllm = true\n"
    with pytest.raises(ValueError, match="second vLLM engine beside the trainer"):
        LeagueConfig.from_toml(write(tmp_path, vllm))


def test_a_bad_agent_spec_in_a_population_names_the_list(tmp_path):
    text = ISSUE_CONFIG.replace('"scripted:prober"', '"scripted:nobody"')
    with pytest.raises(ValueError, match=r"league\.sellers\[1\]: .*nobody"):
        LeagueConfig.from_toml(write(tmp_path, text))


def test_both_sides_alternate_starting_with_the_seller():
    learner = LearnerConfig(model="tiny", side="both")
    assert [learner.side_of(g) for g in (1, 2, 3, 4)] == ["seller", "buyer", "seller", "buyer"]
    assert learner.roles == ("seller", "buyer")


def test_a_relative_model_folder_next_to_the_toml_is_used_as_is(tmp_path):
    model = tmp_path / "models" / "mine"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    text = ISSUE_CONFIG.replace("path/to/a/local/causal-lm", "models/mine")
    config = LeagueConfig.from_toml(write(tmp_path, text))
    assert config.learner.model == str(model)


def test_a_relative_model_path_leaving_the_toml_folder_must_name_a_model(tmp_path):
    """Otherwise it would silently build a tiny model at that path (the hand-off's base)."""
    text = ISSUE_CONFIG.replace("path/to/a/local/causal-lm", "../runs/bases/abc/warm-start")
    with pytest.raises(ValueError, match=r"league\.learner\.model: no model folder at .*abc"):
        LeagueConfig.from_toml(write(tmp_path, text))


CHECKPOINT = "hf:runs/bases/abc/warm-start?lora=runs/buyer-seed0/gen-003-buyer/adapter"


@pytest.mark.parametrize(
    ("side", "start", "extra", "message"),
    [
        ("seller", {"buyer": CHECKPOINT}, {}, r"start\.buyer: this learner trains no buyer"),
        ("self-play", {"seller": CHECKPOINT}, {}, r"start\.seller: this learner trains no"),
        ("buyer", {"buyer": "scripted:time"}, {}, r"start\.buyer: a start is a model checkpoint"),
        ("buyer", {"buyer": CHECKPOINT}, {"warm_start": "scripted:time"},
         r"warm_start: every side starts from"),
    ],
)  # fmt: skip
def test_a_start_names_a_side_the_learner_trains_with_a_model_checkpoint(
    side, start, extra, message
):
    with pytest.raises(ValueError, match=message):
        LearnerConfig(model="tiny", side=side, start=start, **extra)


@pytest.mark.parametrize("name", ["start", "side_train"])
def test_a_per_side_setting_built_in_python_must_be_keyed_by_side(name):
    """A bare spec or settings table (not keyed by side) is refused with the form to use."""
    with pytest.raises(ValueError, match=rf"learner\.{name} must be a table keyed by side"):
        LearnerConfig(model="tiny", side="both", **{name: CHECKPOINT})


def test_a_start_checkpoint_that_is_not_there_fails_before_any_work_naming_the_key(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    spec = f"hf:{model}?lora={tmp_path / 'gone'}"
    learner = LearnerConfig(model="tiny", side="both", start={"buyer": spec})
    config = LeagueConfig(name="s", sellers=("scripted:prober",), buyers=("scripted:time",),
                          learner=learner)  # fmt: skip
    with pytest.raises(FileNotFoundError, match=r"start\.buyer: no LoRA adapter at .*gone"):
        check_starts(config)
    spec = f"hf:{tmp_path / 'nothing'}"
    learner = LearnerConfig(model="tiny", side="both", start={"seller": spec})
    config = dataclasses.replace(config, learner=learner)
    with pytest.raises(FileNotFoundError, match=r"start\.seller: .*nothing does not exist"):
        check_starts(config)
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "adapter_config.json").write_text("{}")
    config = dataclasses.replace(
        config,
        learner=LearnerConfig(
            model="tiny", side="buyer", start={"buyer": f"hf:{model}?lora={tmp_path / 'gone'}"}
        ),
    )
    assert check_starts(config) == {"buyer": model}


def test_the_config_hash_is_stable_and_changes_with_the_settings(tmp_path):
    one = LeagueConfig.from_toml(write(tmp_path, ISSUE_CONFIG))
    two = LeagueConfig.from_toml(write(tmp_path, ISSUE_CONFIG.replace("seed = 0", "seed = 1")))
    assert one.config_hash() != two.config_hash()
    assert one.config_hash() == LeagueConfig.from_toml(write(tmp_path, ISSUE_CONFIG)).config_hash()


def test_the_example_leagues_read_and_the_vllm_one_samples_with_vllm_on_cpu():
    examples = Path(__file__).resolve().parents[2] / "examples"
    leagues = {}
    for path in sorted(examples.glob("*.toml")):
        needs_runs = '"../runs/' in path.read_text()  # another league's base: tested below
        if "[league]" in path.read_text() and not needs_runs:
            leagues[path.stem] = LeagueConfig.from_toml(path)
    assert {"tiny-league", "vllm-league", "learning-league", "coevolution-league"} <= set(leagues)
    train = leagues["vllm-league"].learner.train
    assert train.use_vllm and train.vllm_mode == "colocate" and train.device != "cuda"
    coevolution = leagues["coevolution-league"].learner
    assert [coevolution.side_of(g) for g in (1, 2, 3, 4)] == ["seller", "buyer", "seller", "buyer"]
    assert coevolution.warm_start_roles == ("seller", "buyer")


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CHAINED = sorted(p.name for p in EXAMPLES.glob("*league.toml") if '"../runs/' in p.read_text())


def changed_keys(before: dict, after: dict) -> set[str]:
    """The keys two TOML tables disagree on (present in one only, or with another value)."""
    return {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}


@pytest.mark.parametrize("example", CHAINED)
def test_an_example_starting_from_other_leagues_reads_once_the_folders_it_names_exist(
    tmp_path, monkeypatch, example
):
    """The examples that start from other leagues' checkpoints (the hand-off's, c20-c23) are
    read as configs, every key and cross-field check included, in a copy of the repository
    layout where the base models and adapters they name exist: a misspelt key or a setting the
    config refuses fails here, not an hour into the chain of leagues before it. Agent specs are
    relative to the repository root, the folder the example's commands run from."""
    monkeypatch.chdir(tmp_path)
    text = (EXAMPLES / example).read_text()
    (tmp_path / "examples").mkdir()
    path = tmp_path / "examples" / example
    path.write_text(text)
    made = {
        "config.json": r"runs/bases/\w+/warm-start",
        "adapter_config.json": r"runs/[\w-]+/gen-\d+-\w+/adapter",
    }
    for marker, pattern in made.items():
        for folder in set(re.findall(pattern, text)):
            (tmp_path / folder).mkdir(parents=True)
            (tmp_path / folder / marker).write_text("{}")
    config = LeagueConfig.from_toml(path)
    league = read_toml_table(path, "league")
    learner = config.learner
    assert Path(learner.model) == (tmp_path / league["learner"]["model"][3:]).resolve()
    assert dict(learner.start) == league["learner"].get("start", {})
    for side, settings in league["learner"].get("side_train", {}).items():
        for key, value in settings.items():
            if key in SIDE_LEAGUE_KEYS:
                assert learner.side_setting(side, key) == value, (side, key)
            else:
                assert learner.train_for(side).grpo[key] == value, (side, key)


def test_the_chained_examples_include_every_coevolution_from_checkpoints():
    """The test above finds the chained examples by their `../runs/` model path: every recipe
    that starts from checkpoints must be among them, or it would go unread."""
    assert {
        "handoff-league.toml",
        "handoff-coevolution-league.toml",
        "handoff-coevolution-nash-league.toml",
        "handoff-coevolution-explore-league.toml",
        "handoff-coevolution-models-league.toml",
        "handoff-coevolution-warm-buyer-league.toml",
    } <= set(CHAINED)


def test_the_handoff_league_names_the_checkpoints_the_two_recipes_train():
    """Its opponents are the buyer and learning leagues' last checkpoints, by the paths those
    leagues write under runs/: the bases' folders must follow the recipes' settings. The seller
    it trains is the learning league's recipe from the learning league's own base (so the two
    sellers differ only in the buyers they trained against): the warm start's settings give
    way to that base's folder."""
    handoff = read_toml_table(EXAMPLES / "handoff-league.toml", "league")
    learning = LeagueConfig.from_toml(EXAMPLES / "learning-league.toml")
    buyer = LeagueConfig.from_toml(EXAMPLES / "handoff-buyer-league.toml")
    recipe = read_toml_table(EXAMPLES / "learning-league.toml", "league")["learner"]
    base = {"model", "tiny", "base_seed"} | {k for k in recipe if k.startswith("warm_start")}
    assert {k: v for k, v in handoff["learner"].items() if k != "model"} == {
        k: v for k, v in recipe.items() if k not in base
    }
    assert handoff["learner"]["model"] == str(
        Path("..") / "runs" / base_folder(learning, Path("runs")) / "warm-start"
    )
    for specs, recipe, side in ((handoff["sellers"], learning, "seller"),
                                (handoff["buyers"], buyer, "buyer")):  # fmt: skip
        trained = [parse_spec(s) for s in specs if s.startswith("hf:")]
        assert len(trained) == 2
        for seed, spec in enumerate(trained):
            assert spec.name == str(Path("runs") / base_folder(recipe, Path("runs")) / "warm-start")
            lora = f"runs/{recipe.name}-seed{seed}/gen-{recipe.generations:03d}-{side}/adapter"
            assert spec.params["lora"] == lora
    # Before those leagues have run, reading it says which folder is missing.
    with pytest.raises(ValueError, match=r"learner\.model: no model folder at .*runs/bases/"):
        LeagueConfig.from_toml(EXAMPLES / "handoff-league.toml")


def test_the_handoff_coevolution_is_the_coevolution_recipe_from_the_handoffs_checkpoints():
    """examples/handoff-coevolution-league.toml is a copy of c15's co-evolution recipe
    (examples/coevolution-protocol-league.toml; TOML has no include) whose lineages start from
    the hand-off's last seller and the hand-off buyer league's last buyer: a change to the
    recipe that is not carried over fails here."""
    recipe = read_toml_table(EXAMPLES / "coevolution-protocol-league.toml", "league")
    chained = read_toml_table(EXAMPLES / "handoff-coevolution-league.toml", "league")
    differing = changed_keys(recipe, chained)
    assert differing == {"name", "learner"}
    base = {"model", "tiny", "base_seed"} | {k for k in recipe["learner"] if "warm_start" in k}
    assert {k: v for k, v in chained["learner"].items() if k not in ("model", "start")} == {
        k: v for k, v in recipe["learner"].items() if k not in base
    }
    learning = LeagueConfig.from_toml(EXAMPLES / "learning-league.toml")  # the hand-off's base
    buyer = LeagueConfig.from_toml(EXAMPLES / "handoff-buyer-league.toml")
    for side, league, recipe_base in (
        ("seller", "handoff", learning),
        ("buyer", "handoff-buyer", buyer),
    ):
        spec = parse_spec(chained["learner"]["start"][side])
        assert spec.name == str(
            Path("runs") / base_folder(recipe_base, Path("runs")) / "warm-start"
        )
        assert spec.params["lora"] == f"runs/{league}-seed0/gen-003-{side}/adapter"
    assert chained["learner"]["model"] == str(
        Path("..") / parse_spec(chained["learner"]["start"]["seller"]).name
    )


def test_the_nash_coevolution_is_the_handoff_coevolution_with_c17_to_c20s_changes_only():
    """examples/handoff-coevolution-nash-league.toml is handoff-coevolution-league.toml with the
    changes docs/training.md measures one by one (c17-c20) and nothing else: the buyer's rate
    halved, the hand-off buyers as fixed entries, the seller's 15 steps against the Nash mixture,
    its start the learning league's seller, 96 held-out episodes."""
    chained = read_toml_table(EXAMPLES / "handoff-coevolution-league.toml", "league")
    nash = read_toml_table(EXAMPLES / "handoff-coevolution-nash-league.toml", "league")
    differing = changed_keys(chained, nash)
    assert differing == {"name", "buyers", "learner"}
    assert nash["buyers"][:2] == chained["buyers"]
    assert (
        nash["buyers"][2:]
        == read_toml_table(EXAMPLES / "handoff-continued-league.toml", "league")["buyers"]
    )  # the two hand-off buyers
    learner, before = nash["learner"], chained["learner"]
    changed = changed_keys(learner, before)
    assert changed == {"eval_episodes", "start", "side_train"}
    assert (before["eval_episodes"], learner["eval_episodes"]) == (48, 96)
    assert learner["start"] == {
        **before["start"],
        "seller": before["start"]["seller"].replace("handoff-seed0", "learning-seed0"),
    }
    side, was = learner["side_train"], before["side_train"]
    assert side["buyer"] == {**was["buyer"], "learning_rate": was["buyer"]["learning_rate"] / 2}
    assert side["seller"] == {**was["seller"], "steps_per_generation": 15, "opponents": "nash"}


@pytest.mark.parametrize(
    ("example", "seller"),
    [
        ("handoff-coevolution-explore-league.toml", {"opponents_explore": 0.5}),  # c21
        ("handoff-coevolution-models-league.toml",
         {"opponents": "uniform", "opponents_from": "models"}),  # c22
    ],
)  # fmt: skip
def test_a_later_coevolution_is_the_nash_coevolution_with_its_seller_settings_only(example, seller):
    """c21 and c22 are c20's file (examples/handoff-coevolution-nash-league.toml) with the
    seller's opponent settings docs/training.md measures them by, and nothing else."""
    nash = read_toml_table(EXAMPLES / "handoff-coevolution-nash-league.toml", "league")
    later = read_toml_table(EXAMPLES / example, "league")
    differing = changed_keys(nash, later)
    assert differing == {"name", "learner"}
    before, learner = nash["learner"], later["learner"]
    changed = changed_keys(learner, before)
    assert changed == {"side_train"}
    assert learner["side_train"] == {
        **before["side_train"],
        "seller": {**before["side_train"]["seller"], **seller},
    }


def test_the_warm_buyer_coevolution_is_c22_with_the_buyers_temperature_only():
    """c23 (examples/handoff-coevolution-warm-buyer-league.toml) is c22's file with the buyer
    sampling at 1.0 while it trains, and nothing else."""
    models = read_toml_table(EXAMPLES / "handoff-coevolution-models-league.toml", "league")
    warm = read_toml_table(EXAMPLES / "handoff-coevolution-warm-buyer-league.toml", "league")
    differing = changed_keys(models, warm)
    assert differing == {"name", "learner"}
    before, learner = models["learner"], warm["learner"]
    changed = changed_keys(learner, before)
    assert changed == {"side_train"}
    side, was = learner["side_train"], before["side_train"]
    assert side == {**was, "buyer": {**was["buyer"], "temperature": 1.0}}
    assert "temperature" not in was["buyer"] and before["train"]["temperature"] == 0.7


def test_the_share_coevolution_is_the_coevolution_with_the_buyer_recipe_of_c24_to_c45():
    """examples/coevolution-share-league.toml (c45) is c15's co-evolution league with the buyer's
    aids, credit, reward and opponents that docs/training.md measured one by one, and its move
    one digit (steer and warm-start Thought "share"); the sellers' settings and the step are
    unchanged."""
    plain = read_toml_table(EXAMPLES / "coevolution-protocol-league.toml", "league")
    share = read_toml_table(EXAMPLES / "coevolution-share-league.toml", "league")
    assert changed_keys(plain, share) == {"name", "seeds", "buyers", "learner"}
    before, learner = plain["learner"], share["learner"]
    assert changed_keys(before, learner) == {
        "steer", "ladder", "buyer_credit", "list_hint", "round_hint", "warm_start_talk",
        "train_market", "side_train",
    }  # fmt: skip
    assert (learner["steer"], learner["warm_start_talk"], learner["ladder"]) == ("share",) * 2 + (
        9,
    )
    assert learner["train_market"]["buyer_reward"] == "reservation_surplus"
    assert learner["side_train"]["seller"] == before["side_train"]["seller"]
    assert learner["side_train"]["buyer"]["opponents_from"] == "scripted"
    config = LeagueConfig.from_toml(EXAMPLES / "coevolution-share-league.toml")
    assert config.seeds == (0, 1, 2) and config.learner.shared_replies_for("buyer") == (0,)


def test_the_coevolution_league_is_c15_with_c44s_buyer_recipe_and_four_times_the_evaluation():
    """examples/coevolution-league.toml (c44, evaluated as c54) is c15's file with the buyer's
    aids, credit, reward, opponents, step and tree rollouts that docs/training.md measured one by
    one, and 192 held-out episodes a pair: the sellers' settings, the warm start and the seeds are
    unchanged, so its checkpoints are c44's and only the evaluation grew (on two worker
    processes, and beside the next generation's training, which play the same episodes:
    tests/leagues/test_league.py)."""
    plain = read_toml_table(EXAMPLES / "coevolution-protocol-league.toml", "league")
    recipe = read_toml_table(EXAMPLES / "coevolution-league.toml", "league")
    assert changed_keys(plain, recipe) == {
        "name", "buyers", "workers", "overlap_evaluation", "learner"
    }  # fmt: skip
    assert (plain.get("workers", 1), recipe["workers"]) == (1, 2)
    assert "overlap_evaluation" not in plain and recipe["overlap_evaluation"] is True
    before, learner = plain["learner"], recipe["learner"]
    assert changed_keys(before, learner) == {
        "steer", "ladder", "buyer_credit", "list_hint", "round_hint", "eval_episodes",
        "eval_batch_size", "train_market", "side_train",
    }  # fmt: skip
    assert (learner["steer"], learner["ladder"], learner["buyer_credit"]) == ("ladder", 9, "side")
    assert learner["eval_episodes"] == 4 * before["eval_episodes"] == 192
    assert learner["train_market"] == {
        **before["train_market"],
        "buyer_reward": "reservation_surplus",
    }
    assert learner["side_train"]["seller"] == before["side_train"]["seller"]
    buyer = learner["side_train"]["buyer"]
    assert (buyer["opponents_from"], buyer["learning_rate"]) == ("scripted", 1e-3)
    assert buyer["steps_per_generation"] == before["side_train"]["buyer"]["steps_per_generation"]
    assert [parse_spec(b).params["ladder"] for b in recipe["buyers"]] == ["9", "9"]
    config = LeagueConfig.from_toml(EXAMPLES / "coevolution-league.toml")
    assert config.name == "coevolution" and config.seeds == (0, 1)
    assert config.learner.shared_replies_for("buyer") == (0, 4)
    assert config.learner.shared_replies_for("seller") == (0,)


def test_the_random_base_coevolution_is_the_coevolution_with_a_random_teacher_and_share_buyer():
    """examples/coevolution-random-base-league.toml (c74) is the shipped co-evolution file with
    the base's buyer fitted on scripted:random, the share steer, another base seed and the
    buyer's step; the league's populations, evaluation and the seller's settings unchanged."""
    plain = read_toml_table(EXAMPLES / "coevolution-league.toml", "league")
    recipe = read_toml_table(EXAMPLES / "coevolution-random-base-league.toml", "league")
    assert changed_keys(plain, recipe) == {"name", "learner"}
    before, learner = plain["learner"], recipe["learner"]
    assert changed_keys(before, learner) == {
        "steer", "warm_start_talk", "warm_start_buyers", "base_seed", "side_train",
    }  # fmt: skip
    assert (learner["steer"], learner["warm_start_talk"]) == ("share", "share")
    assert learner["warm_start_buyers"] == ["scripted:random?ladder=9"]
    assert learner["side_train"]["seller"] == before["side_train"]["seller"]
    buyer, was = learner["side_train"]["buyer"], before["side_train"]["buyer"]
    assert changed_keys(was, buyer) == {"steps_per_generation", "learning_rate"}
    assert (buyer["steps_per_generation"], buyer["learning_rate"]) == (24, 2e-3)
    config = LeagueConfig.from_toml(EXAMPLES / "coevolution-random-base-league.toml")
    assert config.learner.warm_start_buyers == ("scripted:random?ladder=9",)
    assert config.buyers == LeagueConfig.from_toml(EXAMPLES / "coevolution-league.toml").buyers


def test_the_buyer_league_is_the_hint_league_at_half_its_learning_rate():
    """examples/buyer-league.toml (k3) is b12's file (examples/buyer-hint-league.toml) at half
    its learning rate and nothing else: docs/training.md compares the two on the same seeds."""
    buyer = read_toml_table(EXAMPLES / "buyer-league.toml", "league")
    hint = read_toml_table(EXAMPLES / "buyer-hint-league.toml", "league")
    assert changed_keys(buyer, hint) == {"name", "learner"}
    assert changed_keys(buyer["learner"], hint["learner"]) == {"train"}
    assert changed_keys(buyer["learner"]["train"], hint["learner"]["train"]) == {"learning_rate"}
    assert (
        buyer["learner"]["train"]["learning_rate"] * 2 == hint["learner"]["train"]["learning_rate"]
    )
    assert buyer["learner"]["budget_hint"] is hint["learner"]["budget_hint"] is True


def test_the_ladder_buyer_league_is_the_hint_league_with_the_ladder_and_ladder_teachers():
    """examples/buyer-ladder-league.toml (b10) is b12's recipe with the ladder and a warm start
    whose teachers bid on it, and nothing else."""
    hint = read_toml_table(EXAMPLES / "buyer-hint-league.toml", "league")
    ladder = read_toml_table(EXAMPLES / "buyer-ladder-league.toml", "league")
    assert changed_keys(hint, ladder) == {"name", "learner"}
    assert changed_keys(hint["learner"], ladder["learner"]) == {"ladder", "warm_start"}
    assert (ladder["learner"]["ladder"], ladder["learner"]["budget_hint"]) == (9, True)
    config = LeagueConfig.from_toml(EXAMPLES / "buyer-ladder-league.toml")
    for spec in config.learner.warm_start_specs:
        assert parse_spec(spec).params["ladder"] == "9"  # the teachers bid the rungs it reads


def test_the_handoff_buyers_are_b6m_on_the_three_buyer_clock():
    """examples/handoff-buyer-league.toml is a copy of b6m, the buyer league's recipe before the
    budget hint (b12's file without `budget_hint`; TOML has no include): it may differ in its
    name, its seeds and its training clock only, so that its checkpoints, which the chained
    hand-off examples name, stay the ones docs/training.md measured."""
    hint = read_toml_table(EXAMPLES / "buyer-hint-league.toml", "league")
    handoff = read_toml_table(EXAMPLES / "handoff-buyer-league.toml", "league")
    assert changed_keys(hint, handoff) == {"name", "seeds", "learner"}
    assert changed_keys(hint["learner"], handoff["learner"]) == {"train_market", "budget_hint"}
    assert "budget_hint" not in handoff["learner"]
    assert handoff["learner"]["train_market"] == {
        **hint["learner"]["train_market"], "per_buyer_cap": 3, "total_turns": 3,
    }  # fmt: skip
    clock = LeagueConfig.from_toml(EXAMPLES / "handoff-buyer-league.toml").train_market_config()
    three_buyers = LeagueConfig.from_toml(EXAMPLES / "coevolution-league.toml").market_config()
    assert clock.per_buyer_cap == three_buyers.per_buyer_cap == 3


def test_the_learning_league_trains_in_a_jittered_market_and_evaluates_in_the_preset():
    config = LeagueConfig.from_toml(EXAMPLES / "learning-league.toml")
    evaluation, training = config.market_config(), config.train_market_config()
    assert evaluation == LeagueConfig.from_toml(EXAMPLES / "learning-league.toml").market_config()
    assert (evaluation.total_turns, evaluation.num_buyers, evaluation.per_buyer_cap) == (7, 3, 3)
    assert evaluation.price_jitter == 0.0 and training.price_jitter == 1.5
    assert config.learner.prompt == "compact"
    assert config.learner.tiny.copy_pretrain_steps > 0


def learner_toml(extra: str) -> str:
    return ISSUE_CONFIG + extra


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('prompt = "tiny"\n', "league.learner.prompt must be one of full, compact"),
        ('warm_start_talk = "loud"\n', "warm_start_talk must be one of scripted, short, share"),
        (
            'warm_start = "scripted:prober"\nsteer = "share"\nladder = 9\n',
            r"steer = 'share' and warm_start_talk = 'share' go together .* set both, or neither",
        ),
        (
            'warm_start = "scripted:prober"\nwarm_start_talk = "share"\n',
            r"steer = 'share' and warm_start_talk = 'share' go together",
        ),
        ('steer = "share"\n', r"learner\.steer: steer=share .* \(league\.learner\.ladder = N\)"),
        ('warm_start = "scripted:prober,hf:/x"\n', "must name scripted agents"),
        ('warm_start = "scripted:prober,scripted:nobody"\n', r"warm_start\[1\]"),
        ('warm_start_buyers = ["scripted:random"]\n', "needs warm_start and side = 'seller'"),
        (
            'warm_start = "scripted:prober"\nwarm_start_buyers = ["hf:/x"]\n',
            "warm_start_buyers must name scripted agents",
        ),
        (
            'warm_start = "scripted:prober"\nwarm_start_buyers = ["scripted:prober"]\n',
            r"warm_start_buyers\[0\]",
        ),
        (
            'train_market = { num_buyers = 2, budget_mode = "uniform", total_turns = 5 }\n',
            "must equal",
        ),
        ("train_market = { price_jitter = 9.0 }\n", "price_jitter must lie in"),
        ("[league.learner.tiny]\nhidden = 100\nheads = 8\n", "divisible by heads=8"),
        ("[league.learner.tiny]\nwidth = 3\n", "unknown key 'width'"),
        ("ladder = 10\n", r"learner\.ladder: ladder=10 is out of range: .* 0 \(none\) to 9"),
        ('steer = "ladder"\n', r"learner\.steer: steer=ladder .* \(league\.learner\.ladder = N\)"),
        ('steer = "bids"\n', r"learner\.steer: steer='bids' is unknown; choose one of none, "),
        ("share_cue = true\n", r"learner\.share_cue = true cues the share digit; set .*steer"),
    ],
)
def test_model_side_settings_are_checked_with_the_key_named(tmp_path, extra, message):
    with pytest.raises(ValueError, match=message):
        LeagueConfig.from_toml(write(tmp_path, learner_toml(extra)))


def test_the_share_steer_reads_with_its_warm_start_talk(tmp_path):
    text = (
        'warm_start = "scripted:prober"\nsteer = "share"\nladder = 9\nwarm_start_talk = "share"\n'
    )
    learner = LeagueConfig.from_toml(write(tmp_path, learner_toml(text))).learner
    assert (learner.steer, learner.warm_start_talk, learner.ladder) == ("share", "share", 9)
    cued = LeagueConfig.from_toml(write(tmp_path, learner_toml(text + "share_cue = true\n")))
    assert learner_params(cued.learner)["share_cue"] == "true"  # every spec of the learner
    assert base_settings(cued)["warm"]["share_cue"] is True  # its own base: the warm start cues


def test_a_warm_start_may_mix_scripted_agents(tmp_path):
    text = learner_toml('warm_start = "scripted:prober, scripted:satisficer"\n')
    config = LeagueConfig.from_toml(write(tmp_path, text))
    assert config.learner.warm_start_specs == ["scripted:prober", "scripted:satisficer"]


def test_warm_start_buyers_are_what_a_seller_warm_start_plays_and_name_their_own_base(tmp_path):
    text = 'warm_start = "scripted:prober"\n'
    plain = LeagueConfig.from_toml(write(tmp_path, learner_toml(text)))
    random = LeagueConfig.from_toml(
        write(tmp_path, learner_toml(text + 'warm_start_buyers = ["scripted:random?ladder=9"]\n'))
    )
    assert "warm_start_buyers" not in base_settings(plain)["warm"]  # earlier bases keep names
    assert base_settings(random)["warm"]["warm_start_buyers"] == ["scripted:random?ladder=9"]
    assert base_folder(random, tmp_path / "x") != base_folder(plain, tmp_path / "x")
    played = {b for r in warm_start_records(random) for b in r.buyers}
    assert played == {"scripted:random?ladder=9"}
    assert {b for r in warm_start_records(plain) for b in r.buyers} == set(plain.buyers)
    side_buyer = learner_toml(
        text.replace("prober", "time") + 'warm_start_buyers = ["scripted:time"]\n'
    )
    with pytest.raises(ValueError, match="needs warm_start and side = 'seller' or 'both'"):
        LeagueConfig.from_toml(
            write(tmp_path, side_buyer.replace('side = "seller"', 'side = "buyer"'))
        )


@pytest.mark.parametrize(
    ("side", "named", "fitted"),
    [
        ("seller", "seller", ("seller",)),
        ("buyer", "buyer", ("buyer",)),
        ("both", "seller", ("seller", "buyer")),
        ("self-play", "seller", ("seller", "buyer")),
    ],
)
def test_the_warm_start_fits_every_role_the_learner_plays(tmp_path, side, named, fitted):
    text = ISSUE_CONFIG.replace('side = "seller"', f'side = "{side}"')
    learner = LeagueConfig.from_toml(write(tmp_path, text)).learner
    assert (learner.warm_start_role, learner.warm_start_roles) == (named, fitted)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"num_generations": 3}, r"generation_batch_size \(64\) must be divisible by num_gen"),
        ({"num_generations": 1, "gradient_accumulation_steps": 1}, "at least 2 generations"),
        ({"lr_scheduler_type": "sometimes"}, "sometimes is not a valid SchedulerType"),
    ],
)
def test_a_value_trls_grpo_config_refuses_is_an_error_through_trls_own_check(table, message):
    with pytest.raises(ValueError, match=r"league\.learner\.train: trl\.GRPOConfig refuses"):
        TrainConfig.from_dict(table)
    with pytest.raises(ValueError, match=message):
        TrainConfig.from_dict(table)


def test_trls_refusal_read_from_a_league_file_names_the_table_once(tmp_path):
    text = ISSUE_CONFIG + "\n[league.learner.train]\nnum_generations = 3\n"
    with pytest.raises(ValueError) as error:
        LeagueConfig.from_toml(write(tmp_path, text))
    assert str(error.value).count("league.learner.train") == 1, str(error.value)
    assert "trl.GRPOConfig refuses these settings" in str(error.value)


@pytest.mark.parametrize("key", ["seed", "output_dir", "shuffle_dataset", "bf16", "max_steps"])
def test_a_grpo_field_the_league_sets_is_refused_with_the_reason(tmp_path, key):
    text = ISSUE_CONFIG + f"[league.learner.train]\n{key} = 1\n"
    reason = LEAGUE_SETS[key].replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(ValueError, match=rf"train\.{key}: the league sets this GRPOConfig field: "
                                         rf"{reason}"):  # fmt: skip
        LeagueConfig.from_toml(write(tmp_path, text))


def test_an_unknown_key_is_named_and_said_to_be_no_grpo_field_with_a_near_name(tmp_path):
    text = ISSUE_CONFIG + "[league.learner.train]\nnum_generation = 4\n"
    with pytest.raises(ValueError) as error:
        LeagueConfig.from_toml(write(tmp_path, text))
    message = str(error.value)
    assert "unknown key 'num_generation'" in message
    assert "neither a trl.GRPOConfig field nor a league setting (device," in message
    assert "did you mean num_generations" in message


def test_the_table_keeps_grpo_fields_by_trls_names_beside_the_leagues_own(tmp_path):
    text = ISSUE_CONFIG + (
        "[league.learner.train]\nnum_generations = 4\nper_device_train_batch_size = 4\n"
        'gradient_accumulation_steps = 3\ntop_k = 20\ndevice = "cpu"\n'
        "[league.learner.train.lora]\nr = 4\n"
    )
    train = LeagueConfig.from_toml(write(tmp_path, text)).learner.train
    assert (train.device, train.lora.r, train.scenarios_per_step) == ("cpu", 4, 3)
    assert train.grpo["top_k"] == 20 and train.grpo["loss_type"] == "cispo"
    assert "device" not in train.grpo and "lora" not in train.grpo


def test_a_linear_lr_schedule_steps_the_learning_rate_down_across_generations(tmp_path):
    text = ISSUE_CONFIG.replace("generations = 2", "generations = 3")
    constant = LeagueConfig.from_toml(write(tmp_path, text))
    linear = LeagueConfig.from_toml(write(tmp_path, text + 'lr_schedule = "linear"\n'))
    rate = constant.learner.train.grpo["learning_rate"]
    assert [constant.learning_rate(g) for g in (1, 2, 3)] == [rate] * 3
    assert [linear.learning_rate(g) for g in (1, 2, 3)] == pytest.approx(
        [rate, rate * 2 / 3, rate / 3]
    )
    assert linear.learning_rate(5) == pytest.approx(rate / 3)  # resumed past the plan: the last
    with pytest.raises(ValueError, match="lr_schedule must be one of constant, linear"):
        LearnerConfig(model="tiny", lr_schedule="cosine")


SIDES = (
    ISSUE_CONFIG.replace('side = "seller"    ', 'side = "both"      ').replace(
        'model = "path/to/a/local/causal-lm"', 'model = "tiny"'
    )
    + """
[league.learner.train]
learning_rate = 1e-3
temperature = 0.7
"""
)


def test_a_side_trains_with_its_own_settings_and_the_other_with_the_leagues(tmp_path):
    text = SIDES + "[league.learner.side_train.buyer]\nlearning_rate = 5e-4\ntemperature = 1.0\n"
    config = LeagueConfig.from_toml(write(tmp_path, text))
    learner = config.learner
    assert learner.side == "both"
    buyer, seller = learner.train_for("buyer"), learner.train_for("seller")
    assert (buyer.temperature, buyer.grpo["learning_rate"]) == (1.0, 5e-4)
    assert seller == learner.train and seller.temperature == 0.7
    assert buyer.scenarios_per_step == seller.scenarios_per_step  # the step's shape is shared
    assert [config.learning_rate(g) for g in (1, 2, 3)] == [1e-3, 5e-4, 1e-3]


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("buyer]\nnum_generations = 4", r"side_train.buyer.num_generations: not a per-side"),
        ("buyer]\nlearning_rate = 0", r"side_train.buyer.learning_rate must be a positive"),
        ("buyer]\nsteps_per_generation = 0", r"buyer.steps_per_generation must be an integer >= 1"),
        ("seller]\nsteps_per_generation = 2.5", r"integer >= 1, got 2.5"),
        ("seller]\nopponents = 'best'", r"side_train.seller.opponents must be one of .*'best'"),
        ("auctioneer]\ntemperature = 1.0", r"a side is seller or buyer, got 'auctioneer'"),
        ("seller]\nopponents_explore = 2", r"side_train.seller.opponents_explore must be a number"),
        (
            "seller]\nopponents_from = 'humans'",
            r"opponents_from must be one of all, models, scripted, got",
        ),
        ("buyer]\nshared_replies = 3", r"buyer.shared_replies must be a non-empty list .* got 3"),
        ("buyer]\nshared_replies = []", r"shared_replies must be a non-empty list of reply"),
        ("buyer]\nshared_replies = [0, -1]", r"reply counts >= 0, e.g. \[0, 3\]"),
    ],
)
def test_side_settings_name_what_is_wrong(tmp_path, table, message):
    text = SIDES + f"[league.learner.side_train.{table}\n"
    with pytest.raises(ValueError, match=message):
        LeagueConfig.from_toml(write(tmp_path, text))


def test_the_exploration_share_is_the_leagues_unless_a_side_sets_its_own(tmp_path):
    text = SIDES.replace(
        "[league.learner.train]", "opponents_explore = 0.25\n[league.learner.train]"
    )
    text += "[league.learner.side_train.seller]\nopponents_explore = 0.5\n"
    learner = LeagueConfig.from_toml(write(tmp_path, text)).learner
    assert (learner.opponents_explore_for("seller"), learner.opponents_explore_for("buyer")) == (
        0.5,
        0.25,
    )
    assert learner.train_for("seller") == learner.train  # a league setting, not TRL's
    assert (learner.opponent_rule("seller"), learner.opponent_rule("buyer")) == (
        "pfsp (explore 0.50)",
        "pfsp (explore 0.25)",
    )
    with pytest.raises(ValueError, match=r"league.learner.opponents_explore must be a number .*-1"):
        LeagueConfig.from_toml(write(tmp_path, text.replace("= 0.25", "= -1")))


def test_shared_replies_are_the_leagues_unless_a_side_sets_its_own(tmp_path):
    learner = LeagueConfig.from_toml(write(tmp_path, SIDES)).learner
    assert learner.shared_replies_for("buyer") == learner.shared_replies_for("seller") == (0,)
    text = SIDES + "[league.learner.side_train.buyer]\nshared_replies = [0, 3]\n"
    learner = LeagueConfig.from_toml(write(tmp_path, text)).learner
    assert (learner.shared_replies_for("buyer"), learner.shared_replies_for("seller")) == (
        (0, 3),
        (0,),
    )
    assert learner.train_for("buyer") == learner.train  # a league setting, not TRL's


def test_side_settings_for_a_side_the_learner_never_trains_are_refused(tmp_path):
    text = SIDES.replace('side = "both"', 'side = "seller"')
    text += "[league.learner.side_train.buyer]\ntemperature = 1.0\n"
    with pytest.raises(ValueError, match=r"never trains the buyer \(side = 'seller'\)"):
        LeagueConfig.from_toml(write(tmp_path, text))


def test_the_continued_leagues_differ_only_in_the_buyers_and_the_comparison_plays_them_all():
    """examples/handoff-continued-league.toml and its control train the learning league's last
    seller on, against the hand-off's trained buyers or the learning league's scripted ones;
    examples/continued-compare.toml plays the start and every seed's last checkpoint of both
    against those trained buyers (issue 19, item 3's fourth attempt)."""
    handoff = read_toml_table(EXAMPLES / "handoff-continued-league.toml", "league")
    control = read_toml_table(EXAMPLES / "scripted-continued-league.toml", "league")
    learning = LeagueConfig.from_toml(EXAMPLES / "learning-league.toml")
    differing = {k for k in handoff.keys() | control.keys() if handoff[k] != control[k]}
    assert differing == {"name", "buyers"}
    trained = [s for s in read_toml_table(EXAMPLES / "handoff-league.toml", "league")["buyers"]
               if s.startswith("hf:")]  # fmt: skip
    assert handoff["buyers"] == trained
    assert control["buyers"] == list(learning.buyers)
    start = parse_spec(handoff["learner"]["start"]["seller"])
    last = f"gen-{learning.generations:03d}-seller/adapter"
    assert start.params["lora"] == f"runs/learning-seed0/{last}"
    assert start.name == str(Path("runs") / base_folder(learning, Path("runs")) / "warm-start")
    assert handoff["learner"]["model"] == str(Path("..") / start.name)
    compare = read_toml_table(EXAMPLES / "continued-compare.toml", "tournament")
    assert compare["buyers"] == trained and compare["split"] == "test"
    loras = {parse_spec(s).params.get("lora") for s in compare["sellers"]}
    last = f"gen-{handoff['generations']:03d}-seller/adapter"
    assert loras >= {start.params["lora"]} | {
        f"runs/{league['name']}-seed{k}/{last}" for league in (handoff, control)
        for k in handoff["seeds"]
    }  # fmt: skip


@pytest.mark.parametrize("start", [1, 2])
@pytest.mark.parametrize("kind", ["handoff", "scripted"])
def test_the_continued_leagues_from_another_start_change_the_start_and_nothing_it_trains(
    kind, start
):
    """examples/<kind>-continued-from<n>-league.toml is <kind>-continued-league.toml started from
    the learning league's gen-3 seller of seed n (its reference seller seed 0's), and
    examples/continued-compare-from<n>.toml plays its checkpoints as continued-compare.toml does."""
    first = read_toml_table(EXAMPLES / f"{kind}-continued-league.toml", "league")
    other = read_toml_table(EXAMPLES / f"{kind}-continued-from{start}-league.toml", "league")
    differing = changed_keys(first, other)
    assert differing == {"name", "seeds", "sellers", "learner"}
    assert other["name"] == f"{first['name']}-from{start}"
    assert {**other["learner"], "start": first["learner"]["start"]} == first["learner"]
    moved = {"learning-seed0": f"learning-seed{start}", "learning-seed1": "learning-seed0"}
    for old, new in ((first["learner"]["start"]["seller"], other["learner"]["start"]["seller"]),
                     (first["sellers"][0], other["sellers"][0])):  # fmt: skip
        assert new == re.sub("learning-seed[01]", lambda m: moved[m.group()], old)
    compare = read_toml_table(EXAMPLES / "continued-compare.toml", "tournament")
    again = read_toml_table(EXAMPLES / f"continued-compare-from{start}.toml", "tournament")
    assert {k: v for k, v in again.items() if k not in ("name", "sellers")} == {
        k: v for k, v in compare.items() if k not in ("name", "sellers")
    }
    loras = {parse_spec(s).params.get("lora") for s in again["sellers"]}
    last = f"gen-{other['generations']:03d}-seller/adapter"
    begin = parse_spec(other["learner"]["start"]["seller"]).params["lora"]
    assert begin.startswith(f"runs/learning-seed{start}/")
    assert loras >= {begin} | {f"runs/{other['name']}-seed{k}/{last}" for k in other["seeds"]}


def test_exploring_starts_are_a_buyer_setting_under_the_ladder_or_share_steer(tmp_path):
    ladder = SIDES.replace(
        "[league.learner.train]", 'steer = "ladder"\nladder = 9\n\n[league.learner.train]'
    )
    buyer = '[league.learner.side_train.buyer]\nexploring_starts = "move"\n'
    learner = LeagueConfig.from_toml(write(tmp_path, ladder + buyer)).learner
    assert learner.side_setting("buyer", "exploring_starts") == "move"
    assert learner.side_setting("seller", "exploring_starts") == "none"
    share = ladder.replace('steer = "ladder"', 'steer = "share"') + buyer
    assert LeagueConfig.from_toml(write(tmp_path, share)).learner.steer == "share"
    for text in (ladder.replace('steer = "ladder"', 'steer = "protocol"') + buyer,
                 ladder.replace("[league.learner.train]", 'exploring_starts = "episode"\n\n'
                                "[league.learner.train]")):  # fmt: skip
        with pytest.raises(ValueError, match=r"exploring_starts explores a buyer's bids on its "
                           r"ladder: set it under \[league\.learner\.side_train\.buyer\], with "
                           r"league\.learner\.steer = 'ladder' or 'share'"):  # fmt: skip
            LeagueConfig.from_toml(write(tmp_path, text))
    with pytest.raises(ValueError, match=r"side_train.buyer.exploring_starts must be one of "
                       r"none, episode, move, got True"):  # fmt: skip
        LeagueConfig.from_toml(write(tmp_path, ladder + buyer.replace('"move"', "true")))
