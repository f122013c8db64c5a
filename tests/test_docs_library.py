"""The Python examples of docs/library.md run against the current library, in order, as one session.

Their budgets are cut for a test (each cut names the exact text it replaces, so an example that changes its numbers
fails here rather than running at full size): two training steps instead of the Trainer's thousand, four steps of
the hand-written loop, 200-token prefixes, five VAE steps, three of the word model, one epoch of the LSTM-NADE and
four test songs. What runs is otherwise the text a reader copies.
"""

import dataclasses
import re
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "library.md"

CUTS = {  # text in the examples -> what the test runs instead
    "ptb.valid[:10_001].to(device), ptb.test[:10_001].to(device)":
        "ptb.valid[:201].to(device), ptb.test[:201].to(device)",
    "steps = 800 ": "steps = 4 ",
    "evaluate_every=200": "evaluate_every=2",
    "max_batches=50": "max_batches=2",
    "for _ in range(1_000):": "for _ in range(5):",
    "for _ in range(2_000):": "for _ in range(3):",
    'rolls.split("test")': 'rolls.split("test")[:4]',
    "max_epochs=20, patience=2": "max_epochs=1, patience=2",
}


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_library_examples_run(data_root, mirror, tmp_path, monkeypatch, capsys):
    from paperlib.data import fetch_corpus
    from paperlib.train import Trainer

    fetch_corpus("jsb_chorales", data_root, mirror=mirror)

    blocks = examples()
    assert len(blocks) >= 6, "docs/library.md lost its examples"
    code = "\n".join(blocks)
    for text, cut in CUTS.items():
        assert code.count(text) == 1, f"the examples should contain {text!r} once (the test cuts it to {cut!r})"
        code = code.replace(text, cut)
    assert code.count('"data/raw"') == 2 and code.count('"runs/mine"') == 1
    code = code.replace('"data/raw"', repr(str(data_root))).replace('"runs/mine"', repr(str(tmp_path / "mine")))

    trained = []
    original = Trainer.__init__

    def two_steps(self, model, train_ids, valid_ids, config, *args, **kwargs):
        config = dataclasses.replace(config, max_steps=2, eval_every=1, eval_max_windows=2)
        trained.append(config)
        original(self, model, train_ids, valid_ids, config, *args, **kwargs)

    monkeypatch.setattr(Trainer, "__init__", two_steps)
    torch.manual_seed(0)
    namespace: dict = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - the documentation's own examples
    assert len(trained) == 1 and (tmp_path / "mine").is_dir()  # the Trainer example trained (briefly) and saved
    assert namespace["averager"].steps == 4 and namespace["report"] is not None  # evaluated at steps 2 and 4
    assert len(namespace["tuned"].trials) == 4  # coordinate search: three learning rates, then one more decay
    printed = capsys.readouterr().out
    assert re.search(r"test ppl [\d.]+ static, [\d.]+ dynamic", printed), printed
    assert re.search(r"estimate of ln p\(x\) -[\d.]+ nats, MI -?[\d.]+ nats", printed), printed
    assert re.search(r"log-likelihood per frame -[\d.]+ static, -[\d.]+ dynamic", printed), printed
    assert len(namespace["dynamic"].losses) == 4  # one per test song
    words = namespace["dssm"].sample_words(5)
    assert len(words) == 5 and all(isinstance(w, str) for w in words)
    losses = namespace["tuned"].result.losses
    assert losses.numel() == 200 and torch.isfinite(losses).all()  # the best trial's, on the 200 validation tokens


def test_the_example_cuts_name_text_that_is_there():
    """Each cut matches the examples exactly once; checked without the data mirror too, where the run above skips."""
    code = "\n".join(examples())
    for text in CUTS:
        assert code.count(text) == 1, text
