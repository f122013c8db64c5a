"""Claim 11 of the PTB MICMCO study read on its figures (Melis §5.B.1, Figs. 5.16-5.21): batch size and
optimisation length shift the frontiers of the three estimators (1, 16 KL, 16 Rényi) but keep their order; and Fig.
5.18's exception, the DReG estimators close together at twice the hidden size. The hypervolumes of each setting are
taken on the reference of that setting's own curves, since the factor moves all of them.

Pure Python at import, as :mod:`paperlib.experiments.micmco.ptb.comparisons`.
"""

from __future__ import annotations

from typing import Any, Mapping

from paperlib.experiments.micmco.ptb.comparisons import Measured, Results, _compared, _hv, hv_tie


def _trio_names(base: str, variant: str) -> list[str]:
    """The curves of the three estimators (1, 16 KL, 16 Rényi) of ``base`` at one robustness setting."""
    return [f"{base}{s}.shared{variant}" for s in ("1", "16_kl", "16_renyi")]


def _trio(results: Results, base: str, variant: str) -> list[float] | None:
    """HVs of the three estimators (1, 16 KL, 16 Rényi) of ``base`` at one robustness setting, on that setting's
    own reference; None unless all three ran with an area."""
    names = _trio_names(base, variant)
    if not all(n in results["curves"] for n in names):
        return None
    hv = _hv(results, names)
    return None if any(hv[n] is None for n in names) else [hv[n] for n in names]


def _settings(results: Results, fig: str) -> list[tuple[str, list[float] | None]]:
    """Per setting of robustness figure ``fig``: its tag (base, bs×2, T×2, ...) and its estimators' HVs."""
    from paperlib.experiments.micmco.ptb.design import _VARIANT_TAG, ROBUSTNESS

    base, variants = ROBUSTNESS[fig]
    return [(_VARIANT_TAG[v], _trio(results, base, v)) for v in variants]


def _setting_curves(fig: str) -> list[list[str]]:
    """Per setting of robustness figure ``fig``, its three estimators' curves (as :func:`_settings` orders them)."""
    from paperlib.experiments.micmco.ptb.design import ROBUSTNESS

    base, variants = ROBUSTNESS[fig]
    return [_trio_names(base, v) for v in variants]


_TRIO_TAGS = ("1", "16 K", "16 R")


def _side(a: float, b: float) -> int:
    """+1 if ``a`` leads ``b`` by more than the tie, -1 if ``b`` leads ``a``, 0 within the tie."""
    return 0 if abs(a - b) <= hv_tie() else (1 if a > b else -1)


def _trio_text(settings: list[tuple[str, list[float] | None]]) -> str:
    return ", ".join(f"{' / '.join(f'{x:.3f}' for x in hv)} ({tag})" for tag, hv in settings)


def _kept_gap(differences: list[float]) -> float:
    """A pair's HV differences at the two settings of a factor as one signed gap: the smaller of the two in the
    direction of the larger, so it is positive when the pair keeps its order at both settings (by its smaller lead)
    and negative when the order changes sign, reversed or inside the tie."""
    lead = max(differences, key=abs)
    sign = 1.0 if lead >= 0 else -1.0
    return min(sign * d for d in differences)


# Claim 11 as read here: the stage's record keeps a pair that is separated at one setting and tied at the other
# (the order "not reversed"); that shows the order at one setting only, so here a pair holds only when it is
# separated the same way at both settings, and a pair that keeps its sign inside the tie goes the thesis' way
# within noise.
KEEPS_ORDER_RULE = (
    "per figure and pair of its three estimators (1, 16 KL, 16 Rényi), each setting's HVs on the reference of its own "
    "curves: a pair keeps its order when it is separated (HV difference > {tie}) the same way at both settings of the "
    "factor, it goes the thesis' way inside the tie when its sign holds at both settings without being separated at "
    "both, and it does not keep its order when its sign changes between the settings (separated or not); a figure "
    "whose pairs all tie at both settings is read by their signs. Read here from the curves, more strictly than the "
    "record the stage wrote with its results, which counts a pair separated at one setting and tied at the other "
    "as kept and leaves out pairs tied at both. The factors double our steps or batch (see the scale), where the "
    "thesis ran 40 against 80 thousand steps, and the budget ladder (M-F5.8 to M-F5.12) finds our curves still "
    "learning")


def _lead_text(gap: float, ahead: str) -> str:
    """How far ``ahead`` leads at its weaker setting (``gap`` > 0) or falls behind (< 0), with four decimals where
    three would show 0.000 or the tie."""
    size = abs(gap)
    digits = 4 if round(size, 3) in (0.0, hv_tie()) else 3
    if gap > 0:
        return f"{ahead} ahead at both by at least {size:.{digits}f}"
    return "no lead at one setting" if gap == 0 else \
        f"{ahead} ahead at one setting, behind by {size:.{digits}f} at the other"


def _order_keys(wins: Mapping[str, Any]) -> list[str]:
    """The comparisons of claim 11 read here: the stage's "<figure> order" (its three pairs tied at both settings)
    as it is, else all three pairs of each figure the stage compared, tied ones included (the stage leaves out
    pairs tied at both settings; here they count, within noise or against the claim by their signs)."""
    figures = sorted({key.split(" ", 1)[0] for key in wins}, key=lambda f: tuple(map(int, f.split("."))))
    keys = []
    for fig in figures:
        keys += [f"{fig} order"] if f"{fig} order" in wins else \
            [f"{fig} {_TRIO_TAGS[i]} vs {_TRIO_TAGS[j]}" for i, j in ((0, 1), (0, 2), (1, 2))]
    return keys


def _order(results: Results, key: str) -> Measured:  # key: "<figure> <tag> vs <tag>" or "<figure> order"
    fig, pair = key.split(" ", 1)
    settings = _settings(results, fig)
    if pair == "order":
        gaps = [_kept_gap([hv[i] - hv[j] for _, hv in settings]) for i, j in ((0, 1), (0, 2), (1, 2))]
        gap = min(gaps)
        digits = 4 if round(abs(gap), 3) == 0.0 else 3
        how = (f"every pair keeps its sign at both (the smallest lead {gap:.{digits}f})" if gap > 0
               else "a pair shows no lead at one setting" if gap == 0
               else f"a pair's sign changes inside the tie (by {-gap:.{digits}f})")
        return (f"Fig. {fig}: HV 1 / 16 K / 16 R = {_trio_text(settings)}: the three estimators tie at both "
                f"settings, {how}", gap,
                {"kept gap": gap, **_compared(results, [n for trio in _setting_curves(fig) for n in trio])})
    i, j = (_TRIO_TAGS.index(t) for t in pair.split(" vs "))
    sides = [_side(hv[i], hv[j]) for _, hv in settings]
    reversed_, one_sided = sides[0] * sides[1] < 0, (sides[0] == 0) != (sides[1] == 0)
    differences = [hv[i] - hv[j] for _, hv in settings]
    gap = _kept_gap(differences)
    how = ("reversed" if reversed_ else "separated at one setting only" if one_sided
           else "separated the same way at both" if sides[0] != 0 else "tied at both")
    ahead = _TRIO_TAGS[i] if max(differences, key=abs) >= 0 else _TRIO_TAGS[j]
    values = ", ".join(f"{hv[i]:.3f} / {hv[j]:.3f} ({tag})" for tag, hv in settings)
    return (f"Fig. {fig} {pair}: HV {_TRIO_TAGS[i]} / {_TRIO_TAGS[j]} = {values}: {how}, {_lead_text(gap, ahead)}",
            gap, {"reversed": int(reversed_), "one sided": int(one_sided), "kept gap": gap,
                  **_compared(results, [trio[k] for trio in _setting_curves(fig) for k in (i, j)])})


def _spread(results: Results, key: str) -> Measured:  # key: "5.18 <tag>"
    fig, tag = key.split(" ", 1)
    settings, narrow = _settings(results, fig), _settings(results, "5.17")
    k = [t for t, _ in settings].index(tag)
    hv, base_hv = settings[k][1], narrow[k][1]
    spread = max(hv) - min(hv)
    base = None if base_hv is None else max(base_hv) - min(base_hv)
    return (f"Fig. {fig} {tag}: HV 1 / 16 K / 16 R = {' / '.join(f'{x:.3f}' for x in hv)}, spread {spread:.3f} "
            f"(tie {hv_tie()}" + ("" if base is None else f", base hidden size at the same length: {base:.3f}") + ")",
            None, {"spread": spread, "base spread": base, "larger HV": max([*hv, *(base_hv or ())]),
                   **_compared(results, _setting_curves(fig)[k])})
