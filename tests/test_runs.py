"""A stage's runs (paperlib/experiments/common/runs.py): the job map, the run recorded once, the JSON without NaN."""

import json
import math
import operator

import pytest
import torch

from paperlib.experiments.common.runs import json_safe, map_jobs, run_once


def test_json_safe_replaces_non_finite_floats_at_any_depth_and_keeps_everything_else():
    value = {"a": math.nan, "b": [1.0, math.inf, (2, -math.inf)], "c": {"d": 0.5, 3: "x"}, "e": None, "f": True}
    assert json_safe(value) == {"a": None, "b": [1.0, None, [2, None]], "c": {"d": 0.5, 3: "x"}, "e": None, "f": True}
    json.dumps(json_safe(value), allow_nan=False)  # strict JSON now


def _product_and_threads(a: int, b: int) -> tuple[int, int]:
    torch.set_num_threads(1)  # a job sets its own thread count, as the stages' jobs do
    return a * b, torch.get_num_threads()


@pytest.mark.parametrize("workers", [1, 2])
def test_map_jobs_returns_results_in_the_order_of_the_arguments_and_restores_the_thread_count(workers):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        args = [(i, i + 1) for i in range(5)]
        assert [p for p, _ in map_jobs(_product_and_threads, args, workers)] == [i * (i + 1) for i in range(5)]
        assert torch.get_num_threads() == 2  # in-process jobs changed it; map_jobs put it back
        assert map_jobs(operator.add, [], workers) == []
    finally:
        torch.set_num_threads(threads)


def test_run_once_runs_the_body_once_and_reads_the_record_back(tmp_path):
    path = tmp_path / "run.json"
    calls = []

    def body():
        calls.append(1)
        return {"loss": math.nan, "steps": 3}

    first = run_once(path, 1, None, body, encode=json_safe)
    assert calls == [1] and math.isnan(first["loss"]) and first["seconds"] >= 0  # the caller sees the run itself
    stored = json.loads(path.read_text())
    assert stored == {"loss": None, "steps": 3, "seconds": first["seconds"]}  # the file holds the encoded record
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically

    def must_not_run():
        raise AssertionError("a finished run was trained again")

    assert run_once(path, 1, None, must_not_run) == stored
