"""The Python half of .ci/flower.sh: the sites' files and configurations, the run's list of sites, each method's
settings, the foreign app, and the checks of each run.

    python .ci/flower_check.py prepare DIR PORT     # sets/, sites/, site-*.toml, sites.json (keys/ made), ...
    python .ci/flower_check.py use DIR SET          # sites/{a,b,c}.csv := sets/SET/{a,b,c}.csv (fresh rows)
    python .ci/flower_check.py settings DIR METHOD  # DIR/settings.json (what every site and the coordinator read)
    python .ci/flower_check.py compare DIR METHOD   # METHOD max|flower - in-process| = X; fails above 1e-12
    python .ci/flower_check.py unknown DIR          # unknown node: refused (the rogue node, in every run)
    python .ci/flower_check.py refusal DIR          # budget refusal: held (one request past the fit)
    python .ci/flower_check.py foreign DIR          # foreign app: refused
    python .ci/flower_check.py restart DIR          # restart mid-run: no overspend
    python .ci/flower_check.py second DIR CODE      # second run on the same rows: refused (CODE: the command's
                                                    # exit status; Flower's status from DIR/status-second.json)
    python .ci/flower_check.py rejoined DIR         # superlink restart: the sites rejoined
    python .ci/flower_check.py killed DIR POINT DIED ENDED  # guard killed taking a message: no lockout
"""
import json
import os
import re
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np

SIZES = {"a": 120, "b": 150, "c": 180}
FEATURES = ["x0", "x1", "x2"]
SEED = 20261206           # the test seed: the sites' guarantee is void, and they say so
STEPS = {"fedsgd": {"K": 8, "eta": 0.5}, "fedavg": {"R": 3, "K": 4, "eta": 0.5},
         "fedhybrid": {"K1": 4, "K2": 4, "eta1": 0.5, "eta2": 0.5}, "fednewton_certified": {"K": 4, "eta": 0.5}}
#: one fresh set of rows per check, so that the checks do not spend one another's budget
SETS = [f"eq-{m}" for m in STEPS] + ["restart"] + [f"kill-{p}" for p in ("input", "message", "header")]
#: each point of a guard's taking of a message where the kill check kills it: the outcome and the most seconds
#: from its kill to the coordinator's command's end (the guard's own restart, about 4 s, among them)
KILLS = {"input": ("failed", "was restarted after it started this message's task", 20),
         "message": ("completed", "", 20),
         "header": ("failed", "within its SuperNode's task heartbeat", 40)}
CONNECTION = """[superlink]
default = "loopback"

[superlink.loopback]
address = "127.0.0.1:{port}"
root-certificates = "{ca}"
"""
SITE = """name = "{name}"
data = "{dir}/sites/{data}.csv"
settings = "{dir}/settings.json"
ledger = "{dir}/ledger-{node}"
lifetime_mu = 1.0
key = "{dir}/keys/{node}_key"
apps = ["{app}"]
runtime = "127.0.0.1:{runtime}"
test_seed = {seed}
test_index = {index}
test_sites = 3
"""
ROGUE_APP = '''"""A coordinator's own app: its ClientApp reads the site's data file and returns it."""
import json
import os

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

client = ClientApp()
server = ServerApp()


@client.query()
def steal(msg: Message, context: Context) -> Message:
    path = str(context.node_config.get("data", ""))
    open(os.path.join(MARK, f"rogue-ran-{context.node_id}"), "w").write(path)
    rows = open(path).read() if path else "no data path in node_config"
    return Message(RecordDict({"request": ConfigRecord({"json": json.dumps({"rows": rows})})}), reply_to=msg)


@server.main()
def main(grid: Grid, context: Context) -> None:
    nodes = list(grid.get_node_ids())
    hello = json.dumps({"op": "hello", "settings": json.loads(str(context.run_config["settings"])), "nonce": "x"})
    msgs = [Message(RecordDict({"request": ConfigRecord({"json": hello})}), dst_node_id=n, message_type="query")
            for n in nodes]
    got = grid.send_and_receive(msgs, timeout=60)
    out = [{"node": r.metadata.src_node_id, "error": r.error.reason} if r.has_error()
           else {"node": r.metadata.src_node_id, "content": str(r.content.config_records["request"]["json"])}
           for r in got]
    with open(str(context.run_config["out"]), "w") as fh:
        json.dump({"nodes": nodes, "replies": out}, fh)
'''


def rows(name: str, seed: int):
    rng = np.random.default_rng(seed)
    n = sum(SIZES.values())
    X = rng.normal(size=(n, len(FEATURES)))
    y = (X[:, 0] - 0.5 * X[:, 1] + rng.logistic(size=n) > 0).astype(int)
    return X, y, np.repeat(list(SIZES), list(SIZES.values()))


def settings(method):
    return {"family": "logistic", "classes": [0, 1], "method": method, "mu": 1.0, "clip": 1.0,
            "features": FEATURES, "target": "y", "method_settings": STEPS[method]}


def _write_csv(path: Path, X, y) -> None:
    import pandas as pd

    df = pd.DataFrame(X, columns=FEATURES)
    df["y"] = y
    df.to_csv(path, index=False)


def prepare(out: Path, port: int, root: Path) -> None:
    from fedgdp.federation.__main__ import app_hash

    public = {n: (out / "keys" / f"{n}_key.pub").read_text().strip() for n in SIZES}     # made by ssh-keygen
    (out / "sites.json").write_text(json.dumps([{"name": n, "public_key": public[n]} for n in SIZES]))
    for i, s in enumerate(SETS):
        X, y, clients = rows(s, i + 1)
        (out / "sets" / s).mkdir(parents=True, exist_ok=True)
        for c in SIZES:
            _write_csv(out / "sets" / s / f"{c}.csv", X[clients == c], y[clients == c])
    (out / "sites").mkdir(exist_ok=True)
    rng = np.random.default_rng(99)                   # the rogue node's 5,000 poisoned rows
    Xr = rng.normal(size=(5000, len(FEATURES)))
    _write_csv(out / "sites" / "rogue.csv", Xr, (Xr[:, 0] < 0).astype(int))
    (out / "sites" / "bad.csv").write_text("x0,x1,y\n1.0,2.0,0\n")        # a feature column missing
    app = app_hash(str(root / "apps" / "fedgdp-sites"))
    for i, node in enumerate(["a", "b", "c", "rogue"]):
        (out / f"site-{node}.toml").write_text(SITE.format(
            name="a" if node == "rogue" else node, node=node, data=node, dir=out, app=app, runtime=port + 1 + i,
            seed=SEED, index=0 if node == "rogue" else i))
    (out / "rogue-app").mkdir(exist_ok=True)
    (out / "rogue-app" / "pyproject.toml").write_text(
        (root / "apps" / "fedgdp-sites" / "pyproject.toml").read_text()
        .replace('name = "fedgdp-sites"', 'name = "rogue"').replace("fedgdp_sites:", "rogue:"))
    (out / "rogue-app" / "rogue.py").write_text(ROGUE_APP.replace("MARK", repr(str(out))))
    (out / "flwr").mkdir(exist_ok=True)
    (out / "flwr" / "config.toml").write_text(CONNECTION.format(port=port, ca=out / "certs" / "ca.crt"))


def use(out: Path, name: str) -> None:
    for c in SIZES:
        tmp = out / "sites" / f".{c}.csv"
        shutil.copyfile(out / "sets" / name / f"{c}.csv", tmp)
        os.replace(tmp, out / "sites" / f"{c}.csv")


def compare(out: Path, method: str) -> int:
    from fedgdp import FederatedGLM
    from fedgdp.api.fitting import read_table

    res = json.loads((out / f"{method}.json").read_text())
    if "error" in res:
        print(f"{method}: the run across sites failed: {res['error']}")
        return 1
    tables = [read_table(str(out / "sets" / f"eq-{method}" / f"{c}.csv")) for c in SIZES]    # the sites' numbers
    X = np.vstack([t[FEATURES].to_numpy() for t in tables])
    y = np.concatenate([t["y"].to_numpy() for t in tables])
    clients = np.repeat(list(SIZES), [len(t) for t in tables])
    s = settings(method)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        est = FederatedGLM(**{k: v for k, v in s.items() if k not in ("features", "target")}, shuffle=False,
                           inference_share=0.0, random_state=SEED).fit(X, y, clients)
        took = time.perf_counter() - start
    diff = float(np.max(np.abs(np.asarray(res["theta"]) - est.theta_)))
    print(f"{method} max|flower - in-process| = {diff:.3g} (the in-process fit: {took:.3f} s)")
    return 0 if diff <= 1e-12 and res["sizes"] == list(SIZES.values()) else 1


def unknown(out: Path) -> int:
    results = [json.loads((out / f"{m}.json").read_text()) for m in STEPS]
    refused = [w for r in results for w in r.get("refused_nodes", {}).values()]
    # in every run the three sites, never the rogue (a run may end its greetings before the rogue answers)
    ok = (all(r.get("sizes") == list(SIZES.values()) and r.get("sites") == list(SIZES) for r in results)
          and refused and all("claims site 'a' but its signature does not verify" in w for w in refused))
    why = refused[0] if refused else "none"
    print(f"unknown node: {'refused' if ok else 'NOT refused'} ({why})")
    return 0 if ok else 1


def refusal(out: Path) -> int:
    res = json.loads((out / "fedavg.json").read_text())
    extra = res.get("extra", [])
    for line in extra:
        print(f"  {line}")
    if len(extra) == len(SIZES) and all("would spend past mu" in line for line in extra):
        print("budget refusal: held")
        return 0
    print(f"budget refusal: NOT held ({res})")
    return 1


def foreign(out: Path) -> int:
    res = json.loads((out / "foreign.json").read_text())
    replies = res.get("replies", [])
    marks = sorted(p.name for p in out.glob("rogue-ran-*"))
    refused = [json.loads(r["content"]).get("refused", "") for r in replies if "content" in r]
    ok = (len(replies) == len(res.get("nodes", [])) == len(SIZES) + 1 and not marks and len(refused) == len(replies)
          and all("is not one this site serves; nothing was read or released" in r for r in refused))
    print(f"  {refused[0] if refused else res}")
    print(f"foreign app: {'refused' if ok else 'NOT refused'}" + (f" (its ClientApp ran: {marks})" if marks else ""))
    return 0 if ok else 1


def _ledger(out: Path, node: str) -> list:
    path = out / f"ledger-{node}" / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def restart(out: Path) -> int:
    res = json.loads((out / "restart.json").read_text())
    lines = _ledger(out, "a")
    last = [e for e in lines if e["rows"] == lines[-1]["rows"]] if lines else []    # the restart set's rows
    spent = max((e["mu_run"] for e in last), default=0.0)
    outcome = ("the fit completed and the request past it was refused" if all(
        "would spend past mu" in x for x in res.get("extra", ["-"])) else f"the run failed: {res.get('error')}")
    ok = (len(last) <= 3 and len({e["run"] for e in last}) == 1 and spent <= 1.0 + 1e-12
          and ("error" in res or outcome.startswith("the fit completed")))
    print(f"  site a's ledger: {len(last)} release(s) of 3 in the run, mu = {spent:.6g} of 1; {outcome}")
    print(f"restart mid-run: {'no overspend' if ok else 'OVERSPENT'}")
    return 0 if ok else 1


def killed(out: Path, point: str, died: str, ended: str) -> int:
    """A guard killed (SIGKILL) at ``point`` of its third message (request 2) and restarted: the run resumed or
    failed naming the cause, soon enough (`KILLS`), and site a's ledger of those rows is within mu = 1."""
    outcome, cause, most = KILLS[point]
    res = json.loads((out / f"kill-{point}.json").read_text())
    lines = _ledger(out, "a")
    last = [e for e in lines if e["rows"] == lines[-1]["rows"]] if lines else []
    spent = max((e["mu_run"] for e in last), default=0.0)
    took = float(ended) - float(died)
    got = "failed" if "error" in res else "completed"
    ok = got == outcome and cause in res.get("error", "") and took <= most and spent <= 1.0 + 1e-12
    print(f"  killed at {point!r} of request 2: the run {got} {took:.1f} s after the kill (at most {most} s)"
          + (f": {res['error'][:200]}" if "error" in res else "") + f"; site a's ledger mu = {spent:.6g} of 1")
    print(f"guard killed taking a message ({point}): {'no lockout, no overspend' if ok else 'FAILED'}")
    return 0 if ok else 1


def _flower_status(path: Path) -> str:
    """The run's status in `flwr ls --format json` (saved to ``path``), or why it is not known."""
    try:
        runs = json.loads(path.read_text()).get("runs", [])
    except (OSError, ValueError) as exc:
        return f"unknown ({type(exc).__name__})"
    return str(runs[0].get("status", "none")) if runs else "not listed"


def second(out: Path, code: str) -> int:
    res = json.loads((out / "second.json").read_text())
    err = res.get("error", "")
    ok = err.count("lifetime budget") == len(SIZES) and "theta" not in res
    for part in re.split(r"(?:refused: |; )node ", err)[1:]:
        if "lifetime budget" in part:
            print(f"  node {part.rstrip(')')}")
    status = _flower_status(out / "status-second.json")
    shown = int(code) == 1 and "failed" in status
    print(f"  the coordinator's command exited {code}; Flower lists the run as {status!r}")
    print(f"second run on the same rows: {'refused' if ok else 'NOT refused'}"
          f"{'' if shown else ' (its failure did NOT show)'}")
    return 0 if ok and shown else 1


def rejoined(out: Path) -> int:
    """After the SuperLink's restart, every site's SuperNode (not restarted) answered the second run's greeting."""
    err = json.loads((out / "second.json").read_text()).get("error", "")
    answered = sorted(set(re.findall(r"site (\w+): refused: lifetime budget", err)))
    ok = answered == sorted(SIZES)
    print(f"superlink restart: {'the sites rejoined' if ok else 'the sites did NOT rejoin'} (the SuperLink killed "
          f"and restarted from its database; sites answering the next run: {', '.join(answered) or 'none'})")
    return 0 if ok else 1


if __name__ == "__main__":
    cmd, where = sys.argv[1], Path(sys.argv[2])
    checks = {"compare": compare, "unknown": unknown, "refusal": refusal, "foreign": foreign, "restart": restart,
              "killed": killed,
              "second": second, "rejoined": rejoined}
    if cmd == "prepare":
        prepare(where, int(sys.argv[3]), Path(__file__).resolve().parent.parent)
    elif cmd == "use":
        use(where, sys.argv[3])
    elif cmd == "settings":
        (where / "settings.json").write_text(json.dumps(settings(sys.argv[3])))
    elif cmd in checks:
        sys.exit(checks[cmd](where, *sys.argv[3:]))
    else:
        sys.exit(f"unknown command {cmd!r}")
