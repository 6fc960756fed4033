"""The CNN experiments (Figures 9-10): runs per dataset, their settings, files, data and captions."""
from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
from typing import TYPE_CHECKING

from .base import PlanBase, alternatives, figure_number, mnist_files

if TYPE_CHECKING:
    from ..nn.readings import Readings

#: the x axis of a CNN figure -> the figure identifier of fedgdp.nn (its two layouts)
NN_X = {"n": "fig09", "m": "fig10"}
_CIFAR_BATCHES = [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]


class NNPart(PlanBase):
    """Plan methods of the CNN runs and figures."""

    def nn(self) -> dict:
        """The config's ``nn`` section (``{}`` when absent)."""
        return self.config.get("nn", {})

    def nn_gpus(self, wildcards=None) -> int:
        """GPUs a CNN run asks for (rule ``train_nn``'s ``gpu`` resource): ``nn.gpus``, else 1 for a ``cuda`` device.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards, optional
            Unused (the same for every run).
        """
        nn = self.nn()
        if nn.get("gpus") is not None:
            return int(nn["gpus"])
        return 1 if str(nn.get("device", "auto")).startswith("cuda") else 0

    def nn_axes(self, dataset: str, fig: str) -> tuple[list[int], list]:
        """(m values, n values) of a CNN figure's grid: ``([m], [n, ...])`` or ``([m, ...], ["full"])``.

        Parameters
        ----------
        dataset : str
            A dataset of ``nn.datasets``.
        fig : str
            A CNN figure name.
        """
        f = self.figure(fig)
        if f["x"] == "n":
            return [int(f["m"])], [int(n) for n in f["n"][dataset]]
        return [int(m) for m in f["m"][dataset]], ["full"]

    def nn_settings(self, dataset: str, fig: str, m, n, rep) -> dict:
        """``fedgdp nn-run`` settings of one run: ``nn.settings``, then ``nn.dataset_settings[dataset]``, then
        the run's own keys.

        Parameters
        ----------
        dataset : str
            A dataset of ``nn.datasets``.
        fig : str
            A CNN figure name.
        m : int or str
            Number of clients.
        n : int, str or None
            Samples per client; ``"full"`` or None: the full training split.
        rep : int or str
            The run index (``run`` of the settings).
        """
        s = self.nn()
        p = dict(s.get("settings", {}))
        p.update(s.get("dataset_settings", {}).get(dataset, {}))
        p.update(figure=NN_X[self.figure(fig)["x"]], dataset=dataset, m=int(m),
                 n=None if n in ("full", None) else int(n), run=int(rep), base_seed=s["base_seed"],
                 methods=s["methods"])
        return p

    def nn_run_files(self, dataset: str, fig: str) -> list[str]:
        """Every run file of a CNN figure for one dataset (m x n x runs, in that order).

        Parameters
        ----------
        dataset : str
            A dataset of ``nn.datasets``.
        fig : str
            A CNN figure name.
        """
        ms, ns = self.nn_axes(dataset, fig)
        return [self.paths.nn_run.format(dataset=dataset, fig=fig, m=m, n=n, rep=r)
                for m in ms for n in ns for r in range(self.figure(fig)["runs"])]

    def nn_run_spec(self, wildcards) -> str:
        """JSON settings of one run (ValueError for wildcards that name no run of the grid).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A CNN run path's wildcards: ``dataset``, ``fig``, ``m``, ``n``, ``rep``.
        """
        w = wildcards
        ms, ns = self.nn_axes(w.dataset, w.fig)
        if int(w.m) not in ms or w.n not in [str(n) for n in ns] or int(w.rep) >= self.figure(w.fig)["runs"]:
            raise ValueError(f"{w.fig}/m~{w.m}/n~{w.n}/rep~{w.rep} is not a run of {w.dataset} in the config")
        return json.dumps(self.nn_settings(w.dataset, w.fig, w.m, w.n, w.rep), sort_keys=True)

    def nn_restore(self, pieces: str | os.PathLike | None, *, readings: str | os.PathLike | None = None,
                   dry_run: bool = False) -> list[dict]:
        """Copy committed run files back into this run's results, so Snakemake reruns only the missing ones; one
        dict per run file: ``file``, ``action`` (``restored``, ``kept``, ``differs``, ``absent``), ``reason``
        and ``commit``.

        A file is copied only when the settings it recorded (`fedgdp.nn.run.piece_settings`;
        a setting it lacks at its default) equal this config's and the target is absent
        (docs/cnns.md, ``fedgdp nn-restore``). The code's version is not compared.

        Parameters
        ----------
        pieces : str or path or None
            The folder of committed run files of the grid (None: none).
        readings : str or path, optional
            The folder of committed pieces of the readings map, laid out as ``results/<run>/nn_readings/``.
        dry_run : bool
            Report what would be copied, copy nothing.
        """
        root = self.paths.nn_run.split("{")[0]
        out = []
        for fig in self.figures("nn") if pieces is not None else []:
            for ds in self.nn()["datasets"]:
                ms, ns = self.nn_axes(ds, fig)
                for m, n, r in itertools.product(ms, ns, range(self.figure(fig)["runs"])):
                    target = self.paths.nn_run.format(dataset=ds, fig=fig, m=m, n=n, rep=r)
                    src = os.path.join(str(pieces), os.path.relpath(target, root))
                    out.append(self._restore_one(src, target, self.nn_settings(ds, fig, m, n, r), dry_run))
        cfg = self.nn_readings_config()
        if readings is not None and cfg is not None:
            from ..nn.readings import pieces as reading_pieces

            root = self.paths.nn_reading.split("{")[0]
            for name, fig, x, run, settings in reading_pieces(cfg):
                target = self.paths.nn_reading.format(reading=name, fig=fig, x=x, rep=run)
                out.append(self._restore_one(os.path.join(str(readings), os.path.relpath(target, root)), target,
                                             settings, dry_run))
        return out

    @staticmethod
    def _restore_one(src: str, target: str, settings: dict, dry_run: bool) -> dict:
        """`nn_restore` of one run file: compare, then copy (see there)."""
        from ..common.io import dumps_strict
        from ..nn.run import piece_settings
        from ..nn.settings import COMMON
        from ..nn.settings import resolve as resolve_nn

        row = {"file": target, "action": "absent", "reason": "", "commit": ""}
        if not os.path.exists(src):
            return row
        got, row["commit"] = piece_settings(src)
        want = json.loads(dumps_strict(resolve_nn(settings).as_dict(), sort_keys=True))
        defaults = json.loads(dumps_strict(COMMON))
        keys = sorted(k for k in set(got) | set(want)                    # a setting added since, at its
                      if got.get(k, defaults.get(k)) != want.get(k))     # default, is the code path it ran
        if keys:
            row.update(action="differs", reason=", ".join(f"{k}: {got.get(k)!r} committed, {want.get(k)!r} here"
                                                          for k in keys))
        elif os.path.exists(target):
            row["action"] = "kept"
        else:
            row["action"] = "restored"
            if not dry_run:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copyfile(src, target)     # a fresh mtime: newer than the run's inputs
        return row

    def nn_data_files(self, wildcards) -> list[str]:
        """The dataset's files (fetched when absent); nothing for digits.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A CNN run path's wildcards: ``dataset`` read.
        """
        root = self.nn().get("data_dir", "data")
        if wildcards.dataset == "mnist":
            return mnist_files(os.path.join(root, "mnist"))
        if wildcards.dataset == "cifar10":
            return self.nn_cifar_files()
        return []

    def nn_cifar_files(self) -> list[str]:
        """The CIFAR-10 batch files under ``nn.data_dir`` (five training batches and the test batch)."""
        root = self.nn().get("data_dir", "data")
        return [os.path.join(root, "cifar10", "cifar-10-batches-py", b) for b in _CIFAR_BATCHES]

    def nn_mnist_fetch_files(self) -> list[str]:
        """MNIST's IDX files for rule fetch_nn_mnist; empty when rule fetch_mnist already makes them."""
        from ..common.datasets import MNIST_FILES

        folder = os.path.join(self.nn().get("data_dir", "data"), "mnist")
        if os.path.normpath(folder) == os.path.normpath(self.config.get("realdata", {}).get("path", "")):
            return []
        return [os.path.join(folder, f) for f in MNIST_FILES]

    def nn_summary_inputs(self, wildcards) -> list[str]:
        """The run files a CNN summary reads (`nn_run_files`).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A CNN summary path's wildcards: ``dataset``, ``fig``.
        """
        return self.nn_run_files(wildcards.dataset, wildcards.fig)

    def nn_figure_summaries(self, wildcards) -> list[str]:
        """The summary files a CNN figure reads, one per dataset of ``nn.datasets``.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        return [self.paths.nn_summary.format(dataset=ds, fig=wildcards.fig) for ds in self.nn()["datasets"]]

    def nn_figure_id(self, wildcards) -> str:
        """fedgdp.nn's identifier of the figure's layout: ``fig09`` (x = n) or ``fig10`` (x = m).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a CNN figure).
        """
        return NN_X[self.figure(wildcards.fig)["x"]]

    def nn_caption(self, wildcards) -> str:
        """One paragraph: what the CNN figure shows and the settings of its runs, per dataset.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig`` (a CNN figure).
        """
        from ..nn.settings import LABELS
        from ..nn.settings import resolve as resolve_nn

        s, fig = self.nn(), wildcards.fig
        f = self.figure(fig)
        parts = []
        for ds in s["datasets"]:
            p = resolve_nn(self.nn_settings(ds, fig, *[v[0] for v in self.nn_axes(ds, fig)], 0))  # type: ignore[call-arg]  # two axes (m, n) plus the run
            grid = (f"m = {f['m']}, n per client in {{{', '.join(map(str, f['n'][ds]))}}}" if f["x"] == "n"
                    else f"full training split over m in {{{', '.join(map(str, f['m'][ds]))}}} clients")
            parts.append(f"{ds}: {grid}; q = {p.q:g}, R = {p.rounds} rounds of K = "
                         f"{p.local_epochs} full-batch local steps, lr {p.lr:g}, server lr "
                         f"{p.server_lr:g}, B = {p.clip:g}, mu = {p.mu:g}, FedNewton-Iter "
                         f"{p.newton_cycles} cycles with ridge {p.ridge:g} and damping "
                         f"{p.damping:g}, FedHybrid local share {p.hybrid_local_share:g}")
        x = "samples per client" if f["x"] == "n" else "the number of clients (total fixed)"
        return (f"{f.get('title', figure_number(fig))}: final accuracy on the standard test set of "
                f"private federated CNNs against {x}; median over {f['runs']} runs (band: range over "
                f"runs), one line per method ({', '.join(LABELS[mth] for mth in s['methods'])}). Each "
                f"client keeps 10% for validation and 10% for a local test. Noise calibrated so every "
                f"client is mu-GDP when drawn in every round (no amplification by sampling). "
                f"{'; '.join(parts)}; base_seed {s['base_seed']}. Made by {self.provenance()}.")

    @staticmethod
    def nn_fetch_root(wildcards, output) -> str:
        """nn.data_dir (``"."`` if empty), from a fetch rule's outputs.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            Not read.
        output : snakemake.io.OutputFiles
            The fetch rule's outputs (the first is read).
        """
        path = os.path.dirname(output[0])
        if path.endswith("cifar-10-batches-py"):
            path = os.path.dirname(path)
        return os.path.dirname(path) or "."

    # ------------------------------------------------------------ the readings map
    def nn_readings_config(self) -> Readings | None:
        """The readings map of ``nn.readings`` (read once), or None when that file does not exist."""
        return self._readings_map

    @functools.cached_property
    def _readings_map(self) -> Readings | None:
        from ..nn.readings import load_readings

        path = self.nn().get("readings", "config/nn-readings.yaml")
        return load_readings(path) if os.path.exists(path) else None

    def nn_reading_files(self) -> list[str]:
        """Every piece of the readings map: one run file per (reading, point, run); empty without a map."""
        cfg = self.nn_readings_config()
        if cfg is None:
            return []
        from ..nn.readings import pieces

        return [self.paths.nn_reading.format(reading=name, fig=fig, x=x, rep=run)
                for name, fig, x, run, _ in pieces(cfg)]

    def nn_readings_files(self) -> list[str]:
        """The map's table and figure (`fedgdp nn-readings`): ``readings.{csv,md,pdf,png}``."""
        return [f"{self.paths.nn_readings}/readings.{ext}" for ext in ("csv", "md", "pdf", "png")]

    def nn_reading_spec(self, wildcards) -> str:
        """JSON settings of one piece of the readings map (`fedgdp nn-run --spec`; ValueError for wildcards that
        name no piece).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A piece's wildcards: ``reading``, ``fig``, ``x``, ``rep``.
        """
        from ..nn.readings import pieces

        w, cfg = wildcards, self.nn_readings_config()
        for name, fig, x, run, settings in pieces(cfg) if cfg is not None else []:
            if (name, fig, str(x), str(run)) == (w.reading, w.fig, str(w.x), str(w.rep)):
                return json.dumps(settings, sort_keys=True)
        raise ValueError(f"{w.reading}/{w.fig}-{w.x}-run{w.rep} is not a piece of the readings map")

    def nn_reading_data_dir(self) -> str:
        """The folder the readings map reads its images from (its ``data_dir``)."""
        cfg = self.nn_readings_config()
        return cfg.data_dir if cfg is not None else "data"

    def nn_reading_constraints(self) -> dict[str, str]:
        """Wildcard constraints of the pieces: ``reading``, ``fig``, ``x``, ``rep``."""
        cfg = self.nn_readings_config()
        if cfg is None:
            return dict.fromkeys(("reading", "fig", "x", "rep"), alternatives([]))
        return {"reading": alternatives(cfg.readings), "fig": alternatives(pt.figure for pt in cfg.points),
                "x": alternatives(pt.x for pt in cfg.points), "rep": alternatives(range(cfg.runs))}

    def nn_constraints(self) -> dict[str, str]:
        """Wildcard constraints of the CNN paths: ``dataset``, ``fig``, ``m``, ``n``, ``rep``."""
        datasets, figs = self.nn().get("datasets", []), self.figures("nn")
        values: dict[str, set] = {"m": set(), "n": set()}
        for ds in datasets:
            for fig in figs:
                ms, ns = self.nn_axes(ds, fig)
                values["m"].update(ms)
                values["n"].update(ns)
        runs = max([self.figure(f)["runs"] for f in figs] or [0])
        return {"dataset": alternatives(datasets), "fig": alternatives(figs),
                "m": alternatives(values["m"]), "n": alternatives(values["n"]),
                "rep": alternatives(range(runs))}
