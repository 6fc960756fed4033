"""The config checks a schema cannot express (`ChecksPart.check`): methods exist,
schemes parse, references resolve, layouts fit their data, the decomposition's studies
pair. Each raises a ConfigError naming the key."""
from __future__ import annotations

import itertools

from ..core.settings import suggest
from .base import fmt_mu
from .config import ConfigError
from .coverage import CoveragePart
from .decomposition import DecompositionPart
from .nn import NNPart
from .realdata import RealdataPart

_IMAGES = {"digits": 1797, "mnist": 70000}                       # real data: all images
_NN_TRAIN_IMAGES = {"digits": 1437, "mnist": 60000, "cifar10": 50000}


class ChecksPart(DecompositionPart, RealdataPart, NNPart, CoveragePart):
    """Plan methods that check the config."""

    def check(self) -> None:
        """What the schema cannot say: methods exist, schemes parse, references resolve,
        layouts fit their data. Raises ConfigError naming the key."""
        self._check_simulation()
        self._check_figures()
        self._check_tables()
        if self.config.get("realdata"):
            self._check_realdata()
        if self.figures("nn"):
            self._check_nn()
        if self.config.get("decomposition"):
            self._check_decomposition()
        if self.config.get("coverage"):
            self._check_coverage()

    @staticmethod
    def _check_in(key, value, allowed, what):
        allowed = list(allowed)
        if value not in allowed:
            raise ConfigError(key, f"{what} {value!r} is not one of {', '.join(map(str, allowed))}"
                              f"{suggest(value, allowed)}")

    def _check_simulation(self):
        from ..simulation.backend import REGISTRY, get_method
        from ..simulation.data import parse_sizes
        from ..simulation.params import check_halves, resolve

        c = self.config
        for name in c["defaults"]["method_settings"]:
            self._check_in(f"defaults.method_settings.{name}", name, REGISTRY, "method")
        for s in self.studies():
            study = s.name
            for name in s.settings.get("method_settings", {}):
                self._check_in(f"studies.{study}.settings.method_settings.{name}", name, REGISTRY, "method")
            for i, name in enumerate(s.methods):
                self._check_in(f"studies.{study}.methods[{i}]", name, REGISTRY, "method")
            for i, text in enumerate(s.grid["sizes"]):
                try:
                    scheme = parse_sizes(text, self.study_settings(study)["n_floor"])
                    for m in s.grid["m"]:
                        scheme.check(m)
                    check_halves(s.methods, scheme)
                except ValueError as exc:
                    raise ConfigError(f"studies.{study}.grid.sizes[{i}]", str(exc)) from None
            for model in s.models:
                if model not in c["beta_true"]:
                    raise ConfigError(f"studies.{study}.models", f"no beta_true for model {model!r}")
                over = self.cell_overrides(model, study, self.study_cells(study)[0])
                if over.get("tau1") == "auto":
                    over["tau1"] = 1.0  # the real value is computed by the jobs
                # a method's unknown setting, named where it is given (before the resolver refuses it)
                try:
                    methods = resolve(dict(over, method_settings={})).methods
                except ValueError as exc:
                    raise ConfigError(f"studies.{study}", f"{model}: {exc}") from None
                given_at = [("defaults", c["defaults"]["method_settings"]),
                            (f"studies.{study}.settings", s.settings.get("method_settings", {}))]
                for where, name, given in ((w, n, g) for w, ms in given_at for n, g in ms.items()):
                    if name in methods:
                        known = get_method(name).setting_names()
                        for key in given:
                            if key not in known:
                                raise ConfigError(f"{where}.method_settings.{name}.{key}",
                                                  f"unknown setting {key!r}{suggest(key, known)}; "
                                                  f"known: {', '.join(known)}")
                try:
                    resolve(over)
                except ValueError as exc:
                    raise ConfigError(f"studies.{study}", f"{model}: {exc}") from None
                # every sizes scheme and m of the grid resolves too (the settings' own checks,
                # e.g. client sizes a method cannot use), not only the first cell's
                for cell in {(c["sizes"], c["m"]): c for c in self.study_cells(study)}.values():
                    other = dict(self.cell_overrides(model, study, cell), tau1=over["tau1"])
                    try:
                        resolve(other)
                    except ValueError as exc:
                        raise ConfigError(f"studies.{study}.grid",
                                          f"{model}, sizes {cell['sizes']}, m = {cell['m']}: {exc}") from None

    def _check_panel_value(self, key, name, value, study):
        """A value a panel or table fixes must be a value of the study's grid."""
        from ..simulation.data import parse_sizes

        if name == "method":
            self._check_in(key, value, self.config["studies"][study]["methods"], f"method of study {study}:")
            return
        if name == "sizes":
            try:
                value = parse_sizes(value).text
            except ValueError as exc:
                raise ConfigError(key, str(exc)) from None
        elif name == "mu":
            value = fmt_mu(value)
        else:
            value = int(value)
        self._check_in(key, value, self.study_axes(study)[name], f"{name} of study {study}:")

    def _check_figures(self):
        studies = list(self.config["studies"])
        for fig in self.figures("simulation"):
            f = self.figure(fig)
            for i, panel in enumerate(f["panels"]):
                key = f"figures.{fig}.panels[{i}]"
                study = panel.get("study", f.get("study"))
                if study is None:
                    raise ConfigError(key, "no study: give the figure or the panel a study")
                self._check_in(f"{key}.study" if "study" in panel else f"figures.{fig}.study",
                               study, studies, "study")
                self._check_in(f"figures.{fig}.model", f["model"], self.config["studies"][study]["models"],
                               f"model of study {study}:")
                for name, value in panel.items():
                    if name not in ("study", "title"):
                        self._check_panel_value(f"{key}.{name}", name, value, study)
            self.figure_title(fig)      # its placeholders are known (ConfigError naming the title)

    def _check_tables(self):
        c, studies = self.config, list(self.config["studies"])
        t1 = c.get("tables", {}).get("table1")
        if t1:
            self._check_in("tables.table1.study", t1["study"], studies, "study")
            self._check_in("tables.table1.model", t1["model"], c["studies"][t1["study"]]["models"],
                           f"model of study {t1['study']}:")
            for name, value in t1["cell"].items():
                self._check_panel_value(f"tables.table1.cell.{name}", name, value, t1["study"])
            for i, name in enumerate(t1.get("methods") or []):
                self._check_in(f"tables.table1.methods[{i}]", name, c["studies"][t1["study"]]["methods"],
                               f"method of study {t1['study']}:")
        rates = c.get("tables", {}).get("rates")
        if rates:
            for i, fit in enumerate(rates["fits"]):
                self._check_in(f"tables.rates.fits[{i}].study", fit["study"], studies, "study")
            self.rates_fits()           # the labels' placeholders are known

    def _check_realdata(self):
        from ..realdata import TASKS
        from ..realdata import resolve as resolve_realdata

        rd = self.config["realdata"]
        for i, task in enumerate(rd["tasks"]):
            self._check_in(f"realdata.tasks[{i}]", task, TASKS, "task")
        try:
            resolve_realdata(self.realdata_settings())
        except ValueError as exc:
            raise ConfigError("realdata", str(exc)) from None
        need, have = rd["m"] * rd["n_min"], _IMAGES[rd["dataset"]]
        if need > have:
            raise ConfigError("realdata.n_min", f"m * n_min = {need} exceeds the {have} images of {rd['dataset']}")
        for fig in self.figures("realdata"):
            self._check_in(f"figures.{fig}.task", self.figure(fig)["task"], rd["tasks"],
                           "task of realdata.tasks:")

    def _check_nn(self):
        from ..nn.settings import LABELS
        from ..nn.settings import resolve as resolve_nn

        s = self.nn()
        for i, name in enumerate(s["methods"]):
            self._check_in(f"nn.methods[{i}]", name, LABELS, "method")
        for fig in self.figures("nn"):
            f = self.figure(fig)
            per_dataset = "n" if f["x"] == "n" else "m"
            if f["x"] == "n" and not isinstance(f["m"], int):
                raise ConfigError(f"figures.{fig}.m", "x: n needs one number of clients m")
            if f["x"] == "m" and "n" in f:
                raise ConfigError(f"figures.{fig}.n", "x: m splits the full training set: give no n")
            if not isinstance(f.get(per_dataset), dict):
                raise ConfigError(f"figures.{fig}.{per_dataset}", "give the values per dataset, "
                                  "e.g. {digits: [...]}")
            for ds in s["datasets"]:
                if ds not in f[per_dataset]:
                    raise ConfigError(f"figures.{fig}.{per_dataset}", f"no values for dataset {ds!r}")
                ms, ns = self.nn_axes(ds, fig)
                for m, n in itertools.product(ms, ns):
                    try:
                        resolve_nn(self.nn_settings(ds, fig, m, n, 0))
                    except ValueError as exc:
                        raise ConfigError(f"figures.{fig}", f"{ds}, m={m}, n={n}: {exc}") from None
                    need = m * (1 if n == "full" else n)
                    if need > _NN_TRAIN_IMAGES[ds]:
                        raise ConfigError(f"figures.{fig}", f"{ds}: m * n = {need} exceeds its "
                                          f"{_NN_TRAIN_IMAGES[ds]} training images")

    def _check_coverage(self):
        """The coverage study's settings (`fedgdp.api.coverage.check_settings`: families,
        truths, grid, methods, replicates, seed, alpha, cov_type)."""
        try:
            self.coverage_settings()
        except ValueError as exc:
            raise ConfigError("coverage", str(exc)) from None

    def _check_decomposition(self):
        """The three studies exist, run their release, and differ in nothing else (so
        their replicates share data and pair); K_conv is a K of each; one mu each."""
        d, studies = self.config["decomposition"], self.config["studies"]
        names = d["studies"]
        for role, study in names.items():
            key = f"decomposition.studies.{role}"
            self._check_in(key, study, studies, "study")
            release = self.study_settings(study).get("release", "private")
            if release != role:
                raise ConfigError(key, f"study {study} runs release {release!r}, not {role!r} "
                                  f"(set studies.{study}.settings.release: {role})")
            if len(self.study_axes(study)["mu"]) != 1:
                raise ConfigError(f"studies.{study}.grid.mu", "a decomposition study runs one mu")
            if d["K_conv"] not in self.study_axes(study)["K"]:
                raise ConfigError("decomposition.K_conv", f"K_conv = {d['K_conv']} is not a K of study "
                                  f"{study} (K in {self.study_axes(study)['K']})")

        def shape(study):
            s = self.study(study)
            settings = {k: v for k, v in self.study_settings(study).items() if k != "release"}
            return (s.models, s.methods, s.schedule, self.study_axes(study), settings, self.replicates(study))

        first = names["private"]
        for role in ("clip_only", "plain"):
            if shape(names[role]) != shape(first):
                raise ConfigError(f"decomposition.studies.{role}",
                                  f"study {names[role]} differs from {first} in more than its release "
                                  "(models, methods, schedule, grid, settings and replicates must agree)")
