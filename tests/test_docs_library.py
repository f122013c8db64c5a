"""The Python examples of docs/library.md run against the current library, in order, as one session.

Their budgets are cut for a test (each cut names the exact text it replaces, so an example that changes its numbers
fails here rather than running at full size): two training steps instead of the Trainer's thousand, four steps of
the hand-written loop, 200-token prefixes, five VAE steps and three of the word model. What runs is otherwise the
text a reader copies.
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
}


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_library_examples_run(data_root, tmp_path, monkeypatch, capsys):
    from paperlib.train import Trainer

    blocks = examples()
    assert len(blocks) >= 5, "docs/library.md lost its examples"
    code = "\n".join(blocks)
    for text, cut in CUTS.items():
        assert code.count(text) == 1, f"the examples should contain {text!r} once (the test cuts it to {cut!r})"
        code = code.replace(text, cut)
    assert code.count('"data/raw"') == 1 and code.count('"runs/mine"') == 1
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
    words = namespace["dssm"].sample_words(5)
    assert len(words) == 5 and all(isinstance(w, str) for w in words)
    static, dynamic = namespace["static"], namespace["dynamic"]
    assert static.losses.numel() == dynamic.losses.numel() == 200
    assert torch.isfinite(static.losses).all() and torch.isfinite(dynamic.losses).all()


def test_the_example_cuts_name_text_that_is_there():
    """Each cut matches the examples exactly once; checked without the data mirror too, where the run above skips."""
    code = "\n".join(examples())
    for text in CUTS:
        assert code.count(text) == 1, text
