import os
import shutil
from pathlib import Path

import pytest
import torch

# Two cores on the reference machine; keep test runs predictable and deterministic.
torch.set_num_threads(int(os.environ.get("PAPERLIB_TEST_THREADS", "1")))

REPO = Path(__file__).resolve().parents[1]


def find_mirror() -> Path | None:
    """The local data mirror: $PAPERLIB_DATA_MIRROR, else ../shared/data beside the repository."""
    env = os.environ.get("PAPERLIB_DATA_MIRROR")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for folder in candidates:
        if (folder / "MANIFEST.json").is_file():
            return folder
    return None


@pytest.fixture(scope="session")
def mirror() -> Path:
    folder = find_mirror()
    if folder is None:
        pytest.skip("no data mirror: set PAPERLIB_DATA_MIRROR to a copy of the corpora (tests never use the network)")
    return folder


@pytest.fixture(scope="session")
def data_root(mirror, tmp_path_factory) -> Path:
    """PTB, PTB characters and WikiText-2 fetched (verified) from the mirror into a scratch folder."""
    from paperlib.data import fetch_corpus

    root = tmp_path_factory.mktemp("raw")
    for name in ("ptb", "ptb_char", "wikitext2"):
        fetch_corpus(name, root, mirror=mirror)
    return root


# The end-to-end tests (tests/test_pipeline.py) need the smoke pipeline built in a scratch copy, ~8 minutes on one
# core. It starts in the background as soon as those tests are selected, and they run last, so the build and the
# unit tests (one thread each) share the two cores.
SMOKE_BUILD = pytest.StashKey[object]()


def _is_pipeline_test(item: pytest.Item) -> bool:
    return item.path.name == "test_pipeline.py"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_is_pipeline_test)  # stable: every other test keeps its order


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
