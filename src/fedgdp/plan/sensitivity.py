"""The sensitivity study (target ``sensitivity``, the claims map): the expansion of the
config's ``sensitivity`` section into ordinary studies (`add_sensitivity_studies`,
done by `fedgdp.plan.load`), its schema, its errors renamed to the keys they come
from, and the plan methods of its real-data fits, files, spec and caption."""
from __future__ import annotations

import copy
import json
import os

from ..core.settings import suggest
from .base import alternatives, mnist_files
from .config import GRID_AXES, ConfigError, _without_defaults, merge_settings, numbers
from .realdata import RealdataPart
from .simulation import SimulationPart

#: Simulation claims a sensitivity design may test (C5 is the real-data part).
SENSITIVITY_CLAIMS = ("C1", "C2", "C3", "C4")
#: Real-data keys a sensitivity variant may not set (the dataset is chosen per entry).
_SENS_REALDATA_FIXED = ("dataset", "path", "tasks")


def _fill_sensitivity_schema(schema: dict) -> None:
    """Close the sensitivity section's open objects (in place): variant settings take the
    keys of ``defaults`` (mu and K included), a design's grid those of a study's grid,
    real-data overrides those of ``realdata`` less dataset, path and tasks."""
    props, defs = schema["properties"], schema["$defs"]
    settings = props["sensitivity"]["properties"]["variants"]["additionalProperties"]["properties"]["settings"]
    settings.update(_without_defaults(props["defaults"]), description=settings["description"])
    grid = props["studies"]["additionalProperties"]["properties"]["grid"]
    defs["sensitivity_design"]["properties"]["grid"].update(copy.deepcopy(grid))
    real = _without_defaults(props["realdata"])
    for key in _SENS_REALDATA_FIXED:
        real["properties"].pop(key, None)
    defs["sensitivity_realdata"].update(real, description=defs["sensitivity_realdata"]["description"])


def sensitivity_study_name(variant: str, claim: str) -> str:
    """Name of the generated study of one variant and claim: ``sens_<variant>_<claim>``.

    Parameters
    ----------
    variant : str
        A variant name (``base`` included).
    claim : str
        A claim of `SENSITIVITY_CLAIMS`.
    """
    return f"sens_{variant}_{claim}"


def sensitivity_variants(config: dict) -> dict[str, dict]:
    """The simulation variants in config order, ``base`` (no change) first (ConfigError when a given variant is
    named ``base``).

    Parameters
    ----------
    config : dict
        The config (with a ``sensitivity`` section).
    """
    given = config["sensitivity"]["variants"]
    if "base" in given:
        raise ConfigError("sensitivity.variants.base", "the name base is reserved for the "
                          "unchanged design (added by itself)")
    return {"base": {"settings": {}}, **given}


def sensitivity_index(config: dict) -> list[dict]:
    """One entry per generated study, in variant then claim order: ``variant``, ``claim``, ``study`` (generated
    name), ``base`` (the design's study) and ``models`` (a variant and claim with no model left give none).

    Parameters
    ----------
    config : dict
        The config (no or an empty ``sensitivity`` section: no entries).

    Raises
    ------
    ConfigError
        Naming the sensitivity key at fault: a design's study that does not exist, a
        variant that asks for a design that is not given, a variant that sets mu or K
        for C3 (whose test needs its own mu and K grid).
    """
    sens = config.get("sensitivity")
    if not sens:
        return []
    designs = sens["designs"]
    for claim, d in designs.items():
        if d["study"] not in config["studies"]:
            raise ConfigError(f"sensitivity.designs.{claim}.study", f"no study {d['study']!r}"
                              f"{suggest(d['study'], config['studies'])}; known: {', '.join(config['studies'])}")
    out = []
    for name, v in sensitivity_variants(config).items():
        for claim in v.get("claims") or list(designs):
            if claim not in designs:
                raise ConfigError(f"sensitivity.variants.{name}.claims", f"no design for {claim} in "
                                  f"sensitivity.designs (given: {', '.join(designs)})")
            if claim == "C3" and any(a in v["settings"] for a in GRID_AXES):
                raise ConfigError(f"sensitivity.variants.{name}.settings", "C3 tests the curve over "
                                  "its own mu and K grid: a variant that sets mu or K cannot run it "
                                  "(give the variant claims without C3)")
            d = designs[claim]
            base_models = d.get("models") or config["studies"][d["study"]]["models"]
            models = [mdl for mdl in base_models if mdl in (v.get("models") or base_models)]
            if models:
                out.append({"variant": name, "claim": claim, "study": sensitivity_study_name(name, claim),
                            "base": d["study"], "models": models})
    return out


def sensitivity_studies(config: dict) -> dict[str, dict]:
    """The studies the sensitivity section stands for, generated name -> ``studies.<name>`` entry: its design's
    study (methods, schedule, settings), the design's reduced grid and the section's replicates; the variant's
    mu or K replaces that grid axis and its other settings lie over the study's (`merge_settings`).

    Parameters
    ----------
    config : dict
        The config (not changed).
    """
    out = {}
    for e in sensitivity_index(config):
        d, base = config["sensitivity"]["designs"][e["claim"]], config["studies"][e["base"]]
        settings = copy.deepcopy(sensitivity_variants(config)[e["variant"]]["settings"])
        grid = copy.deepcopy(d["grid"])
        for axis in GRID_AXES:
            if axis in settings:
                grid[axis] = [settings.pop(axis)]
        study = {"models": e["models"], "methods": list(base["methods"]), "schedule": base["schedule"],
                 "replicates": config["sensitivity"]["replicates"], "grid": grid}
        merged = merge_settings(base.get("settings", {}), settings)
        if merged:
            study["settings"] = merged
        out[e["study"]] = study
    return out


def add_sensitivity_studies(config: dict) -> None:
    """Add the sensitivity section's studies to ``config["studies"]`` (in place); a name already taken by a
    different study is a ConfigError (the same study again, as in a resolved config read back, is not).

    Parameters
    ----------
    config : dict
        The config, changed in place.
    """
    for name, study in sensitivity_studies(config).items():
        have = config["studies"].get(name)
        if have is not None and numbers(have) != numbers(study):
            raise ConfigError(f"studies.{name}", "this name belongs to the sensitivity study "
                              "(sens_<variant>_<claim>): rename the study")
        config["studies"][name] = study


def sensitivity_error(exc: ConfigError, config: dict) -> ConfigError:
    """A check error about a generated study, renamed to the sensitivity key it comes
    from (a variant's settings or a design's grid); other errors unchanged.

    Parameters
    ----------
    exc : ConfigError
        An error of the plan's checks.
    config : dict
        The config (with its sensitivity studies added).
    """
    for e in sensitivity_index(config):
        head = f"studies.{e['study']}"
        if exc.key == head or exc.key.startswith(head + "."):
            rest = exc.key[len(head):]
            if rest.startswith(".settings"):
                key = f"sensitivity.variants.{e['variant']}{rest}"
            elif rest.startswith(".grid"):
                key = f"sensitivity.designs.{e['claim']}{rest}"
            else:
                key = f"sensitivity.variants.{e['variant']} (design {e['claim']})"
            message = str(exc).split(": ", 1)[1]
            return ConfigError(key, message)
    return exc


class SensitivityPart(SimulationPart, RealdataPart):
    """Plan methods of the sensitivity study."""

    # The section's studies are ordinary studies (added by load); these methods name its
    # real-data fits, its files and the claims map's spec and caption.
    def sensitivity(self) -> dict:
        """The config's ``sensitivity`` section (``{}`` when absent or empty)."""
        return self.config.get("sensitivity") or {}

    def sensitivity_files(self) -> list[str]:
        """The claims map: tables/<run>/claims_map.{csv,md}, figures/<run>/claims_map.{pdf,png}."""
        base = self.paths.figure.format(fig="claims_map")
        return [f"{self.paths.tables}/claims_map.csv", f"{self.paths.tables}/claims_map.md",
                f"{base}.pdf", f"{base}.png"]

    def sensitivity_summaries(self, wildcards=None) -> list[str]:
        """The summary files of every generated sensitivity study and its models (input of claims_map).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return [self.summary_file(model, e["study"]) for e in sensitivity_index(self.config)
                for model in e["models"]]

    def sensitivity_realdata_variants(self) -> dict[str, dict]:
        """Real-data variants, ``base`` (no change) first; none without a realdata section."""
        rd = self.sensitivity().get("realdata") or {}
        if not rd.get("variants") or not self.config.get("realdata"):
            return {}
        if "base" in rd["variants"]:
            raise ConfigError("sensitivity.realdata.variants.base", "the name base is reserved for "
                              "the unchanged fits (added by itself)")
        return {"base": {}, **rd["variants"]}

    def sensitivity_datasets(self) -> tuple[dict[str, dict], list[str]]:
        """(dataset -> layout overrides of the datasets that run, notes on those that do not):
        MNIST only where its files are present (the study never downloads)."""
        rd = self.sensitivity().get("realdata") or {}
        given = rd.get("datasets") or {self.config["realdata"]["dataset"]: {}}
        run, skipped = {}, []
        for ds, over in given.items():
            if ds == "mnist":
                files = mnist_files(self.config["realdata"]["path"])
                if not all(os.path.isfile(f) for f in files):
                    skipped.append(f"mnist: not run (its files are absent from {self.config['realdata']['path']})")
                    continue
            run[ds] = over
        return run, skipped

    def _sensitivity_realdata_params(self, variant: str, dataset: str) -> dict:
        """Every realdata key of one variant's fits (tasks and splits included)."""
        rd = dict(self.config["realdata"], dataset=dataset)
        over = merge_settings(self.sensitivity_datasets()[0].get(dataset, {}),
                              self.sensitivity_realdata_variants()[variant])
        return merge_settings(rd, over)

    def sensitivity_realdata_file(self, variant: str, dataset: str, task: str, split: int) -> str:
        """One real-data fit of a variant; the base variant of the run's own dataset and
        layout is the default run's file (the same fit).

        Parameters
        ----------
        variant : str
            A real-data variant (`sensitivity_realdata_variants`).
        dataset : str
            A dataset that runs (`sensitivity_datasets`).
        task : str
            A task of the variant.
        split : int
            The split index.
        """
        p = self._sensitivity_realdata_params(variant, dataset)
        if p == self.config["realdata"]:
            return self.realdata_split_file(task, split)
        return (f"results/{self.run}/sensitivity/realdata/{variant}/{dataset}/{task}/"
                f"split~{split}.parquet")

    def sensitivity_realdata_runs(self) -> list[dict]:
        """One entry per (variant, dataset): its ``files`` (every task and split)."""
        out = []
        for variant in self.sensitivity_realdata_variants():
            for ds in self.sensitivity_datasets()[0]:
                p = self._sensitivity_realdata_params(variant, ds)
                out.append({"variant": variant, "dataset": ds, "files": [
                    self.sensitivity_realdata_file(variant, ds, t, s)
                    for t in p["tasks"] for s in range(p["splits"])]})
        return out

    def sensitivity_realdata_files(self, wildcards=None) -> list[str]:
        """Every real-data fit file of the sensitivity section (`sensitivity_realdata_runs`), in order.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        return [f for r in self.sensitivity_realdata_runs() for f in r["files"]]

    def sensitivity_realdata_spec(self, wildcards) -> str:
        """``fedgdp realdata --spec`` of one variant's fit: JSON (keys sorted) of its realdata keys less the
        pipeline-only ones (ValueError for wildcards that name no fit of the section).

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A sensitivity real-data path's wildcards: ``variant``, ``dataset``, ``task``, ``split``.
        """
        w = wildcards
        if w.variant not in self.sensitivity_realdata_variants() or w.dataset not in self.sensitivity_datasets()[0]:
            raise ValueError(f"{w.variant}/{w.dataset} is not a real-data run of the sensitivity section")
        p = self._sensitivity_realdata_params(w.variant, w.dataset)
        if w.task not in p["tasks"] or int(w.split) >= p["splits"]:
            raise ValueError(f"{w.task}/split~{w.split} is not a fit of variant {w.variant}")
        return json.dumps({k: v for k, v in p.items() if k not in self._REALDATA_PIPELINE_KEYS}, sort_keys=True)

    def sensitivity_realdata_data_files(self, wildcards) -> list[str]:
        """MNIST's files (present, or this dataset would not run); nothing for digits.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards
            A sensitivity real-data path's wildcards: ``dataset`` read.
        """
        return mnist_files(self.config["realdata"]["path"]) if wildcards.dataset == "mnist" else []

    def sensitivity_constraints(self) -> dict[str, str]:
        return {"variant": alternatives(self.sensitivity_realdata_variants()),
                "dataset": alternatives(self.sensitivity_datasets()[0]),
                "task": alternatives(self.config.get("realdata", {}).get("tasks", [])),
                "split": r"\d+"}

    def sensitivity_map_spec(self, wildcards=None) -> str:
        """What ``fedgdp claims-map`` needs, as JSON: ``designs`` (which study is which variant and claim),
        ``variants`` (what each changes), ``realdata_variants``, ``order``, ``realdata`` (the files per
        variant), ``skipped``, ``replicates``, ``title``, ``provenance`` and ``caption``.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        sens = self.sensitivity()
        variants = {n: v["settings"] for n, v in sensitivity_variants(self.config).items()}
        real = {n: v for n, v in self.sensitivity_realdata_variants().items()}
        spec = {"designs": {e["study"]: {"variant": e["variant"], "claim": e["claim"], "models": e["models"]}
                            for e in sensitivity_index(self.config)},
                "variants": variants, "realdata_variants": real, "order": list(dict.fromkeys([*variants, *real])),
                "realdata": self.sensitivity_realdata_runs(), "skipped": self.sensitivity_datasets()[1],
                "replicates": sens.get("replicates"),
                "title": f"Claims map: which claims hold under which settings [{self.run}, {self.sha}]",
                "provenance": self.provenance(), "caption": self.sensitivity_caption()}
        return json.dumps(spec, sort_keys=True)

    def sensitivity_caption(self, wildcards=None) -> str:
        """One paragraph for the claims map: the designs, replicates, real-data variants and provenance.

        Parameters
        ----------
        wildcards : snakemake.io.Wildcards or None, default=None
            Not read.
        """
        sens = self.sensitivity()
        designs = "; ".join(
            f"{claim}: study {d['study']} at m in {{{', '.join(map(str, d['grid']['m']))}}}, sizes "
            f"{', '.join(d['grid']['sizes'])}" for claim, d in sens.get("designs", {}).items())
        real = self.sensitivity_realdata_variants()
        ds, skipped = self.sensitivity_datasets()
        return ("Claims map of the sensitivity study (fedgdp claims-map, module fedgdp.reports.sensitivity): "
                "the paper's claims tested by fedgdp.reports.claims (the thresholds of the claims report) on "
                "every variant of the settings the paper leaves open; one column per variant (base: "
                "config.yaml's defaults), one row per claim and model (C2, C4: also per sub-claim, "
                "and with certified FedNewton in FedNewton's place), the verdict written in each cell "
                f"(holds / partly / fails / not run). Designs: {designs}; "
                f"{sens.get('replicates')} replicates per cell. "
                + (f"Real data (C5): {', '.join(ds)}, variants {', '.join(real)}"
                   + (f" ({'; '.join(skipped)})" if skipped else "") + ". " if real else "")
                + "What each variant changes: the Markdown table. "
                f"Made by {self.provenance()}.")
