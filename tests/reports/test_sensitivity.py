"""The sensitivity study: the config section's expansion into ordinary studies
(fedgdp.plan), its checks, its real-data runs, and the claims map
(fedgdp.reports.sensitivity) on small synthetic summaries built to make a claim hold under one
variant and fail under another."""
import copy
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace as W

import pandas as pd
import pytest
import yaml

from fedgdp import plan as wp
from fedgdp.reports import sensitivity
from shipped_configs import SCHEMA, merged
from test_claims import grid_cells, summary_rows


def plan_with(**sens) -> wp.Plan:
    """config.yaml with ``sens`` merged into its sensitivity section (dicts key by key)."""
    return wp.load(merged(sensitivity=sens), SCHEMA)


@pytest.fixture(scope="module")
def paper() -> wp.Plan:
    return wp.load(merged(), SCHEMA)


# ------------------------------------------------------------------ expansion
def test_the_section_expands_into_named_studies(paper):
    c = paper.config
    sens = c["sensitivity"]
    index = wp.sensitivity_index(c)
    names = [e["study"] for e in index]
    assert names[:3] == ["sens_base_C1", "sens_base_C2", "sens_base_C4"]
    assert len(names) == len(set(names))
    for e in index:                                   # every one is an ordinary study now
        s = c["studies"][e["study"]]
        assert s["replicates"] == sens["replicates"] and paper.seed_blocks(e["study"]) == [(0, sens["replicates"] - 1)]
        assert s["grid"]["m"] == sens["designs"][e["claim"]]["grid"]["m"]
        assert s["methods"] == c["studies"][sens["designs"][e["claim"]]["study"]]["methods"]
    # mu replaces the grid axis; other settings lie over the study's
    assert c["studies"]["sens_mu_0p5_C2"]["grid"]["mu"] == [0.5] and "settings" not in c["studies"]["sens_mu_0p5_C2"]
    assert c["studies"]["sens_q_0p99_C4"]["settings"] == {"clip": {"rule": "quantile", "q": 0.99}}
    # claims restrictions: the FedSGD variants run C2 and C4 only
    assert not any(e["variant"] == "fedsgd_eta_1" and e["claim"] == "C1" for e in index)
    assert {"sens_fedsgd_eta_1_C2", "sens_fedsgd_eta_1_C4"} <= set(names)
    assert sum(len(paper.study_cells(e["study"])) * len(e["models"]) for e in index) == 352
    # a job of a generated cell carries the variant's settings
    group = paper.cell_groups("sens_fedsgd_K_200_C2")[0]
    spec = json.loads(paper.cell_params(W(model="logistic", study="sens_fedsgd_K_200_C2",
                                        cells=f"{group[0]}-{group[1]}",
                                          first="0", last=str(sens["replicates"] - 1))))[0]
    assert spec["sizes"] == "equal(400)" and spec["m"] == 60
    assert spec["method_settings"]["fedsgd"] == {"eta": 0.5, "K": 200} and spec["K"] == 50


def test_the_study_is_not_in_the_default_target(paper):
    t = paper.targets()
    assert t["sensitivity"] == ["tables/paper/claims_map.csv", "tables/paper/claims_map.md",
                                "figures/paper/claims_map.pdf", "figures/paper/claims_map.png"]
    assert not set(t["sensitivity"]) & set(t["all"])
    assert not any("sens_" in f for f in paper.claims_summaries())
    smoke_like = merged()
    del smoke_like["sensitivity"]
    assert "sensitivity" not in wp.load(smoke_like, SCHEMA).targets()


def test_beta_scale_changes_beta_and_nothing_else():
    """Without beta_scale a cell's parameters are those of a config without the section
    (so its data seeds and outputs are unchanged); with it, beta_true is scaled."""
    bare = merged()
    del bare["sensitivity"]
    w = W(model="logistic", study="compare", cells="0-14", first="0", last="99")
    with_section = wp.load(merged(), SCHEMA)
    assert with_section.cell_params(w) == wp.load(bare, SCHEMA).cell_params(w)
    x2 = json.loads(with_section.cell_params(W(**{**vars(w), "study": "sens_beta_x2_C2",
        "cells": "0-1", "last": "19"})))[0]
    assert x2["beta_true"] == [2 * b for b in merged()["beta_true"]["logistic"]]
    assert "beta_scale" not in x2


BAD = {
    "unknown setting": ({"variants": {"v": {"settings": {"sigma": 1}}}}, "sensitivity.variants.v.settings.sigma"),
    "bad clip": ({"variants": {"v": {"settings": {"clip": {"rule": "quantile", "qq": 0.5}}}}},
                 "sensitivity.variants.v.settings.clip.qq"),
    "unknown claim": ({"variants": {"v": {"settings": {}, "claims": ["C7"]}}}, "sensitivity.variants.v.claims[0]"),
    "design key": ({"designs": {"C2": {"study": "compare", "grdi": {}}}}, "sensitivity.designs.C2.grdi"),
    "design study": ({"designs": {"C2": {"study": "comprae", "grid": {"m": [60], "sizes": ["equal(400)"]}}}},
                     "sensitivity.designs.C2.study"),
    "claim without design": ({"variants": {"v": {"settings": {}, "claims": ["C3"]}}}, "sensitivity.variants.v.claims"),
    "method name": ({"variants": {"v": {"settings": {"method_settings": {"fedsdg": {"eta": 1}}}}}},
                    "sensitivity.variants.v.settings.method_settings.fedsdg"),
    "method setting": ({"variants": {"v": {"settings": {"method_settings": {"fedsgd": {"eat": 1}}}}}},
                       "sensitivity.variants.v.settings.method_settings.fedsgd.eat"),
    "design sizes": ({"designs": {"C2": {"study": "compare", "grid": {"m": [60], "sizes": ["equal(4OO)"]}}}},
                     "sensitivity.designs.C2.grid.sizes[0]"),
    "reserved name": ({"variants": {"base": {"settings": {}}}}, "sensitivity.variants.base"),
    "C3 with mu": ({"designs": {"C3": {"study": "iterations", "grid": {"m": [50], "sizes": ["equal(100)"],
                                                                       "K": [10, 50], "mu": [2, 6]}}},
                    "variants": {"v": {"settings": {"mu": 1}}}}, "sensitivity.variants.mu_0p5.settings"),
                    # the first variant setting mu
    "real-data key": ({"realdata": {"variants": {"v": {"tau": 1}}}}, "sensitivity.realdata.variants.v.tau"),
    "real-data dataset": ({"realdata": {"datasets": {"minst": {}}, "variants": {}}},
                          "sensitivity.realdata.datasets.minst"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_section_is_named_before_any_job(case):
    given, key = BAD[case]
    with pytest.raises(wp.ConfigError) as err:
        plan_with(**given)
    msg = str(err.value)
    assert msg.startswith(f"invalid config at {key}:") or msg.startswith(f"invalid config at {key} "), msg
    assert "\n" not in msg


def test_variant_models_and_a_name_clash():
    p = plan_with(variants={"v": {"settings": {"sigma_c": 2.0}, "models": ["poisson"]}})
    assert all(e["models"] == ["poisson"] for e in wp.sensitivity_index(p.config) if e["variant"] == "v")
    cfg = merged()
    cfg["studies"]["sens_base_C2"] = copy.deepcopy(cfg["studies"]["compare"])
    with pytest.raises(wp.ConfigError, match="studies.sens_base_C2"):
        wp.load(cfg, SCHEMA)


def test_a_resolved_config_loads_again(paper):
    """The resolved config (generated studies included) gives the same plan back."""
    again = wp.load(copy.deepcopy(paper.config), SCHEMA)
    assert again.sensitivity_summaries() == paper.sensitivity_summaries()


# ------------------------------------------------------------------ real data
def test_real_data_runs(paper, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)        # no data/mnist here, whatever the checkout has
    runs = paper.sensitivity_realdata_runs()
    assert [r["variant"] for r in runs][:2] == ["base", "tau1_0p05"] and {r["dataset"] for r in runs} == {"digits"}
    base = runs[0]["files"]
    assert base == paper.claims_realdata_files()          # the default run's own fits
    assert runs[1]["files"][0] == "results/paper/sensitivity/realdata/tau1_0p05/digits/binary/split~0.parquet"
    spec = json.loads(paper.sensitivity_realdata_spec(W(variant="K_200", dataset="digits", task="binary", split="1")))
    assert spec["method_settings"]["fedhybrid"] == {"K1": 120, "eta1": 0.5, "K2": 80, "eta2": 0.5}
    assert spec["tau1"] == paper.config["realdata"]["tau1"] and "splits" not in spec
    with pytest.raises(ValueError):
        paper.sensitivity_realdata_spec(W(variant="K_200", dataset="digits", task="binary", split="7"))
    assert any("mnist: not run" in s for s in paper.sensitivity_datasets()[1])
    # MNIST runs where its files are present (here: empty stand-ins in a temporary folder)
    cfg = merged()
    cfg["realdata"]["path"] = str(tmp_path)
    for f in wp.mnist_files(str(tmp_path)):
        Path(f).write_bytes(b"")
    p = wp.load(cfg, SCHEMA)
    mnist = [r for r in p.sensitivity_realdata_runs() if r["dataset"] == "mnist"]
    assert mnist and mnist[0]["files"][0].startswith("results/paper/sensitivity/realdata/base/mnist/")
    spec = json.loads(p.sensitivity_realdata_spec(W(variant="base", dataset="mnist", task="binary", split="0")))
    assert spec["m"] == 80 and spec["method_settings"]["fedsgd"]["eta"] == 0.1


# ------------------------------------------------------------------ the claims map
def _c2_summary(study, good: bool):
    """compare-like cells where the C2 ordering holds (good) or is reversed."""
    order = {"fednewton": 1.0, "fedhybrid": 2.0, "fedsgd": 3.0, "fedavg": 4.0}
    cells = grid_cells([60, 140], [400])
    return summary_rows("logistic", study, cells,
                        lambda meth, c: order[meth] if good else 5.0 - order[meth])


def _c4_summary(study, flat_others: bool):
    cells = [dict(sizes="total(20000,equal)", m=m, n=20000 // m) for m in (20, 50, 100, 200)]

    def mse(meth, c):
        rising = {"fedavg": 1e-3 * c["m"]}        # the claim's data: FedAvg's slope +1
        return rising.get(meth, 1e-3 if flat_others else 1e-3 * c["m"] ** 0.8)
    return summary_rows("logistic", study, cells, mse)


SPEC = {"designs": {"sens_base_C2": {"variant": "base", "claim": "C2", "models": ["logistic"]},
                    "sens_bad_C2": {"variant": "bad", "claim": "C2", "models": ["logistic"]},
                    "sens_base_C4": {"variant": "base", "claim": "C4", "models": ["logistic"]},
                    "sens_bad_C4": {"variant": "bad", "claim": "C4", "models": ["logistic"]}},
        "variants": {"base": {}, "bad": {"mu": 0.5}}, "realdata_variants": {}, "realdata": [],
        "title": "Claims map [test, 00000000]", "provenance": "run test", "replicates": 100}


@pytest.fixture(scope="module")
def toy_summary():
    return pd.concat([_c2_summary("sens_base_C2", True), _c2_summary("sens_bad_C2", False),
                      _c4_summary("sens_base_C4", True), _c4_summary("sens_bad_C4", False)], ignore_index=True)


def test_the_map_says_where_a_claim_holds(toy_summary):
    df = sensitivity.claims_map(toy_summary, None, SPEC)
    top = df[df["subclaim"] == ""].set_index(["claim", "variant"])["verdict"]
    assert top[("C2", "base")] == "holds" and top[("C2", "bad")] == "fails"
    assert top[("C4", "base")] == "holds" and top[("C4", "bad")] != "holds"
    assert sensitivity.where_holds(df, "C2") == [("base", "logistic", "paper")]
    sub = df[(df["claim"] == "C2") & (df["variant"] == "base") & (df["subclaim"] != "")]
    assert list(sub["subclaim"]) == ["FedHybrid < FedSGD", "FedNewton < FedAvg", "FedNewton best", "FedAvg worst"]
    assert set(sub["verdict"]) == {"holds"}
    c4 = df[(df["claim"] == "C4") & (df["variant"] == "bad")].set_index("subclaim")["verdict"]
    assert c4["others flat"] == "fails" and c4["FedAvg rises sharply"] == "holds"
    key = df[(df["claim"] == "C4") & (df["variant"] == "base") & (df["subclaim"] == "")]["key_statistic"].iloc[0]
    assert "FedAvg +1.00" in key
    assert df.loc[df["variant"] == "bad", "changes"].iloc[0] == '{"mu": 0.5}'


def test_certified_newton_takes_newtons_place(toy_summary):
    c2 = toy_summary[toy_summary["study"] == "sens_base_C2"]
    cert = c2[c2["method"] == "fednewton"].assign(method="fednewton_certified", mse=10.0, se=0.1)
    df = sensitivity.claims_map(pd.concat([c2, cert]), None,
                                dict(SPEC, designs={"sens_base_C2": SPEC["designs"]["sens_base_C2"]}))
    top = df[df["subclaim"] == ""].set_index("newton")["verdict"]
    assert top["paper"] == "holds" and top["certified"] != "holds"   # certified is the worst here


def test_claims_map_command_writes_every_output(toy_summary, tmp_path):

    src = tmp_path / "s.parquet"
    toy_summary.to_parquet(src)
    out = {ext: tmp_path / f"claims_map.{ext}" for ext in ("csv", "md", "pdf", "png")}
    rc = subprocess.run([sys.executable, "-m", "fedgdp", "claims-map", "--summaries", str(src),
                         "--spec", json.dumps(dict(SPEC, caption="Made by run test, config 00000000.")),
                         *[a for ext, p in out.items() for a in (f"--{ext}", str(p))]],
                        capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr
    csv = pd.read_csv(out["csv"])
    assert list(csv.columns) == sensitivity.MAP_COLUMNS
    md = out["md"].read_text()
    assert "Claims map [test, 00000000]" in md and "- C2 holds: base (logistic)." in md
    assert out["png"].stat().st_size > 1000 and out["pdf"].read_bytes()[:4] == b"%PDF"


def test_subclaims_are_read_from_the_evidence():
    ev = ["FedHybrid < FedSGD: holds (2/2 agree, 0 tie, 0 contradict)", "context: median ...",
          "extra, not part of the claim: FedNewton-certified < FedAvg: fails (0/2 agree)",
          "others flat: partly (1/2 agree). checks: a: b"]
    assert sensitivity.subclaims(ev) == [("FedHybrid < FedSGD", "holds"), ("others flat", "partly")]


# ------------------------------------------------------------------ end to end (slow)
@pytest.mark.slow
def test_tiny_sensitivity_run_builds_the_map_and_its_report(tmp_path):
    """`snakemake sensitivity` on a tiny section (2 variants x C2, C4 on small grids, one
    real-data variant on the smoke layout): the map's four files, the report lists them,
    and the default target plans none of the section's jobs."""
    from test_pipeline import SMOKE, snakemake, workdir

    d = workdir(tmp_path)
    cfg = yaml.safe_load((d / "config.yaml").read_text())
    cfg["sensitivity"] = {
        "replicates": 4,
        "designs": {"C2": {"study": "compare", "grid": {"m": [10, 20], "sizes": ["equal(100)"]}},
                    "C4": {"study": "fixed_N", "grid": {"m": [10, 20, 40], "sizes": ["total(2000,equal)"]}}},
        "variants": {"mu_inf": {"settings": {"mu": "inf"}}},
        "realdata": {"variants": {"tau1_5": {"tau1": 5}}}}
    (d / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    dry = snakemake(d, *SMOKE, "-n")
    assert dry.returncode == 0 and "sens_" not in dry.stdout and "claims_map" not in dry.stdout
    res = snakemake(d, "sensitivity", *SMOKE, timeout=600)   # targets before --configfile (it takes several)
    assert res.returncode == 0, res.stderr[-3000:]
    maps = {ext: d / f"{'figures' if ext in ('pdf', 'png') else 'tables'}/smoke/claims_map.{ext}"
            for ext in ("csv", "md", "pdf", "png")}
    assert all(p.stat().st_size > 0 for p in maps.values())
    df = pd.read_csv(maps["csv"])
    top = df[df["subclaim"].isna()]
    assert set(top["variant"]) == {"base", "mu_inf", "tau1_5"}
    assert set(top["claim"]) == {"C2", "C4", "C5"} and not (top["verdict"] == "not run").any()
    assert "[smoke, " in maps["md"].read_text()
    rep = snakemake(d, "sensitivity", *SMOKE, "--report", "report.html")
    assert rep.returncode == 0, rep.stderr[-2000:]
    html = (d / "report.html").read_text(errors="replace")
    assert "claims_map.png" in html and "Sensitivity" in html
