"""The simulation studies: cells, jobs (cell groups x seed blocks), files, specs and figures."""
from __future__ import annotations

import itertools
import json
import math
import string

from .base import PlanBase, alternatives, fmt_mu
from .config import GRID_AXES, ConfigError, merge_settings

#: Placeholders a simulation figure's title or a rates fit's label may hold, filled in
#: from the cells it draws (so a title cannot state a size the data do not have).
TITLE_FIELDS = {"mean_n": "the mean client size of the cells drawn (2 significant digits; a range if they differ)",
                "N": "the total sample size N = m x mean client size of the cells drawn (likewise)"}


def _two_digits(x: float) -> str:
    return f"{float(f'{x:.2g}'):g}"


def _span(values) -> str:
    """``400`` when the rounded values agree, else ``100-400``."""
    shown = sorted({float(_two_digits(v)) for v in values})
    return f"{shown[0]:g}" if len(shown) == 1 else f"{shown[0]:g}-{shown[-1]:g}"


class SimulationPart(PlanBase):
    """Plan methods of the simulation studies and their figures."""

    # ----------------------------------------------------------- simulation cells
    def study_axes(self, study: str) -> dict:
        """Grid axes of a study in path order, a missing axis taking ``defaults``:
        ``{"sizes": [str], "m": [int], "mu": [str], "K": [int]}`` (canonical size texts, mu in path form,
        `fmt_mu`).

        Parameters
        ----------
        study : str
            A study name (a key of ``config["studies"]``).
        """
        from ..simulation.data import parse_sizes

        grid = self.config["studies"][study]["grid"]
        d = self.config["defaults"]
        return {
            "sizes": [parse_sizes(s).text for s in grid["sizes"]],
            "m": [int(m) for m in grid["m"]],
            "mu": [fmt_mu(mu) for mu in grid.get("mu", [d["mu"]])],
            "K": [int(k) for k in grid.get("K", [d["K"]])],
        }

    def study_cells(self, study: str) -> list[dict]:
        """Every cell of a study (the product of `study_axes`, K fastest): sizes, m, mu, K.

        Parameters
        ----------
        study : str
            A study name (a key of ``config["studies"]``).
        """
        axes = self.study_axes(study)
        return [dict(zip(axes, values)) for values in itertools.product(*axes.values())]

    def replicates(self, study: str | None = None) -> int:
        """Replicates per cell of a study (its own ``replicates``, else the config's).

        Parameters
        ----------
        study : str or None, default=None
            A study name; None: the config's ``replicates``.
        """
        own = self.config["studies"][study].get("replicates") if study else None
        return int(own or self.config["replicates"])

    def seed_blocks(self, study: str | None = None) -> list[tuple[int, int]]:
        """(first, last) replicate, inclusive, of every simulate job of a cell of ``study``: blocks of
        ``seeds_per_job`` replicates (the last may be shorter).

        Parameters
        ----------
        study : str or None, default=None
            A study name; None: the config's ``replicates``.
        """
        n, per = self.replicates(study), self.config["seeds_per_job"]
        return [(a, min(a + per, n) - 1) for a in range(0, n, per)]

    def study_settings(self, study: str) -> dict:
        """The cell parameters of a study: ``defaults`` with its ``settings`` laid over them (a new dict).

        Parameters
        ----------
        study : str
            A study name (a key of ``config["studies"]``).
        """
        return merge_settings(self.config["defaults"], self.config["studies"][study].get("settings", {}))

    def cell_groups(self, study: str) -> list[tuple[int, int]]:
        """(first, last) index, inclusive, into `study_cells` of the cells of every simulate job:
        ``ceil(n / cells_per_job)`` groups of consecutive cells in grid order, sizes differing by at most one.

        Parameters
        ----------
        study : str
            A study name (a key of ``config["studies"]``).
        """
        n = math.prod(len(values) for values in self.study_axes(study).values())    # len(study_cells)
        per = self.config["cells_per_job"]
        k = -(-n // per)
        cuts = [i * n // k for i in range(k + 1)]
        return [(cuts[i], cuts[i + 1] - 1) for i in range(k)]

    def cell_overrides(self, model: str, study: str, cell: dict) -> dict:
        """Parameters of one cell for ``fedgdp simulate --params``: the study's settings with the cell's axes,
        ``schedule``, ``methods`` and ``beta_true`` (times ``beta_scale`` when set).

        Parameters
        ----------
        model : str
            The model (a key of ``config["beta_true"]``).
        study : str
            A study name (a key of ``config["studies"]``).
        cell : dict
            One cell of `study_cells` (``sizes``, ``m``, ``mu``, ``K``).
        """
        s = self.study(study)
        p = {k: v for k, v in self.study_settings(study).items() if k not in GRID_AXES}
        scale = p.pop("beta_scale", None)   # absent unless set: beta_true as given
        p.update(model=model, study=study, sizes=cell["sizes"], m=int(cell["m"]), mu=cell["mu"],
                 K=int(cell["K"]), schedule=s.schedule, methods=s.methods,
                 beta_true=self.config["beta_true"][model] if scale is None
                 else [scale * b for b in self.config["beta_true"][model]])
        return p

    def group_file(self, model: str, study: str, group, block) -> str:
        """The file of one simulate job: a group of cells (`cell_groups`) x a seed block.

        Parameters
        ----------
        model, study : str
            The model and study.
        group : tuple of (int, int)
            First and last cell index of the group (one of `cell_groups`).
        block : tuple of (int, int)
            First and last replicate (one of `seed_blocks`).
        """
        return self.paths.cell.format(model=model, study=study, cells=f"{group[0]}-{group[1]}",
                                      first=block[0], last=block[1])

    def cell_file(self, model: str, study: str, cell: dict, block) -> str:
        """The file that holds one cell's rows of a seed block (its group's file).

        Parameters
        ----------
        model, study : str
            The model and study.
        cell : dict
            One cell of `study_cells` (ValueError if it is not one).
        block : tuple of (int, int)
            First and last replicate (one of `seed_blocks`).
        """
        i = self.study_cells(study).index(cell)
        group = next(g for g in self.cell_groups(study) if g[0] <= i <= g[1])
        return self.group_file(model, study, group, block)

    def summary_file(self, model: str, study: str) -> str:
        """The summary file of one model's study (output of summarise_study).

        Parameters
        ----------
        model, study : str
            The model and study.
        """
        return self.paths.summary.format(model=model, study=study)

    def _group_of(self, w) -> list[dict]:
        """The grid cells of the job a cell path's wildcards name; ValueError if there is none."""
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
        """The parameters of every cell a simulate job runs, in grid order (JSON; ValueError when the config has
        no such job, `_group_of`).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A cell path's wildcards: ``model``, ``study``, ``cells``, ``first``, ``last``.
        """
        cells = self._group_of(wildcards)
        return json.dumps([self.cell_overrides(wildcards.model, wildcards.study, c) for c in cells],
                          sort_keys=True)

    def study_cell_files(self, wildcards) -> list[str]:
        """Every cell file of one model's study, in grid order (input of summarise_study; ValueError when the
        study is not run for the model).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A summary path's wildcards: ``model`` and ``study``.
        """
        if wildcards.model not in self.config["studies"][wildcards.study]["models"]:
            raise ValueError(f"study {wildcards.study} is not run for model {wildcards.model}")
        return [self.group_file(wildcards.model, wildcards.study, group, block)
                for group in self.cell_groups(wildcards.study) for block in self.seed_blocks(wildcards.study)]

    # ------------------------------------------------------- wildcard constraints
    def constraints(self) -> dict[str, str]:
        """Global wildcard constraints of the simulation paths, built from the config."""
        from ..simulation.backend import REGISTRY

        return {
            "model": alternatives(m for s in self.studies() for m in s.models),
            "study": alternatives(self.config["studies"]),
            "cells": alternatives(f"{a}-{b}" for s in self.config["studies"] for a, b in self.cell_groups(s)),
            "first": r"\d+",
            "last": r"\d+",
            "method": alternatives(REGISTRY),
        }

    # --------------------------------------------------- simulation figures/tables
    def figure_studies(self, fig: str) -> list[str]:
        """The studies a simulation figure's panels draw, in order, once each.

        Parameters
        ----------
        fig : str
            A simulation figure name.
        """
        f = self.figure(fig)
        return list(dict.fromkeys(p.get("study", f.get("study")) for p in f["panels"]))

    def drawn_cells(self, study: str, fixed: dict | None = None) -> list[tuple[str, int]]:
        """(sizes, m) of the cells of ``study`` that a panel or fit fixing ``fixed`` draws.

        Parameters
        ----------
        study : str
            A study name.
        fixed : dict or None, default=None
            A panel's or fit's config entry; its ``sizes`` and ``m``, when present, fix those axes.
        """
        from ..simulation.data import parse_sizes

        fixed = fixed or {}
        axes = self.study_axes(study)
        sizes = [parse_sizes(fixed["sizes"]).text] if "sizes" in fixed else axes["sizes"]
        ms = [int(fixed["m"])] if "m" in fixed else axes["m"]
        return [(sz, m) for sz in sizes for m in ms]

    def render_title(self, text: str, study_cells: list[tuple[str, list]], key: str) -> str:
        """``text`` with its placeholders (`TITLE_FIELDS`) filled in from the cells drawn (ConfigError for an
        unknown placeholder or a stray brace).

        Parameters
        ----------
        text : str
            A title or label, perhaps with ``{mean_n}`` or ``{N}``.
        study_cells : list of tuple of (str, list of tuple of (str, int))
            (study, `drawn_cells` of it) for each part the text describes.
        key : str
            The config key of ``text``, for errors.
        """
        from ..simulation.data import parse_sizes

        try:
            names = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
        except ValueError as exc:
            raise ConfigError(key, f"{exc} in {text!r} (write a placeholder as {{mean_n}} or {{N}})") from None
        for name in names:
            if name not in TITLE_FIELDS:
                raise ConfigError(key, f"unknown placeholder {{{name}}} in {text!r}; known: "
                                  + ", ".join(f"{{{k}}} ({v})" for k, v in TITLE_FIELDS.items()))
        if not names:
            return text
        means, totals = [], []
        for study, cells in study_cells:
            floor = self.study_settings(study)["n_floor"]
            for sizes, m in cells:
                scheme = parse_sizes(sizes, floor)
                mean = scheme.mean_size(m)
                means.append(mean)
                totals.append(scheme.args[0] if scheme.kind == "total" else m * mean)
        return text.format_map({"mean_n": _span(means), "N": _span(totals)})

    def figure_title(self, fig: str) -> str:
        """A simulation figure's title (default: its name), placeholders filled in (`render_title`).

        Parameters
        ----------
        fig : str
            A simulation figure name.
        """
        f = self.figure(fig)
        cells = [(p.get("study", f.get("study")), self.drawn_cells(p.get("study", f.get("study")), p))
                 for p in f["panels"]]
        return self.render_title(f.get("title", fig), cells, f"figures.{fig}.title")

    def rates_fits(self) -> list[dict]:
        """The rates table's fits, each label's placeholders filled in (`render_title`)."""
        out = []
        for i, fit in enumerate(self.config["tables"]["rates"]["fits"]):
            fit = dict(fit)
            if "label" in fit:
                fit["label"] = self.render_title(fit["label"], [(fit["study"], self.drawn_cells(fit["study"]))],
                                                 f"tables.rates.fits[{i}].label")
            out.append(fit)
        return out

    def figure_summaries(self, wildcards) -> list[str]:
        """The summary files a simulation figure reads, one per figure study.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        f = self.figure(wildcards.fig)
        return [self.summary_file(f["model"], s) for s in self.figure_studies(wildcards.fig)]

    def figure_spec(self, wildcards) -> str:
        """The figure's config entry with what fedgdp.simulation.plots needs besides, as JSON: ``name``,
        ``title``, ``studies``, ``d`` and ``method_settings`` added.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a simulation figure).
        """
        fig = wildcards.fig
        f = {k: v for k, v in self.figure(fig).items() if k != "kind"}
        spec = dict(f, name=fig, title=f"{self.figure_title(fig)} [{self.run}, {self.sha}]",
                    studies={s: self.config["studies"][s] for s in self.figure_studies(fig)},
                    d=len(self.config["beta_true"][f["model"]]),
                    method_settings=self.study_settings(self.figure_studies(fig)[0])["method_settings"])
        return json.dumps(spec, sort_keys=True)

    def figure_caption(self, wildcards) -> str:
        """One paragraph: what the figure shows and the settings that made it.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a simulation figure).
        """
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
        return (f"{self.figure_title(fig)}. Empirical MSE of beta_hat (log scale; mean over "
                f"non-diverged replicates, error bars +-2 Monte Carlo standard errors), {layout}"
                f"{theory}. {'; '.join(parts)}. "
                f"beta_true = {c['beta_true'][f['model']]}, sigma_c = {d['sigma_c']}, clipping "
                f"{self._clip_text(d['clip'], 'beta = 0')}, tau1 = {d['tau1']}, weights "
                f"{d['weights']}, base_seed {d['base_seed']}. Made by {self.provenance()}.")
