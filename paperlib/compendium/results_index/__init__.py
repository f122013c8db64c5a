"""The results index: one row per table and figure of the seeds (``results/seed_items.csv``).

Every row names our file, the paper's numbers (or its finding in words, where the paper gives only
a figure), our numbers read from ``results/*.json`` at the time the index is written, the scale we
ran at, a one-word verdict and a one-line reason; its details quote the seed sentences the verdict
judges (:data:`.quotes.QUOTES`, verbatim, with the seed file and section). Rows whose experiment has
not produced its results yet say which DVC stage makes them ("pending"), so nothing is silently missing. ``write_index``
renders ``results/README.md``: a table that reads at a glance, then one detail section per row with
the full evidence; the DVC stage ``results_index`` calls it after every experiment stage.

Modules: :mod:`.text` (the row record and its words), one module per experiment family building that family's rows
from its results (:mod:`.language_models`, :mod:`.averaging`, :mod:`.dynamic_evaluation` and
:mod:`.dynamic_evaluation_char`, :mod:`.micmco_synthetic`, :mod:`.micmco_ptb`, :mod:`.word_generation`),
:mod:`.rows` (the table of rows, one per seed item), :mod:`.quotes` (the seed sentences each row judges) and
:mod:`.render` (reading results, writing the index and the README's summary).

Verdict vocabulary (:data:`~paperlib.experiments.common.claims.VERDICTS`; its rules live in
:mod:`paperlib.experiments.common.claims`, where experiments declare their claims): ``reproduced``, ``partly``,
``within noise``, ``not reproduced``, ``not attempted`` (with the reason), ``diagram`` (nothing to measure; the
row names the code that implements what it depicts), ``encoded`` (a search space or setting carried over as
data), ``pending``.

A judged row reads ``<word>: <part>; <part>; ...``. Each part is one claim with its own verdict (one of
:data:`~paperlib.experiments.common.claims.PART_VERDICTS`) outside the parentheses that hold its evidence; evidence
never repeats a verdict word, so a reader can count the parts. The row's word follows from its parts by one
rule, :func:`verdict_word`: every part reproduced -> ``reproduced``; none reproduced (even partly) and every part
within noise -> ``within noise``; none reproduced (even partly) and some part not reproduced -> ``not
reproduced``; otherwise ``partly``. A claim made of several comparisons (per estimator, objective or figure) is
judged by the same rule over its comparisons. One comparison is read by :func:`direction_word`: beyond its tie
margin in the paper's direction -> reproduced; in the paper's direction but inside the margin (or with one seed,
where no margin is measured) -> within noise; the other way, at any size -> not reproduced. A row whose parts all
hold but that leaves some of the item unrun says so ("not run") and reads ``partly``.
"""

from paperlib.experiments.common.claims import VERDICTS, direction_word, part_word, verdict_word
from paperlib.compendium.results_index.text import (
    CELL_CHARS, INDEX, REASON_CHARS, SEED_ITEMS, MissingResult, NotAttempted, Row, default_reason, grouped_reason,
    model_name, plain, shorten,
)
from paperlib.compendium.results_index.micmco_ptb import ptb_key
from paperlib.compendium.results_index.rows import ROWS
from paperlib.compendium.results_index.render import (
    AIM_MINUTES, BUDGET_END, BUDGET_START, HEADLINE, README_END, README_START, anchor, build_index, current_table,
    load_results, load_wall_times, read_seed_items, readme_with_summary, recorded_work, render_budget,
    render_compute, render_definitions, render_details, render_markdown, render_quote, render_summary,
    scratch_estimate, write_index,
)

__all__ = [
    "AIM_MINUTES", "BUDGET_END", "BUDGET_START", "CELL_CHARS", "HEADLINE", "INDEX", "README_END", "README_START",
    "REASON_CHARS", "ROWS", "SEED_ITEMS", "VERDICTS", "MissingResult", "NotAttempted", "Row", "anchor", "build_index",
    "current_table", "default_reason", "direction_word", "grouped_reason", "load_results", "load_wall_times",
    "model_name", "part_word", "plain", "ptb_key", "read_seed_items", "readme_with_summary", "recorded_work",
    "render_budget", "render_compute", "render_definitions", "render_details", "render_markdown", "render_quote",
    "render_summary", "scratch_estimate", "shorten", "verdict_word", "write_index",
]
