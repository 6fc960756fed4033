"""One colour and marker per method, shared by every figure (no imports).

The hues are the colour-blind safe Tableau palette. A method keeps its colour in every
experiment: the simulation figures (:mod:`fedgdp.plots`), the real-data box plots
(:mod:`fedgdp.plots_realdata`, where a non-private twin of a private algorithm has
its colour, hatched) and the CNN curves (:mod:`fedgdp.nn.plots`, where the iterated
FedNewton has FedNewton's). A method missing here gets a derived fallback style
(:func:`method_style`).
"""
from __future__ import annotations

__all__ = ["METHOD_STYLE", "method_style", "HATCHED"]

METHOD_STYLE: dict[str, dict[str, str]] = {
    "fedsgd": {"color": "#1f77b4", "marker": "o"},
    "fedhybrid": {"color": "#ff7f0e", "marker": "s"},
    "fedavg": {"color": "#2ca02c", "marker": "^"},
    "fednewton": {"color": "#d62728", "marker": "D"},
    "fednewton_certified": {"color": "#9467bd", "marker": "v"},
    "fednewton_iter": {"color": "#d62728", "marker": "D"},
    "dp_scaffold": {"color": "#17becf", "marker": "P"},
    "np_scaffold": {"color": "#17becf", "marker": "P"},
    "np_fedavg": {"color": "#2ca02c", "marker": "^"},
    "np_localfit": {"color": "#8c8c8c", "marker": "x"},
    "np_pooled": {"color": "#3b3b3b", "marker": "*"},
}

#: non-private twins of private algorithms: drawn in their twin's colour, hatched
HATCHED = frozenset({"np_scaffold", "np_fedavg"})

_FALLBACK_MARKERS = "vP*Xph<>"


def method_style(name: str) -> dict[str, str]:
    """The style of ``name``: its :data:`METHOD_STYLE` entry, or a fallback derived
    from the name (a matplotlib cycle colour ``C4``-``C9`` and a marker), so that a new
    method is drawn distinctly before it is given a style."""
    if name in METHOD_STYLE:
        return METHOD_STYLE[name]
    k = sum(map(ord, name))
    return {"color": f"C{4 + k % 6}", "marker": _FALLBACK_MARKERS[k % len(_FALLBACK_MARKERS)]}
