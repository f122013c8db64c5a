"""The compendium layer: everything that turns the experiments' results into what a reader sees.

The command line (:mod:`~paperlib.compendium.cli`), the notebook runner (:mod:`~paperlib.compendium.notebooks`),
one plotting style (:mod:`~paperlib.compendium.figure_style`), DVC's metrics and plots
(:mod:`~paperlib.compendium.dvc_views`) and the results index (:mod:`~paperlib.compendium.results_index`). It reads
results JSON and the experiments' settings; nothing in the library or the experiments imports it.
"""
