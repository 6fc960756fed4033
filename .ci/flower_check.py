"""The Python half of .ci/flower.sh: three sites' files, each method's settings, the Flower app,
and the comparison of a run across sites with the in-process fit.

    python .ci/flower_check.py prepare DIR          # sites/{a,b,c}.csv, bad.csv, app/, flwr/config.toml
    python .ci/flower_check.py settings DIR METHOD  # DIR/settings.json (what every site and the coordinator read)
    python .ci/flower_check.py compare DIR METHOD   # prints METHOD max|flower - in-process| = X; fails above 1e-12
    python .ci/flower_check.py refusal DIR          # prints budget refusal: held when every site refused
"""
import json
import sys
import warnings
from pathlib import Path

import numpy as np

SIZES = {"a": 120, "b": 150, "c": 180}
FEATURES = ["x0", "x1", "x2"]
SEED = 20261206           # the test seed: the sites' guarantee is void, and they say so
STEPS = {"fedsgd": {"K": 8, "eta": 0.5}, "fedavg": {"R": 3, "K": 4, "eta": 0.5},
         "fedhybrid": {"K1": 4, "K2": 4, "eta1": 0.5, "eta2": 0.5}, "fednewton_certified": {"K": 4, "eta": 0.5}}
APP = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fedgdp-sites"
version = "1.0.0"
description = "fedgdp's certified methods across sites"
license = "MIT"
dependencies = []    # fedgdp[flower] is installed where the SuperLink and every SuperNode run

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "fedgdp"

[tool.flwr.app.components]
serverapp = "fedgdp_sites:server"
clientapp = "fedgdp_sites:client"

[tool.flwr.app.config]
settings = "{}"
sites = 3
out = "result.json"
timeout = 120
extra = 0
"""
CONNECTION = """[superlink]
default = "loopback"

[superlink.loopback]
address = "127.0.0.1:{port}"
insecure = true
"""


def data():
    rng = np.random.default_rng(0)
    n = sum(SIZES.values())
    X = rng.normal(size=(n, len(FEATURES)))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.repeat(list(SIZES), list(SIZES.values()))


def settings(method):
    return {"family": "logistic", "classes": [0, 1], "method": method, "mu": 1.0, "clip": 1.0,
            "features": FEATURES, "target": "y", "method_settings": STEPS[method]}


def prepare(out: Path, port: str) -> None:
    import pandas as pd

    X, y, clients = data()
    (out / "sites").mkdir(parents=True, exist_ok=True)
    for c in SIZES:
        df = pd.DataFrame(X[clients == c], columns=FEATURES)
        df["y"] = y[clients == c]
        df.to_csv(out / "sites" / f"{c}.csv", index=False)
    (out / "sites" / "bad.csv").write_text("x0,x1,y\n1.0,2.0,0\n")        # a feature column missing
    (out / "app").mkdir(exist_ok=True)
    (out / "app" / "pyproject.toml").write_text(APP)
    (out / "app" / "fedgdp_sites.py").write_text('"""The Flower app: fedgdp\'s ServerApp and ClientApp."""\n'
                                                 "from fedgdp.federation.app import client, server\n\n"
                                                 '__all__ = ["client", "server"]\n')
    (out / "flwr").mkdir(exist_ok=True)
    (out / "flwr" / "config.toml").write_text(CONNECTION.format(port=port))


def compare(out: Path, method: str) -> int:
    from fedgdp import FederatedGLM

    res = json.loads((out / f"{method}.json").read_text())
    if "error" in res:
        print(f"{method}: the run across sites failed: {res['error']}")
        return 1
    from fedgdp.api.fitting import read_table

    tables = [read_table(str(out / "sites" / f"{c}.csv")) for c in SIZES]     # the sites' own numbers
    X = np.vstack([t[FEATURES].to_numpy() for t in tables])
    y = np.concatenate([t["y"].to_numpy() for t in tables])
    clients = np.repeat(list(SIZES), [len(t) for t in tables])
    s = settings(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = FederatedGLM(**{k: v for k, v in s.items() if k not in ("features", "target")}, shuffle=False,
                           inference_share=0.0, random_state=SEED).fit(X, y, clients)
    diff = float(np.max(np.abs(np.asarray(res["theta"]) - est.theta_)))
    print(f"{method} max|flower - in-process| = {diff:.3g}")
    return 0 if diff <= 1e-12 else 1


def refusal(out: Path) -> int:
    res = json.loads((out / "extra.json").read_text())
    extra = res.get("extra", [])
    for line in extra:
        print(f"  {line}")
    if len(extra) == len(SIZES) and all("would spend past mu" in line for line in extra):
        print("budget refusal: held")
        return 0
    print(f"budget refusal: NOT held ({res})")
    return 1


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    if cmd == "prepare":
        prepare(where, sys.argv[3])
    elif cmd == "settings":
        (where / "settings.json").write_text(json.dumps(settings(sys.argv[3])))
    elif cmd == "compare":
        sys.exit(compare(where, sys.argv[3]))
    elif cmd == "refusal":
        sys.exit(refusal(where))
    else:
        sys.exit(f"unknown command {cmd!r}")
