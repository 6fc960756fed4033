"""What a run makes: the files of every figure and table, the named targets
(`TargetsPart.targets`), the figure-name constraints and the report labels."""
from __future__ import annotations

import re
from pathlib import Path

from ..core.settings import suggest
from .base import alternatives, figure_number
from .coverage import CoveragePart
from .decomposition import DecompositionPart
from .gallery import GALLERY_DIR, GALLERY_RUN
from .nn import NNPart
from .sensitivity import SensitivityPart


class RequestError(ValueError):
    """A Snakemake invocation that cannot be served (a target, a missing extra): one line."""


class TargetsPart(SensitivityPart, DecompositionPart, NNPart, CoveragePart):
    """Plan methods of the targets and the labels of their files in the report."""

    # ----------------------------------------------------------------- targets
    def figure_files(self, fig: str) -> list[str]:
        """The files of one figure: PDF and PNG, and its data table for real data and CNNs.

        Parameters
        ----------
        fig : str
            A figure name.
        """
        base = self.paths.figure.format(fig=fig)
        out = [f"{base}.pdf", f"{base}.png"]
        kind = self.figure(fig)["kind"]
        if kind == "realdata":
            out.append(f"{self.paths.tables}/{fig}_medians.csv")
        elif kind == "nn":
            out.append(f"{self.paths.tables}/{fig}_summary.csv")
        return out

    def table_files(self, name: str) -> list[str]:
        """tables/<run>/<name>.<ext> of one table: table1: csv, md, tex; rates and claims: csv, md.

        Parameters
        ----------
        name : {"table1", "rates", "claims"}
            The table.
        """
        ext = {"table1": ("csv", "md", "tex"), "rates": ("csv", "md"), "claims": ("csv", "md")}[name]
        return [f"{self.paths.tables}/{name}.{e}" for e in ext]

    def tables(self) -> list[str]:
        """The tables of the run: those the config asks for and the claims report."""
        return [t for t in ("table1", "rates") if t in self.config.get("tables", {})] + ["claims"]

    def nn_in_default(self) -> bool:
        """Whether the default target ``all`` includes the CNN figures (``nn.in_default_target``)."""
        return bool(self.config.get("nn", {}).get("in_default_target", False))

    def default_figures(self) -> list[str]:
        """Figures of the default target: simulation and real data; CNNs when asked."""
        return [f for f in self.figures() if self.figure(f)["kind"] != "nn" or self.nn_in_default()]

    def gallery_figures(self) -> list[str]:
        """Figures shown in the gallery (docs/gallery.md): those of the default target without PyTorch."""
        return [f for f in self.figures() if self.figure(f)["kind"] != "nn"]

    def gallery_file(self, fig: str) -> str:
        """The gallery's PNG of a figure (docs/gallery.md): ``docs/gallery/<fig>.png``.

        Parameters
        ----------
        fig : str
            A figure name.
        """
        return f"{GALLERY_DIR}/{fig}.png"

    def audit_files(self) -> list[str]:
        """The files of target ``audit`` (not in ``all``): the privacy audit and empirical mu of the run's settings."""
        t, f = self.paths.tables, self.paths.figure.format(fig="audit")
        return [f"{t}/audit.csv", f"{t}/audit.md", f"{f}.csv", f"{f}.pdf", f"{f}.png"]

    def targets(self) -> dict[str, list[str]]:
        """Named targets -> files: each figure and table, ``gallery``, ``decompose``, ``coverage``, ``audit``, ``all``.

        ``decompose``, ``coverage`` (when configured) and ``audit`` are not in ``all``.
        """
        out = {fig: self.figure_files(fig) for fig in self.figures()}
        out.update({t: self.table_files(t) for t in self.tables()})
        out["gallery"] = [self.gallery_file(f) for f in self.gallery_figures()]
        if self.config.get("sensitivity"):
            out["sensitivity"] = self.sensitivity_files()   # on request only, never in all
        if self.config.get("decomposition"):
            out["decompose"] = self.decomposition_files()      # not in `all`: extra work
        if self.config.get("coverage"):
            out["coverage"] = self.coverage_files()            # not in `all`: thousands of fits
        out["audit"] = self.audit_files()                      # not in `all`: a search, minutes
        if self.nn_readings_config() is not None:
            out["nn_readings"] = self.nn_readings_files()      # not in `all`: hours of CNN runs
        out["all"] = ([self.paths.config]
                      + [p for f in self.default_figures() for p in self.figure_files(f)]
                      + [p for t in self.tables() for p in self.table_files(t)])
        return out

    # ------------------------------------------------------- the invocation's request
    def gallery_allowed(self) -> bool:
        """Only run `GALLERY_RUN` may write docs/gallery/ (docs/gallery.md says the gallery shows it)."""
        return self.run == GALLERY_RUN

    def check_request(self, targets, *, rule_names=(), dry_run: bool = False, torch: bool = True,
                      use_conda: bool = False) -> None:
        """Check the targets of one Snakemake invocation before any job: RequestError, one line, for an unknown
        target, the gallery of another run than `GALLERY_RUN`, or CNN targets without PyTorch.

        Parameters
        ----------
        targets : iterable of str
            The targets given (empty: the default target ``all``).
        rule_names : iterable of str, default=()
            Names of the workflow's rules (a target without ``/`` or ``.`` must be one).
        dry_run : bool, default=False
            A dry run plans without PyTorch.
        torch : bool, default=True
            Whether PyTorch can be imported here.
        use_conda : bool, default=False
            Jobs run in their conda environments (``--sdm conda``: PyTorch comes with nn.yaml).
        """
        named = self.targets()
        known = list(dict.fromkeys([*named, *rule_names]))
        for t in targets:
            if "/" not in t and "." not in t and t not in known:
                hit = re.fullmatch(r"([A-Za-z_]+)(\d+)", t)            # fig3 -> fig03
                padded = f"{hit.group(1)}{int(hit.group(2)):02d}" if hit else ""
                hint = f" (did you mean {padded!r}?)" if padded in known else suggest(t, known)
                raise RequestError(f"unknown target {t!r}{hint}; named targets: "
                                   f"{', '.join(n for n in named)} (or a file path)")
        if not self.gallery_allowed() and any(t == "gallery" or t.startswith(GALLERY_DIR + "/") for t in targets):
            raise RequestError(f"target gallery: {GALLERY_DIR}/ shows run {GALLERY_RUN} (docs/gallery.md), not run "
                               f"{self.run}; build it with config.yaml alone (`snakemake --cores 2 gallery`); "
                               f"this run's figures are in figures/{self.run}/")
        if not (dry_run or use_conda or torch):
            nn = self.nn_requested(targets)
            if nn:
                raise RequestError(f"target(s) {', '.join(nn)} train CNNs (figures {', '.join(self.figures('nn'))}) "
                                   "and need PyTorch, which is not installed: pip install 'fedgdp[nn]' (or run "
                                   "with --sdm conda); a dry run (-n) plans without it")

    def nn_requested(self, targets) -> list[str]:
        """The targets, in order, whose files include a CNN figure or run file (training jobs).

        Parameters
        ----------
        targets : iterable of str
            The targets given: named targets or file paths (empty: ``all``).
        """
        named = self.targets()
        nn_files = {p for f in self.figures("nn") for p in self.figure_files(f)}
        nn_files |= set(named.get("nn_readings", []))
        prefixes = (self.paths.nn_run.split("{")[0], self.paths.nn_reading.split("{")[0])
        out = []
        for t in (list(targets) or ["all"]):
            files = named.get(t, [t])
            if any(f in nn_files or f.startswith(prefixes) for f in files):
                out.append(t)
        return out

    def run_warning(self, root=".") -> str | None:
        """A line when this run's folder holds results of another config hash (e.g. ``--config run=paper``), else None.

        Parameters
        ----------
        root : str or path-like, default="."
            The folder the run's paths are relative to (the workflow's directory).
        """
        path = Path(root) / self.paths.config
        try:
            text = path.read_text()
        except OSError:
            return None
        hit = re.search(r"config sha256 prefix ([0-9a-f]{8})", text)
        if hit is None or hit.group(1) == self.sha:
            return None
        return (f"fedgdp: warning: run {self.run} already holds results of config {hit.group(1)} "
                f"({self.paths.config}); this config is {self.sha}: its changed jobs will be rebuilt "
                f"into the same run. Name a new run (--config run=NAME) to keep both.")

    def figure_constraint(self, kind: str) -> str:
        """Wildcard constraint of ``fig`` matching the figures of one kind.

        Parameters
        ----------
        kind : {"simulation", "realdata", "nn"}
            The figure kind.
        """
        return alternatives(self.figures(kind))

    # ------------------------------------------------------------- report labels
    def category(self, wildcards) -> str:
        """Report category of a figure's files (``Figure N``).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        return figure_number(wildcards.fig)

    def labels_pdf(self, wildcards) -> dict:
        """Report labels of a figure's PDF: ``{"figure": "Figure N", "format": "PDF", "run": run}``.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        return {"figure": figure_number(wildcards.fig), "format": "PDF", "run": self.run}

    def labels_png(self, wildcards) -> dict:
        """Report labels of a figure's PNG: ``{"figure": "Figure N", "format": "PNG", "run": run}``.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A figure path's wildcards: ``fig``.
        """
        return {"figure": figure_number(wildcards.fig), "format": "PNG", "run": self.run}

    def table_labels(self, name: str, fmt: str) -> dict:
        """Report labels of one file of a table:
        ``{"table": "Table 1" | "Rates" | "Claims", "format": fmt, "run": run}``.

        Parameters
        ----------
        name : {"table1", "rates", "claims"}
            The table.
        fmt : str
            The file's format as shown in the report (``CSV``, ``Markdown``, ``LaTeX``).
        """
        return {"table": {"table1": "Table 1", "rates": "Rates", "claims": "Claims"}[name],
                "format": fmt, "run": self.run}
