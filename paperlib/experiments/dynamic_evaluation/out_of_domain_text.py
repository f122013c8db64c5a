"""Out-of-domain text in the PTB character vocabulary (for Krause Tables 6.1/6.4's out-of-domain evaluation):
WikiText-2 words mapped to PTB's characters the way PTB's character files were made (lower case, numbers as
``N``, WikiText's "a @-@ b" splits joined), with counts of what the mapping changed."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
from torch import Tensor


EOS = "<eos>"
KEPT_TOKENS = ("<unk>", "N")  # PTB's unknown-word and number tokens, spelled out in the character files
WIKITEXT_JOINERS = {"@-@": "-", "@,@": ",", "@.@": "."}  # WikiText splits 1,000 as "1 @,@ 000"
NUMBER = re.compile(r"^[+-]?\d[\d,./:-]*$")


@dataclass
class CharMapping:
    """Character ids of mapped text and what the mapping changed (counts over the input's characters)."""

    ids: Tensor
    stats: dict[str, Any] = field(default_factory=dict)


def _join_wikitext_splits(tokens: Sequence[str]) -> list[str]:
    """Undo WikiText's "a @-@ b" splitting: "a-b" as one token, as PTB writes hyphenated words and numbers."""
    out: list[str] = []
    glue = False
    for tok in tokens:
        if tok in WIKITEXT_JOINERS and out:
            out[-1] += WIKITEXT_JOINERS[tok]
            glue = True
        elif glue:
            out[-1] += tok
            glue = False
        else:
            out.append(tok)
    return out


def map_words_to_chars(lines: Iterable[Sequence[str]], vocab) -> CharMapping:
    """Map word-tokenised lines into a PTB-style character stream with ids of ``vocab`` (the PTB char vocabulary).

    The mapping (applied per line, ``<eos>`` tokens in the input ignored):

    1. WikiText's split separators are undone: ``a @-@ b`` -> ``a-b``, ``1 @,@ 000`` -> ``1,000``;
    2. a token that is a number (digits with , . / : -) becomes ``N``, PTB's number token;
    3. ``<unk>`` and ``N`` are kept as they are; every other token is lowercased (PTB is lowercase);
    4. characters outside the vocabulary are dropped (``,``, parentheses, quotes, ``=``, accented and
       other non-ASCII letters, ...), and a token left empty is dropped;
    5. the remaining tokens are joined by ``_`` (PTB's word boundary) and the line ends in ``<eos>``;
       lines without tokens (WikiText's blank lines) are dropped.

    PTB's word-level text maps exactly onto PTB's character files. ``stats`` counts the input characters
    (of the tokens after step 1), those lowercased, those replaced by ``N``, those dropped (with the most
    frequent dropped characters) and the output length.
    """
    if EOS not in vocab or "_" not in vocab:
        raise ValueError("vocab must be a PTB-style character vocabulary with '<eos>' and '_' (word boundary)")
    stoi = vocab.stoi
    ids: list[int] = []
    raw = lowered = numbers = dropped = tokens_dropped = lines_kept = 0
    dropped_chars: dict[str, int] = {}
    for line in lines:
        words = []
        for tok in _join_wikitext_splits([t for t in line if t != EOS]):
            raw += len(tok)
            if tok in KEPT_TOKENS:
                words.append(tok)
                continue
            if NUMBER.match(tok):
                numbers += len(tok)
                words.append("N")
                continue
            low = tok.lower()
            lowered += sum(a != b for a, b in zip(tok, low))
            kept = "".join(ch for ch in low if ch in stoi)
            for ch in low:
                if ch not in stoi:
                    dropped_chars[ch] = dropped_chars.get(ch, 0) + 1
            dropped += len(low) - len(kept)
            if kept:
                words.append(kept)
            else:
                tokens_dropped += 1
        if not words:
            continue
        lines_kept += 1
        for index, word in enumerate(words):
            if index:
                ids.append(stoi["_"])
            ids.extend(stoi[ch] for ch in word)
        ids.append(stoi[EOS])
    common = sorted(dropped_chars.items(), key=lambda kv: (-kv[1], kv[0]))[:15]
    stats = {"input_chars": raw, "lowercased_chars": lowered, "number_chars_to_N": numbers, "dropped_chars": dropped,
             "dropped_fraction": dropped / max(raw, 1), "changed_fraction": (lowered + numbers + dropped) / max(raw, 1),
             "dropped_tokens": tokens_dropped, "lines": lines_kept, "output_chars": len(ids),
             "most_dropped": [[ch, n] for ch, n in common]}
    return CharMapping(torch.tensor(ids, dtype=torch.long), stats)


def chars_to_lines(ids: Tensor, vocab) -> list[str]:
    """Inverse view of :func:`map_words_to_chars`: one string per ``<eos>``-terminated line, ``_`` as a space."""
    text = "".join("\n" if tok == EOS else (" " if tok == "_" else tok) for tok in vocab.decode(ids.tolist()))
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")
