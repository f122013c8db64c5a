"""The PTB MICMCO frontiers drawn like the thesis' figures: one image per group of thesis figures
(:data:`~paperlib.compendium.figure_style.MICMCO_PTB_GROUPS`), one panel per figure, from a ``micmco_ptb`` results
file of any profile (``results/micmco_ptb.json``, or ``results/gpu/micmco_ptb.json`` from a GPU machine).

Within an image the NLL axis is shared, and the KL axis by the panels of one estimator family within a row. Line and
marker say the objective; KL rings are larger than Rényi dots, so points where the two coincide stay visible as a dot
inside a ring. Colour says the family (its standard run) or how a run departs from the standard one, the same
departure in the same colour in every image. Frontier points above the NLL axis are drawn in a grey band at its top;
the KL axis ends where the points below that top stop being an isolated tail (:func:`kl_limits`), and points beyond
it are drawn as ▶ at the right edge with their KL written beside.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any, Iterable, Mapping

from paperlib.compendium import figure_style
from paperlib.reference.micmco import MICMCO_PTB_TABLE_5_1
from paperlib.reference.setups import MELIS_PTB_MICMCO

GROUPS = figure_style.MICMCO_PTB_GROUPS  # the results index links each figure to the same files
OBJECTIVE_STYLE = {
    "K/R": dict(ls=":", marker="s", mfc="none", ms=7.5),
    "kl": dict(ls="--", marker="o", mfc="none", ms=8.5),
    "renyi": dict(ls="-", marker="o", ms=5),
    "power": dict(ls="-.", marker="x", ms=7.5, mew=1.6),
}
OBJECTIVE_KEY = {"K/R": "K/R: 1 sample in the divergence term, where the KL and Rényi objectives coincide",
                 "kl": "KL objective, 16 samples in the divergence term",
                 "renyi": "Rényi objective, 16 samples in the divergence term",
                 "power": "power objective, 16 samples"}
# One colour per kind of departure across all images: more steps, a larger batch, a larger model, and the two
# asymmetric sample counts, none of them a family's colour (figure_style.COLOURS: DReG blue, VIMCO orange)
DEPARTURE_COLOUR = {"T×16": figure_style.PALETTE[2], "bs×16": figure_style.PALETTE[4],
                    "T×2": figure_style.PALETTE[2], "bs×2": figure_style.PALETTE[4],
                    "hs×2": "black", "hs×2 T×2": figure_style.PALETTE[5],
                    "16/1": "#a50f15", "1/16": "#6a3d9a"}
FAMILY_KEY = {"dreg": "DReG (Gaussian latents)", "vimco": "VIMCO (categorical latents)"}
FAMILY_NAME = {"dreg": "DReG", "vimco": "VIMCO"}  # as the thesis names its curves: "DReG 16/1", "VIMCO 1"


# The level of a model without context (paperlib.experiments.micmco.ptb.unigram): wide, light and behind the frontiers,
# unlike any objective's line
UNIGRAM_LINE = {"color": "0.78", "ls": "-", "lw": 3.0, "zorder": 0.5}


def scored_on(fig_id: str) -> str:
    """What a thesis figure's curves are scored on: ``train`` (the training fit) or ``valid``, by its first curve."""
    from paperlib.experiments.micmco.ptb.design import FIGURES

    return "train" if FIGURES[fig_id].configurations[0].split(".")[1] == "train" else "valid"


def departure_key(hidden_size: int, families: Iterable[str] = ()) -> dict[str, str]:
    """The key of each departure's colour; the asymmetric ones carry the thesis' curve names for ``families``."""
    def named(tag: str) -> str:
        return " and ".join(f"{FAMILY_NAME[f]} {tag}" for f in sorted(families)) or tag

    return {"T×16": "T×16: base run with 16× the optimisation steps",
            "bs×16": "bs×16: base run with 16× the batch size",
            "T×2": "T×2: base run with twice the optimisation steps",
            "bs×2": "bs×2: base run with twice the batch size",
            "hs×2": f"hs×2: base run with twice the hidden size ({2 * hidden_size})",
            "hs×2 T×2": "hs×2 T×2: base run with twice the hidden size and the steps",
            "16/1": f"{named('16/1')}: 16 samples in the likelihood term, 1 in the divergence term",
            "1/16": f"{named('1/16')}: 1 sample in the likelihood term, 16 in the divergence term"}


def objective_of(c: Mapping[str, Any]) -> str:
    e = c["estimator"]
    return "K/R" if e["objective"] != "power" and e["kl_samples"] == 1 else e["objective"]


def departure_of(c: Mapping[str, Any], settings: Mapping[str, Any]) -> str | None:
    """The tag of a run's departure from the profile's standard run, as in the curve labels; None if standard."""
    e, tags = c["estimator"], []
    if c["hidden_size"] != settings["hidden_size"]:
        tags.append(f"hs×{c['hidden_size'] // settings['hidden_size']}")
    tags += [f"{t}×{f}" for t, f in (("T", c["steps_factor"]), ("bs", c["batch_factor"])) if f != 1]
    if e["lik_samples"] != e["kl_samples"]:
        tags.append(f"{e['lik_samples']}/{e['kl_samples']}")
    return " ".join(tags) or None


def _line_style(c: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    d = departure_of(c, settings)
    return dict(color=figure_style.colour(c["estimator"]["base"]) if d is None else DEPARTURE_COLOUR[d],
                **OBJECTIVE_STYLE[objective_of(c)])


def _frontier_points(results: Mapping[str, Any], fig_ids: list[str]) -> list[tuple[float, float]]:
    from paperlib.experiments.micmco.ptb.design import FIGURES

    curves = results["curves"]
    return [(p["kl"], p["nll"]) for f in fig_ids if f in results["figures"]
            for n in FIGURES[f].configurations if n in curves for p in curves[n]["frontier"]]


def nll_limits(results: Mapping[str, Any], fig_ids: list[str]) -> tuple[float, float]:
    """A group's NLL axis: from its lowest frontier point to the highest of its curves' best points + 2 HV margins, so
    that every curve shows its best point; frontier points above are drawn in a band at the top."""
    from paperlib.experiments.micmco.ptb.design import FIGURES

    curves, settings = results["curves"], results["settings"]
    points = _frontier_points(results, fig_ids)
    if not points:
        return 0.0, 1.0
    best = [min(p["nll"] for p in curves[n]["frontier"]) for f in fig_ids if f in results["figures"]
            for n in FIGURES[f].configurations if n in curves and curves[n]["frontier"]]
    lowest, highest = min(best), max(n for _, n in points)
    top = max(min(max(best) + 2 * settings["hv_margin"], highest + 0.04 * (highest - lowest)), lowest + 0.1)
    return lowest - 0.06 * (top - lowest), top


def kl_reach(kls: Iterable[float]) -> float:
    """The largest KL worth an axis: the largest of ``kls`` unless the upper half of them ends in an isolated tail,
    a point more than twice the KL of the one before it; the axis then stops before the tail (one run far out to
    the right would otherwise squeeze every other curve into a sliver of the panel)."""
    ks = sorted(kls)
    if not ks:
        raise ValueError("no KL values to reach")
    for i in range(max(len(ks) // 2, 1), len(ks)):
        if ks[i - 1] > 0 and ks[i] > 2 * ks[i - 1]:
            return ks[i - 1]
    return ks[-1]


def kl_limits(results: Mapping[str, Any], fig_ids: list[str], top: float) -> tuple[float, float]:
    """The KL axis shared by panels ``fig_ids``: up to :func:`kl_reach` of their frontier points below the top of the
    NLL axis."""
    shown = [k for k, n in _frontier_points(results, fig_ids) if n <= top]
    return (min([0.0, *shown]), 1.08 * kl_reach(shown) + 1e-3 if shown else 1.0)


def family_of(results: Mapping[str, Any], fig_id: str) -> str:
    """The estimator families of a thesis figure's curves: ``dreg``, ``vimco``, or ``dreg+vimco`` where they mix."""
    from paperlib.experiments.micmco.ptb.design import FIGURES

    bases = {results["curves"][n]["estimator"]["base"] for n in FIGURES[fig_id].configurations
             if n in results["curves"]}
    return "+".join(sorted(bases))


def panel_title(fig_id: str) -> str:
    """A panel's title: the thesis figure and what it varies (the design's ASCII "x2" set as "×2")."""
    from paperlib.experiments.micmco.ptb.design import FIGURES

    return f"Fig. {fig_id}\n" + "\n".join(textwrap.wrap(FIGURES[fig_id].title.replace(" x2", " ×2"), 42))


def draw_frontier(ax, c: Mapping[str, Any], settings: Mapping[str, Any], top: float, right: float,
                  band_y: float) -> None:
    """The frontier as far as the panel's NLL axis goes; points above it as ▲ in the band (▶ at the right edge if
    their KL is off the axis too); points below it but beyond the KL axis as ▶ at the right edge, their KL beside."""
    style = _line_style(c, settings)
    kl = [p["kl"] for p in c["frontier"]]
    nll = [p["nll"] for p in c["frontier"]]
    xs, ys = [], []
    for i, (k, n) in enumerate(zip(kl, nll)):
        if n <= top:
            xs.append(k), ys.append(n)
        elif i and nll[i - 1] <= top:  # continue the line to where it leaves the panel
            xs.append(kl[i - 1] + (k - kl[i - 1]) * (top - nll[i - 1]) / (n - nll[i - 1])), ys.append(top)
    ax.plot(xs, ys, ls=style["ls"], color=style["color"], marker="none")
    ax.plot([k for k, n in zip(kl, nll) if n <= top], [n for n in nll if n <= top], ls="none",
            **{k: v for k, v in style.items() if k != "ls"})
    for k, n in zip(kl, nll):
        if n <= top and k > right:
            ax.plot([right], [n], ls="none", marker=">", color=style["color"], ms=7, clip_on=False)
            ax.annotate(f"KL {k:.2f}", (right, n), xytext=(-9, 0), textcoords="offset points", ha="right",
                        va="center", fontsize=9, color=style["color"],
                        bbox=dict(fc="white", ec="none", alpha=0.85, pad=1))
    above = [k for k, n in zip(kl, nll) if n > top]
    for xs, marker in (([k for k in above if k <= right], "^"), ([right] * sum(k > right for k in above), ">")):
        if xs:  # (an empty line drawn unclipped would break the layout)
            ax.plot(xs, [band_y] * len(xs), ls="none", marker=marker, color=style["color"], ms=6, clip_on=False)


def draw_groups(results: Mapping[str, Any], root: str | os.PathLike, stem: str = "micmco_ptb",
                show: bool = True, levels: Mapping[str, float] | None = None) -> list[str]:
    """One image per group of thesis figures, saved as ``figures/<stem>_<group>.png`` and ``.pdf`` under ``root``
    (``stem`` may name a subfolder, e.g. ``gpu/micmco_ptb``); returns the PNG paths, relative to ``root``. With
    ``levels`` (NLL per token per split, :func:`paperlib.experiments.micmco.ptb.unigram.unigram_levels`), each panel
    draws the unigram model's NLL on the sentences its curves are scored on as a wide light grey line behind the
    curves (:data:`UNIGRAM_LINE`)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from paperlib.compendium.notebooks import save_figure
    from paperlib.experiments.micmco.ptb.design import FIGURES

    curves, settings, data = results["curves"], results["settings"], results["data"]
    grouped = [f for _, rows in GROUPS.values() for row in rows for f in row]
    if sorted(grouped) != sorted(FIGURES) or len(grouped) != len(set(grouped)):
        raise ValueError("every thesis figure must be in exactly one group of MICMCO_PTB_GROUPS")
    (Path(root) / "figures" / stem).parent.mkdir(parents=True, exist_ok=True)
    written = []
    for group, (title, rows) in GROUPS.items():
        ids = [f for row in rows for f in row]
        bottom, top = nll_limits(results, ids)
        band = 0.08 * (top - bottom)
        splits = {scored_on(f) for f in ids}
        ylabel = {frozenset({"train"}): "training NLL per token (nats)",
                  frozenset({"valid"}): "validation NLL per token (nats)"}.get(frozenset(splits), "NLL per token (nats)")
        ncols = max(len(row) for row in rows)
        # NLL shared by the whole group; KL by each row (one estimator family), whose KL ranges can differ several-fold
        fig, axes = plt.subplots(len(rows), ncols, figsize=(4.4 * ncols + 0.8, 3.8 * len(rows) + 2.4),
                                 sharey=True, squeeze=False, layout="constrained")
        families, departures, objectives, level_drawn = set(), set(), set(), False
        for r, row in enumerate(rows):
            # KL shared by the panels of the same families in the row
            sharing = {f: [g for g in row if family_of(results, g) == family_of(results, f)] for f in row}
            for col in range(ncols):
                ax = axes[r, col]
                if col >= len(row):
                    ax.axis("off")
                    continue
                fig_id = row[col]
                left, right = kl_limits(results, sharing[fig_id], top)
                ax.set_xlim(left, right)
                ax.set_title(panel_title(fig_id))
                ax.axhspan(top, top + band, color="0.9", lw=0, zorder=0)
                ax.set_xlabel("KL per token (nats)")
                if fig_id not in results["figures"]:
                    ax.text(0.5, 0.5, "not run at this profile", transform=ax.transAxes, ha="center", color="grey")
                    continue
                if levels is not None and bottom <= levels[scored_on(fig_id)] <= top:
                    ax.axhline(levels[scored_on(fig_id)], **UNIGRAM_LINE)
                    level_drawn = True
                missing = []
                for n in FIGURES[fig_id].configurations:
                    if n not in curves or not curves[n]["frontier"]:
                        missing.append(curves[n]["label"] if n in curves else n)
                        continue
                    draw_frontier(ax, curves[n], settings, top, right, top + band / 2)
                    families.add(curves[n]["estimator"]["base"])
                    objectives.add(objective_of(curves[n]))
                    if departure_of(curves[n], settings):
                        departures.add(departure_of(curves[n], settings))
                notes = []
                if fig_id == "5.10":
                    notes.append("1-sample curves: shared masks\n(the same as naive with one sample)")
                if missing:
                    notes.append("no finite trials: " + ", ".join(missing))
                if notes:
                    ax.text(0.97, 0.04, "\n".join(notes), transform=ax.transAxes, ha="right", va="bottom",
                            fontsize=9, color="0.3")
        for ax in axes[:, 0]:
            ax.set_ylabel(ylabel)
        axes[0, 0].set_ylim(bottom, top + band)
        ticks = [t for t in axes[0, 0].get_yticks() if bottom <= t <= top - band / 2]  # (none crowding the band's)
        axes[0, 0].set_yticks(ticks)
        labels = axes[0, 0].yaxis.get_major_formatter().format_ticks(ticks)
        axes[0, 0].set_yticks([*ticks, top + band / 2], [*labels, f"> {top:.2f}"])  # the band's tick: what lies above
        # the key, in two columns: colours (family, or a run's departure from its base run); lines (objective)
        base = (", base run" if any("×" in d for d in departures) else
                ", as many samples in both terms" if departures else "")
        colour_keys = [(Line2D([], [], color=figure_style.colour(f), lw=3), FAMILY_KEY[f] + base)
                       for f in ("dreg", "vimco") if f in families]
        keys_of_departures = departure_key(settings["hidden_size"], families)
        colour_keys += [(Line2D([], [], color=DEPARTURE_COLOUR[d], lw=3), keys_of_departures[d])
                        for d in keys_of_departures if d in departures]
        line_keys = [(Line2D([], [], color="0.25", **OBJECTIVE_STYLE[o]), OBJECTIVE_KEY[o])
                     for o in OBJECTIVE_STYLE if o in objectives]
        if level_drawn:
            line_keys.append((Line2D([], [], **{k: v for k, v in UNIGRAM_LINE.items() if k != "zorder"}),
                              "a unigram model of the same sentences (no context)"))
        line_keys.append((Line2D([], [], color="0.25", ls="none", marker="^", ms=6),
                          "▲ in the grey band: frontier points above the NLL axis (▶ there: also beyond the KL "
                          "axis); ▶ at a right edge: beyond the KL axis, its KL beside"))
        blank = (Line2D([], [], alpha=0), "")
        length = max(len(colour_keys), len(line_keys))
        keys = colour_keys + [blank] * (length - len(colour_keys)) + line_keys + [blank] * (length - len(line_keys))
        keys = [(h, "\n".join(textwrap.wrap(label, 21 * ncols))) for h, label in keys]
        fig.legend(*zip(*keys), loc="outside lower center", ncols=2, handlelength=3.2, columnspacing=2.5)
        fig.suptitle(f"{title}\nPareto frontiers: vocabulary {data['vocab_size']:,} (thesis "
                     f"{MELIS_PTB_MICMCO['vocab_size']:,}), hidden {settings['hidden_size']} (thesis "
                     f"{min(MICMCO_PTB_TABLE_5_1)}),\n{settings['steps']} steps (thesis {MELIS_PTB_MICMCO['steps']:,}) "
                     f"of {settings['batch_size']} sentences, {settings['trials']} trials per curve", fontsize=13,
                     fontweight="bold")
        save_figure(fig, f"{stem}_{group}", root)
        written.append(f"figures/{stem}_{group}.png")
        print(f"figures/{stem}_{group}.png: Figs. {', '.join(ids)}")
        if show:
            plt.show()
        else:
            plt.close(fig)
    return written


__all__ = ["DEPARTURE_COLOUR", "FAMILY_KEY", "FAMILY_NAME", "GROUPS", "OBJECTIVE_KEY", "OBJECTIVE_STYLE",
           "UNIGRAM_LINE", "departure_key", "departure_of", "draw_frontier", "draw_groups", "family_of", "kl_limits",
           "kl_reach", "nll_limits", "objective_of", "panel_title", "scored_on"]
