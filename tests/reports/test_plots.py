"""Figure layouts: panels, one line per size/method/mu, styles shared by every figure."""

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgdp.simulation.backend import REGISTRY
from fedgdp.simulation.plots import LAYOUTS, METHOD_STYLE, plot_figure, size_label, size_title
from paths import ROOT

METHODS = ["fedsgd", "fedhybrid", "fedavg", "fednewton", "fednewton_certified"]   # the figures' order


def _summary(study, sizes, ms=(20, 40), mus=(2.0,), Ks=(50,), model="logistic"):
    rows = []
    for method in METHODS:
        for s in sizes:
            for m in ms:
                for mu in mus:
                    for K in Ks:
                        mse = 1.0 / m + 0.01 * (METHODS.index(method) + 1) + (0 if np.isinf(mu) else 0.1 / mu)
                        rows.append(dict(model=model, study=study, method=method, sizes=s, m=m, mu=mu, K=K,
                                         replicates=4, diverged=0, n_ok=4, mse=mse, se=mse / 5, median=mse,
                                         rounds=K, floats_up=m * K * 5, floats_down=m * K * 5,
                                         N_mean=float(m * 100), n_min=100, n_max=100, B_mean=1.0,
                                         mu_composed_max=mu))
    return pd.DataFrame(rows)


def _lines(ax):
    """Data lines of a panel: solid with markers (error-bar caps have no line; theory is dashed)."""
    return [ln for ln in ax.get_lines()
            if ln.get_linestyle() == "-" and ln.get_marker() not in (None, "None", "")]


def test_m_by_size_one_panel_per_method_one_line_per_size(tmp_path):
    sizes = ["equal(30)", "equal(50)", "equal(70)"]
    spec = {"name": "f1", "model": "logistic", "study": "equal_n", "layout": "m_by_size",
            "panels": [{"method": "fedsgd"}, {"method": "fedhybrid"}],
            "studies": {"equal_n": {"grid": {"sizes": sizes[::-1]}}}}
    fig = plot_figure(spec, _summary("equal_n", sizes), pdf=tmp_path / "f.pdf", png=tmp_path / "f.png")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    assert [ax.get_title() for ax in axes] == ["(a) FedSGD, same $n_i$", "(b) FedHybrid, same $n_i$"]
    for ax in axes:
        assert len(_lines(ax)) == 3 and ax.get_yscale() == "log"
        assert ax.get_xlabel() == "number of clients $m$" and ax.get_ylabel() == "empirical MSE"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [size_label(s) for s in sizes[::-1]]      # the study's order
    assert (tmp_path / "f.pdf").read_bytes()[:4] == b"%PDF"
    import matplotlib.image as mpimg

    assert mpimg.imread(tmp_path / "f.png").shape[2] in (3, 4)


def test_m_by_method_uses_the_method_styles():
    sizes = ["uniform(100,700)", "equal(400)"]
    spec = {"model": "logistic", "study": "compare", "layout": "m_by_method", "theory": True, "d": 5,
            "panels": [{"sizes": s} for s in sizes], "studies": {"compare": {"methods": METHODS}}}
    fig = plot_figure(spec, _summary("compare", sizes))
    for ax in fig.axes:
        lines = _lines(ax)
        assert [ln.get_color() for ln in lines] == [METHOD_STYLE[m]["color"] for m in METHODS]
        assert [ln.get_marker() for ln in lines] == [METHOD_STYLE[m]["marker"] for m in METHODS]
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(dashed) == len(METHODS)            # a scaled bound per method
    assert fig.axes[1].get_title() == "(b) Equal $n_i = 400$"
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["FedSGD", "FedHybrid", "FedAvg", "FedNewton", "FedNewton (certified)",
                      "bound of Table 1 (scaled)"]


def test_K_by_mu_and_mixed_studies_get_column_legends():
    it = _summary("iterations", ["equal(100)"], ms=(50,), mus=(2.0, 6.0, np.inf), Ks=(10, 50, 100))
    spec = {"model": "logistic", "study": "iterations", "layout": "K_by_mu",
            "panels": [{"method": m} for m in METHODS[:4]],
            "studies": {"iterations": {"grid": {"mu": [2, 6, "inf"]}}}}
    fig = plot_figure(spec, it)
    assert len(fig.axes) == 4 and all(len(_lines(ax)) == 3 for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "non-private ($\\mu = \\infty$)"
    assert "$m = 50$" in fig._suptitle.get_text() and "$n_i = 100$" in fig._suptitle.get_text()
    both = pd.concat([_summary("equal_n", ["equal(30)"]), _summary("varied_n", ["uniform(10,90)"])])
    spec = {"model": "logistic", "layout": "m_by_size",
            "panels": [{"study": "equal_n", "method": "fedsgd"}, {"study": "varied_n", "method": "fedsgd"}]}
    fig = plot_figure(spec, both)
    # one legend under each column, each naming that column's lines; none inside a panel
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 2
    assert [[t.get_text() for t in leg.get_texts()] for leg in fig.legends] == \
        [[size_label("equal(30)")], [size_label("uniform(10,90)")]]
    assert fig.axes[1].get_title() == "(b) FedSGD, different $n_i$"
    _assert_legends_outside_panels(fig)


def _assert_legends_outside_panels(fig):
    """No legend overlaps the data area of any panel (display coordinates)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)          # plot_figure closed its own; draw as when saved
    canvas.draw()
    renderer = canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    for leg in legends:
        box = leg.get_window_extent(renderer)
        for ax in fig.axes:
            if ax.get_visible():
                assert not box.overlaps(ax.get_window_extent(renderer)), (leg, ax.get_title())
        fig_box = fig.bbox
        assert fig_box.x0 - 1 <= box.x0 and box.x1 <= fig_box.x1 + 1 and box.y0 >= fig_box.y0 - 1


def _caption(fig) -> str:
    return " ".join(" ".join(t.get_text().split()) for t in fig.texts if t is not fig._suptitle)


FIG13_LIKE = [{"study": "equal_n", "method": "fedsgd"}, {"study": "varied_n", "method": "fedsgd"},
              {"study": "equal_n", "method": "fedhybrid"}, {"study": "varied_n", "method": "fedhybrid"}]


@pytest.mark.parametrize("layout,panels,ncols", [
    ("m_by_size", FIG13_LIKE, None),                                  # Figure 13: a legend per column
    ("m_by_size", FIG13_LIKE[:2], 1),                                 # a column of different panels
    ("m_by_method", [{"sizes": "equal(30)"}, {"sizes": "uniform(10,90)"}], None),   # one legend
])
def test_legends_never_cover_a_panel(layout, panels, ncols):
    both = pd.concat([_summary("equal_n", ["equal(30)", "equal(60)"]),
                      _summary("varied_n", ["uniform(10,90)", "uniform(40,80)"])])
    if layout == "m_by_method":
        both = pd.concat([_summary("s", ["equal(30)", "uniform(10,90)"])])
        panels = [dict(p, study="s") for p in panels]
    spec = {"model": "logistic", "layout": layout, "panels": panels, "theory": True, "d": 5}
    if ncols:
        spec["ncols"] = ncols
    _assert_legends_outside_panels(plot_figure(spec, both))


def _dotted(ax):
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]


def test_lower_bound_is_drawn_dotted_below_the_data_where_theorem_3_10_holds():
    from fedgdp.core.theory import lower_bound

    sizes = ["equal(400)"]
    spec = {"model": "logistic", "study": "compare", "layout": "m_by_method", "theory": True, "d": 5,
            "panels": [{"sizes": "equal(400)"}], "studies": {"compare": {"methods": METHODS}}}
    s = _summary("compare", sizes, ms=(20, 40, 80), mus=(0.5,))
    fig = plot_figure(spec, s)
    (ax,) = fig.axes
    (dotted,) = _dotted(ax)               # one for the panel: the methods share its cells
    x, y = dotted.get_data()
    lb = np.array([lower_bound(np.full(m, 100.0), d=5, mu=0.5) for m in (20, 40, 80)])
    ratio = y / lb
    assert np.allclose(ratio, ratio[0], rtol=1e-12)          # the bound's shape, one constant
    lowest = s[s["sizes"] == "equal(400)"].groupby("m")["mse"].min().to_numpy()
    assert np.all(y <= lowest * (1 + 1e-12)) and np.isclose(y / lowest, 1).any()   # touches from below
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[-2:] == ["bound of Table 1 (scaled)", "lower bound, Theorem 3.10 (scaled)"]
    caption = _caption(fig)
    assert "Solid lines: empirical MSE" in caption and "Dashed: the MSE bound of Table 1" in caption
    assert "Dotted: the minimax lower bound of Theorem 3.10" in caption and "not drawn" not in caption


def test_lower_bound_is_not_drawn_at_mu_2_and_the_caption_says_so():
    spec = {"model": "logistic", "study": "compare", "layout": "m_by_method", "theory": True, "d": 5,
            "panels": [{"sizes": "equal(400)"}], "studies": {"compare": {"methods": METHODS}}}
    fig = plot_figure(spec, _summary("compare", ["equal(400)"], mus=(2.0,)))
    assert not _dotted(fig.axes[0])
    assert "Theorem 3.10" not in " ".join(t.get_text() for t in fig.legends[0].get_texts())
    caption = _caption(fig)
    assert "lower bound of Theorem 3.10 is not drawn" in caption and "$\\mu = 2$" in caption
    assert "Dotted" not in caption


def test_caption_without_theory_names_only_what_is_drawn():
    spec = {"model": "logistic", "study": "equal_n", "layout": "m_by_size", "panels": [{"method": "fedsgd"}]}
    caption = _caption(plot_figure(spec, _summary("equal_n", ["equal(30)"])))
    assert caption.startswith("Solid lines: empirical MSE, error bars $\\pm 2$ Monte Carlo standard errors.")
    assert "Dashed" not in caption and "Theorem" not in caption


def test_bad_panels_are_errors():
    s = _summary("equal_n", ["equal(30)"])
    spec = {"name": "fig99", "model": "logistic", "study": "equal_n", "layout": "m_by_size",
            "panels": [{"method": "fedsgd", "sizes": "equal(31)"}]}
    with pytest.raises(ValueError, match="fig99: no summary rows"):
        plot_figure(spec, s)
    with pytest.raises(ValueError, match="several cells per"):
        plot_figure(dict(spec, panels=[{"method": "fedsgd"}]),
                    pd.concat([s, s.assign(K=100)]))
    with pytest.raises(ValueError, match="unknown layout"):
        plot_figure(dict(spec, layout="pie"), s)


def test_labels():
    assert size_label("equal(30)") == "$n = 30$"
    assert size_label("uniform(10,90)") == "$n_i \\sim U[10, 90]$"
    assert size_title("lognormal(5.5,1)").startswith("Lognormally distributed")
    assert size_title("total(20000,uniform(0.5,1.5))").startswith("Uniformly distributed")
    assert size_label("total(20000,equal)") == "equal, $N = 20000$"


def test_schema_enums_match_the_package():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    fig = schema["$defs"]["simulation_figure"]["properties"]
    assert fig["layout"]["enum"] == list(LAYOUTS)
    study = schema["properties"]["studies"]["additionalProperties"]["properties"]
    from fedgdp.simulation.params import DEFAULTS

    assert study["methods"]["default"] == DEFAULTS["methods"]


def test_every_method_of_every_experiment_has_one_style():
    """One style table serves the simulations, the real data and the CNNs; no two
    methods drawn in one figure share a colour unless one is the other's hatched twin."""
    from fedgdp import realdata
    from fedgdp.common.figures import HATCHED
    from fedgdp.nn.settings import METHODS as NN_METHODS

    for names in (list(REGISTRY), list(realdata.REGISTRY), list(NN_METHODS)):
        assert set(names) <= set(METHOD_STYLE), set(names) - set(METHOD_STYLE)
        solid = [METHOD_STYLE[n]["color"] for n in names if n not in HATCHED]
        assert len(solid) == len(set(solid)), solid


def test_cnn_figures_have_one_legend_under_the_panels(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedgdp.nn.plots import SUMMARY_COLUMNS
    from fedgdp.nn.plots import plot_nn_figure as nn_plot
    from fedgdp.nn.settings import METHODS as NN_METHODS

    rows = [{c: 1.0 for c in SUMMARY_COLUMNS} | {"figure": "fig10", "dataset": ds, "method": meth, "label": meth,
                                                 "x": x, "m": x, "median_accuracy": 0.5 + 0.1 * k, "runs": 3}
            for ds in ("mnist", "cifar10") for k, meth in enumerate(NN_METHODS) for x in (5, 10)]
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)             # keep the figure to inspect it
    nn_plot(pd.DataFrame(rows), "fig10", tmp_path / "f.pdf")
    (fig,) = kept
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(NN_METHODS)
    assert "median final test accuracy over runs; bands: range" in _caption(fig)
    _assert_legends_outside_panels(fig)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.pdf", "f.png"]       # no temporary left
    nn_plot(pd.DataFrame([r | {"runs": 1} for r in rows]), "fig10", tmp_path / "one.pdf")
    assert "no band: one run" in _caption(kept[-1]) and "bands: range" not in _caption(kept[-1])


def test_caption_lines_never_split_math():
    from fedgdp.simulation.plots import _wrap

    text = "aaa bbb $\\mu = 2$ ccc ddd $\\pm 2$ eee"
    for width in range(3, 30):
        lines = _wrap(text, width)
        assert " ".join(lines) == text and all(line.count("$") % 2 == 0 for line in lines), width


def test_more_columns_than_panels():
    both = pd.concat([_summary("equal_n", ["equal(30)"]), _summary("varied_n", ["uniform(10,90)"])])
    spec = {"model": "logistic", "layout": "m_by_size", "ncols": 3, "panels": FIG13_LIKE[:2]}
    fig = plot_figure(spec, both)
    assert len(fig.legends) == 2           # one under each of the two used columns
    _assert_legends_outside_panels(fig)


def test_a_figure_of_a_missing_or_unknown_selection_is_a_clear_error():
    from fedgdp.common.figures import rows_of

    df = pd.DataFrame({"task": ["binary", "binary"], "value": [0.7, 0.8]})
    assert list(rows_of(df, "task", "binary", ["binary", "multiclass"], "the rows")["value"]) == [0.7, 0.8]
    with pytest.raises(ValueError, match="unknown task 'ternary'; choose from binary, multiclass"):
        rows_of(df, "task", "ternary", ["binary", "multiclass"], "the rows")
    with pytest.raises(ValueError, match="no rows of task .multiclass. in the rows"):
        rows_of(df, "task", "multiclass", ["binary", "multiclass"], "the rows")
