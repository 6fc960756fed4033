"""The workflow's plan: every decision of the Snakemake pipeline as plain Python.

The rules in ``workflow/rules/*.smk`` are thin wrappers around one :class:`Plan`,
built from the merged config. The plan holds what Snakemake would otherwise hide in
rule files, so it can be unit-tested without Snakemake (``tests/test_workflow_plan.py``):

- config checks: the closed schema (:func:`validate`, every unknown key named with the
  nearest known one) and the checks a schema cannot express (:meth:`Plan.check`);
- the run name (:func:`run_name`) and the output tree of a run, so that two configs
  never write to the same files;
- the cells of every study, the jobs that run them (groups of cells x seed blocks),
  the named targets (:meth:`Plan.targets`);
- per-job specs (the JSON each ``fedgdp`` command receives), report captions, and the
  resources a cluster job asks for (:meth:`Plan.cell_runtime` and friends).

Output tree of a run named ``R``::

    results/R/config.resolved.yaml         the config that made every output below
    results/R/cells/...  summary/...  realdata/...  nn/...
    figures/R/<fig>.pdf, .png
    tables/R/table1.*, rates.*, <fig>_medians.csv, <fig>_summary.csv (claims.*: reserved)
    logs/R/<rule>/...,  benchmarks/R/<rule>/...

Snakemake itself is never imported here.
"""
from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

from .settings import suggest  # noqa: F401 (also this module's public name)

__all__ = ["ConfigError", "Plan", "numbers", "validate", "run_name", "config_sha", "suggest", "LAYOUT_KEYS",
           "FIGURE_KINDS", "GALLERY_DIR", "NN_X"]

FIGURE_KINDS = ("simulation", "realdata", "nn")
#: the x axis of a CNN figure -> the figure identifier of fedgdp.nn (its two layouts)
NN_X = {"n": "fig09", "m": "fig10"}
GALLERY_DIR = "docs/gallery"
GALLERY_WIDTH = 900      # pixels of a gallery PNG
GALLERY_COLOURS = 128    # palette size of a gallery PNG (keeps each file at tens of KB)
_IMAGES = {"digits": 1797, "mnist": 70000}                       # real data: all images
_NN_TRAIN_IMAGES = {"digits": 1437, "mnist": 60000, "cifar10": 50000}
_CIFAR_BATCHES = [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class ConfigError(ValueError):
    """A bad config value: one line naming the key."""

    def __init__(self, key: str, message: str):
        self.key = key
        super().__init__(f"invalid config at {key}: {message}")


# ---------------------------------------------------------------- config basics
def numbers(value):
    """Nested values given with ``--config`` arrive as strings (``'defaults={mu: 6}'``
    gives mu='6'): turn strings that are numbers back into numbers (a new object)."""
    if isinstance(value, dict):
        return {k: numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [numbers(v) for v in value]
    if isinstance(value, str) and _NUMBER.match(value):
        return int(value) if re.fullmatch(r"[-+]?\d+", value) else float(value)
    return value


def key_path(path) -> str:
    """Dotted form of a path of keys and indices: studies.compare.grid.sizes[0]."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _validator(schema: dict):
    """A Draft 2020-12 validator that fills in defaults as it validates (as Snakemake's)."""
    from jsonschema import Draft202012Validator, validators

    properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, props, instance, sub):
        if isinstance(instance, dict):
            for name, subschema in props.items():
                if isinstance(subschema, dict) and "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from properties(validator, props, instance, sub)

    return validators.extend(Draft202012Validator, {"properties": set_defaults})(schema)


def _error_message(error) -> ConfigError:
    """One schema error as a ConfigError naming the key (and the likely intended key)."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in known]
        if extra:
            key = extra[0]
            return ConfigError(key_path(path + [key]), f"unknown key {key!r}{suggest(key, known)}; "
                               f"known here: {', '.join(known)}")
    if error.validator == "propertyNames" and error.context:
        bad = error.context[0].instance
        allowed = error.schema.get("propertyNames", {}).get("enum", [])
        return ConfigError(key_path(path + [bad]), f"unknown name {bad!r}{suggest(bad, allowed)}"
                           + (f"; known: {', '.join(allowed)}" if allowed else ""))
    if "propertyNames" in error.schema_path and not isinstance(error.instance, (dict, list)):
        allowed = error.validator_value if error.validator == "enum" else []
        return ConfigError(key_path(path + [error.instance]), f"unknown name {error.instance!r}"
                           f"{suggest(error.instance, allowed)}"
                           + (f"; known: {', '.join(map(str, allowed))}" if allowed else ""))
    if error.validator in ("anyOf", "oneOf") and error.schema.get("description"):
        return ConfigError(key_path(path), f"{error.instance!r} is not valid: {error.schema['description']}")
    if error.validator == "enum":
        return ConfigError(key_path(path), f"{error.instance!r} is not one of "
                           f"{', '.join(map(str, error.validator_value))}"
                           f"{suggest(error.instance, error.validator_value)}")
    return ConfigError(key_path(path), error.message)


def validate(config: dict, schema: dict) -> None:
    """Check ``config`` against the (closed) schema and fill in its defaults in place.

    Raises
    ------
    ConfigError
        For the first error, naming its key; an unknown key comes with the known key
        nearest to it (difflib), e.g. ``replicats`` -> ``replicates``.
    """
    errors = list(_validator(schema).iter_errors(config))
    if errors:
        # unknown keys first (they explain the rest), then the deepest error
        errors.sort(key=lambda e: (e.validator != "additionalProperties", -len(e.absolute_path)))
        raise _error_message(errors[0])


def load_schema(path: str | os.PathLike) -> dict:
    """The config schema, with ``studies.*.settings`` closed over the keys of ``defaults``."""
    import yaml

    schema = yaml.safe_load(Path(path).read_text())
    study = schema["properties"]["studies"]["additionalProperties"]["properties"]
    if "settings" in study:
        study["settings"].update(_without_defaults(schema["properties"]["defaults"]),
                                 description=study["settings"]["description"])
        for axis in GRID_AXES:
            study["settings"]["properties"].pop(axis, None)
    if "sensitivity" in schema["properties"]:
        _fill_sensitivity_schema(schema)
    return schema


#: Cell parameters a study's grid sets (not allowed in a study's settings).
GRID_AXES = ("mu", "K")


def _without_defaults(schema):
    """A copy of a schema with every ``default`` removed (a study's settings fill nothing in)."""
    if isinstance(schema, dict):
        return {k: _without_defaults(v) for k, v in schema.items() if k != "default"}
    if isinstance(schema, list):
        return [_without_defaults(v) for v in schema]
    return schema


def merge_settings(defaults: dict, settings: dict) -> dict:
    """``defaults`` with a study's ``settings`` laid over it.

    ``clip`` is replaced whole (its keys depend on its rule); ``privacy`` and
    ``method_settings`` (per method) are merged key by key; any other key is replaced.
    """
    out = copy.deepcopy(defaults)
    for key, value in settings.items():
        if key == "privacy":
            out[key] = {**out.get(key, {}), **value}
        elif key == "method_settings":
            ms = out.setdefault(key, {})
            for name, given in value.items():
                ms[name] = {**ms.get(name, {}), **given}
        else:
            out[key] = copy.deepcopy(value)
    return out


#: Settings that decide only how the work is cut into jobs, never a number of any output
#: (a replicate's numbers depend on its cell, index and base_seed alone): they are left
#: out of the config hash, and overriding only them keeps the run name.
LAYOUT_KEYS = ("cells_per_job",)


def config_sha(config: dict) -> str:
    """SHA-256 of the canonical JSON of ``config`` without its ``run`` key and the
    :data:`LAYOUT_KEYS` (8 hex digits)."""
    body = {k: v for k, v in config.items() if k != "run" and k not in LAYOUT_KEYS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def run_name(config: dict, overrides: list[dict]) -> str:
    """The name of a run's output sets.

    ``config["run"]`` (``paper`` in config.yaml) when every override (each
    ``--configfile`` and the ``--config`` settings) names its run; otherwise that name
    plus the hash of the resolved config (``paper-1a2b3c4d``): settings changed without
    a new name never land on the outputs of the named config. An override of
    :data:`LAYOUT_KEYS` alone (``--config cells_per_job=1``) changes no number, so it
    keeps the name.
    """
    name = config["run"]
    if any("run" not in (o or {}) and not (o and set(o) <= set(LAYOUT_KEYS)) for o in overrides):
        return f"{name}-{config_sha(config)}"
    return name


def invocation_overrides(configfiles, config_args) -> list[dict]:
    """What one invocation changes on top of config.yaml: each ``--configfile`` (read
    here), then the ``--config`` settings (when any). Input of :func:`run_name`."""
    import yaml

    out = [yaml.safe_load(Path(f).read_text()) or {} for f in configfiles]
    if config_args:
        out.append(dict(config_args))
    return out


def fmt_mu(mu) -> str:
    """Path form of mu: 2 -> '2', 0.5 -> '0.5', inf -> 'inf'."""
    mu = float(mu)
    return "inf" if math.isinf(mu) else f"{mu:g}"


def alternatives(values) -> str:
    """A wildcard constraint matching exactly ``values`` (never anything, when empty)."""
    values = sorted({str(v) for v in values}, key=lambda v: (-len(v), v))
    return "|".join(re.escape(v) for v in values) if values else "(?!)"


def figure_number(fig: str) -> str:
    """Report category of a figure: fig03 -> 'Figure 3'."""
    hit = re.search(r"(\d+)$", fig)
    return f"Figure {int(hit.group(1))}" if hit else fig


# ---------------------------------------------------------------------- the plan
class Plan:
    """Everything the pipeline decides for one resolved config.

    Parameters
    ----------
    config : the merged config, validated and with defaults (:func:`validate`)
    run : the run name (:func:`run_name`; default ``config["run"]``)

    Methods that take ``wildcards`` read its attributes, so they serve directly as
    Snakemake input, params and resources functions (tests pass a SimpleNamespace).
    """

    def __init__(self, config: dict, run: str | None = None):
        self.config = config
        self.run = run or config["run"]
        self.sha = config_sha(config)
        r = self.run
        self.paths = SimpleNamespace(
            config=f"results/{r}/config.resolved.yaml",
            cell=f"results/{r}/cells/{{model}}/{{study}}/cells~{{cells}}/seeds~{{first}}-{{last}}.parquet",
            summary=f"results/{r}/summary/{{model}}_{{study}}.parquet",
            realdata=f"results/{r}/realdata/{{dataset}}/{{task}}/split~{{split}}.parquet",
            nn_run=f"results/{r}/nn/{{dataset}}/{{fig}}/m~{{m}}/n~{{n}}/rep~{{rep}}.parquet",
            nn_summary=f"results/{r}/nn/summary/{{dataset}}_{{fig}}.parquet",
            figure=f"figures/{r}/{{fig}}",
            tables=f"tables/{r}",
            logs=f"logs/{r}",
            benchmarks=f"benchmarks/{r}",
        )

    # ------------------------------------------------------------ figures by kind
    def figures(self, kind: str | None = None) -> list[str]:
        """Figure names of the config, in config order (of one kind)."""
        return [f for f, s in self.config.get("figures", {}).items() if kind in (None, s["kind"])]

    def figure(self, fig: str) -> dict:
        return self.config["figures"][fig]

    # ----------------------------------------------------------- simulation cells
    def study_axes(self, study: str) -> dict:
        """Grid axes of a study in path order; a missing axis takes ``defaults``."""
        from .simulate import parse_sizes

        grid = self.config["studies"][study]["grid"]
        d = self.config["defaults"]
        return {
            "sizes": [parse_sizes(s).text for s in grid["sizes"]],
            "m": [int(m) for m in grid["m"]],
            "mu": [fmt_mu(mu) for mu in grid.get("mu", [d["mu"]])],
            "K": [int(k) for k in grid.get("K", [d["K"]])],
        }

    def study_cells(self, study: str) -> list[dict]:
        """Every cell of a study: dicts with sizes (canonical text), m, mu (path form), K."""
        axes = self.study_axes(study)
        return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]

    def replicates(self, study: str | None = None) -> int:
        """Replicates per cell of a study (its own ``replicates``, else the config's)."""
        own = self.config["studies"][study].get("replicates") if study else None
        return int(own or self.config["replicates"])

    def seed_blocks(self, study: str | None = None) -> list[tuple[int, int]]:
        """(first, last) replicate of every simulate job of a cell of ``study``."""
        n, per = self.replicates(study), self.config["seeds_per_job"]
        return [(a, min(a + per, n) - 1) for a in range(0, n, per)]

    def study_settings(self, study: str) -> dict:
        """The cell parameters of a study: ``defaults`` with its ``settings`` laid over them."""
        return merge_settings(self.config["defaults"], self.config["studies"][study].get("settings", {}))

    def cell_groups(self, study: str) -> list[tuple[int, int]]:
        """(first, last) index into :meth:`study_cells` of the cells of every simulate job.

        A job runs up to ``cells_per_job`` consecutive cells of one study (and one model)
        in one process: ``ceil(n / cells_per_job)`` groups whose sizes differ by at most
        one, so the process start-up (imports, compiled kernels) is paid once per group.
        """
        n, per = len(self.study_cells(study)), self.config["cells_per_job"]
        k = -(-n // per)
        cuts = [i * n // k for i in range(k + 1)]
        return [(cuts[i], cuts[i + 1] - 1) for i in range(k)]

    def cell_overrides(self, model: str, study: str, cell: dict) -> dict:
        """Parameters of one cell for ``fedgdp simulate --params`` (fedgdp.params keys)."""
        s = self.config["studies"][study]
        p = {k: v for k, v in self.study_settings(study).items() if k not in GRID_AXES}
        scale = p.pop("beta_scale", None)   # absent unless set: beta_true as given
        p.update(model=model, study=study, sizes=cell["sizes"], m=int(cell["m"]), mu=cell["mu"],
                 K=int(cell["K"]), schedule=s["schedule"], methods=s["methods"],
                 beta_true=self.config["beta_true"][model] if scale is None
                 else [scale * b for b in self.config["beta_true"][model]])
        return p

    def group_file(self, model: str, study: str, group, block) -> str:
        """The file of one simulate job: a group of cells (:meth:`cell_groups`) x a seed block."""
        return self.paths.cell.format(model=model, study=study, cells=f"{group[0]}-{group[1]}",
                                      first=block[0], last=block[1])

    def cell_file(self, model: str, study: str, cell: dict, block) -> str:
        """The file that holds one cell's rows of a seed block (its group's file)."""
        i = self.study_cells(study).index(cell)
        group = next(g for g in self.cell_groups(study) if g[0] <= i <= g[1])
        return self.group_file(model, study, group, block)

    def summary_file(self, model: str, study: str) -> str:
        return self.paths.summary.format(model=model, study=study)

    def _group_of(self, w) -> list[dict]:
        """The grid cells of a job named by a cell path's wildcards (model, study, cells,
        first, last); ValueError if the config has no such job."""
        study = self.config["studies"][w.study]
        if w.model not in study["models"]:
            raise ValueError(f"study {w.study} is not run for model {w.model}")
        groups = self.cell_groups(w.study)
        first, _, last = str(w.cells).partition("-")
        if not (first.isdigit() and last.isdigit()) or (int(first), int(last)) not in groups:
            raise ValueError(f"cells~{w.cells} is not a group of study {w.study}: with cells_per_job="
                             f"{self.config['cells_per_job']} its groups are "
                             f"{', '.join(f'{a}-{b}' for a, b in groups)}")
        if (int(w.first), int(w.last)) not in self.seed_blocks(w.study):
            raise ValueError(f"seeds~{w.first}-{w.last} is not a seed block of replicates="
                             f"{self.replicates(w.study)}, seeds_per_job={self.config['seeds_per_job']}")
        return self.study_cells(w.study)[int(first):int(last) + 1]

    def cell_params(self, wildcards) -> str:
        """JSON list of the parameters of every cell a simulate job runs, in grid order
        (checked against the config)."""
        cells = self._group_of(wildcards)
        return json.dumps([self.cell_overrides(wildcards.model, wildcards.study, c) for c in cells],
                          sort_keys=True)

    def study_cell_files(self, wildcards) -> list[str]:
        """Every cell file of one model's study, in grid order (input of summarise_study)."""
        if wildcards.model not in self.config["studies"][wildcards.study]["models"]:
            raise ValueError(f"study {wildcards.study} is not run for model {wildcards.model}")
        return [self.group_file(wildcards.model, wildcards.study, group, block)
                for group in self.cell_groups(wildcards.study) for block in self.seed_blocks(wildcards.study)]

    # ----------------------------------------------------------------- targets
    def figure_files(self, fig: str) -> list[str]:
        """The files of one figure: PDF and PNG, and its data table for real data and CNNs."""
        base = self.paths.figure.format(fig=fig)
        out = [f"{base}.pdf", f"{base}.png"]
        kind = self.figure(fig)["kind"]
        if kind == "realdata":
            out.append(f"{self.paths.tables}/{fig}_medians.csv")
        elif kind == "nn":
            out.append(f"{self.paths.tables}/{fig}_summary.csv")
        return out

    def table_files(self, name: str) -> list[str]:
        """tables/<run>/<name>.<ext> of one table."""
        ext = {"table1": ("csv", "md", "tex"), "rates": ("csv", "md"), "claims": ("csv", "md")}[name]
        return [f"{self.paths.tables}/{name}.{e}" for e in ext]

    def tables(self) -> list[str]:
        """The tables of the run: those the config asks for (rule tabulate_<name> each)
        and the claims report (rule assess_claims)."""
        return [t for t in ("table1", "rates") if t in self.config.get("tables", {})] + ["claims"]

    def nn_in_default(self) -> bool:
        return bool(self.config.get("nn", {}).get("in_default_target", False))

    def default_figures(self) -> list[str]:
        """Figures of the default target: simulation and real data; CNNs when asked."""
        return [f for f in self.figures() if self.figure(f)["kind"] != "nn" or self.nn_in_default()]

    def gallery_figures(self) -> list[str]:
        """Figures shown in the README gallery: those of the default target without PyTorch."""
        return [f for f in self.figures() if self.figure(f)["kind"] != "nn"]

    def gallery_file(self, fig: str) -> str:
        return f"{GALLERY_DIR}/{fig}.png"

    def targets(self) -> dict[str, list[str]]:
        """Named targets -> files: one per figure, one per table (``claims`` is the
        claims report), ``gallery``, ``decompose`` (the error decomposition, when the
        config has one; not in ``all``), ``all``."""
        out = {fig: self.figure_files(fig) for fig in self.figures()}
        out.update({t: self.table_files(t) for t in self.tables()})
        out["gallery"] = [self.gallery_file(f) for f in self.gallery_figures()]
        if self.config.get("sensitivity"):
            out["sensitivity"] = self.sensitivity_files()   # on request only, never in all
        if self.config.get("decomposition"):
            out["decompose"] = self.decomposition_files()      # not in `all`: extra work
        out["all"] = ([self.paths.config]
                      + [p for f in self.default_figures() for p in self.figure_files(f)]
                      + [p for t in self.tables() for p in self.table_files(t)])
        return out

    # ------------------------------------------------------------ provenance
    def provenance(self) -> str:
        """Which run and config made an output, for titles, notes and captions."""
        return f"run {self.run}, config {self.sha} ({self.paths.config})"

    def resolved_config_text(self) -> str:
        """The resolved config as YAML, with a header naming the run and its hash."""
        import yaml

        body = yaml.safe_dump(dict(self.config, run=self.run), sort_keys=False, width=100)
        return (f"# The resolved config of run {self.run} (config.yaml, then every --configfile and\n"
                f"# --config, then the schema's defaults); config sha256 prefix {self.sha}.\n{body}")

    # --------------------------------------------------- simulation figures/tables
    def figure_studies(self, fig: str) -> list[str]:
        f = self.figure(fig)
        return list(dict.fromkeys(p.get("study", f.get("study")) for p in f["panels"]))

    def figure_summaries(self, wildcards) -> list[str]:
        f = self.figure(wildcards.fig)
        return [self.summary_file(f["model"], s) for s in self.figure_studies(wildcards.fig)]

    def figure_spec(self, wildcards) -> str:
        """The figure's config entry with what fedgdp.plots needs besides (JSON)."""
        fig = wildcards.fig
        f = {k: v for k, v in self.figure(fig).items() if k != "kind"}
        spec = dict(f, name=fig, title=f"{f.get('title', fig)} [{self.run}, {self.sha}]",
                    studies={s: self.config["studies"][s] for s in self.figure_studies(fig)},
                    d=len(self.config["beta_true"][f["model"]]),
                    method_settings=self.study_settings(self.figure_studies(fig)[0])["method_settings"])
        return json.dumps(spec, sort_keys=True)

    def _clip_text(self, clip: dict, at: str) -> str:
        if clip["rule"] == "quantile":
            return f"B = max over clients of the {clip['q']:g}-quantile of gradient norms at {at}"
        if clip["rule"] == "private_quantile":
            return (f"B = max over clients of the {clip['q']:g}-quantile of noisy gradient-norm "
                    f"histograms at {at} (a private release, in the ledger)")
        return f"B = {clip['value']:g}"

    def figure_caption(self, wildcards) -> str:
        """One paragraph: what the figure shows and the settings that made it."""
        fig = wildcards.fig
        f, c = self.figure(fig), self.config
        d = self.study_settings(self.figure_studies(fig)[0])
        parts = []
        for study in self.figure_studies(fig):
            axes, s = self.study_axes(study), c["studies"][study]
            parts.append(
                f"study {study} ({f['model']}): m in {{{', '.join(map(str, axes['m']))}}}, "
                f"sizes in {{{', '.join(axes['sizes'])}}}, mu in {{{', '.join(axes['mu'])}}}, "
                f"K in {{{', '.join(map(str, axes['K']))}}}, schedule {s['schedule']}, "
                f"{self.replicates(study)} replicates per cell"
                + (f", settings {json.dumps(s['settings'], sort_keys=True)}" if s.get("settings") else ""))
        layout = {"m_by_size": "one line per client-size scheme, one panel per method",
                  "m_by_method": "one line per method, one panel per client-size scheme",
                  "K_by_mu": "one line per mu, one panel per method"}[f["layout"]]
        theory = "; dashed: the bound of Table 1 scaled to the data" if f.get("theory") else ""
        return (f"{f.get('title', fig)}. Empirical MSE of beta_hat (log scale; mean over "
                f"non-diverged replicates, error bars +-2 Monte Carlo standard errors), {layout}"
                f"{theory}. {'; '.join(parts)}. "
                f"beta_true = {c['beta_true'][f['model']]}, sigma_c = {d['sigma_c']}, clipping "
                f"{self._clip_text(d['clip'], 'beta = 0')}, tau1 = {d['tau1']}, weights "
                f"{d['weights']}, base_seed {d['base_seed']}. Made by {self.provenance()}.")

    def table1_summaries(self, wildcards=None) -> list[str]:
        t = self.config["tables"]["table1"]
        return [self.summary_file(t["model"], t["study"])]

    def table1_spec(self, wildcards=None) -> str:
        c = self.config
        t = c["tables"]["table1"]
        cell = dict(t["cell"])
        cell.setdefault("mu", c["defaults"]["mu"])
        cell.setdefault("K", c["defaults"]["K"])
        note = (f"Measured at the reference cell: {t['model']} regression, study {t['study']}, "
                f"sizes {cell['sizes']}, m = {cell['m']}, nominal mu = {cell['mu']}, K = {cell['K']}; "
                f"{self.replicates(t['study'])} replicates; MSE is the mean over non-diverged replicates, "
                f"MC SE its Monte Carlo standard error. Theory columns: the paper's Table 1 (orders, "
                f"constants omitted). Made by {self.provenance()}.")
        spec = dict(t, cell=cell, methods=t.get("methods") or c["studies"][t["study"]]["methods"], note=note)
        return json.dumps(spec, sort_keys=True)

    def _rates_pairs(self) -> list[tuple[str, str]]:
        r = self.config["tables"]["rates"]
        studies = dict.fromkeys(fit["study"] for fit in r["fits"])
        return [(model, s) for s in studies for model in r["models"]
                if model in self.config["studies"][s]["models"]]

    def rates_summaries(self, wildcards=None) -> list[str]:
        return [self.summary_file(model, study) for model, study in self._rates_pairs()]

    def rates_spec(self, wildcards=None) -> str:
        c = self.config
        spec = dict(c["tables"]["rates"], studies={s: dict(c["studies"][s], method_settings=self.study_settings(s)["method_settings"])
                                                   for _, s in self._rates_pairs()},
                    d={model: len(beta) for model, beta in c["beta_true"].items()},
                    method_settings=c["defaults"]["method_settings"],
                    note="Slopes of log(MSE) on log(x) over the cells of a group (statsmodels OLS, "
                         "95% confidence interval); predicted: least-squares slope of the method's "
                         "bound (fedgdp.theory, constants set to one) over the same cells. "
                         f"Made by {self.provenance()}.")
        return json.dumps(spec, sort_keys=True)

    def table1_caption(self, wildcards=None) -> str:
        return self.table_caption("table1")

    def rates_caption(self, wildcards=None) -> str:
        return self.table_caption("rates")

    def table_caption(self, name: str) -> str:
        """Report caption of table1 or rates: what it holds and which run made it."""
        c = self.config
        if name == "table1":
            t = c["tables"]["table1"]
            return (f"The paper's Table 1 for {', '.join(t.get('methods') or c['studies'][t['study']]['methods'])}: "
                    f"communication rounds, total communication and the order of the MSE bound "
                    f"(theory, constants omitted), beside what the simulation measured at the "
                    f"reference cell {t['model']} / {t['study']} / {t['cell']} (mu and K from the "
                    f"defaults when not given: nominal mu = {c['defaults']['mu']}, K = {c['defaults']['K']}): "
                    f"rounds, floats sent up and down per replicate, empirical MSE and its Monte "
                    f"Carlo standard error, over {self.replicates(t['study'])} replicates. Made by "
                    f"{self.provenance()}.")
        r = c["tables"]["rates"]
        fits = "; ".join(f"{f.get('label', f['study'])} (study {f['study']}, x = {f['x']}"
                         + (f", one fit per {f['by']}" if f.get("by") else "") + ")" for f in r["fits"])
        return (f"Fitted log-log slopes of the empirical MSE (statsmodels OLS of log MSE on log x "
                f"over the cells of each group, 95% confidence interval) beside the exponent the "
                f"method's bound predicts over the same cells, in the K-explicit form of Remark 3.4 "
                f"with the iteration counts the study ran (column 'Bound used'), not Table 1's "
                f"K = Theta(log N). Fits: {fits}. Models: "
                f"{', '.join(r['models'])}; {c['replicates']} replicates per cell. Made by "
                f"{self.provenance()}.")

    # ------------------------------------------------------------ claims report
    def claims_studies(self) -> dict[str, list[str]]:
        """Claim -> the studies of this config it reads (missing studies left out)."""
        from .claims import DEFAULT_STUDIES

        return {claim: [s for s in studies if s in self.config["studies"]]
                for claim, studies in DEFAULT_STUDIES.items()}

    def claims_summaries(self, wildcards=None) -> list[str]:
        """Summaries of the studies behind C1-C4."""
        studies = dict.fromkeys(s for ss in self.claims_studies().values() for s in ss)
        return [self.summary_file(model, s) for s in studies for model in self.config["studies"][s]["models"]]

    def claims_realdata_files(self, wildcards=None) -> list[str]:
        """Real-data files behind C5 (none when the run draws no real-data figure)."""
        rd = self.config.get("realdata")
        if not rd or not any(self.figure(f)["kind"] == "realdata" for f in self.default_figures()):
            return []
        return [self.realdata_split_file(t, s) for t in rd["tasks"] for s in range(rd["splits"])]

    def claims_nn_summaries(self, wildcards=None) -> list[str]:
        """CNN summaries behind C6, only when the CNN figures are in the default target
        (otherwise C6 is reported as not run and no training starts)."""
        if not self.nn_in_default():
            return []
        figs = [f for f in self.figures() if self.figure(f)["kind"] == "nn"]
        return [self.paths.nn_summary.format(dataset=ds, fig=f) for ds in self.nn()["datasets"] for f in figs]

    def claims_spec(self, wildcards=None) -> str:
        models = list(dict.fromkeys(m for s in self.config["studies"].values() for m in s["models"]))
        return json.dumps({"models": models, "studies": self.claims_studies(),
                           "title": f"Which of the paper's claims the results support [{self.run}, {self.sha}]"},
                          sort_keys=True)

    def claims_caption(self, wildcards=None) -> str:
        rd = self.config.get("realdata", {})
        return ("Which of the paper's conclusions the results support (fedgdp claims, module "
                "fedgdp.claims): one row per claim and model with the paper's statement, the test "
                "used, a verdict (holds / partly / fails / not run) and the numbers behind it. C1: MSE "
                "falls with m and with n_i (Figs 1-2, 11-14); C2: the ordering of the methods (Figs 3, "
                "6); C3: the trade-off in K (Figs 4, 15); C4: fixed N (Figs 5, 16); C5: real data (Figs "
                f"7-8, {rd.get('dataset', 'not run')}); C6: CNNs (Figs 9-10, only when they are in the "
                "default target). Differences count only beyond the thresholds listed in the Markdown "
                f"file (Monte Carlo standard errors, {self.config['replicates']} replicates per cell; "
                f"OLS slopes with 95% CIs; a paired bootstrap for medians). Made by {self.provenance()}.")

    # ------------------------------------------------------------ real data
    _REALDATA_PIPELINE_KEYS = ("tasks", "splits")

    def realdata_settings(self) -> dict:
        """The realdata section without the pipeline-only keys: ``fedgdp realdata`` parameters."""
        return {k: v for k, v in self.config["realdata"].items() if k not in self._REALDATA_PIPELINE_KEYS}

    def realdata_spec(self, wildcards=None) -> str:
        return json.dumps(self.realdata_settings(), sort_keys=True)

    def realdata_split_file(self, task: str, split: int) -> str:
        return self.paths.realdata.format(dataset=self.config["realdata"]["dataset"], task=task, split=split)

    def realdata_data_files(self, wildcards=None) -> list[str]:
        """MNIST's files (fetched by fetch_mnist when absent); nothing for digits."""
        rd = self.config["realdata"]
        return mnist_files(rd["path"]) if rd["dataset"] == "mnist" else []

    @staticmethod
    def fetch_folder(wildcards, output) -> str:
        """The folder a fetch rule writes to (that of its outputs)."""
        return os.path.dirname(output[0])

    @staticmethod
    def nn_fetch_root(wildcards, output) -> str:
        """nn.data_dir, from a fetch rule's outputs (<root>/mnist/<file> or
        <root>/cifar10/cifar-10-batches-py/<file>)."""
        path = os.path.dirname(output[0])
        if path.endswith("cifar-10-batches-py"):
            path = os.path.dirname(path)
        return os.path.dirname(path) or "."

    def mnist_fetch_files(self) -> list[str]:
        from .datasets import MNIST_FILES

        return [os.path.join(self.config["realdata"]["path"], f) for f in MNIST_FILES]

    def realdata_figure_task(self, wildcards) -> str:
        return self.figure(wildcards.fig)["task"]

    def realdata_figure_files(self, wildcards) -> list[str]:
        task = self.realdata_figure_task(wildcards)
        return [self.realdata_split_file(task, s) for s in range(self.config["realdata"]["splits"])]

    def realdata_figure_title(self, wildcards) -> str:
        return f"{self.figure(wildcards.fig).get('title', wildcards.fig)} [{self.run}, {self.sha}]"

    def realdata_caption(self, wildcards) -> str:
        from .realdata import resolve as resolve_realdata

        rd, fig = self.config["realdata"], wildcards.fig
        task = self.realdata_figure_task(wildcards)
        s = resolve_realdata(dict(self.realdata_settings(), task=task))
        metric = {"binary": "AUC (label 1 = odd digit)", "multiclass": "accuracy (10 classes)"}[task]
        settings = "; ".join(f"{name} {json.dumps(v, sort_keys=True)}" for name, v in s["method_settings"].items())
        return (f"{self.figure(fig).get('title', fig)}. Client-level out-of-fold {metric}, averaged "
                f"over {s['folds']} folds within each client; boxes over the m x S = {s['m']} x "
                f"{rd['splits']} client values per method, one panel per mu "
                f"({', '.join(f'{mu:g}' for mu in s['mu'])}), non-private baselines shaded. Data "
                f"{s['dataset']}: pixels scaled to [0, 1] plus an intercept; {s['m']} clients of at "
                f"least {s['n_min']} images, the rest by Dirichlet({s['alpha']:g}) proportions. "
                f"Clipping {self._clip_text(s['clip'], '0')}; FedNewton tau1 = {s['tau1']:g} (Newton "
                f"solver {s['newton']['solver']}); base_seed {s['base_seed']}. Settings: {settings}. "
                f"Made by {self.provenance()}.")

    # ------------------------------------------------------------------ CNNs
    def nn(self) -> dict:
        return self.config.get("nn", {})

    def nn_axes(self, dataset: str, fig: str) -> tuple[list[int], list]:
        """(m values, n values) of a CNN figure's grid for one dataset; n 'full' when x is m."""
        f = self.figure(fig)
        if f["x"] == "n":
            return [int(f["m"])], [int(n) for n in f["n"][dataset]]
        return [int(m) for m in f["m"][dataset]], ["full"]

    def nn_settings(self, dataset: str, fig: str, m, n, rep) -> dict:
        """``fedgdp nn-run`` settings of one run (fedgdp.nn.settings keys)."""
        s = self.nn()
        p = dict(s.get("settings", {}))
        p.update(s.get("dataset_settings", {}).get(dataset, {}))
        p.update(figure=NN_X[self.figure(fig)["x"]], dataset=dataset, m=int(m),
                 n=None if n in ("full", None) else int(n), run=int(rep), base_seed=s["base_seed"],
                 methods=s["methods"])
        return p

    def nn_run_files(self, dataset: str, fig: str) -> list[str]:
        ms, ns = self.nn_axes(dataset, fig)
        return [self.paths.nn_run.format(dataset=dataset, fig=fig, m=m, n=n, rep=r)
                for m in ms for n in ns for r in range(self.figure(fig)["runs"])]

    def nn_run_spec(self, wildcards) -> str:
        """JSON settings of one run (checked against the grid)."""
        w = wildcards
        ms, ns = self.nn_axes(w.dataset, w.fig)
        if int(w.m) not in ms or w.n not in [str(n) for n in ns] or int(w.rep) >= self.figure(w.fig)["runs"]:
            raise ValueError(f"{w.fig}/m~{w.m}/n~{w.n}/rep~{w.rep} is not a run of {w.dataset} in the config")
        return json.dumps(self.nn_settings(w.dataset, w.fig, w.m, w.n, w.rep), sort_keys=True)

    def nn_data_files(self, wildcards) -> list[str]:
        """The dataset's files (fetched when absent); nothing for digits."""
        root = self.nn().get("data_dir", "data")
        if wildcards.dataset == "mnist":
            return mnist_files(os.path.join(root, "mnist"))
        if wildcards.dataset == "cifar10":
            return self.nn_cifar_files()
        return []

    def nn_cifar_files(self) -> list[str]:
        root = self.nn().get("data_dir", "data")
        return [os.path.join(root, "cifar10", "cifar-10-batches-py", b) for b in _CIFAR_BATCHES]

    def nn_mnist_fetch_files(self) -> list[str]:
        """MNIST's IDX files for rule fetch_nn_mnist; empty (no such rule) when rule
        fetch_mnist already makes them (nn.data_dir/mnist is realdata.path)."""
        from .datasets import MNIST_FILES

        folder = os.path.join(self.nn().get("data_dir", "data"), "mnist")
        if os.path.normpath(folder) == os.path.normpath(self.config.get("realdata", {}).get("path", "")):
            return []
        return [os.path.join(folder, f) for f in MNIST_FILES]

    def nn_summary_inputs(self, wildcards) -> list[str]:
        return self.nn_run_files(wildcards.dataset, wildcards.fig)

    def nn_figure_summaries(self, wildcards) -> list[str]:
        return [self.paths.nn_summary.format(dataset=ds, fig=wildcards.fig) for ds in self.nn()["datasets"]]

    def nn_figure_id(self, wildcards) -> str:
        """fedgdp.nn's identifier of the figure's layout (fig09: x = n, fig10: x = m)."""
        return NN_X[self.figure(wildcards.fig)["x"]]

    def nn_caption(self, wildcards) -> str:
        from .nn.calibration import LABELS
        from .nn.settings import resolve as resolve_nn

        s, fig = self.nn(), wildcards.fig
        f = self.figure(fig)
        parts = []
        for ds in s["datasets"]:
            p = resolve_nn(self.nn_settings(ds, fig, *[v[0] for v in self.nn_axes(ds, fig)], 0))
            grid = (f"m = {f['m']}, n per client in {{{', '.join(map(str, f['n'][ds]))}}}" if f["x"] == "n"
                    else f"full training split over m in {{{', '.join(map(str, f['m'][ds]))}}} clients")
            parts.append(f"{ds}: {grid}; q = {p['q']:g}, R = {p['rounds']} rounds of K = "
                         f"{p['local_epochs']} full-batch local steps, lr {p['lr']:g}, server lr "
                         f"{p['server_lr']:g}, B = {p['clip']:g}, mu = {p['mu']:g}, FedNewton-Iter "
                         f"{p['newton_cycles']} cycles with ridge {p['ridge']:g} and damping "
                         f"{p['damping']:g}, FedHybrid local share {p['hybrid_local_share']:g}")
        x = "samples per client" if f["x"] == "n" else "the number of clients (total fixed)"
        return (f"{f.get('title', figure_number(fig))}: final accuracy on the standard test set of "
                f"private federated CNNs against {x}; median over {f['runs']} runs (band: range over "
                f"runs), one line per method ({', '.join(LABELS[mth] for mth in s['methods'])}). Each "
                f"client keeps 10% for validation and 10% for a local test. Noise calibrated so every "
                f"client is mu-GDP when drawn in every round (no amplification by sampling). "
                f"{'; '.join(parts)}; base_seed {s['base_seed']}. Made by {self.provenance()}.")

    # ------------------------------------------------------------- report labels
    def category(self, wildcards) -> str:
        return figure_number(wildcards.fig)

    def labels_pdf(self, wildcards) -> dict:
        return {"figure": figure_number(wildcards.fig), "format": "PDF", "run": self.run}

    def labels_png(self, wildcards) -> dict:
        return {"figure": figure_number(wildcards.fig), "format": "PNG", "run": self.run}

    def table_labels(self, name: str, fmt: str) -> dict:
        return {"table": {"table1": "Table 1", "rates": "Rates", "claims": "Claims"}[name], "format": fmt, "run": self.run}

    # ------------------------------------------------------- wildcard constraints
    def constraints(self) -> dict[str, str]:
        """Global wildcard constraints of the simulation paths, built from the config."""
        from .estimators import REGISTRY

        return {
            "model": alternatives(m for s in self.config["studies"].values() for m in s["models"]),
            "study": alternatives(self.config["studies"]),
            "cells": alternatives(f"{a}-{b}" for s in self.config["studies"] for a, b in self.cell_groups(s)),
            "first": r"\d+",
            "last": r"\d+",
            "method": alternatives(REGISTRY),
        }

    def figure_constraint(self, kind: str) -> str:
        return alternatives(self.figures(kind))

    def realdata_constraints(self) -> dict[str, str]:
        rd = self.config["realdata"]
        return {"dataset": re.escape(rd["dataset"]), "task": alternatives(rd["tasks"]),
                "split": alternatives(range(rd["splits"]))}

    def nn_constraints(self) -> dict[str, str]:
        datasets, figs = self.nn().get("datasets", []), self.figures("nn")
        values = {"m": set(), "n": set()}
        for ds in datasets:
            for fig in figs:
                ms, ns = self.nn_axes(ds, fig)
                values["m"].update(ms)
                values["n"].update(ns)
        runs = max([self.figure(f)["runs"] for f in figs] or [0])
        return {"dataset": alternatives(datasets), "fig": alternatives(figs),
                "m": alternatives(values["m"]), "n": alternatives(values["n"]),
                "rep": alternatives(range(runs))}

    # -------------------------------------------------------------- resources
    # A cell's work grows with its expected number of samples N = m x mean client size,
    # the replicates of its seed block and K. Measured on one core: the largest cell of
    # the paper (compare, m = 140, lognormal(5.5,1), N ~ 56,000, 100 replicates) takes
    # 31 s and 160 MB; a small one 2 s and 140 MB. The requests leave wide margins (7 min
    # and 1.6 GB for the largest, 2 min and 1 GB for a small one) and grow with each retry.
    # A job of several cells runs them one after another in one process: it asks for the
    # sum of their run times and the memory of the largest.
    def _job_cells(self, wildcards) -> list[tuple[float, int, int]]:
        """(expected samples, K, replicates) of every cell of a simulate job."""
        from .simulate import parse_sizes

        reps = int(wildcards.last) - int(wildcards.first) + 1
        return [(int(c["m"]) * parse_sizes(c["sizes"]).mean_size(int(c["m"])), int(c["K"]), reps)
                for c in self._group_of(wildcards)]

    def cell_runtime(self, wildcards, attempt: int = 1) -> int:
        """Minutes a simulate_cell job asks for."""
        return attempt * (2 + sum(int(2e-8 * reps * max(K, 50) * samples)
                                  for samples, K, reps in self._job_cells(wildcards)))

    def cell_mem_mb(self, wildcards, attempt: int = 1) -> int:
        """Megabytes a simulate_cell job asks for."""
        return attempt * (1000 + int(max(samples for samples, _, _ in self._job_cells(wildcards)) / 100))

    # Real data: digits takes seconds; MNIST, one core: about 6 min per binary and 30 min
    # per multiclass split, about 0.8 GB seen (70,000 x 785 doubles are 0.44 GB alone).
    @staticmethod
    def realdata_runtime(wildcards, attempt: int = 1) -> int:
        if wildcards.dataset != "mnist":
            return 15 * attempt
        return (120 if wildcards.task == "multiclass" else 30) * attempt

    @staticmethod
    def realdata_mem_mb(wildcards, attempt: int = 1) -> int:
        return (4000 if wildcards.dataset == "mnist" else 1000) * attempt

    # CNNs: MNIST measured at about 1.5 h of one CPU core per run (config/paper-nn.yaml);
    # CIFAR-10 (30 local epochs, a larger network) not measured: a day as the ceiling.
    @staticmethod
    def nn_runtime(wildcards, attempt: int = 1) -> int:
        return {"digits": 60, "mnist": 360}.get(wildcards.dataset, 1440) * attempt

    @staticmethod
    def nn_mem_mb(wildcards, attempt: int = 1) -> int:
        return (2000 if wildcards.dataset == "digits" else 8000) * attempt

    @staticmethod
    def short_runtime(wildcards, attempt: int = 1) -> int:
        """Summaries, figures and tables take seconds: 3 minutes per attempt."""
        return 3 * attempt

    # ------------------------------------------------------------------ checks
    def check(self) -> None:
        """What the schema cannot say: methods exist, schemes parse, references resolve,
        layouts fit their data. Raises ConfigError naming the key."""
        self._check_simulation()
        self._check_figures()
        self._check_tables()
        if self.config.get("realdata"):
            self._check_realdata()
        if self.figures("nn"):
            self._check_nn()
        if self.config.get("decomposition"):
            self._check_decomposition()

    @staticmethod
    def _check_in(key, value, allowed, what):
        allowed = list(allowed)
        if value not in allowed:
            raise ConfigError(key, f"{what} {value!r} is not one of {', '.join(map(str, allowed))}"
                              f"{suggest(value, allowed)}")

    def _check_simulation(self):
        from .estimators import REGISTRY, get_method
        from .params import resolve
        from .simulate import parse_sizes

        c = self.config
        for name, given in c["defaults"]["method_settings"].items():
            self._check_in(f"defaults.method_settings.{name}", name, REGISTRY, "method")
        for study, s in c["studies"].items():
            for name in s.get("settings", {}).get("method_settings", {}):
                self._check_in(f"studies.{study}.settings.method_settings.{name}", name, REGISTRY, "method")
            for i, name in enumerate(s["methods"]):
                self._check_in(f"studies.{study}.methods[{i}]", name, REGISTRY, "method")
            for i, text in enumerate(s["grid"]["sizes"]):
                try:
                    scheme = parse_sizes(text, self.study_settings(study)["n_floor"])
                    for m in s["grid"]["m"]:
                        scheme.check(m)
                except ValueError as exc:
                    raise ConfigError(f"studies.{study}.grid.sizes[{i}]", str(exc)) from None
            for model in s["models"]:
                if model not in c["beta_true"]:
                    raise ConfigError(f"studies.{study}.models", f"no beta_true for model {model!r}")
                over = self.cell_overrides(model, study, self.study_cells(study)[0])
                if over.get("tau1") == "auto":
                    over["tau1"] = 1.0  # the real value is computed by the jobs
                try:
                    p = resolve(over)
                except ValueError as exc:
                    raise ConfigError(f"studies.{study}", f"{model}: {exc}") from None
                bare = dict(p, method_settings={})
                given_at = [("defaults", c["defaults"]["method_settings"]),
                            (f"studies.{study}.settings", s.get("settings", {}).get("method_settings", {}))]
                for where, name, given in ((w, n, g) for w, ms in given_at for n, g in ms.items()):
                    if name in p["methods"]:
                        known = get_method(name).settings(bare)
                        for key in given:
                            if key not in known:
                                raise ConfigError(f"{where}.method_settings.{name}.{key}",
                                                  f"unknown setting {key!r}{suggest(key, known)}; "
                                                  f"known: {', '.join(known)}")

    def _check_panel_value(self, key, name, value, study):
        """A value a panel or table fixes must be a value of the study's grid."""
        from .simulate import parse_sizes

        if name == "method":
            self._check_in(key, value, self.config["studies"][study]["methods"], f"method of study {study}:")
            return
        if name == "sizes":
            try:
                value = parse_sizes(value).text
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
        elif name == "mu":
            value = fmt_mu(value)
        else:
            value = int(value)
        self._check_in(key, value, self.study_axes(study)[name], f"{name} of study {study}:")

    def _check_figures(self):
        studies = list(self.config["studies"])
        for fig in self.figures("simulation"):
            f = self.figure(fig)
            for i, panel in enumerate(f["panels"]):
                key = f"figures.{fig}.panels[{i}]"
                study = panel.get("study", f.get("study"))
                if study is None:
                    raise ConfigError(key, "no study: give the figure or the panel a study")
                self._check_in(f"{key}.study" if "study" in panel else f"figures.{fig}.study",
                               study, studies, "study")
                self._check_in(f"figures.{fig}.model", f["model"], self.config["studies"][study]["models"],
                               f"model of study {study}:")
                for name, value in panel.items():
                    if name not in ("study", "title"):
                        self._check_panel_value(f"{key}.{name}", name, value, study)

    def _check_tables(self):
        c, studies = self.config, list(self.config["studies"])
        t1 = c.get("tables", {}).get("table1")
        if t1:
            self._check_in("tables.table1.study", t1["study"], studies, "study")
            self._check_in("tables.table1.model", t1["model"], c["studies"][t1["study"]]["models"],
                           f"model of study {t1['study']}:")
            for name, value in t1["cell"].items():
                self._check_panel_value(f"tables.table1.cell.{name}", name, value, t1["study"])
            for i, name in enumerate(t1.get("methods") or []):
                self._check_in(f"tables.table1.methods[{i}]", name, c["studies"][t1["study"]]["methods"],
                               f"method of study {t1['study']}:")
        rates = c.get("tables", {}).get("rates")
        if rates:
            for i, fit in enumerate(rates["fits"]):
                self._check_in(f"tables.rates.fits[{i}].study", fit["study"], studies, "study")

    def _check_realdata(self):
        from .realdata import TASKS
        from .realdata import resolve as resolve_realdata

        rd = self.config["realdata"]
        for i, task in enumerate(rd["tasks"]):
            self._check_in(f"realdata.tasks[{i}]", task, TASKS, "task")
        try:
            resolve_realdata(self.realdata_settings())
        except ValueError as exc:
            raise ConfigError("realdata", str(exc)) from None
        need, have = rd["m"] * rd["n_min"], _IMAGES[rd["dataset"]]
        if need > have:
            raise ConfigError("realdata.n_min", f"m * n_min = {need} exceeds the {have} images of {rd['dataset']}")
        for fig in self.figures("realdata"):
            self._check_in(f"figures.{fig}.task", self.figure(fig)["task"], rd["tasks"],
                           "task of realdata.tasks:")

    def _check_nn(self):
        from .nn.calibration import LABELS
        from .nn.settings import resolve as resolve_nn

        s = self.nn()
        for i, name in enumerate(s["methods"]):
            self._check_in(f"nn.methods[{i}]", name, LABELS, "method")
        for fig in self.figures("nn"):
            f = self.figure(fig)
            per_dataset = "n" if f["x"] == "n" else "m"
            if f["x"] == "n" and not isinstance(f["m"], int):
                raise ConfigError(f"figures.{fig}.m", "x: n needs one number of clients m")
            if f["x"] == "m" and "n" in f:
                raise ConfigError(f"figures.{fig}.n", "x: m splits the full training set: give no n")
            if not isinstance(f.get(per_dataset), dict):
                raise ConfigError(f"figures.{fig}.{per_dataset}", "give the values per dataset, "
                                  "e.g. {digits: [...]}")
            for ds in s["datasets"]:
                if ds not in f[per_dataset]:
                    raise ConfigError(f"figures.{fig}.{per_dataset}", f"no values for dataset {ds!r}")
                ms, ns = self.nn_axes(ds, fig)
                for m, n in itertools.product(ms, ns):
                    try:
                        resolve_nn(self.nn_settings(ds, fig, m, n, 0))
                    except ValueError as exc:
                        raise ConfigError(f"figures.{fig}", f"{ds}, m={m}, n={n}: {exc}") from None
                    need = m * (1 if n == "full" else n)
                    if need > _NN_TRAIN_IMAGES[ds]:
                        raise ConfigError(f"figures.{fig}", f"{ds}: m * n = {need} exceeds its "
                                          f"{_NN_TRAIN_IMAGES[ds]} training images")

    # ------------------------------------------------------- sensitivity study
    # The section's studies are ordinary studies (added by load); these methods name its
    # real-data fits, its files and the claims map's spec and caption.
    def sensitivity(self) -> dict:
        return self.config.get("sensitivity") or {}

    def sensitivity_files(self) -> list[str]:
        """The claims map: tables/<run>/claims_map.{csv,md}, figures/<run>/claims_map.{pdf,png}."""
        base = self.paths.figure.format(fig="claims_map")
        return [f"{self.paths.tables}/claims_map.csv", f"{self.paths.tables}/claims_map.md",
                f"{base}.pdf", f"{base}.png"]

    def sensitivity_summaries(self, wildcards=None) -> list[str]:
        return [self.summary_file(model, e["study"]) for e in sensitivity_index(self.config)
                for model in e["models"]]

    def sensitivity_realdata_variants(self) -> dict[str, dict]:
        """Real-data variants, ``base`` (no change) first; none without a realdata section."""
        rd = self.sensitivity().get("realdata") or {}
        if not rd.get("variants") or not self.config.get("realdata"):
            return {}
        if "base" in rd["variants"]:
            raise ConfigError("sensitivity.realdata.variants.base", "the name base is reserved for "
                              "the unchanged fits (added by itself)")
        return {"base": {}, **rd["variants"]}

    def sensitivity_datasets(self) -> tuple[dict[str, dict], list[str]]:
        """(dataset -> layout overrides of the datasets that run, notes on those that do not):
        MNIST only where its files are present (the study never downloads)."""
        rd = self.sensitivity().get("realdata") or {}
        given = rd.get("datasets") or {self.config["realdata"]["dataset"]: {}}
        run, skipped = {}, []
        for ds, over in given.items():
            if ds == "mnist":
                files = mnist_files(self.config["realdata"]["path"])
                if not all(os.path.isfile(f) for f in files):
                    skipped.append(f"mnist: not run (its files are absent from {self.config['realdata']['path']})")
                    continue
            run[ds] = over
        return run, skipped

    def _sensitivity_realdata_params(self, variant: str, dataset: str) -> dict:
        """Every realdata key of one variant's fits (tasks and splits included)."""
        rd = dict(self.config["realdata"], dataset=dataset)
        over = merge_settings(self.sensitivity_datasets()[0].get(dataset, {}),
                              self.sensitivity_realdata_variants()[variant])
        return merge_settings(rd, over)

    def sensitivity_realdata_file(self, variant: str, dataset: str, task: str, split: int) -> str:
        """One real-data fit of a variant; the base variant of the run's own dataset and
        layout is the default run's file (the same fit)."""
        p = self._sensitivity_realdata_params(variant, dataset)
        if p == self.config["realdata"]:
            return self.realdata_split_file(task, split)
        return (f"results/{self.run}/sensitivity/realdata/{variant}/{dataset}/{task}/"
                f"split~{split}.parquet")

    def sensitivity_realdata_runs(self) -> list[dict]:
        """One entry per (variant, dataset): its ``files`` (every task and split)."""
        out = []
        for variant in self.sensitivity_realdata_variants():
            for ds in self.sensitivity_datasets()[0]:
                p = self._sensitivity_realdata_params(variant, ds)
                out.append({"variant": variant, "dataset": ds, "files": [
                    self.sensitivity_realdata_file(variant, ds, t, s)
                    for t in p["tasks"] for s in range(p["splits"])]})
        return out

    def sensitivity_realdata_files(self, wildcards=None) -> list[str]:
        return [f for r in self.sensitivity_realdata_runs() for f in r["files"]]

    def sensitivity_realdata_spec(self, wildcards) -> str:
        """``fedgdp realdata --spec`` of one variant's fit (checked against the variants)."""
        w = wildcards
        if w.variant not in self.sensitivity_realdata_variants() or w.dataset not in self.sensitivity_datasets()[0]:
            raise ValueError(f"{w.variant}/{w.dataset} is not a real-data run of the sensitivity section")
        p = self._sensitivity_realdata_params(w.variant, w.dataset)
        if w.task not in p["tasks"] or int(w.split) >= p["splits"]:
            raise ValueError(f"{w.task}/split~{w.split} is not a fit of variant {w.variant}")
        return json.dumps({k: v for k, v in p.items() if k not in self._REALDATA_PIPELINE_KEYS}, sort_keys=True)

    def sensitivity_realdata_data_files(self, wildcards) -> list[str]:
        """MNIST's files (present, or this dataset would not run); nothing for digits."""
        return mnist_files(self.config["realdata"]["path"]) if wildcards.dataset == "mnist" else []

    def sensitivity_constraints(self) -> dict[str, str]:
        return {"variant": alternatives(self.sensitivity_realdata_variants()),
                "dataset": alternatives(self.sensitivity_datasets()[0]),
                "task": alternatives(self.config.get("realdata", {}).get("tasks", [])),
                "split": r"\d+"}

    def sensitivity_map_spec(self, wildcards=None) -> str:
        """What ``fedgdp claims-map`` needs: which study is which variant and claim, what
        each variant changes, the real-data files per variant, title and note (JSON)."""
        sens = self.sensitivity()
        variants = {n: v["settings"] for n, v in sensitivity_variants(self.config).items()}
        real = {n: v for n, v in self.sensitivity_realdata_variants().items()}
        spec = {"designs": {e["study"]: {"variant": e["variant"], "claim": e["claim"], "models": e["models"]}
                            for e in sensitivity_index(self.config)},
                "variants": variants, "realdata_variants": real, "order": list(dict.fromkeys([*variants, *real])),
                "realdata": self.sensitivity_realdata_runs(), "skipped": self.sensitivity_datasets()[1],
                "replicates": sens.get("replicates"),
                "title": f"Claims map: which claims hold under which settings [{self.run}, {self.sha}]",
                "provenance": self.provenance(), "caption": self.sensitivity_caption()}
        return json.dumps(spec, sort_keys=True)

    def sensitivity_caption(self, wildcards=None) -> str:
        sens = self.sensitivity()
        designs = "; ".join(
            f"{claim}: study {d['study']} at m in {{{', '.join(map(str, d['grid']['m']))}}}, sizes "
            f"{', '.join(d['grid']['sizes'])}" for claim, d in sens.get("designs", {}).items())
        real = self.sensitivity_realdata_variants()
        ds, skipped = self.sensitivity_datasets()
        return ("Claims map of the sensitivity study (fedgdp claims-map, module fedgdp.sensitivity): "
                "the paper's claims tested by fedgdp.claims (the thresholds of the claims report) on "
                "every variant of the settings the paper leaves open; one column per variant (base: "
                "config.yaml's defaults), one row per claim and model (C2, C4: also per sub-claim, "
                "and with certified FedNewton in FedNewton's place), the verdict written in each cell "
                f"(holds / partly / fails / not run). Designs: {designs}; "
                f"{sens.get('replicates')} replicates per cell. "
                + (f"Real data (C5): {', '.join(ds)}, variants {', '.join(real)}"
                   + (f" ({'; '.join(skipped)})" if skipped else "") + ". " if real else "")
                + "What each variant changes: the Markdown table. "
                f"Made by {self.provenance()}.")


    # ---------------------------------------------------- error decomposition
    def decomposition_files(self) -> list[str]:
        """The decomposition's table and figure (target ``decompose``)."""
        t, f = self.paths.tables, self.paths.figure.format(fig="decomposition")
        return [f"{t}/decomposition.csv", f"{t}/decomposition.md", f"{f}.pdf", f"{f}.png"]

    def decomposition_studies(self) -> dict[str, str]:
        """Release -> the study that runs it (config ``decomposition.studies``)."""
        return dict(self.config["decomposition"]["studies"])

    def decomposition_cell_files(self, wildcards=None) -> list[str]:
        """Every cell file of the three decomposition studies, for each of their models."""
        return [f for study in self.decomposition_studies().values()
                for model in self.config["studies"][study]["models"]
                for f in self.study_cell_files(SimpleNamespace(model=model, study=study))]

    def decomposition_spec(self, wildcards=None) -> str:
        """What ``fedgdp decompose`` needs (JSON): studies, K_conv, method order, title, caption."""
        d = self.config["decomposition"]
        private = self.config["studies"][d["studies"]["private"]]
        return json.dumps({"studies": d["studies"], "K_conv": d["K_conv"], "methods": private["methods"],
                           "name": "decomposition", "title": f"{d['title']} [{self.run}, {self.sha}]",
                           "caption": self.decomposition_caption()}, sort_keys=True)

    def decomposition_caption(self, wildcards=None) -> str:
        """The definition of the decomposition and the settings that made it."""
        d, c = self.config["decomposition"], self.config
        st = d["studies"]
        axes, settings = self.study_axes(st["private"]), self.study_settings(st["private"])
        return (f"Error decomposition of each method's MSE (docs/methods.md section 9). Three studies "
                f"run the same cells on the same replicate data: {st['private']} (release private: the "
                f"algorithms, clipped and noisy), {st['clip_only']} (clip_only: the same clipping bound "
                f"B, no noise) and {st['plain']} (plain: no clipping, no noise). With e_r(K) a "
                f"replicate's squared error under release r at budget K and K_conv = {d['K_conv']} (the "
                f"plain fit converged): statistical = e_plain(K_conv); optimisation = e_plain(K) - "
                f"e_plain(K_conv); clipping = e_clip_only(K) - e_plain(K); privacy noise = "
                f"e_private(K) - e_clip_only(K). The four add up to e_private(K); shown are their "
                f"means over the replicates (bars stacked with their signs: a negative term lies "
                f"below zero) and the private MSE (diamond, +-2 Monte Carlo SE); each term's SE is "
                f"that of its paired per-replicate differences. Replicates with a non-finite error "
                f"under any release are dropped (column Dropped). Cells: models "
                f"{', '.join(c['studies'][st['private']]['models'])}, sizes {', '.join(axes['sizes'])}, "
                f"m in {{{', '.join(map(str, axes['m']))}}}, K in {{{', '.join(map(str, axes['K']))}}}, "
                f"nominal mu = {', '.join(axes['mu'])}, {self.replicates(st['private'])} replicates, "
                f"clipping {self._clip_text(settings['clip'], 'beta = 0')}, schedule "
                f"{c['studies'][st['private']]['schedule']}, base_seed {settings['base_seed']}. "
                f"Made by {self.provenance()}.")

    def decomposition_labels(self, what: str, fmt: str) -> dict:
        return {"output": what, "format": fmt, "run": self.run}

    def _check_decomposition(self):
        """The three studies exist, run their release, and differ in nothing else (so
        their replicates share data and pair); K_conv is a K of each; one mu each."""
        d, studies = self.config["decomposition"], self.config["studies"]
        names = d["studies"]
        for role, study in names.items():
            key = f"decomposition.studies.{role}"
            self._check_in(key, study, studies, "study")
            release = self.study_settings(study).get("release", "private")
            if release != role:
                raise ConfigError(key, f"study {study} runs release {release!r}, not {role!r} "
                                  f"(set studies.{study}.settings.release: {role})")
            if len(self.study_axes(study)["mu"]) != 1:
                raise ConfigError(f"studies.{study}.grid.mu", "a decomposition study runs one mu")
            if d["K_conv"] not in self.study_axes(study)["K"]:
                raise ConfigError("decomposition.K_conv", f"K_conv = {d['K_conv']} is not a K of study "
                                  f"{study} (K in {self.study_axes(study)['K']})")

        def shape(study):
            s = studies[study]
            settings = {k: v for k, v in self.study_settings(study).items() if k != "release"}
            return (s["models"], s["methods"], s["schedule"], self.study_axes(study), settings,
                    self.replicates(study))

        first = names["private"]
        for role in ("clip_only", "plain"):
            if shape(names[role]) != shape(first):
                raise ConfigError(f"decomposition.studies.{role}",
                                  f"study {names[role]} differs from {first} in more than its release "
                                  "(models, methods, schedule, grid, settings and replicates must agree)")


def mnist_files(folder: str) -> list[str]:
    """MNIST's files in ``folder``: mnist.npz, or the unpacked IDX files, when present;
    otherwise the four IDX .gz files (what fetch rules make)."""
    from .datasets import MNIST_FILES

    if os.path.isfile(os.path.join(folder, "mnist.npz")):
        return [os.path.join(folder, "mnist.npz")]
    plain = [os.path.join(folder, f.removesuffix(".gz")) for f in MNIST_FILES]
    if all(os.path.isfile(f) for f in plain):
        return plain
    return [os.path.join(folder, f) for f in MNIST_FILES]


def load(config: dict, schema_path, overrides: list[dict] | None = None) -> Plan:
    """The plan of a merged config: numbers fixed, schema checked with defaults, run
    named, semantic checks done. Raises ConfigError naming the first bad key."""
    config.update(numbers(config))
    validate(config, load_schema(schema_path))
    add_sensitivity_studies(config)
    plan = Plan(config, run_name(config, overrides or []))
    try:
        plan.check()
    except ConfigError as exc:
        raise sensitivity_error(exc, config) from None
    return plan


# ---------------------------------------------------------- sensitivity study
#: Simulation claims a sensitivity design may test (C5 is the real-data part).
SENSITIVITY_CLAIMS = ("C1", "C2", "C3", "C4")
#: Real-data keys a sensitivity variant may not set (the dataset is chosen per entry).
_SENS_REALDATA_FIXED = ("dataset", "path", "tasks")


def _fill_sensitivity_schema(schema: dict) -> None:
    """Close the sensitivity section's open objects (in place): variant settings take the
    keys of ``defaults`` (mu and K included), a design's grid those of a study's grid,
    real-data overrides those of ``realdata`` less dataset, path and tasks."""
    props, defs = schema["properties"], schema["$defs"]
    settings = props["sensitivity"]["properties"]["variants"]["additionalProperties"]["properties"]["settings"]
    settings.update(_without_defaults(props["defaults"]), description=settings["description"])
    grid = props["studies"]["additionalProperties"]["properties"]["grid"]
    defs["sensitivity_design"]["properties"]["grid"].update(copy.deepcopy(grid))
    real = _without_defaults(props["realdata"])
    for key in _SENS_REALDATA_FIXED:
        real["properties"].pop(key, None)
    defs["sensitivity_realdata"].update(real, description=defs["sensitivity_realdata"]["description"])


def sensitivity_study_name(variant: str, claim: str) -> str:
    """Name of the generated study of one variant and claim: ``sens_<variant>_<claim>``."""
    return f"sens_{variant}_{claim}"


def sensitivity_variants(config: dict) -> dict[str, dict]:
    """The simulation variants in config order, ``base`` (no change) first."""
    given = config["sensitivity"]["variants"]
    if "base" in given:
        raise ConfigError("sensitivity.variants.base", "the name base is reserved for the "
                          "unchanged design (added by itself)")
    return {"base": {"settings": {}}, **given}


def sensitivity_index(config: dict) -> list[dict]:
    """One entry per generated study: ``variant``, ``claim``, ``study`` (generated name),
    ``base`` (the design's study) and ``models``, in variant then claim order.

    Raises
    ------
    ConfigError
        Naming the sensitivity key at fault: a design's study that does not exist, a
        variant that asks for a design that is not given, a variant that sets mu or K
        for C3 (whose test needs its own mu and K grid).
    """
    sens = config.get("sensitivity")
    if not sens:
        return []
    designs = sens["designs"]
    for claim, d in designs.items():
        if d["study"] not in config["studies"]:
            raise ConfigError(f"sensitivity.designs.{claim}.study", f"no study {d['study']!r}"
                              f"{suggest(d['study'], config['studies'])}; known: {', '.join(config['studies'])}")
    out = []
    for name, v in sensitivity_variants(config).items():
        for claim in v.get("claims") or list(designs):
            if claim not in designs:
                raise ConfigError(f"sensitivity.variants.{name}.claims", f"no design for {claim} in "
                                  f"sensitivity.designs (given: {', '.join(designs)})")
            if claim == "C3" and any(a in v["settings"] for a in GRID_AXES):
                raise ConfigError(f"sensitivity.variants.{name}.settings", "C3 tests the curve over "
                                  "its own mu and K grid: a variant that sets mu or K cannot run it "
                                  "(give the variant claims without C3)")
            d = designs[claim]
            base_models = d.get("models") or config["studies"][d["study"]]["models"]
            models = [mdl for mdl in base_models if mdl in (v.get("models") or base_models)]
            if models:
                out.append({"variant": name, "claim": claim, "study": sensitivity_study_name(name, claim),
                            "base": d["study"], "models": models})
    return out


def sensitivity_studies(config: dict) -> dict[str, dict]:
    """The studies the sensitivity section stands for (``studies.<name>`` entries).

    Each takes its design's study (methods, schedule, settings), the design's reduced
    grid and the section's replicates; the variant's mu or K replaces that grid axis and
    its other settings lie over the study's settings (:func:`merge_settings`)."""
    out = {}
    for e in sensitivity_index(config):
        d, base = config["sensitivity"]["designs"][e["claim"]], config["studies"][e["base"]]
        settings = copy.deepcopy(sensitivity_variants(config)[e["variant"]]["settings"])
        grid = copy.deepcopy(d["grid"])
        for axis in GRID_AXES:
            if axis in settings:
                grid[axis] = [settings.pop(axis)]
        study = {"models": e["models"], "methods": list(base["methods"]), "schedule": base["schedule"],
                 "replicates": config["sensitivity"]["replicates"], "grid": grid}
        merged = merge_settings(base.get("settings", {}), settings)
        if merged:
            study["settings"] = merged
        out[e["study"]] = study
    return out


def add_sensitivity_studies(config: dict) -> None:
    """Add the sensitivity section's studies to ``config["studies"]`` (in place); a name
    already taken by a different study is an error (the same study again, as in a
    resolved config read back, is not)."""
    for name, study in sensitivity_studies(config).items():
        have = config["studies"].get(name)
        if have is not None and numbers(have) != numbers(study):
            raise ConfigError(f"studies.{name}", "this name belongs to the sensitivity study "
                              "(sens_<variant>_<claim>): rename the study")
        config["studies"][name] = study


def sensitivity_error(exc: ConfigError, config: dict) -> ConfigError:
    """A check error about a generated study, renamed to the sensitivity key it comes
    from (a variant's settings or a design's grid); other errors unchanged."""
    for e in sensitivity_index(config):
        head = f"studies.{e['study']}"
        if exc.key == head or exc.key.startswith(head + "."):
            rest = exc.key[len(head):]
            if rest.startswith(".settings"):
                key = f"sensitivity.variants.{e['variant']}{rest}"
            elif rest.startswith(".grid"):
                key = f"sensitivity.designs.{e['claim']}{rest}"
            else:
                key = f"sensitivity.variants.{e['variant']} (design {e['claim']})"
            message = str(exc).split(": ", 1)[1]
            return ConfigError(key, message)
    return exc


# ------------------------------------------------------------------- gallery
def shrink_png(src: str | os.PathLike, dst: str | os.PathLike, width: int = GALLERY_WIDTH,
               colours: int = GALLERY_COLOURS) -> None:
    """A small copy of a figure's PNG for the README gallery: ``width`` pixels wide, a
    palette of ``colours``, its text metadata kept (written atomically)."""
    from PIL import Image, PngImagePlugin

    from .io import atomic_path

    with Image.open(src) as img:
        info = PngImagePlugin.PngInfo()
        for key, value in (img.text or {}).items():
            info.add_text(key, value)
        img = img.convert("RGB")
        height = round(img.height * width / img.width)
        small = img.resize((width, height), Image.LANCZOS).quantize(colours, method=Image.FASTOCTREE)
    with atomic_path(dst) as tmp:
        small.save(tmp, format="PNG", optimize=True, pnginfo=info)


def main(argv: list[str] | None = None) -> int:
    """``python -m fedgdp.workflow_plan shrink-png SRC DST``: a gallery PNG (rule gallery)."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[0] != "shrink-png":
        print("usage: python -m fedgdp.workflow_plan shrink-png SRC DST", file=sys.stderr)
        return 2
    shrink_png(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
