"""What every figure shares: one colour and marker per method in every experiment
(colour-blind safe Tableau hues; non-private twins hatched), the plotting backend
(matplotlib imported on first use) and how a figure is written.
"""
from __future__ import annotations

__all__ = ["METHOD_STYLE", "method_style", "HATCHED", "pyplot", "save_figure", "rows_of"]

METHOD_STYLE: dict[str, dict[str, str]] = {
    "fedsgd": {"color": "#1f77b4", "marker": "o"},
    "fedhybrid": {"color": "#ff7f0e", "marker": "s"},
    "fedavg": {"color": "#2ca02c", "marker": "^"},
    "fednewton": {"color": "#d62728", "marker": "D"},
    "fednewton_certified": {"color": "#9467bd", "marker": "v"},
    "fednewton_iter": {"color": "#d62728", "marker": "D"},
    "dp_scaffold": {"color": "#17becf", "marker": "P"},
    "fedirls": {"color": "#bcbd22", "marker": "h"},
    "np_scaffold": {"color": "#17becf", "marker": "P"},
    "np_fedavg": {"color": "#2ca02c", "marker": "^"},
    "np_localfit": {"color": "#8c8c8c", "marker": "x"},
    "np_pooled": {"color": "#3b3b3b", "marker": "*"},
}

#: non-private twins of private algorithms: drawn in their twin's colour, hatched
HATCHED = frozenset({"np_scaffold", "np_fedavg"})

_FALLBACK_MARKERS = "vP*Xph<>"


def method_style(name: str) -> dict[str, str]:
    """``color`` and ``marker`` of ``name``: its `METHOD_STYLE` entry, or a fallback derived
    from the name (a cycle colour ``C4``-``C9`` and a marker).

    Parameters
    ----------
    name : str
        The method's name.
    """
    if name in METHOD_STYLE:
        return METHOD_STYLE[name]
    k = sum(map(ord, name))
    return {"color": f"C{4 + k % 6}", "marker": _FALLBACK_MARKERS[k % len(_FALLBACK_MARKERS)]}


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def rows_of(table, column: str, value, known, what: str):
    """The rows of ``table`` whose ``column`` equals ``value``: what one figure draws.

    Parameters
    ----------
    table : pandas.DataFrame
        The table.
    column : str
        The column to select on.
    value : object
        The value to select (ValueError unless one of ``known`` with rows in the table).
    known, what
        The values allowed, and the table in words (for the message).
    """
    if value not in known:
        raise ValueError(f"unknown {column} {value!r}; choose from {', '.join(map(str, known))}")
    rows = table[table[column] == value]
    if rows.empty:
        raise ValueError(f"no rows of {column} {value!r} in {what}")
    return rows


def save_figure(fig, pdf=None, png=None, *, title: str = "", about: str = "", **savefig) -> list:
    """Write ``fig`` as PDF and/or PNG (150 dpi), each atomically, and close it; the PDF has
    no creation date, so a rerun writes the same bytes.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure (closed afterwards).
    pdf, png : path or None
        Where to write each format.
    title, about : str
        Metadata of the files.
    **savefig
        Passed to ``savefig`` (e.g. ``bbox_inches="tight"``).
    """
    from .io import atomic_path

    pdf_meta = {"Title": title, **({"Subject": about} if about else {}), "CreationDate": None}
    png_meta = {"Title": title, **({"Description": about} if about else {})}
    written = []
    for path, fmt, extra in ((pdf, "pdf", {"metadata": pdf_meta}), (png, "png", {"dpi": 150, "metadata": png_meta})):
        if path:
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=fmt, **extra, **savefig)
            written.append(path)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return written
