# Shared set-up of the workflow: config validation, the study grids, wildcard
# constraints, input and parameter functions. No rules here.
import itertools
import json
import math
import os
import re
import shlex
import shutil
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

from fedgdp.estimators import REGISTRY
from fedgdp.params import resolve
from fedgdp.plots import LAYOUTS
from fedgdp.simulate import parse_sizes, size_slug


_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def _numbers(value):
    """Nested values given with --config arrive as strings ('defaults={mu: 6}' gives
    mu='6'): turn strings that are numbers back into numbers."""
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, str) and _NUMBER.match(value):
        return int(value) if re.fullmatch(r"[-+]?\d+", value) else float(value)
    return value


config.update(_numbers(config))
validate(config, schema="../schemas/config.schema.yaml")

# The job commands call `fedgdp`; when Snakemake runs from a virtual environment that
# is not activated, put that environment's scripts first on the PATH of every job
# (a prefix replaces Snakemake's own, so it repeats its bash strict mode).
if shutil.which("fedgdp") is None:
    shell.prefix(
        "set -euo pipefail; export PATH={}:\"$PATH\"; ".format(
            shlex.quote(os.path.dirname(sys.executable))
        )
    )

# The output of simulate_cell (workflow/rules/simulate.smk).
CELL_FILE = "results/cells/{model}/{study}/sizes~{sizes}/m~{m}/mu~{mu}/K~{K}/seeds~{first}-{last}.parquet"


def config_error(key, message):
    """Stop before any job runs, naming the config key at fault."""
    return WorkflowError(f"invalid config at {key}: {message}")


def fmt_mu(mu):
    """Path form of mu: 2 -> '2', 0.5 -> '0.5', inf -> 'inf'."""
    mu = float(mu)
    return "inf" if math.isinf(mu) else f"{mu:g}"


def study_axes(study):
    """Grid axes of a study in path order, missing ones from `defaults`."""
    grid = config["studies"][study]["grid"]
    d = config["defaults"]
    return {
        "sizes": [parse_sizes(s).text for s in grid["sizes"]],
        "m": [int(m) for m in grid["m"]],
        "mu": [fmt_mu(mu) for mu in grid.get("mu", [d["mu"]])],
        "K": [int(k) for k in grid.get("K", [d["K"]])],
    }


def study_cells(study):
    """Every cell of a study: dicts with sizes (canonical text), m, mu (path form), K."""
    axes = study_axes(study)
    return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]


def seed_blocks():
    """(first, last) replicate of every simulate job of a cell."""
    n, per = config["replicates"], config["seeds_per_job"]
    return [(a, min(a + per, n) - 1) for a in range(0, n, per)]


def cell_overrides(model, study, cell):
    """Parameters of one cell for `fedgdp simulate --params` (fedgdp.params keys)."""
    s = config["studies"][study]
    p = {k: v for k, v in config["defaults"].items() if k not in ("mu", "K")}
    p.update(model=model, study=study, sizes=cell["sizes"], m=int(cell["m"]),
             mu=cell["mu"], K=int(cell["K"]), schedule=s["schedule"], methods=s["methods"],
             beta_true=config["beta_true"][model])
    return p


# ------------------------------------------------------------------ semantic checks
def _check_in(key, value, allowed, what):
    if value not in allowed:
        raise config_error(key, f"{what} {value!r} is not one of {', '.join(map(str, allowed))}")


def _check_panel_value(key, name, value, study):
    """A value a panel or table fixes must be a value of the study's grid."""
    axes = study_axes(study)
    if name == "method":
        _check_in(key, value, config["studies"][study]["methods"], f"method of study {study}:")
        return
    if name == "sizes":
        try:
            value = parse_sizes(value).text
        except ValueError as exc:
            raise config_error(key, str(exc)) from None
    elif name == "mu":
        value = fmt_mu(value)
    else:
        value = int(value)
    _check_in(key, value, axes[name], f"{name} of study {study}:")


def check_config():
    """What the schema cannot say: methods exist, schemes parse, references resolve."""
    for name in config["defaults"]["method_settings"]:
        _check_in(f"defaults.method_settings.{name}", name, list(REGISTRY), "method")
    for study, s in config["studies"].items():
        for i, name in enumerate(s["methods"]):
            _check_in(f"studies.{study}.methods[{i}]", name, list(REGISTRY), "method")
        for i, text in enumerate(s["grid"]["sizes"]):
            try:
                scheme = parse_sizes(text, config["defaults"]["n_floor"])
                for m in s["grid"]["m"]:
                    scheme.check(m)
            except ValueError as exc:
                raise config_error(f"studies.{study}.grid.sizes[{i}]", str(exc)) from None
        for model in s["models"]:
            if model not in config["beta_true"]:
                raise config_error(f"studies.{study}.models", f"no beta_true for model {model!r}")
            over = cell_overrides(model, study, study_cells(study)[0])
            if over.get("tau1") == "auto":
                over["tau1"] = 1.0  # the real value is computed by the jobs
            try:
                resolve(over)
            except ValueError as exc:
                raise config_error(f"studies.{study}", f"{model}: {exc}") from None
    studies = list(config["studies"])
    for fig, f in config["figures"].items():
        for i, panel in enumerate(f["panels"]):
            key = f"figures.{fig}.panels[{i}]"
            study = panel.get("study", f.get("study"))
            if study is None:
                raise config_error(key, "no study: give the figure or the panel a study")
            _check_in(f"{key}.study" if "study" in panel else f"figures.{fig}.study", study,
                      studies, "study")
            _check_in(f"figures.{fig}.model", f["model"], config["studies"][study]["models"],
                      f"model of study {study}:")
            for name, value in panel.items():
                if name not in ("study", "title"):
                    _check_panel_value(f"{key}.{name}", name, value, study)
    t1 = config["tables"].get("table1")
    if t1:
        _check_in("tables.table1.study", t1["study"], studies, "study")
        _check_in("tables.table1.model", t1["model"], config["studies"][t1["study"]]["models"],
                  f"model of study {t1['study']}:")
        for name, value in t1["cell"].items():
            _check_panel_value(f"tables.table1.cell.{name}", name, value, t1["study"])
        for i, name in enumerate(t1.get("methods") or []):
            _check_in(f"tables.table1.methods[{i}]", name, config["studies"][t1["study"]]["methods"],
                      f"method of study {t1['study']}:")
    rates = config["tables"].get("rates")
    if rates:
        for i, fit in enumerate(rates["fits"]):
            _check_in(f"tables.rates.fits[{i}].study", fit["study"], studies, "study")


check_config()


def figure_names():
    """Simulation figures of the config (those plot_figure draws)."""
    return [fig for fig, spec in config["figures"].items() if spec["layout"] in LAYOUTS]


# ------------------------------------------------------------ wildcard constraints
def _alternatives(values):
    values = sorted({str(v) for v in values}, key=lambda v: (-len(v), v))
    return "|".join(re.escape(v) for v in values) if values else "(?!)"


_ALL_AXES = [study_axes(s) for s in config["studies"]]

wildcard_constraints:
    model=_alternatives(m for s in config["studies"].values() for m in s["models"]),
    study=_alternatives(config["studies"]),
    sizes=_alternatives(size_slug(v) for a in _ALL_AXES for v in a["sizes"]),
    m=_alternatives(v for a in _ALL_AXES for v in a["m"]),
    mu=_alternatives(v for a in _ALL_AXES for v in a["mu"]),
    K=_alternatives(v for a in _ALL_AXES for v in a["K"]),
    first=r"\d+",
    last=r"\d+",
    fig=_alternatives(figure_names()),
    method=_alternatives(REGISTRY),


# ------------------------------------------------------------------ path helpers
def cell_file(model, study, cell, block):
    return CELL_FILE.format(model=model, study=study, sizes=size_slug(cell["sizes"]), m=cell["m"],
                            mu=cell["mu"], K=cell["K"], first=block[0], last=block[1])


def summary_file(model, study):
    return f"results/summary/{model}_{study}.parquet"


def figure_outputs():
    return [f"figures/{fig}.{ext}" for fig in figure_names() for ext in ("pdf", "png")]


def table_outputs():
    out = []
    if "table1" in config["tables"]:
        out += [f"figures/table1.{ext}" for ext in ("csv", "md", "tex")]
    if "rates" in config["tables"]:
        out += [f"figures/rates.{ext}" for ext in ("csv", "md")]
    return out


def all_targets():
    """Everything `snakemake` builds by default: every figure and table of the config."""
    return figure_outputs() + table_outputs()


# ------------------------------------------------------------ simulate_cell
def _wildcard_cell(w):
    """The grid cell named by a cell path; WorkflowError if the study has no such cell."""
    study = config["studies"][w.study]
    if w.model not in study["models"]:
        raise WorkflowError(f"study {w.study} is not run for model {w.model}")
    sizes = next((s for s in study_axes(w.study)["sizes"] if size_slug(s) == w.sizes), None)
    cell = {"sizes": sizes, "m": int(w.m), "mu": w.mu, "K": int(w.K)}
    if cell not in study_cells(w.study):
        raise WorkflowError(f"sizes~{w.sizes}/m~{w.m}/mu~{w.mu}/K~{w.K} is not a cell of study "
                            f"{w.study} in the config")
    if (int(w.first), int(w.last)) not in seed_blocks():
        raise WorkflowError(f"seeds~{w.first}-{w.last} is not a seed block of replicates="
                            f"{config['replicates']}, seeds_per_job={config['seeds_per_job']}")
    return cell


def cell_params(wildcards):
    """JSON parameters of the cell a simulate job runs (checked against the grid)."""
    cell = _wildcard_cell(wildcards)
    return json.dumps(cell_overrides(wildcards.model, wildcards.study, cell), sort_keys=True)


# ------------------------------------------------------------ summarise_study
def study_cell_files(wildcards):
    """Every cell file of one model's study."""
    if wildcards.model not in config["studies"][wildcards.study]["models"]:
        raise WorkflowError(f"study {wildcards.study} is not run for model {wildcards.model}")
    return [cell_file(wildcards.model, wildcards.study, cell, block)
            for cell in study_cells(wildcards.study) for block in seed_blocks()]


# ------------------------------------------------------------ plot_figure
def _figure_studies(fig):
    f = config["figures"][fig]
    return list(dict.fromkeys(p.get("study", f.get("study")) for p in f["panels"]))


def figure_summaries(wildcards):
    f = config["figures"][wildcards.fig]
    return [summary_file(f["model"], s) for s in _figure_studies(wildcards.fig)]


def figure_spec(wildcards):
    """The figure's config entry with what fedgdp.plots needs besides (JSON)."""
    f = config["figures"][wildcards.fig]
    spec = dict(f, name=wildcards.fig,
                studies={s: config["studies"][s] for s in _figure_studies(wildcards.fig)},
                d=len(config["beta_true"][f["model"]]),
                method_settings=config["defaults"]["method_settings"])
    return json.dumps(spec, sort_keys=True)


def _figure_number(fig):
    hit = re.search(r"(\d+)$", fig)
    return f"Figure {int(hit.group(1))}" if hit else fig


def figure_category(wildcards):
    return _figure_number(wildcards.fig)


def figure_caption(wildcards):
    """One paragraph: what the figure shows and the settings that made it."""
    f = config["figures"][wildcards.fig]
    d = config["defaults"]
    parts = []
    for study in _figure_studies(wildcards.fig):
        axes = study_axes(study)
        s = config["studies"][study]
        parts.append(
            f"study {study} ({f['model']}): m in {{{', '.join(map(str, axes['m']))}}}, "
            f"sizes in {{{', '.join(axes['sizes'])}}}, mu in {{{', '.join(axes['mu'])}}}, "
            f"K in {{{', '.join(map(str, axes['K']))}}}, schedule {s['schedule']}")
    clip = d["clip"]
    clip_text = (f"B = max over clients of the {clip['q']:g}-quantile of gradient norms at beta = 0"
                 if clip["rule"] == "quantile" else f"B = {clip['value']:g}")
    layout = {"m_by_size": "one line per client-size scheme, one panel per method",
              "m_by_method": "one line per method, one panel per client-size scheme",
              "K_by_mu": "one line per mu, one panel per method"}[f["layout"]]
    return (f"{f.get('title', wildcards.fig)}. Empirical MSE of beta_hat (log scale; mean over "
            f"non-diverged replicates, error bars +-2 Monte Carlo standard errors), {layout}"
            f"{'; dashed: the bound of Table 1 scaled to the data' if f.get('theory') else ''}. "
            f"{'; '.join(parts)}. {config['replicates']} replicates per cell, "
            f"beta_true = {config['beta_true'][f['model']]}, sigma_c = {d['sigma_c']}, "
            f"clipping {clip_text}, tau1 = {d['tau1']}, weights {d['weights']}, "
            f"base_seed {d['base_seed']}.")


# ------------------------------------------------------------ tables
def table1_summaries(wildcards):
    t = config["tables"]["table1"]
    return [summary_file(t["model"], t["study"])]


def table1_spec(wildcards):
    t = config["tables"]["table1"]
    cell = dict(t["cell"])
    cell.setdefault("mu", config["defaults"]["mu"])
    cell.setdefault("K", config["defaults"]["K"])
    note = (f"Measured at the reference cell: {t['model']} regression, study {t['study']}, "
            f"sizes {cell['sizes']}, m = {cell['m']}, nominal mu = {cell['mu']}, K = {cell['K']}; "
            f"{config['replicates']} replicates; MSE is the mean over non-diverged replicates, "
            f"MC SE its Monte Carlo standard error. Theory columns: the paper's Table 1 (orders, "
            f"constants omitted).")
    spec = dict(t, cell=cell, methods=t.get("methods") or config["studies"][t["study"]]["methods"], note=note)
    return json.dumps(spec, sort_keys=True)


def _rates_pairs():
    r = config["tables"]["rates"]
    studies = dict.fromkeys(fit["study"] for fit in r["fits"])
    return [(model, s) for s in studies for model in r["models"]
            if model in config["studies"][s]["models"]]


def rates_summaries(wildcards):
    return [summary_file(model, study) for model, study in _rates_pairs()]


def rates_spec(wildcards):
    r = config["tables"]["rates"]
    spec = dict(r, studies={s: config["studies"][s] for _, s in _rates_pairs()},
                d={model: len(beta) for model, beta in config["beta_true"].items()},
                method_settings=config["defaults"]["method_settings"],
                note="Slopes of log(MSE) on log(x) over the cells of a group (statsmodels OLS, "
                     "95% confidence interval); predicted: least-squares slope of the method's "
                     "bound (fedgdp.theory, constants set to one) over the same cells.")
    return json.dumps(spec, sort_keys=True)


def figure_labels_pdf(wildcards):
    return {"figure": _figure_number(wildcards.fig), "format": "PDF"}


def figure_labels_png(wildcards):
    return {"figure": _figure_number(wildcards.fig), "format": "PNG"}
