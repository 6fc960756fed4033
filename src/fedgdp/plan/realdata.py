"""The real-data fits (Figures 7-8): their settings, files, specs, constraints and
captions, and the folders the fetch rules write to."""
from __future__ import annotations

import json
import os
import re

from .base import PlanBase, alternatives, mnist_files


class RealdataPart(PlanBase):
    """Plan methods of the real-data fits and figures."""

    _REALDATA_PIPELINE_KEYS = ("tasks", "splits", "workers")

    def realdata_settings(self) -> dict:
        """The realdata section without the pipeline-only keys: ``fedgdp realdata`` parameters."""
        return {k: v for k, v in self.config["realdata"].items() if k not in self._REALDATA_PIPELINE_KEYS}

    @property
    def realdata_workers(self) -> int:
        """Threads of a real-data fit: ``realdata.workers`` processes share its (fold, method) fits."""
        return int(self.config["realdata"].get("workers", 1))

    def realdata_spec(self, wildcards=None) -> str:
        """``fedgdp realdata --spec`` of the run's fits: `realdata_settings` as JSON (keys sorted).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return json.dumps(self.realdata_settings(), sort_keys=True)

    def realdata_split_file(self, task: str, split: int) -> str:
        """The result file of one real-data fit of the run's dataset.

        Parameters
        ----------
        task : str
            A task of ``realdata.tasks`` (``binary`` or ``multiclass``).
        split : int
            The split index.
        """
        return self.paths.realdata.format(dataset=self.config["realdata"]["dataset"], task=task, split=split)

    def realdata_data_files(self, wildcards=None) -> list[str]:
        """MNIST's files (fetched by fetch_mnist when absent); nothing for digits.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        rd = self.config["realdata"]
        return mnist_files(rd["path"]) if rd["dataset"] == "mnist" else []

    @staticmethod
    def fetch_folder(wildcards, output) -> str:
        """The folder a fetch rule writes to (that of its outputs).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            Not read.
        output : snakemake.io.OutputFiles
            The fetch rule's outputs (the first is read).
        """
        return os.path.dirname(output[0])

    def mnist_fetch_files(self) -> list[str]:
        """MNIST's four IDX .gz files under ``realdata.path`` (outputs of rule fetch_mnist)."""
        from ..common.datasets import MNIST_FILES

        return [os.path.join(self.config["realdata"]["path"], f) for f in MNIST_FILES]

    def realdata_figure_task(self, wildcards) -> str:
        """The task of a real-data figure (its config entry's ``task``).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a real-data figure).
        """
        return self.figure(wildcards.fig)["task"]

    def realdata_figure_files(self, wildcards) -> list[str]:
        """The split files a real-data figure reads: every split of its task.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a real-data figure).
        """
        task = self.realdata_figure_task(wildcards)
        return [self.realdata_split_file(task, s) for s in range(self.config["realdata"]["splits"])]

    def realdata_figure_title(self, wildcards) -> str:
        """A real-data figure's title (default: its name) with the run and config hash.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        return f"{self.figure(wildcards.fig).get('title', wildcards.fig)} [{self.run}, {self.sha}]"

    def realdata_caption(self, wildcards) -> str:
        """One paragraph: what the real-data figure shows and the settings of its fits.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a real-data figure).
        """
        from ..realdata import resolve as resolve_realdata

        rd, fig = self.config["realdata"], wildcards.fig
        task = self.realdata_figure_task(wildcards)
        s = resolve_realdata(dict(self.realdata_settings(), task=task))
        metric = {"binary": "AUC (label 1 = odd digit)", "multiclass": "accuracy (10 classes)"}[task]
        settings = "; ".join(f"{name} {json.dumps(v, sort_keys=True)}" for name, v in s.method_settings.items())
        return (f"{self.figure(fig).get('title', fig)}. Per-client out-of-fold {metric}, averaged "
                f"over {s.folds} folds within each client; boxes over the m x S = {s.m} x "
                f"{rd['splits']} client values per method, one panel per mu "
                f"({', '.join(f'{mu:g}' for mu in s.mu)}), non-private baselines shaded. Data "
                f"{s.dataset}: pixels scaled to [0, 1] plus an intercept; {s.m} clients of at "
                f"least {s.n_min} images, the rest by Dirichlet({s.alpha:g}) proportions. "
                f"Clipping {self._clip_text(s.clip, '0')}; FedNewton tau1 = {s.tau1:g} (Newton "
                f"solver {s.newton['solver']}); base_seed {s.base_seed}. Settings: {settings}. "
                f"Made by {self.provenance()}.")

    def realdata_constraints(self) -> dict[str, str]:
        """Wildcard constraints of the real-data paths: ``dataset``, ``task``, ``split``."""
        rd = self.config["realdata"]
        return {"dataset": re.escape(rd["dataset"]), "task": alternatives(rd["tasks"]),
                "split": alternatives(range(rd["splits"]))}
