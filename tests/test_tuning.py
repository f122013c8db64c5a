"""Search spaces as printed in the thesis; studies that several worker processes share (SQLite and a real
PostgreSQL server) without losing or duplicating trials, also when a worker is killed mid-trial; the
language-model objective with 2TA intermediate values and pruning."""

import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from paperlib.experiments.common.config import PROFILES
from paperlib.search_spaces import Hyperparameter, get_space, sample
from paperlib.tuning import LanguageModelObjective, lm_hyperparameters, make_sampler, make_storage, open_study, run_worker
from paperlib.experiments.language_models.tuning_ptb import (
    TuningParams, best_sampled, neighbour_points, neighbourhood, probe,
)
from tests.conftest import REPO
from tests.test_train import VOCAB, markov_stream

optuna.logging.set_verbosity(optuna.logging.WARNING)


# ---------------------------------------------------------------------------------------------------
# search spaces


def test_table_2_4_ranges_and_spacings_are_the_printed_ones():
    mog = get_space("mogrifier")
    assert mog.names == ("learning_rate", "input_embedding_ratio", "l2_penalty", "input_dropout",
                         "inter_layer_dropout", "state_dropout", "output_dropout", "mogrifier_rounds", "mogrifier_rank")
    printed = {"learning_rate": (0.001, 0.004, True), "input_embedding_ratio": (0.0, 2.0, False),
               "l2_penalty": (5e-6, 1e-3, True), "input_dropout": (0.0, 0.9, False),
               "inter_layer_dropout": (0.0, 0.95, False), "state_dropout": (0.0, 0.8, False),
               "output_dropout": (0.0, 0.95, False), "mogrifier_rounds": (0, 6, False),
               "mogrifier_rank": (-20, 100, False)}
    assert {h.name: (h.low, h.high, h.log) for h in mog.hyperparameters} == printed
    assert mog["mogrifier_rounds"].integer and mog["mogrifier_rank"].integer
    # r and k are tuned only for the Mogrifier (§2.A)
    assert get_space("lstm").names == mog.names[:7]


def test_enwik8_dyneval_and_micmco_tables():
    enwik8 = get_space("enwik8_mogrifier")
    assert "input_embedding_ratio" not in enwik8.names
    assert [(enwik8[n].low, enwik8[n].high) for n in ("input_dropout", "inter_layer_dropout", "state_dropout",
                                                      "output_dropout")] == [(0, 0.2), (0, 0.2), (0, 0.25), (0, 0.25)]
    assert get_space("enwik8_lstm").names == ("learning_rate", "l2_penalty", "input_dropout", "inter_layer_dropout",
                                              "state_dropout", "output_dropout")
    word, char = get_space("dyneval_word"), get_space("dyneval_char")
    assert (word["segment_len"].high, char["segment_len"].high) == (20, 50)
    assert {h.name: (h.low, h.high, h.log) for h in word.hyperparameters if h.name != "segment_len"} == {
        "lr": (1e-6, 1e-3, True), "decay": (1e-6, 1e-2, True), "eps": (1e-8, 1e-2, True)}
    # the dyneval keys are dynamic_evaluate's keyword arguments, tunable by its tuner
    from paperlib.dyneval import TUNABLE

    assert set(word.names) <= set(TUNABLE)
    # Table 5.2 is encoded once: paperlib.experiments.micmco.synthetic.micmco_synthetic's ranges agree with it
    from paperlib.experiments.micmco.synthetic.micmco_synthetic import TABLE_5_2 as MICMCO

    table = get_space("micmco")
    for name, r in MICMCO.items():
        assert (table[name].low, table[name].high, table[name].log, table[name].integer) == (r.low, r.high, r.log,
                                                                                             r.integer), name
    assert set(table.names) - set(MICMCO) == {"input_dropout", "state_dropout", "output_dropout", "l2_penalty"}


def test_sampling_is_uniform_on_each_declared_scale():
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    space = get_space("mogrifier")
    draws = []
    for _ in range(400):
        trial = study.ask()
        draws.append(sample(trial, "mogrifier"))
        study.tell(trial, 0.0)
    for h in space.hyperparameters:
        values = [d[h.name] for d in draws]
        assert all(h.contains(v) for v in values), h.name
        if h.integer:
            assert all(isinstance(v, int) for v in values) and {h.low, h.high} <= set(values)
        # mean position on the sampling scale is 1/2 (log-uniform sampled linearly would give ~0.61 for lr)
        mean_unit = sum(h.to_unit(v) for v in values) / len(values)
        assert abs(mean_unit - 0.5) < 0.06, (h.name, mean_unit)


def test_bad_names_are_value_errors_listing_the_choices():
    with pytest.raises(ValueError, match="valid choices: lstm, mogrifier, enwik8_lstm"):
        get_space("gru")
    with pytest.raises(ValueError, match="has no hyperparameter 'momentum'; it has: learning_rate"):
        get_space("lstm").subset(["learning_rate", "momentum"])
    assert get_space("micmco").subset(["lam", "learning_rate"]).names == ("lam", "learning_rate")
    with pytest.raises(ValueError, match="log-spaced range must be positive"):
        Hyperparameter("x", 0.0, 1.0, log=True)
    with pytest.raises(ValueError, match="not a language-model hyperparameter"):
        lm_hyperparameters({"lam": 0.5}, 16)


def test_lm_hyperparameters_follow_section_2a():
    model, train = lm_hyperparameters({"learning_rate": 0.002, "l2_penalty": 1e-5, "inter_layer_dropout": 0.3,
                                       "input_embedding_ratio": 0.5, "mogrifier_rank": -3, "mogrifier_rounds": 4},
                                      hidden_size=40)
    assert train == {"lr": 0.002, "weight_decay": 1e-5}
    assert model == {"cell_output_dropout": 0.3, "embedding_size": 20, "mogrifier_rank": -3, "mogrifier_rounds": 4}
    assert lm_hyperparameters({"input_embedding_ratio": 1.0}, 40)[0] == {"embedding_size": None}  # = hidden size
    assert lm_hyperparameters({"input_embedding_ratio": 0.0}, 40)[0] == {"embedding_size": 1}


def test_neighbourhood_is_a_window_of_fifteen_percent_per_hyperparameter():
    space = get_space("lstm").subset(["learning_rate", "input_dropout"])
    best = {"number": 0, "params": {"learning_rate": 0.002, "input_dropout": 0.45}}
    step = 4 ** 0.07  # 7% of the log range of [0.001, 0.004]
    trials = [best,
              {"number": 1, "params": {"learning_rate": 0.002 * step, "input_dropout": 0.45 + 0.06}},  # inside
              {"number": 2, "params": {"learning_rate": 0.002 * step ** 1.2, "input_dropout": 0.45}},  # lr outside
              {"number": 3, "params": {"learning_rate": 0.002, "input_dropout": 0.45 - 0.07}}]  # dropout outside
    assert neighbourhood(space, trials, best) == [0, 1]


# ---------------------------------------------------------------------------------------------------
# samplers and studies


def test_from_unit_inverts_to_unit_on_each_scale_and_clips():
    for h in get_space("mogrifier").hyperparameters:
        for u in (0.0, 0.3, 0.77, 1.0):
            value = h.from_unit(u)
            assert h.contains(value)
            assert h.to_unit(value) == pytest.approx(u, abs=0.5 / (h.high - h.low) if h.integer else 1e-12)
        assert h.from_unit(-0.2) == h.low and h.from_unit(1.3) == h.high


def test_neighbour_points_are_uniform_in_the_window_and_seeded():
    space = get_space("mogrifier")
    centre = {h.name: h.from_unit(0.5) for h in space.hyperparameters}
    edge = {**centre, "learning_rate": space["learning_rate"].high}  # the window is clipped at the range's end
    points = neighbour_points(space, edge, 200, seed=3)
    assert points == neighbour_points(space, edge, 200, seed=3) != neighbour_points(space, edge, 200, seed=4)
    trials = [{"number": i, "params": p} for i, p in enumerate(points)]
    assert neighbourhood(space, trials, {"params": edge}) == list(range(200))  # every point in the 15% window
    units = [space.to_unit(p)["input_dropout"] - 0.5 for p in points]
    assert min(units) < -0.06 and max(units) > 0.06  # spread over the window (half-width 0.075), not one point
    assert all(space["learning_rate"].to_unit(p["learning_rate"]) >= 1 - 0.075 - 1e-12 for p in points)


def test_probes_sit_by_the_best_rerun_it_at_other_seeds_never_prune_and_run_once(tmp_path):
    objective = _objective(tmp_path)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(objective, n_trials=2)
    study.pruner = optuna.pruners.ThresholdPruner(upper=0.0)  # any sampled trial would now be pruned
    probe(study, objective, objective.space, neighbours=2, reruns=2, seed=0, train_seed=1)
    trials = study.get_trials()
    best = min(trials[:2], key=lambda t: t.value)
    assert study.user_attrs["probe_anchor"] == best.number
    assert [t.user_attrs.get("probe") for t in trials] == [None, None, "neighbour", "neighbour", "rerun", "rerun"]
    assert all(t.state == TrialState.COMPLETE for t in trials)  # probes are never pruned
    records = [{"number": t.number, "params": t.params} for t in trials]
    assert neighbourhood(objective.space, records, {"params": best.params}) == [best.number, 2, 3, 4, 5]
    reruns = trials[4:]
    assert [t.user_attrs["seed"] for t in reruns] == [2, 3] and all(t.params == best.params for t in reruns)
    assert len({best.value, *(t.value for t in reruns)}) == 3  # another seed, another run
    probe(study, objective, objective.space, neighbours=2, reruns=2, seed=0, train_seed=1)
    assert len(study.get_trials()) == 6  # probed once
    # the tuner's best trial is never a probe, even one that beats it
    record = [{"number": t.number, "state": t.state.name, "value": t.value, **t.user_attrs} for t in trials]
    record[2]["value"] = -1.0
    assert best_sampled(record)["number"] == best.number


def test_auto_sampler_is_optunas_gp_where_available_else_tpe(monkeypatch):
    has_gp = hasattr(optuna.samplers, "GPSampler")
    assert type(make_sampler("auto")).__name__ == ("GPSampler" if has_gp else "TPESampler")
    if has_gp:
        monkeypatch.setattr(optuna, "__version__", "4.3.0")  # GP for several objectives came in 4.4
        assert isinstance(make_sampler("auto", n_objectives=2), optuna.samplers.TPESampler)
        with pytest.raises(ValueError, match="no GPSampler for 2 objective"):
            make_sampler("gp", n_objectives=2)
        monkeypatch.delattr(optuna.samplers, "GPSampler")
    assert isinstance(make_sampler("auto"), optuna.samplers.TPESampler)
    with pytest.raises(ValueError, match="valid choices: auto, gp, tpe, random"):
        make_sampler("cmaes")
    with pytest.raises(ValueError, match="must exceed heartbeat_interval"):
        make_storage("sqlite://", heartbeat_interval=10, grace_period=5)


def test_a_study_reopened_with_other_directions_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    study = open_study("s", url, directions=["minimize", "minimize"], sampler="random", seed=0)
    assert len(study.directions) == 2 and isinstance(study.sampler, optuna.samplers.RandomSampler)
    with pytest.raises(ValueError, match=r"exists with directions \['minimize', 'minimize'\]"):
        open_study("s", url, directions=["minimize"])


WORKER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, {repo!r})
    from paperlib.search_spaces import get_space
    from paperlib.tuning import run_worker

    url, study_name, n_trials, worker, folder, mode = sys.argv[1:7]
    folder = Path(folder)
    space = get_space("lstm")

    def objective(trial):
        params = space.sample(trial)
        if mode == "victim":
            (folder / "victim-started").write_text(str(trial.number))
            time.sleep(600)  # killed in here
        time.sleep(0.2)
        value = sum((space[k].to_unit(v) - 0.5) ** 2 for k, v in params.items())  # closed form
        with open(folder / f"done-{{worker}}.jsonl", "a") as log:
            log.write(json.dumps({{"number": trial.number, "value": value, "params": params}}) + "\\n")
        return value

    (folder / f"ready-{{worker}}").touch()
    while mode == "together" and len(list(folder.glob("ready-*"))) < 2:
        time.sleep(0.05)  # start both workers' trials at the same time
    while mode == "after-victim" and not (folder / "victim-started").exists():
        time.sleep(0.05)  # let the victim take the first trial
    ran = run_worker(study_name, url, objective, int(n_trials), sampler="random", seed=int(worker),
                     heartbeat_interval=1, grace_period=3, poll_seconds=0.2)
    print(ran)
    """
)


def _worker(url, study, n_trials, worker, folder, mode):
    script = WORKER.format(repo=str(REPO))
    return subprocess.Popen([sys.executable, "-c", script, url, study, str(n_trials), str(worker), str(folder), mode],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=90):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    return int(out.split()[-1])


def _logged(folder, worker):
    path = folder / f"done-{worker}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _postgres_binaries():
    found = {}
    for name in ("initdb", "pg_ctl"):
        path = shutil.which(name) or next(iter(sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)),
                                          None)
        if path is None:
            return None
        found[name] = str(path)
    return found


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL server of its own on 127.0.0.1 (trust auth, fsync off) for this module, then removed."""
    pytest.importorskip("psycopg2", reason="the PostgreSQL driver psycopg2-binary is not installed")
    binaries = _postgres_binaries()
    if binaries is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or in /usr/lib/postgresql/*/bin; "
                    "on Debian: apt-get install postgresql")
    prefix = []
    folder = Path(tempfile.mkdtemp(prefix="paperlib-pg-"))  # not under pytest's 0700 root-only tmp folder
    if os.geteuid() == 0:  # the server refuses to run as root: run it as an unprivileged user
        import pwd

        runuser = shutil.which("runuser")
        user = next((u for u in ("postgres", "nobody") if _has_user(pwd, u)), None)
        if runuser is None or user is None:
            shutil.rmtree(folder)
            pytest.skip("running as root without runuser or an unprivileged user to start PostgreSQL as")
        shutil.chown(folder, user)
        prefix = [runuser, "-u", user, "--"]
    port = _free_port()
    data = folder / "data"
    try:
        subprocess.run([*prefix, binaries["initdb"], "-D", str(data), "--auth=trust", "-U", "paperlib", "--no-sync",
                        "-E", "UTF8"], check=True, capture_output=True, timeout=120)
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        subprocess.run([*prefix, binaries["pg_ctl"], "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w",
                        "start"], check=True, capture_output=True, timeout=120)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        log = (folder / "log").read_text() if (folder / "log").exists() else ""
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"could not start PostgreSQL: {err}\n{getattr(err, 'stderr', b'')!r}\n{log}")
    try:
        yield f"postgresql+psycopg2://paperlib@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, binaries["pg_ctl"], "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def _has_user(pwd, name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/study.db"
    return request.getfixturevalue("postgres_url")


def test_two_workers_complete_n_trials_between_them_without_duplicates(storage_url, tmp_path, request):
    study_name, n_trials = f"two-{request.node.callspec.id}", 8
    open_study(study_name, storage_url)  # created once up front, as the first worker would
    workers = [_worker(storage_url, study_name, n_trials, w, tmp_path, "together") for w in (0, 1)]
    ran = [_finish(p) for p in workers]
    study = optuna.load_study(study_name=study_name, storage=storage_url)
    trials = study.get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert all(t.state == TrialState.COMPLETE for t in trials)  # nothing failed, nothing left running
    # both finish when N are done; two asks in the same instant may add one
    assert n_trials <= len(complete) <= n_trials + 1 and sum(ran) == len(trials)
    assert all(r >= 2 for r in ran), ran  # both workers took part
    numbers = [t.number for t in trials]
    assert sorted(numbers) == list(range(len(trials)))
    logged = [_logged(tmp_path, w) for w in (0, 1)]
    mine = [{e["number"] for e in log} for log in logged]
    assert not mine[0] & mine[1]  # no trial ran in both workers
    by_number = {t.number: t for t in complete}
    for entry in logged[0] + logged[1]:
        assert by_number[entry["number"]].value == pytest.approx(entry["value"])
        assert by_number[entry["number"]].params == pytest.approx(entry["params"])
    assert len({tuple(sorted(t.params.items())) for t in complete}) == len(complete)  # workers sample apart


def test_killing_a_worker_mid_trial_loses_nothing_else(storage_url, tmp_path, request):
    study_name, n_trials = f"kill-{request.node.callspec.id}", 5
    open_study(study_name, storage_url)
    victim = _worker(storage_url, study_name, n_trials, 0, tmp_path, "victim")
    healthy = _worker(storage_url, study_name, n_trials, 1, tmp_path, "after-victim")
    deadline = time.time() + 60
    while not _logged(tmp_path, 1):  # the victim is inside its trial and the healthy worker is in business
        assert time.time() < deadline and victim.poll() is None and healthy.poll() is None
        time.sleep(0.05)
    killed_number = int((tmp_path / "victim-started").read_text())
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    ran = _finish(healthy)
    study = optuna.load_study(study_name=study_name, storage=storage_url)
    trials = {t.number: t for t in study.get_trials()}
    states = sorted(t.state.name for t in trials.values())
    assert states == ["COMPLETE"] * n_trials + ["FAIL"]  # exactly the killed trial failed (by heartbeat)
    assert trials[killed_number].state == TrialState.FAIL
    retry = [t for t in trials.values() if t.system_attrs.get("failed_trial") == killed_number]
    assert len(retry) == 1 and retry[0].state == TrialState.COMPLETE
    assert retry[0].params == trials[killed_number].params  # re-run with the killed trial's hyperparameters
    assert ran == n_trials and sorted(trials) == list(range(n_trials + 1))
    for entry in _logged(tmp_path, 1):  # every trial the healthy worker finished is in the study as it saw it
        assert trials[entry["number"]].state == TrialState.COMPLETE
        assert trials[entry["number"]].value == pytest.approx(entry["value"])
    assert not _logged(tmp_path, 0)


# ---------------------------------------------------------------------------------------------------
# the language-model objective


def _objective(tmp_path, metrics=("valid_nll",)):
    train = dict(batch_size=4, bptt=10, max_steps=20, eval_every=5, eval_batch_size=2, num_samples=2,
                 averaging="2ta", seed=1)
    return LanguageModelObjective(get_space("mogrifier"), "mogrifier_lstm", 16, 2, train, markov_stream(3000, 0),
                                  markov_stream(400, 1), VOCAB, tmp_path / "runs", metrics=metrics)


def test_lm_objective_trains_with_sampled_settings_and_reports_2ta_losses(tmp_path):
    objective = _objective(tmp_path)
    ran = run_worker("lm", f"sqlite:///{tmp_path}/lm.db", objective, 2, sampler="random", seed=3)
    study = optuna.load_study(study_name="lm", storage=f"sqlite:///{tmp_path}/lm.db")
    trials = study.get_trials()
    assert ran == 2 and [t.state for t in trials] == [TrialState.COMPLETE] * 2
    for t in trials:
        assert sorted(t.intermediate_values) == [5, 10, 15, 20]  # one 2TA loss per evaluation
        assert all(math.isfinite(v) and 0 < v < 2 * math.log(VOCAB) for v in t.intermediate_values.values())
        if t.user_attrs["rollbacks"] == 0:
            assert t.value == min(t.intermediate_values.values())  # the best 2TA validation loss
        metrics = json.loads((tmp_path / "runs" / f"trial{t.number}" / "metrics.json").read_text())
        # the reported values are the losses of the weights 2TA recommends at each evaluation
        evaluations = [h for h in metrics["history"] if "valid_nll" in h and "monitor" not in h]
        assert {h["step"]: h["valid_nll"] for h in evaluations} == t.intermediate_values
        assert all("averaged_length" in h and "action" in h for h in evaluations)
        assert metrics["best_valid_nll"] == t.value and metrics["steps"] == 20
        assert not list((tmp_path / "runs" / f"trial{t.number}").glob("*.pt"))  # checkpoints removed
        ratio = t.params["input_embedding_ratio"]
        assert t.user_attrs["embedding_size"] == (16 if ratio >= 1 else max(1, round(16 * ratio)))
    assert trials[0].params != trials[1].params


def test_hopeless_trials_are_pruned_on_the_first_2ta_loss(tmp_path):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0),
                                pruner=optuna.pruners.ThresholdPruner(upper=0.0))  # every loss is hopeless
    study.optimize(_objective(tmp_path), n_trials=1)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.PRUNED and list(trial.intermediate_values) == [5]
    assert trial.user_attrs["steps"] == 5


def test_multi_objective_lm_study_returns_loss_and_size(tmp_path):
    study = open_study("pareto", f"sqlite:///{tmp_path}/p.db", directions=["minimize", "minimize"], sampler="random",
                       seed=0)
    study.optimize(_objective(tmp_path, metrics=("valid_nll", "parameters")), n_trials=1)
    (trial,) = study.get_trials()
    assert trial.state == TrialState.COMPLETE and not trial.intermediate_values  # no pruning with two objectives
    assert trial.values[1] == trial.user_attrs["parameters"] > 0
    with pytest.raises(ValueError, match="valid choices: valid_nll, parameters, train_seconds"):
        _objective(tmp_path, metrics=("perplexity",))


def test_tuning_params_name_the_valid_spaces():
    base = dict(corpus="ptb", train={"max_steps": 2}, trials=1, startup_trials=1, threads=1)
    with pytest.raises(ValueError, match="not a language-model search space; valid: lstm, mogrifier"):
        TuningParams(models={"dyneval_word": {"cell": "lstm", "hidden_size": 4, "num_layers": 1}}, **base)
    with pytest.raises(ValueError, match=r"cell 'lstm' has no option\(s\) \['mogrifier_rank', 'mogrifier_rounds'\]"):
        TuningParams(models={"mogrifier": {"cell": "lstm", "hidden_size": 4, "num_layers": 1}}, **base)
    assert TuningParams(models={"lstm": {"cell": "lstm", "hidden_size": 4, "num_layers": 1}}, **base).sampler == "auto"


def test_pipeline_runner_writes_every_trial_and_resumes_its_studies(data_root, tmp_path, monkeypatch):
    import yaml

    from paperlib.experiments.language_models.tuning_ptb import run_tuning

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    tiny = {"corpus": "ptb", "models": {"lstm": {"cell": "lstm", "hidden_size": 8, "num_layers": 1}},
            "train": {"batch_size": 4, "bptt": 10, "max_steps": 2, "eval_every": 1, "eval_batch_size": 2,
                      "eval_max_windows": 2, "averaging": "2ta"},
            "trials": 2, "startup_trials": 2, "sampler": "random", "pruner": None, "train_tokens": 2000,
            "eval_tokens": 500, "threads": 1, "seed": 5, "neighbours": 1, "reruns": 1}
    params["experiments"]["tuning_ptb"] = {p: tiny for p in PROFILES}
    params["profile"] = "smoke"  # the pipeline's profile: results/tuning_ptb.json (another's go to results/<profile>/)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "raw").symlink_to(data_root)
    monkeypatch.setenv("PAPERLIB_ROOT", str(tmp_path))
    out = run_tuning("smoke", progress=False)
    results = json.loads(out.read_text())
    record = results["models"]["lstm"]
    assert out == tmp_path / "results" / "tuning_ptb.json" and out.with_suffix(".provenance.json").exists()
    assert record["counts"] == {"COMPLETE": 4} and [t["steps"] for t in record["trials"]] == [2, 2, 2, 2]
    assert [t.get("probe") for t in record["trials"]] == [None, None, "neighbour", "rerun"]
    assert record["best"]["value"] == min(t["value"] for t in record["trials"][:2])
    assert {record["best"]["number"], 2, 3} <= set(record["neighbourhood"]["trials"])
    assert results["vocab_size"] == 10000 and results["paper"]["neighbourhood_max_gap_ppl"] == 1.2
    assert (tmp_path / "runs" / "tuning" / "tuning_ptb-lstm-smoke.db").exists()
    # a second run finds the study finished and only rewrites the results
    again = json.loads(run_tuning("smoke", progress=False).read_text())["models"]["lstm"]
    assert again["trials"] == record["trials"]
    # other settings: the stale study is dropped and redone
    params["experiments"]["tuning_ptb"]["smoke"] = {**tiny, "train": {**tiny["train"], "max_steps": 3}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    redone = json.loads(run_tuning("smoke", progress=False).read_text())["models"]["lstm"]
    assert [t["steps"] for t in redone["trials"]] == [3, 3, 3, 3]


def test_a_pruner_needs_2ta_averaging():
    from paperlib.experiments.common.config import experiment_params, load_params

    params = load_params()
    cpu = params["experiments"]["tuning_ptb"]["cpu"]
    assert cpu["pruner"] is not None and experiment_params("tuning_ptb", "cpu", params).pruner
    raw = {**cpu, "train": {**cpu["train"], "averaging": "ema"}}
    bad = {**params, "experiments": {**params["experiments"], "tuning_ptb": {**params["experiments"]["tuning_ptb"],
                                                                             "cpu": raw}}}
    with pytest.raises(ValueError, match="train.averaging: 2ta"):
        experiment_params("tuning_ptb", "cpu", bad)
