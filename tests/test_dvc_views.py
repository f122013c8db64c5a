"""`dvc metrics show` / `dvc plots show` inputs are derived from the results, never typed in."""

import csv
import io
import json
import re

import yaml

from paperlib.compendium import dvc_views as dv
from paperlib.compendium.results_index import load_results
from tests.conftest import REPO


def _numbers(tree) -> set[float]:
    """Every number anywhere in a results tree."""
    if isinstance(tree, dict):
        return set().union(*map(_numbers, tree.values())) if tree else set()
    if isinstance(tree, list):
        return set().union(*map(_numbers, tree)) if tree else set()
    return {float(tree)} if isinstance(tree, (int, float)) and not isinstance(tree, bool) else set()


def test_every_headline_metric_is_a_number_the_results_hold():
    results = load_results(REPO)
    metrics = dv.headline_metrics(results)
    assert set(metrics) == set(dv.HEADLINES) & set(results)
    for name, values in metrics.items():
        assert values and all(isinstance(v, float) for v in values.values()), name
        stored = _numbers(results[name])
        assert all(v in stored for v in values.values()), f"{name}: a headline not copied from the results"


def test_headline_metrics_name_what_they_hold():
    results = load_results(REPO)
    metrics = dv.headline_metrics(results)
    for name in ("lm_ptb", "lm_ptb_char"):
        if name in results:
            unit = "bpc" if results[name]["level"] == "char" else "ppl"
            assert metrics[name] == {f"{model}.test_{unit}{stat}": row[f"test_{unit}{stat}"]
                                     for model, row in results[name]["summary"].items() for stat in ("", "_std")}
    if "lm_ptb_ablation" in results:
        assert metrics["lm_ptb_ablation"] == {f"{model}.valid_ppl": row["valid_ppl"]
                                              for model, row in results["lm_ptb_ablation"]["summary"].items()}
    if "dyneval" in results:
        for corpus, table in results["dyneval"]["corpora"].items():
            static = next(r for r in table["rows"] if r["key"] == "static")
            assert metrics["dyneval"][f"{corpus}.static.test_ppl"] == static["test_ppl"]
    if "averaging_ptb" in results:
        methods = results["averaging_ptb"]["summary"]["methods"]
        assert metrics["averaging_ptb"]["2ta.best_valid_nll"] == methods["2ta"]["best"]
        assert metrics["averaging_ptb"]["ta_tuned.early_valid_nll"] == methods["ta (tuned)"]["early_mean"]
    if "word_generation" in results:
        table1 = {row["model"]: row["H_test"] for row in results["word_generation"]["table1"]}
        assert metrics["word_generation"]["2xTRIL_K10.H_test"] == table1["2xTRIL, K=10"]


def test_ablation_metrics_are_the_validation_perplexities_of_every_variant():
    summary = {"lstm": {"valid_ppl": 120.0, "test_ppl": 115.0, "valid_ppl_std": 1.0},
               "mogrifier_r4": {"valid_ppl": 110.0, "test_ppl": 106.0, "valid_ppl_std": 2.0}}
    metrics = dv.headline_metrics({"lm_ptb_ablation": {"level": "word", "summary": summary}})["lm_ptb_ablation"]
    assert metrics == {f"{model}.valid_ppl": row["valid_ppl"] for model, row in summary.items()}


def test_each_experiment_with_results_gets_its_own_small_flat_metrics_file(tmp_path):
    results = load_results(REPO)
    dv.write_views(tmp_path, results)
    files = sorted((tmp_path / dv.METRICS).glob("*.json"))
    assert [p.stem for p in files] == sorted(set(dv.HEADLINES) & set(results))
    metrics = dv.headline_metrics(results)
    for path in files:
        values = json.loads(path.read_text())
        assert values == metrics[path.stem]
        assert 0 < len(values) <= dv.MAX_HEADLINES, f"{path.name}: {len(values)} numbers, more than a row to scan"
        assert all(re.fullmatch(r"[0-9A-Za-z_.-]+", key) for key in values), f"{path.name}: unreadable keys"


def test_metrics_files_are_byte_deterministic(tmp_path):
    results = load_results(REPO)
    dv.write_views(tmp_path / "a", results)
    dv.write_views(tmp_path / "b", dict(reversed(list(results.items()))))
    for path in sorted((tmp_path / "a" / dv.METRICS).glob("*.json")):
        text = path.read_text()
        assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
        assert (tmp_path / "b" / dv.METRICS / path.name).read_bytes() == path.read_bytes()


def test_metrics_file_of_an_experiment_without_results_is_removed_not_left_stale(tmp_path):
    results = {"tuning_ptb": {"models": {"lstm": {"best": {"value": 6.5}}}},
               "reverse_copy": {"lengths": [10], "cross_entropy": {"lstm": [0.5]}}}
    dv.write_views(tmp_path, results)
    (tmp_path / dv.METRICS / "renamed_experiment.json").write_text("{}\n")
    dv.write_views(tmp_path, {"tuning_ptb": results["tuning_ptb"]})
    assert [p.name for p in (tmp_path / dv.METRICS).iterdir()] == ["tuning_ptb.json"]
    assert json.loads((tmp_path / dv.metrics_path("tuning_ptb")).read_text()) == {"lstm.best_valid_nll": 6.5}


def test_plot_tables_hold_every_point_of_every_curve_in_long_format():
    results = {"reverse_copy": {"lengths": [10, 20], "cross_entropy": {"lstm": [0.5, 1.5], "mogrifier": [0.25, 2.0]}}}
    table = dv.plot_tables(results)["reverse_copy"]
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [(r["length"], r["test_cross_entropy"], r["series"]) for r in rows] == [
        ("10", "0.5", "lstm"), ("20", "1.5", "lstm"), ("10", "0.25", "mogrifier"), ("20", "2", "mogrifier")]


def test_every_declared_plot_file_is_written_even_without_results(tmp_path):
    written = dv.write_views(tmp_path, {})
    assert not list(tmp_path.glob(f"{dv.METRICS}/*.json"))
    for name, (_, x, y, _) in dv.CURVES.items():
        assert (tmp_path / dv.PLOTS / f"{name}.csv").read_text() == f"{x},{y},series\n"
    assert len(written) == len(dv.CURVES)


def test_dvc_yaml_declares_every_metrics_file_and_every_plot_with_its_axes():
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["results_index"]
    declared_metrics = {next(iter(m)): next(iter(m.values())) for m in stage["metrics"]}
    assert declared_metrics == {dv.metrics_path(name): {"cache": False} for name in dv.HEADLINES}
    # each declared file is written because the stage depends on every experiment's results
    assert {f"results/{name}.json" for name in dv.HEADLINES} <= set(stage["deps"])
    declared = {next(iter(p)): next(iter(p.values())) for p in stage["plots"]}
    for name, (_, x, y, _) in dv.CURVES.items():
        spec = declared[f"{dv.PLOTS}/{name}.csv"]
        assert (spec["x"], spec["y"], spec["template"]) == (x, y, "series")
    assert (REPO / ".dvc" / "plots" / "series.json").exists()


def test_micmco_ptb_views_hold_table_5_1_and_the_fig_5_12_frontiers():
    def row(column, hidden_size, ppl):
        return {"curve": column.lower(), "hidden_size": hidden_size, "column": column, "test_perplexity": ppl,
                "test_kl": 0.01}
    result = {"table_5_1": [row("DReG 1 K/R", 64, 120.5), row("DReG 16 K", 64, 118.0), row("DReG 16 R", 64, 119.0),
                            {"curve": None, "hidden_size": 128, "column": "DReG 16 K"}],
              "figures": {"5.12": {"curves": ["dreg1.shared", "vimco1.shared"]}},
              "curves": {"dreg1.shared": {"label": "DReG 1 K/R", "frontier": [{"kl": 0.0, "nll": 4.9},
                                                                             {"kl": 0.1, "nll": 5.0}]}}}
    metrics = dv.headline_metrics({"micmco_ptb": result})["micmco_ptb"]
    assert metrics == {"hs64.dreg1.test_ppl": 120.5, "hs64.dreg16_best.test_ppl": 118.0}
    rows = list(csv.DictReader(io.StringIO(dv.plot_tables({"micmco_ptb": result})["micmco_ptb_fig_5_12"])))
    assert [(r["kl"], r["nll"], r["series"]) for r in rows] == [("0.0", "4.9", "DReG 1 K/R"),
                                                                ("0.1", "5", "DReG 1 K/R")]
