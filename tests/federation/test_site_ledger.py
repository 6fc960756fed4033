"""A site's lifetime ledger on its own disk, its guard and its identity (issue 61): a release is on disk before
it leaves, a kill at any point overspends nothing, a later run on the same rows sees the earlier spend, a foreign
app gets nothing, and the coordinator takes only the nodes that prove a listed site's key."""
import json
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_federation import SIZES, data, disk_sites, settings

from fedgdp.api.budget import record_keys
from fedgdp.federation import Site
from fedgdp.federation.ledger import SiteLedger
from fedgdp.federation.sites import fit_across, greet, in_process

FEDAVG = {"R": 3, "K": 2, "eta": 0.5}


def test_a_kill_after_any_ledger_line_overspends_nothing(tmp_path):
    """For each release k of a 3-release run, a site process is killed (SIGKILL) right after the k-th line is
    fsynced, before the release leaves. The restarted site takes up the run at k (the lost release counted),
    answers the rest of the script and refuses one more: at most 3 releases ever left, the ledger says mu = 1."""
    X, y, clients = data()
    st = settings("fedavg", method_settings=FEDAVG)
    rows = clients == "a"
    np.save(tmp_path / "X.npy", X[rows])
    np.save(tmp_path / "y.npy", y[rows])
    (tmp_path / "settings.json").write_text(json.dumps(st))
    child = textwrap.dedent("""
        import json, os, signal, sys
        import numpy as np
        from fedgdp.api.budget import record_keys
        from fedgdp.federation import Site
        from fedgdp.federation.ledger import SiteLedger
        where, kill_at = sys.argv[1], int(sys.argv[2])
        X, y = np.load(where + "/X.npy"), np.load(where + "/y.npy")
        st = json.load(open(where + "/settings.json"))
        charge = SiteLedger.charge
        def charge_then_die(self, run, request, *args):
            charge(self, run, request, *args)
            if request == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)      # the line is on disk; the release never leaves
        SiteLedger.charge = charge_then_die
        site = Site(X, y, st, name="a", ledger=SiteLedger(where + "/ledger", record_keys(X, y), 1.0), run="r")
        for want in site.script:
            reply = site.handle({**want, "theta": np.zeros((4, 1))})
            print("released" if "release" in reply else reply["refused"], flush=True)
    """)
    for kill_at in (1, 2, 3):
        where = tmp_path / f"kill{kill_at}"
        where.mkdir()
        for f in ("X.npy", "y.npy", "settings.json"):
            (where / f).write_bytes((tmp_path / f).read_bytes())
        got = subprocess.run([sys.executable, "-c", child, str(where), str(kill_at)], capture_output=True, text=True,
                             timeout=300)
        assert got.returncode == -signal.SIGKILL, got.stderr
        left = got.stdout.split().count("released")
        assert left == kill_at - 1                       # the k-th release never left the process
        ledger = SiteLedger(str(where / "ledger"), record_keys(X[rows], y[rows]), 1.0)
        site = Site(X[rows], y[rows], st, name="a", ledger=ledger, run="r")      # the restarted process
        assert ledger.position("r")[0] == kill_at and len(site.done) == kill_at
        replies = [site.handle({**want, "theta": np.zeros((4, 1))}) for want in site.script]   # the coordinator
        left += sum("release" in r for r in replies)                                         # asks again
        assert left <= len(site.script) == 3
        assert all("would spend past mu" in r["refused"] for r in replies[3 - kill_at:])
        assert ledger.spent() == pytest.approx(1.0, rel=1e-12) and site.spent_mu() <= 1.0 + 1e-12


def test_a_second_run_on_the_same_rows_sees_the_first_and_is_refused_past_the_lifetime_mu(tmp_path, caplog):
    X, y, clients = data()
    st = settings("fedavg", method_settings=FEDAVG)
    in_process(disk_sites(X, y, clients, st, tmp_path, run="r1", lifetime=1.0), st)
    for site in disk_sites(X, y, clients, st, tmp_path, run="r2", lifetime=1.0):
        with caplog.at_level(logging.WARNING, logger="fedgdp.federation"):
            reply = site.handle({"op": "hello", "settings": st})
        assert "lifetime budget: these rows have spent mu = 1 of their lifetime mu = 1" in reply["refused"]
    # the same rows in another order, or with rows added, are the same records: refused too
    a = clients == "a"
    Xa, ya = X[a], y[a]
    for Xs, ys in [(Xa[::-1], ya[::-1]), (np.vstack([Xa, Xa[:5] + 9.0]), np.append(ya, ya[:5]))]:
        ledger = SiteLedger(str(tmp_path / "a"), record_keys(Xs, ys), 1.0)
        assert ledger.spent() == pytest.approx(1.0) and ledger.room("r3", 1.0) is not None
    # other rows under the same ledger spend their own budget
    fresh = SiteLedger(str(tmp_path / "a"), record_keys(Xa + 100.0, ya), 1.0)
    assert fresh.spent() == 0.0 and fresh.room("r3", 1.0) is None
    # a lifetime of sqrt(2): a second run fits exactly, a third does not
    root = tmp_path / "two"
    in_process(disk_sites(X, y, clients, st, root, run="r1", lifetime=math.sqrt(2)), st)
    in_process(disk_sites(X, y, clients, st, root, run="r2", lifetime=math.sqrt(2)), st)
    site = disk_sites(X, y, clients, st, root, run="r3", lifetime=math.sqrt(2))[0]
    assert site.disk.spent() == pytest.approx(math.sqrt(2), rel=1e-12)
    assert "lifetime budget" in site.handle({"op": "hello", "settings": st})["refused"]


def test_runs_served_at_once_cannot_pass_the_lifetime_mu_together(tmp_path):
    """Two runs greeted at once on the same rows (each fits alone under a lifetime of 1.2): their releases
    interleave, and the ledger refuses the release that would pass 1.2."""
    X, y, clients = data()
    st = settings("fedavg", method_settings=FEDAVG)
    rows = clients == "a"
    one = disk_sites(X[rows], y[rows], clients[rows], st, tmp_path, run="r1", lifetime=1.2, seed=None)[0]
    two = disk_sites(X[rows], y[rows], clients[rows], st, tmp_path, run="r2", lifetime=1.2, seed=None)[0]
    assert "refused" not in one.handle({"op": "hello", "settings": st})
    assert "refused" not in two.handle({"op": "hello", "settings": st})
    replies = []
    for want in one.script:
        replies += [one.handle({**want, "theta": np.zeros((4, 1))}), two.handle({**want, "theta": np.zeros((4, 1))})]
    refused = [r["refused"] for r in replies if "refused" in r]
    assert refused and all("past their lifetime mu = 1.2" in r for r in refused)
    assert one.disk.spent() <= 1.2 * (1 + 1e-12)


def test_a_torn_ledger_stops_the_site_and_a_run_begun_with_other_settings_is_refused(tmp_path):
    X, y, clients = data()
    st = settings("fedavg", method_settings=FEDAVG)
    rows = clients == "a"
    site = disk_sites(X[rows], y[rows], clients[rows], st, tmp_path, run="r1", seed=None)[0]
    site.handle({**site.script[0], "theta": np.zeros((4, 1))})
    other = settings("fedavg", method_settings={**FEDAVG, "eta": 0.25})
    again = disk_sites(X[rows], y[rows], clients[rows], other, tmp_path, run="r1", seed=None)[0]
    assert "begun on these rows with other settings" in again.handle({**again.script[1], "theta": np.zeros((4, 1))})[
        "refused"]
    with open(tmp_path / "a" / "ledger.jsonl", "a") as fh:
        fh.write('{"unit": "record", "rows": ')          # a crash inside a write
    with pytest.raises(ValueError, match="line 2 is torn"):
        SiteLedger(str(tmp_path / "a"), record_keys(X[rows], y[rows]), 1.0)


# ---------------------------------------------------------------- known sites
def _keys(n):
    pytest.importorskip("cryptography", reason="the keys of known sites need cryptography (flwr's; extra flower)")
    from cryptography.hazmat.primitives.asymmetric import ec

    return [ec.generate_private_key(ec.SECP384R1()) for _ in range(n)]


def _listing(keys, names=("a", "b", "c")):
    from fedgdp.federation.identity import public_key_text

    return [{"name": n, "public_key": public_key_text(k)} for n, k in zip(names, keys)]


def test_the_coordinator_takes_only_nodes_that_prove_a_listed_sites_key(tmp_path):
    """Three sites sign their greetings; a rogue node with 5000 poisoned rows claims site a with its own key
    and is refused; a greeting replayed from another hello is refused; the fit runs on the three sites."""
    from fedgdp.federation.identity import identify, read_sites

    X, y, clients = data()
    st = settings("fedsgd")
    keys = _keys(4)
    group = disk_sites(X, y, clients, st, tmp_path, keys=keys[:3], seed=None)
    rng = np.random.default_rng(5)
    Xr = rng.normal(size=(5000, 3))
    rogue = Site(Xr, (Xr[:, 0] < 0).astype(int), st, name="a", key=keys[3])
    nodes = {17: rogue, 3: group[2], 9: group[0], 12: group[1]}     # the rogue holds the lowest... and a low id

    def ask(pairs):
        return [nodes[j].handle(request) for j, request in pairs]

    sites = read_sites(json.dumps(_listing(keys[:3])))
    greetings = dict(zip(nodes, greet(ask, list(nodes), st, nonce="n1")))
    found, refused = identify(greetings, sites, "n1")
    assert found == {"a": 9, "b": 12, "c": 3}
    assert list(refused) == [17] and "signature does not verify with that site's key" in refused[17]
    _, stale = identify({9: greetings[9]}, sites, "n2")                          # a replay of another run's hello
    assert "answers another hello" in stale[9]
    order = [found[name] for name in sites]
    fit = fit_across(lambda pairs: ask([(order[j], r) for j, r in pairs]), 3, st,
                     hellos=[greetings[n] for n in order])
    assert fit.sizes.tolist() == list(SIZES)
    for bad, match in [("[]", "must list"), ('[{"name": "a"}]', "must be"), (json.dumps(_listing(keys[:1] * 2)),
                                                                             "listed twice|share a public key")]:
        with pytest.raises(ValueError, match=match):
            read_sites(bad)


# ---------------------------------------------------------------- the guard
def test_the_guard_answers_only_listed_apps_and_its_configuration_stays_with_it(tmp_path, caplog):
    """A foreign app (its bundle's hash not on the site's list) gets one refusal per message and the site logs
    one line; fedgdp's app gets the site's signed greeting, which names no path. The bundle's own ClientApp
    answers nothing."""
    import pandas as pd

    key = _keys(1)[0]
    from fedgdp.federation.guard import Guard, read_config
    from fedgdp.federation.identity import check_greeting, read_sites
    from fedgdp.federation.ledger import UNIT

    X, y, clients = data()
    st = settings("fedsgd")
    rows = clients == "a"
    pd.DataFrame(X[rows], columns=["x0", "x1", "x2"]).assign(y=y[rows]).to_csv(tmp_path / "a.csv", index=False)
    (tmp_path / "settings.json").write_text(json.dumps(st))
    from cryptography.hazmat.primitives import serialization

    (tmp_path / "a_key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                                       serialization.NoEncryption()))
    ours, theirs = "1" * 64, "2" * 64
    (tmp_path / "site.toml").write_text(
        f'name = "a"\ndata = "{tmp_path}/a.csv"\nsettings = "{tmp_path}/settings.json"\n'
        f'ledger = "{tmp_path}/ledger"\nlifetime_mu = 1.0\nkey = "{tmp_path}/a_key"\napps = ["{ours}"]\n')
    guard = Guard(read_config(str(tmp_path / "site.toml")))
    hello = {"op": "hello", "settings": st, "nonce": "x"}
    with caplog.at_level(logging.WARNING, logger="fedgdp.federation"):
        replies = [guard.answer("7", theirs, "query", hello), guard.answer("7", theirs, "query", {"op": "gradient"})]
    assert all("is not one this site serves; nothing was read or released" in r["refused"] for r in replies)
    assert len(caplog.records) == 1 and "\n" not in caplog.records[0].getMessage()
    greeting = guard.answer("8", ours, "query", hello)
    assert check_greeting(greeting, read_sites(_listing([key], "a")), "x") is None
    assert str(tmp_path) not in json.dumps(greeting) and greeting["n"] == SIZES[0]
    assert "not a fedgdp request" in guard.answer("8", ours, "train", None)["refused"]
    assert not os.path.exists(tmp_path / "ledger" / "ledger.jsonl")       # nothing released, nothing charged
    assert UNIT == "record"
    for bad, match in [('name = "a"\n', "'data' is required"), ('apps = ["abc"]\nname="a"\ndata="x"\nsettings="s"\n'
                                                               'ledger="l"\nlifetime_mu=1\n', "SHA-256"),
                       ("data_path = 1\n", "unknown key")]:
        (tmp_path / "bad.toml").write_text(bad)
        with pytest.raises(ValueError, match=match):
            read_config(str(tmp_path / "bad.toml"))


def test_the_bundles_clientapp_refuses():
    pytest.importorskip("flwr", reason="the extra flower is not installed (pip install -e '.[flower]')")
    from fedgdp.federation import app

    assert "never through the app bundle's ClientApp" in app.NO_GUARD
    assert app.decode(app.encode({"refused": app.NO_GUARD})) == {"refused": app.NO_GUARD}


def test_the_commands_fail_with_one_line_and_their_exit_status(tmp_path, capsys):
    from fedgdp.federation.__main__ import main

    assert main(["nothing"]) == 2
    (tmp_path / "settings.json").write_text(json.dumps(settings("fedsgd")))
    (tmp_path / "bad.csv").write_text("x0,x1,y\n1,2,0\n")
    assert main(["check", str(tmp_path / "bad.csv"), str(tmp_path / "settings.json")]) == 1
    assert "cannot join: feature column 'x2' is not in the data" in capsys.readouterr().err
    (tmp_path / "site.toml").write_text('name = "a"\n')
    assert main(["site", str(tmp_path / "site.toml")]) == 1
    err = capsys.readouterr().err
    assert "cannot serve" in err and "'data' is required" in err


def test_a_pushed_reply_is_noted_by_its_tasks_token(tmp_path):
    """The guard pushes a reply once: restarted, it skips the push of a reply noted for the same task's token."""
    from fedgdp.federation.guard import _pushed, _save

    note = str(tmp_path / "inflight.pushed")
    assert not _pushed(note, "token-1")              # nothing noted: the reply is pushed
    _save(note, "token-1")
    assert _pushed(note, "token-1")                  # noted for this task: not pushed again
    assert not _pushed(note, "token-2")              # a note of another task does not count
