"""The error decomposition: arithmetic on synthetic rows, writers, figure, and its plan."""
import copy
import json
from types import SimpleNamespace as W

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgdp import plan as wp
from fedgdp.reports import decomposition as dc
from paths import ROOT

SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"
STUDIES = {"private": "p", "clip_only": "c", "plain": "q"}


def synthetic(n=40, seed=0, K=(5, 50), K_conv=50):
    """Cell rows of the three studies with known per-replicate squared errors:
    plain_conv = s, plain(K) = s + o_K, clip_only = plain + c, private = clip_only + v,
    with c < 0 (clipping cancelling early stopping) and strong correlation between releases."""
    rng = np.random.default_rng(seed)
    s = rng.gamma(2.0, 0.01, n)
    N = rng.integers(100, 200, n)
    rows = []
    for k in K:
        o = (0.02 if k < K_conv else 0.0) * (1 + 0.1 * rng.standard_normal(n))
        c = -0.015 + 0.001 * rng.standard_normal(n)
        v = rng.gamma(1.0, 0.004, n)
        errs = {"q": s + o, "c": s + o + c, "p": s + o + c + v}
        for study, e in errs.items():
            for r in range(n):
                rows.append(dict(study=study, model="logistic", method="fedsgd", m=10, sizes="equal(20)",
                                 mu=2.0, K=k, replicate=r, N=int(N[r]), sq_error=float(e[r]), diverged=False))
    return pd.DataFrame(rows), dict(s=s, N=N)


def test_terms_add_up_to_the_private_mse_and_use_paired_ses():
    rows, _ = synthetic()
    t = dc.decompose(dc.paired(rows, STUDIES, 50))
    assert list(t.columns) == dc.COLUMNS and list(t["K"]) == [5, 50]
    total = t[list(dc.TERMS)].sum(axis=1)
    np.testing.assert_allclose(total, t["mse_private"], rtol=1e-12)
    early, conv = t.iloc[0], t.iloc[1]
    assert early["optimisation"] == pytest.approx(0.02, abs=0.002) and early["clipping"] < 0
    assert conv["optimisation"] == 0 and conv["se_optimisation"] == 0
    # paired: the SE of (clip_only - plain) is that of c (sd 0.001), far below what
    # independent SEs of the two MSEs would give (sd of s ~ 0.014)
    w = dc.paired(rows, STUDIES, 50)
    w = w[w["K"] == 5]
    d = w["clip_only"] - w["plain"]
    assert early["se_clipping"] == pytest.approx(d.std(ddof=1) / np.sqrt(len(d)), rel=1e-12)
    independent = np.hypot(w["clip_only"].std(ddof=1), w["plain"].std(ddof=1)) / np.sqrt(len(d))
    assert early["se_clipping"] < independent / 5


def test_a_replicate_with_a_non_finite_error_is_dropped_from_every_term():
    rows, _ = synthetic(n=10)
    hit = (rows["study"] == "q") & (rows["K"] == 50) & (rows["replicate"] == 3)
    rows.loc[hit, "sq_error"] = np.inf                  # plain at K_conv: enters every K's row
    t = dc.decompose(dc.paired(rows, STUDIES, 50))
    assert list(t["replicates"]) == [9, 9] and list(t["dropped"]) == [1, 1]
    assert np.isfinite(t[list(dc.TERMS)].to_numpy()).all()


@pytest.mark.parametrize("change, message", [
    (lambda r: r.assign(N=np.where(r["study"] == "c", r["N"] + 1, r["N"])), "not paired"),
    (lambda r: r[r["study"] != "c"], "no rows of study 'c'"),
    (lambda r: pd.concat([r, r[r["study"] == "p"].assign(mu=6.0)]), "several rows per replicate"),
])
def test_unpaired_input_is_refused(change, message):
    rows, _ = synthetic(n=5)
    with pytest.raises(ValueError, match=message):
        dc.paired(change(rows), STUDIES, 50)


def test_k_conv_must_be_a_k_of_the_plain_study():
    rows, _ = synthetic(n=5)
    with pytest.raises(ValueError, match="K_conv = 400 is not a K"):
        dc.paired(rows, STUDIES, 400)


def test_writers_use_one_number_format_per_column(tmp_path):
    rows, _ = synthetic(n=8)
    t = dc.ordered(dc.decompose(dc.paired(rows, STUDIES, 50)), ["fedsgd"])
    dc.write_csv(t, tmp_path / "d.csv")
    dc.write_markdown(t, tmp_path / "d.md", title="T", note="the note")
    back = pd.read_csv(tmp_path / "d.csv")
    assert list(back.columns) == dc.COLUMNS
    np.testing.assert_allclose(back["clipping"], t["clipping"], rtol=1e-6)
    text = (tmp_path / "d.csv").read_text().splitlines()[1].split(",")
    assert all("e" in v for v in text[dc.COLUMNS.index("mse_private"):])      # scientific throughout
    md = (tmp_path / "d.md").read_text()
    assert "| FedSGD |" in md and md.rstrip().endswith("the note") and "-1.5" in md


def test_the_figure_shows_a_negative_term_below_zero(tmp_path):
    from PIL import Image

    from fedgdp.reports.plots_decomposition import plot_decomposition

    rows, _ = synthetic(n=8)
    t = dc.decompose(dc.paired(rows, STUDIES, 50))
    plot_decomposition(t, {"caption": "Definition.", "title": "T"}, tmp_path / "d.pdf", tmp_path / "d.png")
    about = json.loads(Image.open(tmp_path / "d.png").text["Description"])
    assert [(p["K"], p["bars"]) for p in about["panels"]] == [(5, 1), (50, 1)]
    assert about["panels"][0]["negative_terms"] == 1           # the clipping term at K = 5
    assert (tmp_path / "d.pdf").read_bytes()[:5] == b"%PDF-"


# --------------------------------------------------------------------- plan
def config():
    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    return cfg


def load(cfg):
    return wp.load(copy.deepcopy(cfg), SCHEMA)


def test_the_decompose_target_is_not_in_all():
    p = load(config())
    t = p.targets()
    assert t["decompose"] == ["tables/paper/decomposition.csv", "tables/paper/decomposition.md",
                              "figures/paper/decomposition.pdf", "figures/paper/decomposition.png"]
    assert not set(t["decompose"]) & set(t["all"])
    assert not any("decompose_" in f for f in t["all"])
    cells = p.decomposition_cell_files()
    # 3 studies x 2 models, each one job of its 6 cells (cells_per_job >= 6); no file twice
    assert len(cells) == len(set(cells)) == 3 * 2 and all(f.endswith("cells~0-5/seeds~0-29.parquet") for f in cells)
    spec = json.loads(p.decomposition_spec())
    assert spec["K_conv"] == 400 and spec["studies"]["clip_only"] == "decompose_clip_only"
    assert "privacy noise = e_private(K) - e_clip_only(K)" in spec["caption"]
    assert f"run paper, config {p.sha}" in spec["caption"]
    del_cfg = config()
    del del_cfg["decomposition"]
    assert "decompose" not in load(del_cfg).targets()


def test_release_reaches_the_cells_and_default_cells_are_unchanged():
    p = load(config())
    w = dict(model="poisson", cells="0-5", first="0", last="29")
    for role, study in p.decomposition_studies().items():
        assert [c["release"] for c in json.loads(p.cell_params(W(study=study, **w)))] == [role] * 6
    compare = json.loads(p.cell_params(W(**dict(w, study="compare", cells="0-14", last="99"))))[0]
    assert "release" not in compare          # the default run's job parameters stay as they were


@pytest.mark.parametrize("edit, key", [
    (lambda c: c["studies"]["decompose_plain"]["settings"].update(release="clip_only"),
     "decomposition.studies.plain"),
    (lambda c: c["studies"]["decompose_clip_only"].update(replicates=20), "decomposition.studies.clip_only"),
    (lambda c: c["studies"]["decompose_plain"]["settings"].update(sigma_c=2.0), "decomposition.studies.plain"),
    (lambda c: c["decomposition"].update(K_conv=800), "decomposition.K_conv"),
    (lambda c: c["decomposition"]["studies"].update(plain="decompose_plane"), "decomposition.studies.plain"),
    (lambda c: c["studies"]["decompose_private"]["grid"].update(mu=[2, 6]), "studies.decompose_private.grid.mu"),
])
def test_decomposition_config_errors_name_the_key(edit, key):
    cfg = config()
    edit(cfg)
    with pytest.raises(wp.ConfigError) as err:
        load(cfg)
    assert key in str(err.value)


def test_bench_suite_times_each_study_with_its_own_release():
    from fedgdp.commands.bench import suite_cells

    releases = {study: p.get("release", "private") for study, p in suite_cells(config())}
    assert releases["decompose_plain"] == "plain" and releases["decompose_clip_only"] == "clip_only"
    assert releases["compare"] == "private"
