"""The coverage study of `FederatedGLM.summary()`'s intervals (target ``coverage``, config
``coverage``; `fedgdp.api.coverage`): its cells, files, job specs and caption (its
config check is in `fedgdp.plan.checks`)."""
from __future__ import annotations

import json

from .base import PlanBase


class CoveragePart(PlanBase):
    """Plan methods of the coverage study."""

    def coverage_settings(self):
        """The config's ``coverage`` section, checked (`fedgdp.api.coverage.check_settings`)."""
        from ..api.coverage import check_settings

        return check_settings(self.config["coverage"])

    def coverage_cells(self) -> list[str]:
        """The names of the study's cells (`fedgdp.api.coverage.cell_name`), in grid order."""
        from ..api.coverage import cell_name, cells

        return [cell_name(c) for c in cells(self.coverage_settings())]

    def coverage_cell_file(self, cell: str) -> str:
        """``results/<run>/coverage/<cell>.parquet``: one cell's replicate rows.

        Parameters
        ----------
        cell : str
            A cell's name.
        """
        return f"results/{self.run}/coverage/{cell}.parquet"

    def coverage_cell_files(self, wildcards=None) -> list[str]:
        """Every cell file of the study (input of its table).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return [self.coverage_cell_file(c) for c in self.coverage_cells()]

    def coverage_files(self) -> list[str]:
        """The study's table and figure (target ``coverage``)."""
        t, f = self.paths.tables, self.paths.figure.format(fig="coverage")
        return [f"{t}/coverage.csv", f"{t}/coverage.md", f"{f}.pdf", f"{f}.png"]

    def coverage_constraint(self) -> str:
        """The ``cell`` wildcard's constraint: one of the study's cells."""
        return "|".join(self.coverage_cells())

    def _coverage_section(self) -> dict:
        return {k: v for k, v in self.config["coverage"].items() if k != "title"}

    def coverage_cell_spec(self, wildcards) -> str:
        """What ``fedgdp coverage-cell`` needs (JSON): the settings and the cell's name.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            ``cell``.
        """
        return json.dumps({"settings": self._coverage_section(), "cell": wildcards.cell}, sort_keys=True)

    def coverage_spec(self, wildcards=None) -> str:
        """What ``fedgdp coverage`` needs (JSON): the settings, title and caption.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        c = self.config["coverage"]
        return json.dumps({"settings": self._coverage_section(), "caption": self.coverage_caption(),
                           "title": f"{c.get('title', 'Coverage')} [{self.run}, {self.sha}]"}, sort_keys=True)

    def coverage_caption(self, wildcards=None) -> str:
        """What the table shows and the settings that made it.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        s = self.coverage_settings()
        truths = "; ".join(f"{f}: ({', '.join(f'{v:g}' for v in t)})" for f, t in s.families.items())
        return (f"Coverage of FederatedGLM.summary()'s {1 - s.alpha:.0%} intervals (cov_type {s.cov_type}) "
                f"per coefficient on known-truth data (docs/methods.md section 10): m clients of n_i rows, "
                f"standard normal features, truth (intercept first) {truths}; the estimator's defaults but mu "
                f"and method (auto: the method it picks, column method_used). Coverage is over the fits that "
                f"returned (failed: those refused), with its Monte Carlo SE sqrt(c (1 - c) / R); the band "
                f"[0.93, 0.97] is where coverage is said to hold. sd_coef and bias are the estimate's "
                f"empirical sd and mean error over the replicates, beside the mean se_sampling and "
                f"se_noise; converged: share of fits whose fit_info_ says converged. Grid: m in "
                f"{{{', '.join(map(str, s.m))}}}, n_i in {{{', '.join(map(str, s.n))}}}, mu in "
                f"{{{', '.join(f'{v:g}' for v in s.mu)}}}, methods {', '.join(s.methods)}; "
                f"{s.replicates} replicates per cell, base_seed {s.base_seed}. Made by {self.provenance()}.")
