"""`dvc metrics show` / `dvc plots show` inputs are derived from the results, never typed in."""

import csv
import io
import json

import yaml

from paperlib import dvc_views as dv
from paperlib.results_index import load_results
from tests.conftest import REPO


def test_headline_metrics_are_the_numbers_in_the_results():
    results = load_results(REPO)
    metrics = dv.headline_metrics(results)
    assert set(metrics) == set(dv.HEADLINES) & set(results)
    if "dyneval" in results:
        static = next(r for r in results["dyneval"]["corpora"]["ptb"]["rows"] if r["key"] == "static")
        assert metrics["dyneval"]["ptb.static.test_ppl"] == static["test_ppl"]
    for values in metrics.values():
        assert values and all(isinstance(v, float) for v in values.values())


def test_plot_tables_hold_every_point_of_every_curve_in_long_format():
    results = {"reverse_copy": {"lengths": [10, 20], "cross_entropy": {"lstm": [0.5, 1.5], "mogrifier": [0.25, 2.0]}}}
    table = dv.plot_tables(results)["reverse_copy"]
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [(r["length"], r["test_cross_entropy"], r["series"]) for r in rows] == [
        ("10", "0.5", "lstm"), ("20", "1.5", "lstm"), ("10", "0.25", "mogrifier"), ("20", "2", "mogrifier")]


def test_every_declared_plot_file_is_written_even_without_results(tmp_path):
    written = dv.write_views(tmp_path, {})
    assert json.loads((tmp_path / dv.METRICS).read_text()) == {}
    for name, (_, x, y, _) in dv.CURVES.items():
        assert (tmp_path / dv.PLOTS / f"{name}.csv").read_text() == f"{x},{y},series\n"
    assert len(written) == 1 + len(dv.CURVES)


def test_dvc_yaml_declares_the_metrics_and_every_plot_with_its_axes():
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["results_index"]
    assert [next(iter(m)) for m in stage["metrics"]] == [dv.METRICS]
    declared = {next(iter(p)): next(iter(p.values())) for p in stage["plots"]}
    for name, (_, x, y, _) in dv.CURVES.items():
        spec = declared[f"{dv.PLOTS}/{name}.csv"]
        assert (spec["x"], spec["y"], spec["template"]) == (x, y, "series")
    assert (REPO / ".dvc" / "plots" / "series.json").exists()


def test_micmco_ptb_views_hold_table_5_1_and_the_fig_5_12_frontiers():
    result = {"table_5_1": [{"curve": "dreg1.shared", "hidden_size": 64, "column": "DReG 1 K/R",
                             "test_perplexity": 120.5, "test_kl": 0.01}, {"curve": None, "hidden_size": 128,
                                                                            "column": "DReG 16 K"}],
              "figures": {"5.12": {"curves": ["dreg1.shared", "vimco1.shared"]}},
              "curves": {"dreg1.shared": {"label": "DReG 1 K/R", "frontier": [{"kl": 0.0, "nll": 4.9},
                                                                             {"kl": 0.1, "nll": 5.0}]}}}
    metrics = dv.headline_metrics({"micmco_ptb": result})["micmco_ptb"]
    assert metrics == {"table_5_1.hs64.DReG_1_KR.test_ppl": 120.5, "table_5_1.hs64.DReG_1_KR.test_kl": 0.01}
    rows = list(csv.DictReader(io.StringIO(dv.plot_tables({"micmco_ptb": result})["micmco_ptb_fig_5_12"])))
    assert [(r["kl"], r["nll"], r["series"]) for r in rows] == [("0.0", "4.9", "DReG 1 K/R"),
                                                                ("0.1", "5", "DReG 1 K/R")]
