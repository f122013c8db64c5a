import os
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
