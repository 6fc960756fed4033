"""The simulation studies: cells, the jobs that run them (groups of cells x seed
blocks), their files and specs, the wildcard constraints of their paths, and the
specs and captions of the simulation figures."""
from __future__ import annotations

import itertools
import json
import math

from .base import PlanBase, alternatives, fmt_mu
from .config import GRID_AXES, merge_settings


class SimulationPart(PlanBase):
    """Plan methods of the simulation studies and their figures."""

    # ----------------------------------------------------------- simulation cells
    def study_axes(self, study: str) -> dict:
        """Grid axes of a study in path order; a missing axis takes ``defaults``."""
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
        n = math.prod(len(values) for values in self.study_axes(study).values())    # len(study_cells)
        per = self.config["cells_per_job"]
        k = -(-n // per)
        cuts = [i * n // k for i in range(k + 1)]
        return [(cuts[i], cuts[i + 1] - 1) for i in range(k)]

    def cell_overrides(self, model: str, study: str, cell: dict) -> dict:
        """Parameters of one cell for ``fedgdp simulate --params`` (fedgdp.simulation.params keys)."""
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

    # ------------------------------------------------------- wildcard constraints
    def constraints(self) -> dict[str, str]:
        """Global wildcard constraints of the simulation paths, built from the config."""
        from ..simulation.backend import REGISTRY

        return {
            "model": alternatives(m for s in self.config["studies"].values() for m in s["models"]),
            "study": alternatives(self.config["studies"]),
            "cells": alternatives(f"{a}-{b}" for s in self.config["studies"] for a, b in self.cell_groups(s)),
            "first": r"\d+",
            "last": r"\d+",
            "method": alternatives(REGISTRY),
        }

    # --------------------------------------------------- simulation figures/tables
    def figure_studies(self, fig: str) -> list[str]:
        f = self.figure(fig)
        return list(dict.fromkeys(p.get("study", f.get("study")) for p in f["panels"]))

    def figure_summaries(self, wildcards) -> list[str]:
        f = self.figure(wildcards.fig)
        return [self.summary_file(f["model"], s) for s in self.figure_studies(wildcards.fig)]

    def figure_spec(self, wildcards) -> str:
        """The figure's config entry with what fedgdp.simulation.plots needs besides (JSON)."""
        fig = wildcards.fig
        f = {k: v for k, v in self.figure(fig).items() if k != "kind"}
        spec = dict(f, name=fig, title=f"{f.get('title', fig)} [{self.run}, {self.sha}]",
                    studies={s: self.config["studies"][s] for s in self.figure_studies(fig)},
                    d=len(self.config["beta_true"][f["model"]]),
                    method_settings=self.study_settings(self.figure_studies(fig)[0])["method_settings"])
        return json.dumps(spec, sort_keys=True)

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
