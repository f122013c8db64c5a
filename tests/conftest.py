import os
import shutil
from pathlib import Path

import pytest
import torch

# Two cores on the reference machine; keep test runs predictable and deterministic.
torch.set_num_threads(int(os.environ.get("PAPERLIB_TEST_THREADS", "1")))

# On a GPU machine the device policy's `auto` trains on CUDA, so the unit suite does too. The tests that compare a
# resumed run with an uninterrupted one bit for bit need the same kernels to give the same bits there: cuBLAS with a
# fixed workspace (set before CUDA starts) and PyTorch's deterministic kernels instead of atomics (warn_only: an
# operator without a deterministic kernel warns, and a bitwise check that depends on it fails, naming it).
if torch.cuda.is_available():
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    # and IEEE float32 everywhere from the start (cuDNN's RNNs default to TF32): the tolerances are float32's,
    # whichever test a worker process runs first
    from paperlib.device import configure

    configure("fp32")

REPO = Path(__file__).resolve().parents[1]


# The compendium's own packages (word lists, DVC, notebooks, the PostgreSQL client), which a GPU image without a
# package registry lacks. With PAPERLIB_ALLOW_MISSING set (benchmarks/gpu.sh sets it there) a test that fails
# only because one of these is not installed is reported as skipped, naming the package; everywhere else (CI, a
# developer's machine) it fails as it should.
ALLOWED_MISSING = frozenset({"wordfreq", "dvc", "papermill", "nbformat", "nbval", "ipykernel", "psycopg2"})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    missing = call.excinfo.value.name if call.excinfo is not None and call.excinfo.errisinstance(
        ModuleNotFoundError) else None
    if report.failed and missing and missing.split(".")[0] in ALLOWED_MISSING and \
            os.environ.get("PAPERLIB_ALLOW_MISSING"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs {missing}, not installed here")


def find_mirror() -> Path | None:
    """The local data mirror: $PAPERLIB_DATA_MIRROR, else ../shared/data beside the repository."""
    env = os.environ.get("PAPERLIB_DATA_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for folder in candidates:
        if (folder / "MANIFEST.json").is_file():
            return folder
    return None


@pytest.fixture
def float64():
    """torch's default dtype float64 for one test (comparisons of two computations down to rounding)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


@pytest.fixture(scope="session")
def mirror() -> Path:
    folder = find_mirror()
    if folder is None:
        pytest.skip("no data mirror: set PAPERLIB_DATA_MIRROR to a copy of the corpora (tests never use the network)")
    return folder


@pytest.fixture(scope="session")
def manifest(mirror) -> dict:
    """The data mirror's own record of its files (paths, checksums, sizes, counts), independent of paperlib's
    registry; skips for a mirror whose MANIFEST.json records no files (the device script's mirror of links to the
    corpora fetched under data/raw/ names only the corpora it holds)."""
    import json

    data = json.loads((mirror / "MANIFEST.json").read_text())
    if "ptb" not in data:
        pytest.skip("the data mirror's MANIFEST.json records no files (a mirror of links to fetched corpora)")
    return data


@pytest.fixture(scope="session")
def data_root(mirror, tmp_path_factory) -> Path:
    """PTB, PTB characters and WikiText-2 fetched (verified) from the mirror into a scratch folder."""
    from paperlib.data import fetch_corpus

    root = tmp_path_factory.mktemp("raw")
    for name in ("ptb", "ptb_char", "wikitext2"):
        fetch_corpus(name, root, mirror=mirror)
    return root


# The end-to-end tests (tests/test_pipeline.py) need the smoke pipeline built in a scratch copy and its notebooks
# re-run by nbval (tests/smoke_chain.py), the longest part of the suite. It starts in the background as soon as those
# tests are selected, and they run last, so the build and the unit tests (one thread each) share the two cores.
SMOKE_BUILD = pytest.StashKey[object]()


def _is_pipeline_test(item: pytest.Item) -> bool:
    return item.path.name == "test_pipeline.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_is_pipeline_test)  # stable: every other test keeps its order
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (benchmarks/gpu.sh runs these on one)")
        for item in items:
            if item.get_closest_marker("cuda"):
                item.add_marker(skip)


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if config.option.collectonly or not any(map(_is_pipeline_test, session.items)):
        return
    mirror = find_mirror()
    if mirror is not None and shutil.which("git") is not None:  # else the tests skip, saying why
        from tests.test_pipeline import start_smoke_build

        config.stash[SMOKE_BUILD] = start_smoke_build(config._tmp_path_factory, mirror)


def pytest_unconfigure(config: pytest.Config) -> None:
    build = config.stash.get(SMOKE_BUILD, None)
    if build is not None:  # a session ended early (-x, Ctrl-C) must not leave the build running
        from tests.test_pipeline import _stop

        _stop(build.proc)
