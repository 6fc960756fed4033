"""fedgdp.plan without Snakemake: the closed schema and its messages, the run
name, the output tree, the cells and targets of the shipped configs, job specs,
captions and cluster resources."""
import copy
import json
import re
from types import SimpleNamespace as W

import pytest
import yaml

from fedgdp import plan as wp
from shipped_configs import ROOT, SCHEMA, merged  # noqa: F401 (SCHEMA, merged: also used by test_sensitivity)


def plan(*files, overrides=None, **extra) -> wp.Plan:
    return wp.load(merged(*files, **extra), SCHEMA, overrides)


@pytest.fixture(scope="module")
def paper() -> wp.Plan:
    return plan()


@pytest.fixture(scope="module")
def smoke() -> wp.Plan:
    return plan("config/smoke.yaml", overrides=[{"run": "smoke"}])


# ------------------------------------------------------------------ the schema
def test_schema_is_closed_at_every_level():
    """Every object of the schema either lists its keys (additionalProperties: false) or
    is a map of names whose values are checked (studies, figures, per-method settings)."""
    schema = wp.load_schema(SCHEMA)
    open_maps = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node and where.split(".")[-1] != "figure":
                assert node.get("additionalProperties") is False, f"{where} is open"
            if node.get("type") == "object" and "properties" not in node:
                open_maps.append(where)
                assert "additionalProperties" in node, f"{where}: values unchecked"
            for k, v in node.items():
                walk(v, f"{where}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")

    walk(schema, "schema")
    assert schema["additionalProperties"] is False
    assert len(open_maps) >= 3     # studies, figures, nn per-dataset maps
    assert not [w for w in open_maps if "method_settings" in w]     # closed over the registry


@pytest.mark.parametrize("section, kind", [("defaults", "simulation"), ("realdata", "realdata")])
def test_the_schema_method_settings_are_the_methods_declarations(section, kind):
    """Each experiment's ``method_settings`` lists its registered methods, each with the
    fields of its settings dataclass, their bounds and help (nothing restated by hand)."""
    from fedgdp.methods import registry

    node = wp.load_schema(SCHEMA)["properties"][section]["properties"]["method_settings"]
    assert list(node["properties"]) == list(registry(kind)) and node["additionalProperties"] is False
    for name, meth in registry(kind).items():
        entry = node["properties"][name]
        assert list(entry["properties"]) == meth.setting_names() and entry["additionalProperties"] is False
        assert all(p["description"] and "default" not in p for p in entry["properties"].values())
    assert node["properties"]["fedsgd"]["properties"]["eta"]["exclusiveMinimum"] == 0
    if kind == "simulation":
        assert node["properties"]["fedhybrid"]["properties"]["K2"] == {
            "type": "integer", "minimum": 0, "description": "stage-2 server steps"}


@pytest.mark.parametrize("extra, key, message", [
    ({"defaults": {"method_settings": {"fedsgd": {"eta": -1}}}}, "defaults.method_settings.fedsgd.eta",
     "fedsgd.eta must be a number > 0, got fedsgd.eta=-1"),
    ({"defaults": {"method_settings": {"fedhybrid": {"K1": 2.5}}}}, "defaults.method_settings.fedhybrid.K1",
     "fedhybrid.K1 must be an integer >= 1, got fedhybrid.K1=2.5"),
    ({"realdata": {"method_settings": {"np_pooled": {"maxiter": 0}}}}, "realdata.method_settings.np_pooled.maxiter",
     "np_pooled.maxiter must be an integer >= 1, got np_pooled.maxiter=0"),
    ({"realdata": {"method_settings": {"fedsgd": {"eat": 0.5}}}}, "realdata.method_settings.fedsgd.eat",
     "unknown key 'eat' (did you mean 'eta'?); known here: K, eta"),
])
def test_a_bad_method_setting_gets_its_declared_check_message(extra, key, message):
    with pytest.raises(wp.ConfigError) as err:
        plan(**extra)
    assert str(err.value) == f"invalid config at {key}: {message}"


MISSPELT = {
    "top level": ({"replicats": 5}, "replicats", "replicates"),
    "a study": ({"studies": {"compare": {"grdi": {"m": [5]}}}}, "studies.compare.grdi", "grid"),
    "a grid": ({"studies": {"compare": {"grid": {"K": [50], "mus": [2]}}}},
               "studies.compare.grid.mus", "mu"),
    "defaults": ({"defaults": {"sigma": 1.0}}, "defaults.sigma", "sigma_c"),
    "clip": ({"defaults": {"clip": {"rule": "quantile", "qq": 0.9}}}, "defaults.clip.qq", "q"),
    "a figure": ({"figures": {"fig03": {"layuot": "m_by_size"}}}, "figures.fig03.layuot", "layout"),
    "a panel": ({"figures": {"fig03": {"panels": [{"size": "equal(400)"}]}}},
                "figures.fig03.panels[0].size", "sizes"),
    "a table": ({"tables": {"table1": {"cel": {}}}}, "tables.table1.cel", "cell"),
    "realdata": ({"realdata": {"split": 2}}, "realdata.split", "splits"),
    "realdata clip": ({"realdata": {"clip": {"rule": "fixed", "vaule": 0.9}}},
                      "realdata.clip.vaule", "value"),
    "nn": ({"nn": {"dataset": ["digits"]}}, "nn.dataset", "datasets"),
    "nn settings": ({"nn": {"settings": {"ridg": 2}}}, "nn.settings.ridg", "ridge"),
    "nn dataset name": ({"nn": {"dataset_settings": {"minst": {}}}}, "nn.dataset_settings.minst", "mnist"),
    "nn figure": ({"figures": {"fig09": {"run": 3}}}, "figures.fig09.run", "runs"),
    "method settings": ({"defaults": {"method_settings": {"fedsgd": {"eat": 0.5}}}},
                        "defaults.method_settings.fedsgd.eat", "eta"),
    "method name": ({"studies": {"compare": {"methods": ["fedsgd", "fedavgg"]}}},
                    "studies.compare.methods[1]", "fedavg"),
}


@pytest.mark.parametrize("case", list(MISSPELT))
def test_misspelt_key_is_named_with_the_key_it_probably_meant(case):
    extra, key, meant = MISSPELT[case]
    with pytest.raises(wp.ConfigError) as err:
        plan(**extra)
    msg = str(err.value)
    assert msg.startswith(f"invalid config at {key}:"), msg
    assert f"did you mean {meant!r}" in msg, msg
    assert "\n" not in msg


def test_bad_values_name_their_key():
    cases = {"defaults.mu": {"defaults": {"mu": 0}},
             "replicates": {"replicates": -1},
             "studies.compare.grid.sizes[0]": {"studies": {"compare": {"grid": {"sizes": ["unifrom(1,2)"]}}}},
             "figures.fig03.panels[0].sizes": {"figures": {"fig03": {"panels": [{"sizes": "equal(401)"}]}}},
             "figures.fig08.task": {"realdata": {"tasks": ["binary"]}},
             "figures.fig99.kind": {"figures": {"fig99": {"kind": "simulaton"}}},
             "run": {"run": "a/b"}}
    for key, extra in cases.items():
        with pytest.raises(wp.ConfigError) as err:
            plan(**extra)
        assert str(err.value).startswith(f"invalid config at {key}:"), (key, str(err.value))


def test_defaults_are_filled_in(paper):
    cfg = merged()
    del cfg["replicates"], cfg["realdata"]["folds"], cfg["studies"]["compare"]["schedule"]
    wp.validate(cfg, wp.load_schema(SCHEMA))
    assert cfg["replicates"] == 100 and cfg["realdata"]["folds"] == 5
    assert cfg["studies"]["compare"]["schedule"] == "paper"
    assert paper.config["figures"]["fig01"]["theory"] is False


def test_numbers_from_the_command_line():
    assert wp.numbers({"a": "6", "b": ["2.5", "x", "1e-3"], "c": {"d": "-3"}}) == \
        {"a": 6, "b": [2.5, "x", 1e-3], "c": {"d": -3}}


# ------------------------------------------------------------- run name, outputs
def test_run_names_of_the_shipped_configs():
    assert plan().run == "paper"
    for f, name in [("config/smoke.yaml", "smoke"), ("config/mnist.yaml", "mnist"),
                    ("config/paper-nn.yaml", "paper-nn")]:
        assert yaml.safe_load((ROOT / f).read_text())["run"] == name
        assert plan(f, overrides=[yaml.safe_load((ROOT / f).read_text())]).run == name


def test_unnamed_overrides_get_a_hashed_run_name():
    base = plan(overrides=[])
    p = plan(replicates=20, overrides=[{"replicates": 20}])
    assert re.fullmatch(r"paper-[0-9a-f]{8}", p.run) and p.run != base.run
    assert plan(replicates=20, overrides=[{"replicates": 20}]).run == p.run     # resumable
    assert plan(replicates=30, overrides=[{"replicates": 30}]).run != p.run
    assert plan(run="r20", replicates=20, overrides=[{"run": "r20", "replicates": 20}]).run == "r20"
    # a named file with an unnamed --config on top: not the named run either
    smoke = merged("config/smoke.yaml")
    named = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    assert wp.run_name(smoke, [named]) == "smoke"
    assert wp.run_name(smoke, [named, {"replicates": 8}]).startswith("smoke-")


def test_cells_per_job_changes_neither_the_run_name_nor_the_hash(paper):
    """How cells are cut into jobs changes no number (tests/commands/test_cli.py): overriding it
    alone keeps the run and its config hash (so titles and tables stay the same)."""
    one = plan(cells_per_job=1, overrides=[{"cells_per_job": 1}])
    assert (one.run, one.sha) == (paper.run, paper.sha)
    assert wp.run_name(paper.config, [{"cells_per_job": 1, "replicates": 8}]).startswith("paper-")
    assert wp.run_name(paper.config, [{}]).startswith("paper-")


def test_every_output_lies_under_the_run(paper, smoke):
    for p in (paper, smoke):
        files = [f for name, fs in p.targets().items() if name != "gallery" for f in fs]
        assert files and all(f.split("/")[1] == p.run for f in files), files
        assert all(f.split("/")[0] in ("results", "figures", "tables") for f in files)
        for pattern in vars(p.paths).values():
            assert f"/{p.run}/" in pattern + "/" or pattern.endswith(f"/{p.run}"), pattern
    assert not set(paper.targets()["all"]) & set(smoke.targets()["all"])


def test_targets(paper):
    t = paper.targets()
    assert t["fig03"] == ["figures/paper/fig03.pdf", "figures/paper/fig03.png"]
    assert t["fig07"][-1] == "tables/paper/fig07_medians.csv"
    assert t["table1"] == [f"tables/paper/table1.{e}" for e in ("csv", "md", "tex")]
    assert t["rates"] == ["tables/paper/rates.csv", "tables/paper/rates.md"]
    assert t["all"][0] == "results/paper/config.resolved.yaml"
    assert not any("fig09" in f or "fig10" in f for f in t["all"])          # nn: not by default
    assert t["gallery"] == [f"docs/gallery/{f}.png" for f in
                            ["fig01", "fig02", "fig03", "fig04", "fig05", "fig06", "fig11", "fig12",
                             "fig13", "fig14", "fig15", "fig16", "fig07", "fig08"]]
    assert paper.table_files("claims") == ["tables/paper/claims.csv", "tables/paper/claims.md"]
    nn = plan(nn={"in_default_target": True})
    assert "figures/paper/fig09.pdf" in nn.targets()["all"]


def test_figure_kinds(paper):
    assert paper.figures("realdata") == ["fig07", "fig08"]
    assert paper.figures("nn") == ["fig09", "fig10"]
    assert len(paper.figures("simulation")) == 12
    assert paper.nn_figure_id(W(fig="fig09")) == "fig09" and paper.nn_figure_id(W(fig="fig10")) == "fig10"
    renamed = merged()
    renamed["figures"]["cnn_by_n"] = renamed["figures"].pop("fig09")
    p = wp.load(renamed, SCHEMA, [])
    assert p.nn_figure_id(W(fig="cnn_by_n")) == "fig09"                    # by x, not by name


def test_resolved_config_records_run_and_hash(paper, smoke):
    text = smoke.resolved_config_text()
    back = yaml.safe_load(text)
    assert back["run"] == "smoke" and back["replicates"] == 4
    assert smoke.sha in text.splitlines()[1]
    assert wp.config_sha(back) == smoke.sha                     # the file reproduces the hash
    assert paper.sha != smoke.sha


# --------------------------------------------------------------- cells and specs
def test_cells_of_the_shipped_configs(paper, smoke):
    def n_cells(p):
        sens = {e["study"] for e in wp.sensitivity_index(p.config)}   # on request only (test_sensitivity)
        return sum(len(p.study_cells(s)) * len(p.config["studies"][s]["models"])
                   for s in p.config["studies"] if s not in sens)

    assert n_cells(paper) == 230 + 36 and n_cells(smoke) == 48 + 12   # + the decomposition studies' cells
    assert paper.seed_blocks() == [(0, 99)]
    assert plan(seeds_per_job=30).seed_blocks() == [(0, 29), (30, 59), (60, 89), (90, 99)]


def test_cells_are_grouped_into_jobs_within_a_study(paper):
    """Every cell of a study lies in exactly one job's group; groups are consecutive,
    of at most cells_per_job cells and sizes that differ by at most one."""
    for per in (1, 4, 8, 25, 100):
        p = paper if per == paper.config["cells_per_job"] else plan(cells_per_job=per)
        for study in p.config["studies"]:
            groups, n = p.cell_groups(study), len(p.study_cells(study))
            assert [i for a, b in groups for i in range(a, b + 1)] == list(range(n))
            sizes = [b - a + 1 for a, b in groups]
            assert max(sizes) <= per and max(sizes) - min(sizes) <= 1 and len(groups) == -(-n // per)
    assert paper.cell_groups("equal_n") == [(0, 11), (12, 24)]      # 25 cells, 16 per job
    assert plan(cells_per_job=1).cell_groups("compare") == [(i, i) for i in range(15)]


def test_cell_params_are_checked_against_the_grid(paper):
    w = W(model="logistic", study="compare", cells="0-14", first="0", last="99")
    spec = json.loads(paper.cell_params(w))
    assert [c["sizes"] for c in spec] == ["uniform(100,700)"] * 5 + ["equal(400)"] * 5 + ["lognormal(5.5,1)"] * 5
    assert [c["m"] for c in spec] == [60, 80, 100, 120, 140] * 3 and spec[0]["methods"][0] == "fedsgd"
    cell = {"sizes": "equal(400)", "m": 140, "mu": "2", "K": 50}
    assert paper.cell_file("logistic", "compare", cell, (0, 99)) == \
        "results/paper/cells/logistic/compare/cells~0-14/seeds~0-99.parquet"
    for bad in (dict(cells="7-14"), dict(cells="8-14"), dict(cells="15-15"), dict(cells="x"), dict(last="98"),
                dict(model="gaussian")):
        with pytest.raises(ValueError):
            paper.cell_params(W(**{**vars(w), **bad}))
    files = paper.study_cell_files(W(model="poisson", study="compare"))
    assert files == [f"results/paper/cells/poisson/compare/cells~{g}/seeds~0-99.parquet" for g in ("0-14",)]


STUDY_SETTINGS = {"clip": {"rule": "fixed", "value": 3.0}, "privacy": {"mode": "certified"},
                  "method_settings": {"fedsgd": {"eta": 0.1}}, "sigma_c": 2.0}


def test_a_study_settings_lie_over_the_defaults():
    """clip is replaced whole, privacy and method_settings merged key by key, the rest
    replaced; the other studies and the config's hash are untouched by the mechanism."""
    cfg = merged()
    cfg["studies"]["compare"]["settings"] = copy.deepcopy(STUDY_SETTINGS)
    cfg.pop("sensitivity")   # its clip variants would lie over this certified study (an error)
    p = wp.load(cfg, SCHEMA)
    w = W(model="logistic", study="compare", cells="0-14", first="0", last="99")
    spec = json.loads(p.cell_params(w))[7]                    # equal(400), m = 100
    assert spec["sizes"] == "equal(400)" and spec["m"] == 100
    assert spec["clip"] == {"rule": "fixed", "value": 3.0}
    assert spec["privacy"] == {"mode": "certified", "hessian_clip": 4}
    assert spec["method_settings"]["fedsgd"] == {"eta": 0.1}
    assert spec["method_settings"]["fedavg"] == {"eta": 0.5, "R": 2}
    assert spec["sigma_c"] == 2.0 and spec["mu"] == "2" and spec["K"] == 50
    other = json.loads(p.cell_params(W(**{**vars(w), "study": "equal_n", "cells": "0-11"})))[0]
    assert other["clip"] == {"rule": "quantile", "q": 0.9} and other["sigma_c"] == 1.0
    assert "sigma_c 2.0" not in p.figure_caption(W(fig="fig01"))
    assert '"sigma_c": 2.0' in p.figure_caption(W(fig="fig03"))
    assert json.loads(p.figure_spec(W(fig="fig03")))["method_settings"]["fedsgd"] == {"eta": 0.1}
    assert "settings" not in merged()["studies"]["compare"]   # the shipped config sets none


def test_a_study_may_run_fewer_replicates():
    cfg = merged(seeds_per_job=20)
    cfg["studies"]["compare"]["replicates"] = 30
    p = wp.load(cfg, SCHEMA)
    assert p.seed_blocks("compare") == [(0, 19), (20, 29)] and p.seed_blocks("equal_n")[-1] == (80, 99)
    files = p.study_cell_files(W(model="logistic", study="compare"))
    assert len(files) == len(p.cell_groups("compare")) * 2 and files[1].endswith("seeds~20-29.parquet")
    assert "30 replicates per cell" in p.figure_caption(W(fig="fig03"))
    assert "100 replicates per cell" in p.figure_caption(W(fig="fig01"))


@pytest.mark.parametrize("settings, key", [
    ({"mu": 3}, "studies.compare.settings.mu"),
    ({"sigma": 1}, "studies.compare.settings.sigma"),
    ({"clip": {"rule": "quantile", "qq": 0.9}}, "studies.compare.settings.clip.qq"),
    ({"method_settings": {"fedsdg": {"eta": 0.1}}}, "studies.compare.settings.method_settings.fedsdg"),
    ({"method_settings": {"fedsgd": {"eat": 0.1}}}, "studies.compare.settings.method_settings.fedsgd.eat"),
])
def test_a_study_settings_are_checked(settings, key):
    cfg = merged()
    cfg["studies"]["compare"]["settings"] = settings
    with pytest.raises(wp.ConfigError) as err:
        wp.load(cfg, SCHEMA)
    assert key in str(err.value)


def test_figure_and_table_specs_say_which_run_made_them(paper):
    spec = json.loads(paper.figure_spec(W(fig="fig03")))
    assert "kind" not in spec and spec["name"] == "fig03"
    assert spec["title"].endswith(f"[paper, {paper.sha}]")
    assert paper.figure_summaries(W(fig="fig13")) == ["results/paper/summary/poisson_equal_n.parquet",
                                                      "results/paper/summary/poisson_varied_n.parquet"]
    for text in (paper.figure_caption(W(fig="fig03")), json.loads(paper.table1_spec())["note"],
                 json.loads(paper.rates_spec())["note"], paper.table1_caption(), paper.rates_caption(),
                 paper.realdata_caption(W(fig="fig07")), paper.nn_caption(W(fig="fig10"))):
        assert f"run paper, config {paper.sha}" in text, text[-200:]


def test_nn_runs_and_constraints(paper):
    assert len(paper.nn_run_files("digits", "fig09")) == 4 * 3
    assert paper.nn_run_files("digits", "fig10")[0] == \
        "results/paper/nn/digits/fig10/m~5/n~full/rep~0.parquet"
    spec = json.loads(paper.nn_run_spec(W(dataset="digits", fig="fig09", m="10", n="30", rep="2")))
    assert spec["figure"] == "fig09" and spec["n"] == 30 and spec["run"] == 2
    with pytest.raises(ValueError):
        paper.nn_run_spec(W(dataset="digits", fig="fig09", m="10", n="31", rep="0"))
    c = paper.nn_constraints()
    assert re.fullmatch(c["n"], "full") and re.fullmatch(c["rep"], "2") and not re.fullmatch(c["rep"], "3")


def test_constraints_match_exactly_the_config(paper):
    c = paper.constraints()
    assert re.fullmatch(c["study"], "fixed_N") and not re.fullmatch(c["study"], "fixed")
    assert re.fullmatch(c["cells"], "12-24") and not re.fullmatch(c["cells"], "8-14")
    assert wp.alternatives([]) == "(?!)"


# ------------------------------------------------------------------ resources
def test_cell_resources_grow_with_the_cells_of_a_job(paper):
    one = plan(cells_per_job=1)
    big = W(model="logistic", study="compare", cells="14-14", first="0", last="99")    # lognormal(5.5,1), m = 140
    small = W(model="logistic", study="equal_n", cells="0-0", first="0", last="99")    # equal(30), m = 20
    assert one.cell_runtime(big) > one.cell_runtime(small) >= 2
    assert one.cell_mem_mb(big) > one.cell_mem_mb(small) >= 1000
    assert one.cell_runtime(big, attempt=2) == 2 * one.cell_runtime(big)
    assert one.cell_runtime(big) <= 60 and one.cell_mem_mb(big) <= 4000
    # a job of several cells: the sum of their run times, the memory of the largest
    group = W(model="logistic", study="compare", cells="0-14", first="0", last="99")
    singles = [W(**{**vars(group), "cells": f"{i}-{i}"}) for i in range(0, 15)]
    assert paper.cell_runtime(group) == 2 + sum(one.cell_runtime(w) - 2 for w in singles)
    assert paper.cell_mem_mb(group) == max(one.cell_mem_mb(w) for w in singles) == one.cell_mem_mb(big)
    assert wp.Plan.realdata_runtime(W(dataset="mnist", task="multiclass")) == 120
    assert wp.Plan.nn_mem_mb(W(dataset="digits"), attempt=3) == 6000


# -------------------------------------------------------------------- gallery
def test_shrink_png_is_small_and_keeps_metadata(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 5))
    ax.plot(range(10), [x * x for x in range(10)], marker="o")
    fig.savefig(tmp_path / "big.png", dpi=150, metadata={"Description": "about"})
    wp.shrink_png(tmp_path / "big.png", tmp_path / "g" / "small.png")
    from PIL import Image

    with Image.open(tmp_path / "g" / "small.png") as img:
        assert img.width == wp.GALLERY_WIDTH and img.text["Description"] == "about"
    assert (tmp_path / "g" / "small.png").stat().st_size < 60_000
    assert wp.main(["shrink-png", str(tmp_path / "big.png"), str(tmp_path / "b.png")]) == 0
    assert wp.main([]) == 2


def test_pipeline_extra_can_build_the_report():
    """`pip install -e '.[pipeline]'` (the README's install) must bring what
    `snakemake --report` needs (pygments, via snakemake[reports]) and the gallery (pillow)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pipeline = " ".join(extras["pipeline"])
    assert "snakemake[reports]" in pipeline and "pillow" in pipeline


def test_cnn_jobs_ask_for_gpus_only_where_the_config_says():
    """Rule train_nn's gpu resource (sbatch --gpus under the SLURM profile): 1 with
    nn.device cuda, nn.gpus where set, else 0 (no request); nn.gpus leaves the config's
    hash (and so the run's name) as it was, since it changes no number."""
    base = plan()
    assert base.nn_gpus() == 0
    assert plan(nn={"device": "cuda"}).nn_gpus() == 1
    assert plan(nn={"device": "cuda:1", "gpus": 2}).nn_gpus() == 2
    assert plan(nn={"gpus": 1}).nn_gpus() == 1
    assert plan(nn={"gpus": 3}).sha == base.sha
    assert plan(nn={"device": "cuda"}).sha != base.sha
    with pytest.raises(ValueError, match="gpus"):
        plan(nn={"gpus": -1})
