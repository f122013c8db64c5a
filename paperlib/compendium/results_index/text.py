"""The index's row record and its text: verdict words, reasons, plain names, cell shortening, number formats."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from paperlib.experiments.common.claims import VERDICTS, Claim
from paperlib.reference.names import MODEL_NAMES as _MODEL_NAMES, model_name  # noqa: F401 (re-exported)


Results = Mapping[str, Any]
Judged = str | tuple[str, str]  # a verdict text, or (verdict text, one-line reason)
Text = str | Callable[[Results], str]

SEED_ITEMS = "results/seed_items.csv"
INDEX = "results/README.md"
REASON_CHARS = 125  # the table's reason column: one line of plain words
CELL_CHARS = 120  # the table's paper and ours cells; longer texts are cut at a clause and end in " …"


class MissingResult(LookupError):
    """A row's results file (or a key in it) does not exist yet."""


class NotAttempted(LookupError):
    """The active profile deliberately does not run what a row needs; the message says why, ``reason`` briefly."""

    def __init__(self, message: str, reason: str | None = None):
        super().__init__(message)
        self.reason = reason or message


@dataclass(frozen=True)
class Row:
    """How the index fills one seed item's row; callables receive the loaded results files.

    ``verdict`` may return its text or (text, reason); ``reason`` (when given) is the row's one-line reason,
    otherwise it is taken from the verdict (:func:`default_reason`). ``paper_short`` / ``ours_short`` are the
    table's cells where the full texts (kept in the row's details) are too long to read at a glance.
    """

    file: str
    paper: str
    ours: Text
    scale: Text
    verdict: Callable[[Results], Judged] | str
    needs: tuple[str, ...] = ()  # results/<name>.json files the callables read
    reason: Text | None = None
    paper_short: Text | None = None
    ours_short: Text | None = None

    def render(self, results: Results) -> dict[str, str]:
        """The row's texts: ours, ours_short, paper_short, scale, verdict, status (its word) and reason."""
        missing = [name for name in self.needs if name not in results]
        if missing:
            stages = ", ".join(f"`dvc repro {name}`" for name in missing)
            return self._unjudged(f"pending: {stages}", f"no results yet: run {stages}")
        measured: dict[str, str] = {}  # ours and scale, kept when only the verdict declines to judge what ran
        try:
            ours, scale = (_text(part, results) for part in (self.ours, self.scale))
            ours_short = _text(self.ours_short, results) if self.ours_short is not None else ours
            measured = {"ours": ours, "ours_short": ours_short, "scale": scale}
            paper_short = _text(self.paper_short, results) if self.paper_short is not None else self.paper
            judged = self.verdict(results) if callable(self.verdict) else self.verdict
            verdict, reason = judged if isinstance(judged, tuple) else (judged, None)
            if self.reason is not None:
                reason = _text(self.reason, results)
        except NotAttempted as why:
            return {**self._unjudged(f"not attempted: {why}", why.reason), **measured}
        except (KeyError, IndexError, MissingResult) as error:
            return self._unjudged(f"pending: results lack {error}", f"results lack {error}")
        return {"ours": ours, "ours_short": ours_short, "paper_short": paper_short, "scale": scale,
                "verdict": verdict, "status": _status(verdict), "reason": reason or default_reason(verdict)}

    def _unjudged(self, verdict: str, reason: str) -> dict[str, str]:
        paper_short = self.paper_short if isinstance(self.paper_short, str) else self.paper
        return {"ours": "—", "ours_short": "—", "paper_short": paper_short, "scale": "—", "verdict": verdict,
                "status": _status(verdict), "reason": reason}


def _text(part: Text, results: Results) -> str:
    return part(results) if callable(part) else part


def _status(verdict: str) -> str:
    for word in sorted(VERDICTS, key=len, reverse=True):  # "not reproduced" before "reproduced"
        if verdict.startswith(word):
            return word
    raise ValueError(f"verdict {verdict!r} must start with one of {', '.join(VERDICTS)}")


# -- reasons and plain names --------------------------------------------------------------------

_GROUP = {"reproduced": "holds", "partly reproduced": "holds in part", "within noise": "within noise",
          "not reproduced": "fails"}


LADDER_LABEL = "ladder: "  # how a budget ladder's part label starts (paperlib.experiments.common.ladder.claim_part)


def grouped_reason(parts: Sequence[tuple[str, str]], note: str = "") -> str:
    """A reason from (short label, part verdict) pairs: "holds: a, b; within noise: c; fails: d" (+ ``note``).
    When that is too long for a line, a budget ladder's part (its label starts with "ladder: ") is named "the
    budget ladder" instead of by its claim, and if it is still too long the parts that hold are counted instead of
    named (a ladder among them still named), so that a part holding only on the ladder is not hidden in a
    count, nor ``note`` (what was not run) cut off behind a list of parts that all hold."""
    groups: dict[str, list[str]] = {}
    for label, word in parts:
        groups.setdefault(_GROUP[word], []).append(label)
    tail = f"; {note}" if note else ""

    def ladders(labels: list[str]) -> int:
        return sum(label.startswith(LADDER_LABEL) for label in labels)

    def ladder_name(n: int) -> str:
        return "the budget ladder" if n == 1 else f"{n} readings of the budget ladder"

    def named(group: str) -> str:
        labels = groups[group]
        n = ladders(labels)
        plain = [label for label in labels if not label.startswith(LADDER_LABEL)] + [ladder_name(n)] * bool(n)
        return f"{group}: {', '.join(plain)}"

    text = "; ".join(f"{g}: {', '.join(groups[g])}" for g in _GROUP.values() if g in groups) + tail
    if len(text) > REASON_CHARS and any(ladders(labels) for labels in groups.values()):
        text = "; ".join(named(g) for g in _GROUP.values() if g in groups) + tail
    if len(text) > REASON_CHARS and "holds" in groups and (len(groups) > 1 or tail):
        rest = [named(g) for g in list(_GROUP.values())[1:] if g in groups]
        n_ladders = ladders(groups["holds"])
        held = len(groups["holds"]) - n_ladders
        if not n_ladders and not rest:  # every part holds, and the note says what was not run
            counted = ("the one part holds" if held == 1 else "both parts hold" if held == 2 else
                       f"all {held} parts hold")
        elif not n_ladders:
            counted = "the other one holds" if held == 1 else f"the other {held} hold"
        elif not held:
            counted = f"holds: {ladder_name(n_ladders)}" if n_ladders == 1 else f"hold: {ladder_name(n_ladders)}"
        else:
            counted = f"{ladder_name(n_ladders)} and {held} other part{'s' if held > 1 else ''} hold"
        text = "; ".join([*rest, counted]) + tail
    return _clip(text)


_PART = re.compile(r"\b(partly reproduced|within noise|not reproduced|reproduced)\b")


def _parts_of(body: str) -> list[tuple[str, str]]:
    """The (label, part verdict) pairs of a verdict body "<label>: <word> (<evidence>); ..." or "'<claim>' <word>
    (...)": per top-level clause, the text before its verdict word outside parentheses; clauses without one (notes)
    are skipped."""
    parts = []
    for clause in _top_level(body):
        bare = _without_parentheses(clause)
        found = _PART.search(bare)
        if found:
            label = bare[: found.start()].strip().rstrip(":").strip().strip("'")
            if label:
                parts.append((label, found[1]))
    return parts


def _top_level(text: str, sep: str = ";") -> list[str]:
    """``text`` split at ``sep`` outside parentheses, each piece stripped."""
    out, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == sep and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [piece for piece in out if piece]


def _without_parentheses(text: str) -> str:
    while (stripped := re.sub(r"\s*\([^()]*\)", "", text)) != text:
        text = stripped
    return re.sub(r"\s+([,;:])", r"\1", text).strip()


def _clip(text: str, limit: int = REASON_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(",;: ")
    return cut + " …"


def default_reason(verdict: str) -> str:
    """A row's reason from its verdict text: the parts it judges grouped by their verdicts (:func:`grouped_reason`);
    without parts, the body after "<word>: ", whole if it fits :data:`REASON_CHARS`, else without its parenthesised
    evidence, else its first clause, else cut."""
    body = verdict.split(": ", 1)[1] if ": " in verdict else verdict
    parts = _parts_of(body)
    if parts:
        return grouped_reason(parts)
    first = _top_level(body)[0] if body else body
    for candidate in (body, _without_parentheses(body), first, _without_parentheses(first)):
        if candidate and len(candidate) <= REASON_CHARS:
            return candidate
    return _clip(_without_parentheses(first))


def shorten(text: str, limit: int = CELL_CHARS) -> str:
    """``text`` for a table cell: whole if it fits, else as many leading clauses (then comma-separated items) as
    fit, ending in " …" (the row's details hold the whole text)."""
    if len(text) <= limit:
        return text
    for sep in (";", ","):
        kept = ""
        for piece in _top_level(text, sep):
            candidate = f"{kept}{sep} {piece}" if kept else piece
            if len(candidate) > limit - 2:
                break
            kept = candidate
        if kept:
            return kept + " …"
    return _clip(text, limit)


# Internal keys that reach the index's text from the results files, and their plain names (backticked code and
# file names are left alone).
_PLAIN = [(re.compile(rf"\b{re.escape(key)}\b"), name) for key, name in sorted(
    _MODEL_NAMES.items(), key=lambda kv: -len(kv[0]))] + [
    (re.compile(r"\bmogrifier_r(\d+)\b"), r"Mogrifier r=\1"), (re.compile(r"\bneural_cache\b"), "neural cache"),
    (re.compile(r"\bglobal_rms\b"), "global RMS"), (re.compile(r"\bsparse_recurrent\b"), "sparse (recurrent)"),
    (re.compile(r"\bsparse_output\b"), "sparse (output)"), (re.compile(r"\bsgd\b"), "SGD"),
    (re.compile(r"\bwikitext2\b"), "WikiText-2"), (re.compile(r"\bradam\b"), "RAdam"),
    (re.compile(r"\bmogrifier\b"), "Mogrifier")]


def plain(text: str) -> str:
    """``text`` with the results files' internal keys (``mogrifier_lstm``, ``global_rms``, ...) replaced by plain
    names, outside `backticks`."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):
        for pattern, name in _PLAIN:
            pieces[i] = pattern.sub(name, pieces[i])
    return "`".join(pieces)


# -- formatting -----------------------------------------------------------------------------


def _f(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:,.{digits}f}"


def three_quarters(values: Sequence[float]) -> float:
    """The value a logged curve had three quarters of the way in (the last quarter's start: the entry before its last
    ``len // 4``), for "still falling over the last quarter"."""
    return values[len(values) - len(values) // 4 - 1]


def _profile_note(results: Results, name: str) -> str:
    profile = results[name].get("profile", "?")
    return "" if profile == "cpu" else f" [profile {profile}]"


def index_text(claim: Claim) -> str:
    """The index's verdict text of ``claim``: :meth:`~paperlib.experiments.common.claims.Claim.text` with each part's
    rule named first in its evidence ("rule kind: seed margin; ..."), so that the details say how every part was
    judged (the kinds are the rows of the header's rule table; a rule's full sentence stays in the claims tables)."""
    parts = "; ".join(f"{p.label}{f' ({p.corpus})' if p.corpus else ''}: {p.verdict} (rule kind: {p.kind}; "
                      f"{p.evidence})" for p in claim.parts)
    return f"{claim.verdict}: {parts}" + (f"; {claim.note}" if claim.note else "")


def _claim_verdict(claim: Claim) -> tuple[str, str]:
    """A row's verdict text and reason from a :class:`~paperlib.experiments.common.claims.Claim`."""
    return index_text(claim), grouped_reason([(p.label, p.verdict) for p in claim.parts], claim.note)
