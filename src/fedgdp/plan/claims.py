"""The claims report (rule assess_claims): the summaries, real-data fits and CNN
summaries it reads, its spec and caption."""
from __future__ import annotations

import json

from .nn import NNPart
from .targets import TargetsPart


class ClaimsPart(TargetsPart, NNPart):
    """Plan methods of the claims report."""

    def claims_studies(self) -> dict[str, list[str]]:
        """Claim -> the studies of this config it reads (missing studies left out)."""
        from ..reports.claims import DEFAULT_STUDIES

        return {claim: [s for s in studies if s in self.config["studies"]]
                for claim, studies in DEFAULT_STUDIES.items()}

    def claims_summaries(self, wildcards=None) -> list[str]:
        """Summaries of the studies behind C1-C4: one per study of `claims_studies` and model it runs.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        studies = dict.fromkeys(s for ss in self.claims_studies().values() for s in ss)
        return [self.summary_file(model, s) for s in studies for model in self.config["studies"][s]["models"]]

    def claims_realdata_files(self, wildcards=None) -> list[str]:
        """Real-data files behind C5: every task x split file, or none when no real-data figure is drawn.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        rd = self.config.get("realdata")
        if not rd or not any(self.figure(f)["kind"] == "realdata" for f in self.default_figures()):
            return []
        return [self.realdata_split_file(t, s) for t in rd["tasks"] for s in range(rd["splits"])]

    def claims_nn_summaries(self, wildcards=None) -> list[str]:
        """CNN summaries behind C6 (dataset x figure), or none when the CNN figures are not in the default target.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        if not self.nn_in_default():
            return []
        figs = [f for f in self.figures() if self.figure(f)["kind"] == "nn"]
        return [self.paths.nn_summary.format(dataset=ds, fig=f) for ds in self.nn()["datasets"] for f in figs]

    def claims_spec(self, wildcards=None) -> str:
        """What ``fedgdp claims`` needs: the models, the studies per claim and the title (JSON).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        models = list(dict.fromkeys(m for s in self.studies() for m in s.models))
        return json.dumps({"models": models, "studies": self.claims_studies(),
                           "title": f"Which of the paper's claims the results support [{self.run}, {self.sha}]"},
                          sort_keys=True)

    def claims_caption(self, wildcards=None) -> str:
        """Report caption of the claims report: what each claim tests and which run made it.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        rd = self.config.get("realdata", {})
        return ("Which of the paper's conclusions the results support (fedgdp claims, module "
                "fedgdp.reports.claims): one row per claim and model with the paper's statement, the test "
                "used, a verdict (holds / partly / fails / not run) and the numbers behind it. C1: MSE "
                "falls with m and with n_i (Figs 1-2, 11-14); C2: the ordering of the methods (Figs 3, "
                "6); C3: the trade-off in K (Figs 4, 15); C4: fixed N (Figs 5, 16); C5: real data (Figs "
                f"7-8, {rd.get('dataset', 'not run')}); C6: CNNs (Figs 9-10, only when they are in the "
                "default target). Differences count only beyond the thresholds listed in the Markdown "
                f"file (Monte Carlo standard errors, {self.config['replicates']} replicates per cell; "
                f"OLS slopes with 95% CIs; a paired bootstrap for medians). Made by {self.provenance()}.")
