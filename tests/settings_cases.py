"""The settings every shipped config resolves, plus hand-picked overrides, for
tests/core/test_settings.py; ``python tests/settings_cases.py`` writes
tests/fixtures/resolved_settings.json.

That fixture was captured from the three hand-written resolvers before they moved
onto fedgdp.core.settings (commit b57aefa): the test checks that the mechanism resolves
every case to the same dict (same keys in the same order, same values and types,
via ``repr``; the config cases are stored as the first 16 hex digits of the SHA-256
of that ``repr``, the hand-picked ones in full) and refuses every bad case. Do not regenerate it to make a failing
test pass: a difference is a change of the cells' parameters, hence of their seeds
and numbers. (One edit since, by hand: the ``private_quantile`` case's clip keys now read in the
rule's own order, ``rule, q, share, grid``; the seeds sort keys, `fedgdp.core.seeds.stable_hash`.)
"""
from __future__ import annotations

import copy
import hashlib
import json

from shipped_configs import ROOT, SCHEMA, merged

FIXTURE = ROOT / "tests" / "fixtures" / "resolved_settings.json"
CONFIGS = [[], ["config/smoke.yaml"], ["config/mnist.yaml"], ["config/paper-nn.yaml"]]


def config_cases():
    """(kind, label, overrides) of every cell, real-data task and CNN run of the configs."""
    from fedgdp import plan as wp

    for files in CONFIGS:
        plan = wp.load(merged(*files), SCHEMA)
        name = "+".join(["config.yaml", *files])
        for study, s in plan.config["studies"].items():
            for model in s["models"]:
                for cell in plan.study_cells(study):
                    yield "params", f"{name} {model} {study} {cell}", plan.cell_overrides(model, study, cell)
        if plan.config.get("realdata"):
            for task in plan.config["realdata"]["tasks"]:
                yield "realdata", f"{name} {task}", dict(plan.realdata_settings(), task=task)
        for fig in plan.figures("nn"):
            for ds in plan.nn()["datasets"]:
                ms, ns = plan.nn_axes(ds, fig)
                for m in ms:
                    for n in ns:
                        yield "nn", f"{name} {ds} {fig} m={m} n={n}", plan.nn_settings(ds, fig, m, n, 0)


#: overrides as the command lines, the audit and the benchmarks give them
EXTRA = {
    "params": [
        {}, {"mu": "inf"}, {"mu": "2", "tau1": 0.3}, {"model": "poisson", "K": 10, "methods": "fedsgd, fedavg"},
        {"clip": 1.5}, {"clip": {"rule": "fixed", "value": 2.0}, "privacy": {"mode": "certified"}},
        {"clip": {"rule": "private_quantile", "q": 0.9}, "privacy": {"mode": "certified", "hessian_clip": 2}},
        {"method_settings": {"fedavg": {"R": 3}}, "schedule": "budget", "weights": "optimal"},
        {"sizes": "uniform(10,90)", "m": 20, "tau1": "0.25", "beta_true": [1, 2, 3], "sigma_c": 2},
        {"diverge_factor": 3, "base_seed": 0, "n_floor": 5, "study": "x"},
        {"model": "logistic", "m": 100, "sizes": "equal(400)", "mu": 2.0, "K": 50},
        {"model": "poisson", "methods": ["fednewton"], "K": 10},
    ],
    "realdata": [
        {}, {"methods": "all"}, {"methods": ["all"]}, {"mu": "6,2"}, {"mu": 2}, {"mu": "inf"},
        {"newton": {"solver": "floor"}}, {"newton": {"cg_tol": 1e-6, "cg_maxiter": 50}},
        {"method_settings": {"fedavg": {"R": 3}, "dp_scaffold": {"eta_g": 0.5}}},
        {"task": "multiclass", "tau1": 1, "alpha": 2, "m": 5, "n_min": 0, "folds": 3},
        {"dataset": "mnist", "path": "data/mnist"}, {"clip": 1.0, "privacy": {"mode": "certified"}},
        {"methods": ["fednewton"], "task": "binary"}, {"methods": "fedsgd,np_pooled"},
    ],
    "nn": [
        {"n": 30}, {"n": "30", "m": "10", "mu": "inf", "q": "0.5"}, {"dataset": "mnist", "n": 100},
        {"figure": "fig10", "n": "full"}, {"figure": "fig10", "n": None, "dataset": "cifar10"},
        {"figure": "fig10", "n": "None"}, {"n": 30.0, "run": 2.0, "methods": "fedsgd, fedavg"},
        {"n": 50, "rounds": 12, "newton_cycles": 3, "damping": 10, "hybrid_local_share": 0,
         "val_frac": 0, "test_frac": 0.25, "ridge": 2, "lr": 1, "server_lr": 1, "clip": 2},
        {"dataset": "mnist", "figure": "fig09", "m": 4, "n": 100, "rounds": 1, "local_epochs": 1,
         "methods": ["fedsgd"]},
    ],
}

#: overrides each resolver refuses (a ValueError naming the key or value)
BAD = {
    "params": [
        {"bogus": 1}, {"modle": "logistic"}, {"model": "probit"}, {"m": 0}, {"m": 2.5}, {"m": True},
        {"K": "10"}, {"n_floor": 0}, {"base_seed": -1}, {"mu": 0}, {"mu": "x"}, {"mu": "nan"},
        {"sizes": "weird(3)"}, {"schedule": "fast"}, {"weights": "equal"}, {"methods": []},
        {"methods": "nope"}, {"beta_true": [1.0]}, {"diverge_factor": 0}, {"sigma_c": 0},
        {"clip": "x"}, {"clip": {"rule": "median"}}, {"clip": {"rule": "quantile", "q": 1.5}},
        {"clip": {"rule": "fixed", "value": -1}}, {"privacy": {"mode": "strict"}},
        {"privacy": {"modes": "paper"}}, {"privacy": {"mode": "certified"}}, {"tau1": 0},
        {"tau1": -1.0}, {"method_settings": {"fedsgd": {"eta": 0}}},
        {"method_settings": {"fedavg": {"R": 0}}},
    ],
    "realdata": [
        {"bogus": 1}, {"dataset": "cifar"}, {"task": "ternary"}, {"m": 0}, {"n_min": -1}, {"folds": 1},
        {"base_seed": -2}, {"alpha": 0}, {"mu": []}, {"mu": "0"}, {"tau1": 0}, {"weights": "optimal"},
        {"newton": {"solver": "lu"}}, {"newton": {"cg_maxiter": 0}}, {"newton": {"cg_tol": 0}},
        {"methods": []}, {"methods": "nope"}, {"method_settings": {"nope": {}}},
        {"method_settings": {"fedsgd": {"speed": 1}}}, {"method_settings": {"fedavg": {"K": 0}}},
        {"method_settings": {"fedsgd": {"eta": -1}}}, {"dataset": "mnist"},
        {"clip": {"rule": "nope"}}, {"privacy": {"mode": "certified"}},
    ],
    "nn": [
        {}, {"dataset": "svhn", "n": 30}, {"bogus": 1, "n": 30}, {"methods": ["nope"], "n": 30},
        {"methods": [], "n": 30}, {"figure": "fig11", "n": 30}, {"m": 0, "n": 30}, {"m": "x", "n": 30},
        {"m": 2.5, "n": 30}, {"run": -1, "n": 30}, {"n": 2}, {"figure": "fig10", "n": 30},
        {"lr": 0, "n": 30}, {"clip": float("inf"), "n": 30}, {"mu": 0, "n": 30}, {"q": 0, "n": 30},
        {"q": 1.5, "n": 30}, {"damping": 11, "n": 30}, {"hybrid_local_share": 2, "n": 30},
        {"val_frac": 0.5, "n": 30}, {"rounds": 10, "newton_cycles": 3, "n": 30},
    ],
}


#: Cell parameters added after the fixture was captured, with the default that keeps every
#: number as it was: a resolved dict is compared without them when they hold that default.
ADDED_SINCE = {"release": "private"}
#: CNN run settings added since, likewise (the release and the noise calibration of a run)
NN_ADDED_SINCE = {"release": "private", "accounting": "printed", "reduction": "mean", "local_batch": None,
                  "clip_unit": "sample", "init": "default", "noise_for": "release"}


def resolvers():
    from fedgdp.nn.settings import resolve as nn
    from fedgdp.realdata import resolve as realdata
    from fedgdp.simulation.params import resolve as cell_params

    def plain(resolve):
        def as_dict(over):
            p = resolve(over)
            return p.as_dict() if hasattr(p, "as_dict") else p      # a typed resolution, as the seeds see it
        return as_dict

    def without(resolve, added):
        def strip(over):
            p = plain(resolve)(over)
            for key, default in added.items():
                if p.get(key) == default:
                    del p[key]
            return p
        return strip

    return {"params": without(cell_params, ADDED_SINCE), "realdata": plain(realdata), "nn": without(nn, NN_ADDED_SINCE)}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def capture() -> dict:
    res = resolvers()
    good = {}
    for kind, label, over in config_cases():
        good.setdefault(kind, {})[label] = digest(repr(res[kind](copy.deepcopy(over))))
    extra = [{"kind": k, "overrides": over, "repr": repr(res[k](copy.deepcopy(over)))}
             for k, items in EXTRA.items() for over in items]
    bad = []
    for kind, items in BAD.items():
        for over in items:
            try:
                res[kind](copy.deepcopy(over))
            except ValueError as exc:
                bad.append({"kind": kind, "overrides": over, "error": str(exc)})
            else:
                raise AssertionError(f"{kind} accepted {over}")
    return {"configs": good, "extra": extra, "bad": bad}


if __name__ == "__main__":
    FIXTURE.parent.mkdir(exist_ok=True)
    data = capture()
    FIXTURE.write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(f"{sum(map(len, data['configs'].values()))} config cases, {len(data['extra'])}"
          f" extra and {len(data['bad'])} bad cases -> {FIXTURE}")
