"""What every part of the plan shares: figure kinds and path forms, wildcard
alternatives, MNIST's file names, and `PlanBase` (the config, run name, hash and
output tree of a run; its figures; provenance text)."""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from types import SimpleNamespace

from .config import config_sha

FIGURE_KINDS = ("simulation", "realdata", "nn")


def fmt_mu(mu) -> str:
    """Path form of mu, ``f"{mu:g}"``: 2 -> '2', 0.5 -> '0.5', inf -> 'inf'.

    Parameters
    ----------
    mu : float, int or str
        A privacy budget (anything ``float`` reads, ``inf`` included).
    """
    mu = float(mu)
    return "inf" if math.isinf(mu) else f"{mu:g}"


def alternatives(values) -> str:
    """A wildcard constraint matching exactly ``values``: the escaped values joined by ``|``, longest first;
    ``(?!)`` (never anything) when empty.

    Parameters
    ----------
    values : iterable
        The allowed values (compared as ``str``; duplicates are dropped).
    """
    values = sorted({str(v) for v in values}, key=lambda v: (-len(v), v))
    return "|".join(re.escape(v) for v in values) if values else "(?!)"


def figure_number(fig: str) -> str:
    """Report category of a figure: fig03 -> 'Figure 3' (``fig`` itself when it ends in no digits).

    Parameters
    ----------
    fig : str
        A figure name ending in digits (``fig03``).
    """
    hit = re.search(r"(\d+)$", fig)
    return f"Figure {int(hit.group(1))}" if hit else fig


def mnist_files(folder: str) -> list[str]:
    """MNIST's files in ``folder``: mnist.npz or the unpacked IDX files when present, else the four IDX .gz files.

    Parameters
    ----------
    folder : str
        The folder MNIST is kept in.
    """
    from ..common.datasets import MNIST_FILES

    if os.path.isfile(os.path.join(folder, "mnist.npz")):
        return [os.path.join(folder, "mnist.npz")]
    plain = [os.path.join(folder, f.removesuffix(".gz")) for f in MNIST_FILES]
    if all(os.path.isfile(f) for f in plain):
        return plain
    return [os.path.join(folder, f) for f in MNIST_FILES]


@dataclass(frozen=True)
class Study:
    """One simulation study of a config, ``config["studies"][name]``, read once (the schema's defaults
    filled in by `fedgdp.plan.load`; ``settings`` and ``replicates`` optional).

    Attributes
    ----------
    name : str
        The study's key.
    models, methods : list of str
        The models it runs for, the methods of every cell.
    schedule : str
        ``paper`` or ``budget``.
    grid : dict
        Its axes (``m``, ``sizes``; ``mu`` and ``K`` optional).
    settings : dict
        Cell parameters over the defaults (`fedgdp.plan.config.merge_settings`).
    replicates : int or None
        Its own replicate count (None: the run's).
    """

    name: str
    models: list
    methods: list
    schedule: str
    grid: dict
    settings: dict = field(default_factory=dict)
    replicates: int | None = None

    @classmethod
    def of(cls, name: str, entry: dict) -> Study:
        """The study ``name`` from its config entry (a mapping; KeyError for a missing required key).

        Parameters
        ----------
        name : str
        entry : dict
            ``config["studies"][name]``.
        """
        return cls(name, entry["models"], entry["methods"], entry["schedule"], entry["grid"],
                   entry.get("settings", {}), entry.get("replicates"))


class PlanBase:
    """The run a plan is for: ``config``, ``run`` (its name), ``sha`` (the config hash)
    and ``paths`` (its output tree); the parts of `fedgdp.plan.Plan` build on it."""

    def __init__(self, config: dict, run: str | None = None):
        self.config = config
        self.run = run or config["run"]
        self.sha = config_sha(config)
        r = self.run
        self.paths = SimpleNamespace(
            config=f"results/{r}/config.resolved.yaml",
            cell=f"results/{r}/cells/{{model}}/{{study}}/cells~{{cells}}/seeds~{{first}}-{{last}}.parquet",
            summary=f"results/{r}/summary/{{model}}_{{study}}.parquet",
            realdata=f"results/{r}/realdata/{{dataset}}/{{task}}/split~{{split}}.parquet",
            nn_run=f"results/{r}/nn/{{dataset}}/{{fig}}/m~{{m}}/n~{{n}}/rep~{{rep}}.parquet",
            nn_summary=f"results/{r}/nn/summary/{{dataset}}_{{fig}}.parquet",
            nn_reading=f"results/{r}/nn_readings/{{reading}}/{{fig}}-{{x}}-run{{rep}}.parquet",
            nn_readings=f"tables/{r}/nn_readings",
            figure=f"figures/{r}/{{fig}}",
            tables=f"tables/{r}",
            logs=f"logs/{r}",
            benchmarks=f"benchmarks/{r}",
        )

    def study(self, name: str) -> Study:
        """The typed view of a simulation study (KeyError for an unknown one).

        Parameters
        ----------
        name : str
            A key of ``config["studies"]``.
        """
        return Study.of(name, self.config["studies"][name])

    def studies(self) -> list[Study]:
        """Every simulation study of the config, in config order."""
        return [self.study(name) for name in self.config.get("studies", {})]

    # ------------------------------------------------------------ figures by kind
    def figures(self, kind: str | None = None) -> list[str]:
        """Figure names of the config, in config order (of one kind).

        Parameters
        ----------
        kind : {"simulation", "realdata", "nn"} or None, default=None
            Only figures of this kind; None: every figure.
        """
        return [f for f, s in self.config.get("figures", {}).items() if kind in (None, s["kind"])]

    def figure(self, fig: str) -> dict:
        """The config entry of a figure, ``config["figures"][fig]`` (KeyError for an unknown figure).

        Parameters
        ----------
        fig : str
            A figure name (a key of ``config["figures"]``).
        """
        return self.config["figures"][fig]

    # ------------------------------------------------------------ provenance
    def provenance(self) -> str:
        """Which run and config made an output, for titles, notes and captions."""
        return f"run {self.run}, config {self.sha} ({self.paths.config})"

    def resolved_config_text(self, wildcards=None) -> str:
        """The resolved config as YAML under a header naming the run and hash (a params function of save_config).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        import yaml

        body = yaml.safe_dump(dict(self.config, run=self.run), sort_keys=False, width=100)
        return (f"# The resolved config of run {self.run} (config.yaml, then every --configfile and\n"
                f"# --config, then the schema's defaults); config sha256 prefix {self.sha}.\n{body}")

    # ----------------------------------------------------------- captions
    def _clip_text(self, clip, at: str) -> str:
        """The caption's words for a clipping rule (a rule object or its dict form) computed at ``at``."""
        from ..core.privacy import PrivateQuantile, Quantile, clip_rule

        rule = clip_rule(clip)
        if isinstance(rule, Quantile):
            return f"B = max over clients of the {rule.q:g}-quantile of gradient norms at {at}"
        if isinstance(rule, PrivateQuantile):
            return (f"B = max over clients of the {rule.q:g}-quantile of noisy gradient-norm "
                    f"histograms at {at} (a private release, in the ledger)")
        return f"B = {rule.value:g}"
