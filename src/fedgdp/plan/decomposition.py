"""The error decomposition (target ``decompose``): its files, the cells it reads, its
spec and caption (its config check is in `fedgdp.plan.checks`)."""
from __future__ import annotations

import json
from types import SimpleNamespace

from .simulation import SimulationPart


class DecompositionPart(SimulationPart):
    """Plan methods of the error decomposition."""

    def decomposition_files(self) -> list[str]:
        """The decomposition's table and figure (target ``decompose``)."""
        t, f = self.paths.tables, self.paths.figure.format(fig="decomposition")
        return [f"{t}/decomposition.csv", f"{t}/decomposition.md", f"{f}.pdf", f"{f}.png"]

    def decomposition_studies(self) -> dict[str, str]:
        """Release -> the study that runs it (config ``decomposition.studies``)."""
        return dict(self.config["decomposition"]["studies"])

    def decomposition_cell_files(self, wildcards=None) -> list[str]:
        """Every cell file of the three decomposition studies, for each of their models.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return [f for study in self.decomposition_studies().values()
                for model in self.config["studies"][study]["models"]
                for f in self.study_cell_files(SimpleNamespace(model=model, study=study))]

    def decomposition_spec(self, wildcards=None) -> str:
        """What ``fedgdp decompose`` needs (JSON): studies, K_conv, method order, title, caption.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        d = self.config["decomposition"]
        private = self.config["studies"][d["studies"]["private"]]
        return json.dumps({"studies": d["studies"], "K_conv": d["K_conv"], "methods": private["methods"],
                           "name": "decomposition", "title": f"{d['title']} [{self.run}, {self.sha}]",
                           "caption": self.decomposition_caption()}, sort_keys=True)

    def decomposition_caption(self, wildcards=None) -> str:
        """The definition of the decomposition and the settings that made it.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        d, c = self.config["decomposition"], self.config
        st = d["studies"]
        axes, settings = self.study_axes(st["private"]), self.study_settings(st["private"])
        return (f"Error decomposition of each method's MSE (docs/methods.md section 9). Three studies "
                f"run the same cells on the same replicate data: {st['private']} (release private: the "
                f"algorithms, clipped and noisy), {st['clip_only']} (clip_only: the same clipping bound "
                f"B, no noise) and {st['plain']} (plain: no clipping, no noise). With e_r(K) a "
                f"replicate's squared error under release r at budget K and K_conv = {d['K_conv']} (the "
                f"plain fit converged): statistical = e_plain(K_conv); optimisation = e_plain(K) - "
                f"e_plain(K_conv); clipping = e_clip_only(K) - e_plain(K); privacy noise = "
                f"e_private(K) - e_clip_only(K). The four add up to e_private(K); shown are their "
                f"means over the replicates (bars stacked with their signs: a negative term lies "
                f"below zero) and the private MSE (diamond, +-2 Monte Carlo SE); each term's SE is "
                f"that of its paired per-replicate differences. Replicates with a non-finite error "
                f"under any release are dropped (column Dropped). Cells: models "
                f"{', '.join(c['studies'][st['private']]['models'])}, sizes {', '.join(axes['sizes'])}, "
                f"m in {{{', '.join(map(str, axes['m']))}}}, K in {{{', '.join(map(str, axes['K']))}}}, "
                f"nominal mu = {', '.join(axes['mu'])}, {self.replicates(st['private'])} replicates, "
                f"clipping {self._clip_text(settings['clip'], 'beta = 0')}, schedule "
                f"{c['studies'][st['private']]['schedule']}, base_seed {settings['base_seed']}. "
                f"Made by {self.provenance()}.")

    def decomposition_labels(self, what: str, fmt: str) -> dict:
        """Report labels of one file of the decomposition: ``{"output": what, "format": fmt, "run": run}``.

        Parameters
        ----------
        what : {"table", "figure"}
            Which output.
        fmt : str
            The file's format as shown in the report (``CSV``, ``Markdown``, ``PDF``, ``PNG``).
        """
        return {"output": what, "format": fmt, "run": self.run}
