"""Table 1 and the rates table: the summaries they read, their specs and captions."""
from __future__ import annotations

import json

from .simulation import SimulationPart


class TablesPart(SimulationPart):
    """Plan methods of tables/<run>/table1.* and rates.*."""

    def table1_summaries(self, wildcards=None) -> list[str]:
        """The summary file Table 1 reads (one path): that of its model and study.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        t = self.config["tables"]["table1"]
        return [self.summary_file(t["model"], t["study"])]

    def table1_spec(self, wildcards=None) -> str:
        """What Table 1's rule needs, as JSON: ``tables.table1`` with its cell completed (mu and K default to
        ``defaults``'), its methods (default: the study's) and a note.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        c = self.config
        t = c["tables"]["table1"]
        cell = dict(t["cell"])
        cell.setdefault("mu", c["defaults"]["mu"])
        cell.setdefault("K", c["defaults"]["K"])
        note = (f"Measured at the reference cell: {t['model']} regression, study {t['study']}, "
                f"sizes {cell['sizes']}, m = {cell['m']}, nominal mu = {cell['mu']} (per fit and client; "
                f"docs/methods.md §2), K = {cell['K']}; "
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
        """The summary files the rates table reads: each fit's study for each of its models run there.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return [self.summary_file(model, study) for model, study in self._rates_pairs()]

    def rates_spec(self, wildcards=None) -> str:
        """What the rates table's rule needs, as JSON: ``tables.rates`` with ``fits`` (`rates_fits`),
        ``studies``, ``d``, ``method_settings`` and ``note``.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        c = self.config
        spec = dict(c["tables"]["rates"], fits=self.rates_fits(),
                    studies={s: dict(c["studies"][s], method_settings=self.study_settings(s)["method_settings"])
                                                   for _, s in self._rates_pairs()},
                    d={model: len(beta) for model, beta in c["beta_true"].items()},
                    method_settings=c["defaults"]["method_settings"],
                    note="Slopes of log(MSE) on log(x) over the cells of a group (statsmodels OLS, "
                         "95% confidence interval); predicted: least-squares slope of the method's "
                         "bound (fedgdp.core.theory, constants set to one) over the same cells. "
                         f"Made by {self.provenance()}.")
        return json.dumps(spec, sort_keys=True)

    def table1_caption(self, wildcards=None) -> str:
        """Report caption of Table 1 (`table_caption`).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return self.table_caption("table1")

    def rates_caption(self, wildcards=None) -> str:
        """Report caption of the rates table (`table_caption`).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return self.table_caption("rates")

    def table_caption(self, name: str) -> str:
        """Report caption of table1 or rates: what it holds and which run made it.

        Parameters
        ----------
        name : {"table1", "rates"}
            The table (any other name: the rates caption).
        """
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
                         + (f", one fit per {f['by']}" if f.get("by") else "") + ")" for f in self.rates_fits())
        return (f"Fitted log-log slopes of the empirical MSE (statsmodels OLS of log MSE on log x "
                f"over the cells of each group, 95% confidence interval) beside the exponent the "
                f"method's bound predicts over the same cells, in the K-explicit form of Remark 3.4 "
                f"with the iteration counts the study ran (column 'Bound used'), not Table 1's "
                f"K = Theta(log N). Fits: {fits}. Models: "
                f"{', '.join(r['models'])}; {c['replicates']} replicates per cell. Made by "
                f"{self.provenance()}.")
