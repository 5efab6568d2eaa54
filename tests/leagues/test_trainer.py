"""GRPO training through TRL with the multi-turn rollout: settings, and real steps that move the
LoRA adapter as a seller (in-distribution market) and as a buyer (bilateral market)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from arena.catalog import load_catalog
from arena.config import get_preset
from arena.scenarios import make_scenario
from leagues.rollout import LEARNER, GroupRow
from leagues.train_config import TrainConfig
from leagues.trainer import (
    REPORTER_PACKAGES,
    TrainJob,
    adapter_weights,
    build_trainer,
    check_reporters,
    grpo_config,
    last_checkpoint,
    logging_to,
    prompt_dataset,
    train_learner,
)

CATALOG = load_catalog()
SMALL = {"num_generations": 2, "per_device_train_batch_size": 4, "max_completion_length": 16,
         "gradient_accumulation_steps": 1}  # fmt: skip
"""Two scenarios of two rollouts per step, one pass."""
LEARNING = {
    "num_generations": 4,  # 4 x 2 = 8 episodes (2 scenarios) per step
    "per_device_train_batch_size": 4,
    "gradient_accumulation_steps": 2,
    "max_completion_length": 48,
    "learning_rate": 5e-3,
    "max_episode_tokens": 6000,
}
"""Steps that move a tiny warm model: a learning rate that shows in two steps."""


def seller_job(model: Path, out: Path, steps: int = 2) -> TrainJob:
    market = get_preset("in-distribution")
    train = TrainConfig.from_dict(LEARNING)
    rows = tuple(
        GroupRow(
            f"s{i}",
            make_scenario(market, CATALOG, 21, i),
            LEARNER,
            ("scripted:time",) * 3,
            "seller",
        )
        for i in range(steps * train.scenarios_per_step)
    )
    return TrainJob(model, None, rows, market, train, steps, out / "trainer", out / "adapter", 5)


def test_the_grpo_settings_follow_the_train_config(tiny_model_dir, tmp_path):
    job = seller_job(tiny_model_dir, tmp_path)
    args = grpo_config(job, "cpu", "float32")
    assert (args.loss_type, args.epsilon_high, args.beta) == ("cispo", 6.0, 0.0)
    assert args.num_generations == 4
    assert args.generation_batch_size == 8  # one rollout batch per optimizer step: on-policy
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (4, 2)
    assert args.max_completion_length == 48
    assert args.use_cpu and not args.bf16
    assert args.shuffle_dataset is False and args.save_steps == 1
    assert (args.output_dir, args.max_steps, args.seed) == (str(job.output_dir), 2, 5)


def test_the_grpo_config_carries_the_tables_fields_by_trls_names(tiny_model_dir, tmp_path):
    job = seller_job(tiny_model_dir, tmp_path)
    table = {"num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 20,
             "gradient_accumulation_steps": 2, "lr_scheduler_type": "cosine", "top_k": 7,
             "warmup_steps": 3,
             "lora": {"r": 4, "target_modules": ["q_proj", "v_proj"]}}  # fmt: skip
    train = TrainConfig.from_dict(table)
    rows = job.rows[: 2 * train.scenarios_per_step]
    args = grpo_config(dataclasses.replace(job, train=train, rows=rows), "cpu", "float32")
    assert (args.num_generations, args.max_completion_length, args.top_k) == (2, 20, 7)
    assert (args.lr_scheduler_type.value, args.warmup_steps) == ("cosine", 3)
    assert args.generation_batch_size == train.episodes_per_step == 4
    assert args.learning_rate == 3e-5 and args.loss_type == "cispo"  # the project's defaults
    assert train.lora.peft_kwargs() == {"r": 4, "lora_alpha": 32, "lora_dropout": 0.0,
                                        "target_modules": ["q_proj", "v_proj"]}  # fmt: skip
    assert TrainConfig().lora.peft_kwargs()["target_modules"] == "all-linear"


def test_a_job_on_a_folder_without_a_chat_template_fails_before_training(tiny_model_dir, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(tiny_model_dir, bare)
    (bare / "chat_template.jinja").unlink()
    with pytest.raises(ValueError, match="has no chat template"):
        build_trainer(seller_job(bare, tmp_path))


def test_the_prompt_dataset_holds_the_keys_in_order_without_hashing_its_table(monkeypatch):
    import datasets.arrow_dataset

    def broken(dataset):  # what dill raised on a GPU machine's Python 3.12 (docs/performance.md)
        raise AssertionError("datasets hashed the table")

    monkeypatch.setattr(datasets.arrow_dataset, "generate_fingerprint", broken)
    keys = ["g1/s0", "g1/s1", "g1/s0/buyer_2"]
    dataset = prompt_dataset(keys)
    assert dataset["prompt"] == keys and len(dataset) == 3
    assert dataset._fingerprint == prompt_dataset(list(keys))._fingerprint
    assert dataset._fingerprint != prompt_dataset(keys[::-1])._fingerprint


def _moved(adapter: Path) -> float:
    """Largest |weight| of the LoRA B matrices, which start at exactly zero."""
    return max(float(t.abs().max()) for n, t in adapter_weights(adapter).items() if "lora_B" in n)


@pytest.mark.slow
def test_grpo_steps_as_a_seller_against_scripted_buyers_change_the_adapter(warm_models, tmp_path):
    job = seller_job(warm_models["seller"], tmp_path)
    logs: list[tuple[int, dict]] = []
    adapter = train_learner(job, lambda step, entry: logs.append((step, entry)))
    assert [step for step, _ in logs] == [1, 2]
    assert any(entry["reward_std"] > 0 for _, entry in logs), "no group had different rewards"
    for _, entry in logs:
        assert {"deal_rate", "distinct_buyers_engaged", "cispo_clip_ratio", "loss"} <= set(entry)
        assert -1.0 <= entry["reward"] <= 1.0
    assert _moved(adapter) > 0.0
    assert last_checkpoint(job.output_dir).name == "checkpoint-2"
    assert train_learner(job) == adapter  # a finished job is not trained again


@pytest.mark.slow
def test_grpo_steps_as_a_buyer_in_the_bilateral_market_change_the_adapter(warm_models, tmp_path):
    market = get_preset("bilateral", {"total_turns": 2})  # the episodes the fixture was fitted on
    train = TrainConfig.from_dict(LEARNING)
    rows = tuple(
        GroupRow(
            f"b{i}", make_scenario(market, CATALOG, 22, i), "scripted:prober", (LEARNER,), "buyer_1"
        )
        for i in range(2 * train.scenarios_per_step)
    )
    model = warm_models["buyer"]
    job = TrainJob(model, None, rows, market, train, 2, tmp_path / "t", tmp_path / "a", 6)
    logs: list[dict] = []
    adapter = train_learner(job, lambda _step, entry: logs.append(entry))
    assert len(logs) == 2
    assert any(entry["reward_std"] > 0 for entry in logs), "no group had different rewards"
    assert _moved(adapter) > 0.0


@pytest.mark.slow
def test_a_self_play_step_trains_the_seller_and_buyer_streams_of_shared_episodes(
    tiny_model_dir, tmp_path
):
    market = get_preset("bilateral")
    train = TrainConfig.from_dict(SMALL)
    scenario = make_scenario(market, CATALOG, 23, 0)
    rows = (
        GroupRow("s0/seller", scenario, LEARNER, (LEARNER,), "seller"),
        GroupRow("s0/buyer_1", scenario, LEARNER, (LEARNER,), "buyer_1"),
    )
    job = TrainJob(tiny_model_dir, None, rows, market, train, 1, tmp_path / "t", tmp_path / "a", 7)
    logs: list[dict] = []
    adapter = train_learner(job, lambda _step, entry: logs.append(entry))
    assert len(logs) == 1 and (adapter / "adapter_config.json").is_file()
    # The buyer opens and the random model breaks the format there: the buyer streams earn -1 and
    # the seller streams, which never got a turn, the seller's 0; two entries of each.
    assert logs[0]["reward"] == pytest.approx(-0.5)


def test_report_to_names_the_trainers_loggers_and_their_local_folders(tiny_model_dir, tmp_path):
    job = seller_job(tiny_model_dir, tmp_path)
    assert grpo_config(job, "cpu", "float32").report_to == []
    logged = dataclasses.replace(
        job,
        train=dataclasses.replace(job.train, report_to=("tensorboard", "wandb")),
        log_dir=tmp_path / "logs" / "gen-001-seller",
        run_name="demo/gen-001-seller",
    )
    args = grpo_config(logged, "cpu", "float32")
    assert args.report_to == ["tensorboard", "wandb"]
    assert (args.run_name, args.project) == ("demo/gen-001-seller", "demo")
    before = dict(os.environ)
    with logging_to(logged) as folder:
        assert folder == tmp_path / "logs" / "gen-001-seller" and folder.is_dir()
        assert os.environ["TENSORBOARD_LOGGING_DIR"] == str(folder)
        assert (os.environ["WANDB_MODE"], os.environ["WANDB_PROJECT"]) == ("offline", "demo")
    assert dict(os.environ) == before


def test_a_logger_whose_package_is_missing_is_named_before_any_work(monkeypatch) -> None:
    monkeypatch.setitem(REPORTER_PACKAGES, "trackio", "no_such_package_for_the_test")
    with pytest.raises(ValueError, match=r"report_to.*not installed; pip install "
                                         r"'bargain-arena\[trackio\]'"):  # fmt: skip
        check_reporters(("tensorboard", "trackio"))
    with pytest.raises(ValueError, match="unknown logger 'mlflow'"):
        TrainConfig(report_to=("mlflow",))
    with pytest.raises(ValueError, match="names a logger twice"):
        TrainConfig(report_to=("wandb", "wandb"))


@pytest.mark.slow
def test_a_step_logged_to_tensorboard_writes_the_step_metrics_there(tiny_model_dir, tmp_path):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    market = get_preset("bilateral")
    train = TrainConfig.from_dict({**SMALL, "report_to": ("tensorboard",)})
    rows = tuple(
        GroupRow(f"s{i}", make_scenario(market, CATALOG, 24, i), LEARNER, ("scripted:time",),
                 "seller")
        for i in range(2)
    )  # fmt: skip
    logs_dir = tmp_path / "logs" / "gen-001-seller"
    job = TrainJob(tiny_model_dir, None, rows, market, train, 1, tmp_path / "t", tmp_path / "a",
                   8, log_dir=logs_dir, run_name="demo/gen-001-seller")  # fmt: skip
    steps: list[tuple[int, dict]] = []
    train_learner(job, lambda step, entry: steps.append((step, entry)))
    ((step, entry),) = steps
    events = EventAccumulator(str(logs_dir))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"train/reward", "train/loss", "train/deal_rate"} <= set(tags)
    for name in ("reward", "deal_rate", "loss"):
        (scalar,) = events.Scalars(f"train/{name}")
        assert scalar.step == step == 1
        assert scalar.value == pytest.approx(entry[name], rel=1e-5, abs=1e-6)
    assert "TENSORBOARD_LOGGING_DIR" not in os.environ
