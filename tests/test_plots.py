"""Figure layouts: panels, one line per size/method/mu, styles shared by every figure."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgdp.estimators import REGISTRY
from fedgdp.plots import LAYOUTS, METHOD_STYLE, plot_figure, size_label, size_title

ROOT = Path(__file__).resolve().parents[1]
METHODS = list(REGISTRY)


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
    assert labels == ["FedSGD", "FedHybrid", "FedAvg", "FedNewton", "bound of Table 1 (scaled)"]


def test_K_by_mu_and_mixed_studies_get_panel_legends():
    it = _summary("iterations", ["equal(100)"], ms=(50,), mus=(2.0, 6.0, np.inf), Ks=(10, 50, 100))
    spec = {"model": "logistic", "study": "iterations", "layout": "K_by_mu",
            "panels": [{"method": m} for m in METHODS],
            "studies": {"iterations": {"grid": {"mu": [2, 6, "inf"]}}}}
    fig = plot_figure(spec, it)
    assert len(fig.axes) == 4 and all(len(_lines(ax)) == 3 for ax in fig.axes)
    assert [t.get_text() for t in fig.legends[0].get_texts()][-1] == "non-private ($\\mu = \\infty$)"
    assert "$m = 50$" in fig._suptitle.get_text() and "$n_i = 100$" in fig._suptitle.get_text()
    both = pd.concat([_summary("equal_n", ["equal(30)"]), _summary("varied_n", ["uniform(10,90)"])])
    spec = {"model": "logistic", "layout": "m_by_size",
            "panels": [{"study": "equal_n", "method": "fedsgd"}, {"study": "varied_n", "method": "fedsgd"}]}
    fig = plot_figure(spec, both)
    assert not fig.legends and all(ax.get_legend() is not None for ax in fig.axes)
    assert fig.axes[1].get_title() == "(b) FedSGD, different $n_i$"


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
    assert study["methods"]["default"] == list(REGISTRY)
    assert set(METHOD_STYLE) == set(REGISTRY)
