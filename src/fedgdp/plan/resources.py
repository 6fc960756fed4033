"""What a cluster job asks for: minutes and megabytes per rule, growing with each retry."""
from __future__ import annotations

from .simulation import SimulationPart


class ResourcesPart(SimulationPart):
    """Plan methods that serve as Snakemake ``resources:`` functions."""

    # A cell's work grows with its expected number of samples N = m x mean client size,
    # the replicates of its seed block and K. Measured on one core: the largest cell of
    # the paper (compare, m = 140, lognormal(5.5,1), N ~ 56,000, 100 replicates) takes
    # 31 s and 160 MB; a small one 2 s and 140 MB. The requests leave wide margins (7 min
    # and 1.6 GB for the largest, 2 min and 1 GB for a small one) and grow with each retry.
    # A job of several cells runs them one after another in one process: it asks for the
    # sum of their run times and the memory of the largest.
    def _job_cells(self, wildcards) -> list[tuple[float, int, int]]:
        """(expected samples, K, replicates) of every cell of a simulate job."""
        from ..simulation.data import parse_sizes

        reps = int(wildcards.last) - int(wildcards.first) + 1
        return [(int(c["m"]) * parse_sizes(c["sizes"]).mean_size(int(c["m"])), int(c["K"]), reps)
                for c in self._group_of(wildcards)]

    def cell_runtime(self, wildcards, attempt: int = 1) -> int:
        """Minutes a simulate_cell job asks for: ``attempt`` x (2 + the summed estimated minutes of the job's cells).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A cell path's wildcards: ``model``, ``study``, ``cells``, ``first``, ``last``.
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return attempt * (2 + sum(int(2e-8 * reps * max(K, 50) * samples)
                                  for samples, K, reps in self._job_cells(wildcards)))

    def cell_mem_mb(self, wildcards, attempt: int = 1) -> int:
        """Megabytes a simulate_cell job asks for: ``attempt`` x (1000 + the largest cell's expected samples / 100).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A cell path's wildcards: ``model``, ``study``, ``cells``, ``first``, ``last``.
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return attempt * (1000 + int(max(samples for samples, _, _ in self._job_cells(wildcards)) / 100))

    # Real data: digits takes seconds; MNIST, one core: about 1 min per binary and 6 min
    # per multiclass split (two workers: 32-36 s and 176-182 s). Memory measured on MNIST
    # with two workers: 2.9-3.1 GB PSS (the five folds' client pixels through their
    # nonzero columns, about 1.3 GB, and the 70,000 x 785 images, 0.44 GB):
    # docs/results/perf-2026-12c/mnist-final1-fit_realdata.tsv.
    @staticmethod
    def realdata_runtime(wildcards, attempt: int = 1) -> int:
        """Minutes a real-data split job asks for: 15 per attempt off MNIST; on MNIST 120 (multiclass) or 30 per
        attempt.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A real-data path's wildcards: ``dataset`` and ``task`` read.
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        if wildcards.dataset != "mnist":
            return 15 * attempt
        return (120 if wildcards.task == "multiclass" else 30) * attempt

    @staticmethod
    def realdata_mem_mb(wildcards, attempt: int = 1) -> int:
        """Megabytes a real-data split job asks for: 4000 (MNIST) or 1000 per attempt.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A real-data path's wildcards: ``dataset`` read.
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return (4000 if wildcards.dataset == "mnist" else 1000) * attempt

    # CNNs: MNIST measured at about 1.5 h of one CPU core per run (config/paper-nn.yaml);
    # CIFAR-10 (30 local epochs, a larger network) not measured: a day as the ceiling.
    @staticmethod
    def nn_runtime(wildcards, attempt: int = 1) -> int:
        """Minutes a CNN run asks for: 60 (digits), 360 (MNIST) or 1440 (any other dataset) per attempt.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A CNN run path's wildcards: ``dataset`` read (a piece of the readings map has
            none: sized as an MNIST run, the map's data set).
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return {"digits": 60, "mnist": 360}.get(getattr(wildcards, "dataset", "mnist"), 1440) * attempt

    @staticmethod
    def nn_mem_mb(wildcards, attempt: int = 1) -> int:
        """Megabytes a CNN run asks for: 2000 (digits) or 8000 per attempt.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A CNN run path's wildcards: ``dataset`` read (a piece of the readings map has
            none: sized as an MNIST run, the map's data set).
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return (2000 if getattr(wildcards, "dataset", "mnist") == "digits" else 8000) * attempt

    @staticmethod
    def short_runtime(wildcards, attempt: int = 1) -> int:
        """Summaries, figures and tables take seconds: 3 minutes per attempt.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            Not read.
        attempt : int, default=1
            Snakemake's attempt number (1, then 2, ... on retries).
        """
        return 3 * attempt
