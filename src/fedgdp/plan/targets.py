"""What a run makes: the files of every figure and table, the named targets
(:meth:`TargetsPart.targets`), the figure-name constraints and the report labels."""
from __future__ import annotations

from .base import alternatives, figure_number
from .decomposition import DecompositionPart
from .gallery import GALLERY_DIR
from .sensitivity import SensitivityPart


class TargetsPart(SensitivityPart, DecompositionPart):
    """Plan methods of the targets and the labels of their files in the report."""

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

    def figure_constraint(self, kind: str) -> str:
        return alternatives(self.figures(kind))

    # ------------------------------------------------------------- report labels
    def category(self, wildcards) -> str:
        return figure_number(wildcards.fig)

    def labels_pdf(self, wildcards) -> dict:
        return {"figure": figure_number(wildcards.fig), "format": "PDF", "run": self.run}

    def labels_png(self, wildcards) -> dict:
        return {"figure": figure_number(wildcards.fig), "format": "PNG", "run": self.run}

    def table_labels(self, name: str, fmt: str) -> dict:
        return {"table": {"table1": "Table 1", "rates": "Rates", "claims": "Claims"}[name], "format": fmt, "run": self.run}
