"""The `paper` profile trains each PTB table's models with its own chapter's setup (Melis thesis ch. 2 vs ch. 4).

Table 2.1 / 2.2 (LSTM, Mogrifier): Adam with beta1 = 0 and tail averaging switched on by a validation plateau or
at 80% of training at the latest (§2.2.2). Table 4.1 / 4.2 (Mogrifier LSTM, Mogrifier RLSTM): RAdam and
Two-Tailed Averaging with several dropout samples (§4.3, §4.4, §4.6).
"""

import math

import pytest
import yaml
from torch import nn

from paperlib.averaging import PlateauTriggeredAveragedModel, TwoTailedAveragedModel, build_averager
from paperlib.experiments.common.config import ParamsError, experiment_params, validate_params
from paperlib.experiments.language_models.claims import ordering_pairs
from paperlib.experiments.language_models.lm_ptb import comparison_table, summarise
from paperlib.train import TrainConfig
from tests.conftest import REPO

CHAPTER_2 = ("lstm", "mogrifier_lstm")
CHAPTER_4 = ("mogrifier_lstm_ch4", "mogrifier_rlstm")
# (experiment, batch size and BPTT of ch. 2, of ch. 4, dropout samples of ch. 4): Melis §2.2.2 and §4.6
SETUPS = {"lm_ptb": ((64, 70), (128, 70), 8), "lm_ptb_char": ((128, 150), (128, 200), 4)}


@pytest.fixture(scope="module")
def raw():
    return yaml.safe_load((REPO / "params.yaml").read_text())


def train_of(settings, model: str) -> TrainConfig:
    return TrainConfig(**{**settings.train, **settings.models[model].get("train", {})})


@pytest.mark.parametrize("experiment", sorted(SETUPS))
def test_paper_profile_trains_chapter_2_rows_with_adam_and_plateau_tail_averaging(raw, experiment):
    settings = experiment_params(experiment, "paper", raw)
    (batch, bptt), _, _ = SETUPS[experiment]
    for model in CHAPTER_2:
        config = train_of(settings, model)
        assert (config.optimizer, config.beta1, config.beta2) == ("adam", 0.0, 0.999), model
        assert config.clip_norm == 10.0 and (config.batch_size, config.bptt) == (batch, bptt), model
        assert config.num_samples == 1, model
        assert config.averaging == "ta" and config.averaging_options["nonmono"] >= 1, model
        assert config.averaging_options["latest_start"] == round(0.8 * config.max_steps), model
        averager = build_averager(config.averaging, nn.Linear(2, 2), config.eval_every, **config.averaging_options)
        assert isinstance(averager, PlateauTriggeredAveragedModel), model
        assert "chrono_t_max" not in settings.models[model].get("options", {}), f"{model}: Chrono init is ch. 4's"


@pytest.mark.parametrize("experiment", sorted(SETUPS))
def test_paper_profile_trains_chapter_4_rows_with_radam_2ta_and_dropout_samples(raw, experiment):
    settings = experiment_params(experiment, "paper", raw)
    _, (batch, bptt), samples = SETUPS[experiment]
    for model in CHAPTER_4:
        config = train_of(settings, model)
        assert config.optimizer == "radam" and config.beta1 == 0.0, model
        assert config.averaging == "2ta", model
        averager = build_averager(config.averaging, nn.Linear(2, 2), config.eval_every, **config.averaging_options)
        assert isinstance(averager, TwoTailedAveragedModel), model
        assert config.num_samples == samples and (config.batch_size, config.bptt) == (batch, bptt), model
        assert config.lr_decay_on_rollback == 0.9 and config.clip_norm == 10.0, model
        t_max = settings.models[model]["options"]["chrono_t_max"]
        assert math.e**2 <= t_max <= math.e**5, f"{model}: T_max is tuned in [e^2, e^5] (§4.6)"
    assert settings.models["mogrifier_lstm_ch4"]["cell"] == "mogrifier_lstm"


def test_paper_profile_ablation_follows_the_shortened_chapter_2_schedule(raw):
    config = TrainConfig(**experiment_params("lm_ptb_ablation", "paper", raw).train)
    assert (config.optimizer, config.beta1, config.batch_size, config.bptt) == ("adam", 0.0, 64, 35)
    assert config.averaging == "ta" and config.averaging_options["latest_start"] == round(0.8 * config.max_steps)


def test_an_unknown_key_in_a_models_train_overrides_is_a_clear_error(raw):
    bad = yaml.safe_load(yaml.safe_dump(raw))
    bad["experiments"]["lm_ptb"]["paper"]["models"]["lstm"]["train"]["optimiser"] = "adam"
    with pytest.raises(ParamsError, match=r"models.lstm.train: unknown key\(s\) \['optimiser'\]; valid keys: batch_size"):
        validate_params(bad)
    bad = yaml.safe_load(yaml.safe_dump(raw))
    del bad["experiments"]["lm_ptb"]["paper"]["models"]["lstm"]["train"]["averaging_options"]["nonmono"]
    with pytest.raises(ParamsError, match="models.lstm.train: .*needs exactly one of start"):
        validate_params(bad)


def run(model, nll):
    keys = ("valid_nll", "test_nll", "valid_nll_temp", "test_nll_temp", "valid_nll_mc", "test_nll_mc")
    return {"model": model, "seed": 1, "parameters": 1000, **{k: nll for k in keys}}


def test_chapter_4_rows_sit_beside_the_mogrifier_trained_with_chapter_4s_setup():
    runs = [run("lstm", 4.1), run("mogrifier_lstm", 4.0), run("mogrifier_lstm_ch4", 3.9), run("mogrifier_rlstm", 3.95)]
    results = {"experiment": "lm_ptb", "level": "word", "profile": "paper", "summary": summarise(runs, "word")}
    table = comparison_table(results)
    assert table.loc[("mogrifier_lstm_ch4", "paper (Melis T4.1, 24M params)"), "test"] == 48.5
    assert ("mogrifier_lstm", "paper (Melis T4.1, 24M params)") not in table.index
    assert table.loc[("mogrifier_lstm", "paper (Melis T2.1, 24M params)"), "test"] == 51.0
    pairs = [(p["than"], p["paper: better"], p["our gap"] > 0) for p in ordering_pairs(results)]
    assert pairs == [("lstm", "mogrifier_lstm", True), ("mogrifier_lstm_ch4", "mogrifier_rlstm", False)]
