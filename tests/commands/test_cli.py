"""The command line: outputs, metadata, the ledger command, and one-line errors."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from fedgdp.commands.cli import main
from fedgdp.simulation.run import COLUMNS, read_cell

CELL = ["--model", "logistic", "--sizes", "uniform(20,40)", "--m", "5", "--mu", "2", "--K", "6"]


def test_simulate_writes_rows_and_metadata(tmp_path):
    out = tmp_path / "cell.parquet"
    assert main(["simulate", *CELL, "--methods", "fedsgd,fednewton", "--seeds", "0-3", "--study", "demo",
                 "--out", str(out)]) == 0
    df = read_cell(out)
    assert list(df.columns) == COLUMNS and len(df) == 8
    assert set(df["method"]) == {"fedsgd", "fednewton"} and set(df["replicate"]) == {0, 1, 2, 3}
    assert (df["study"] == "demo").all() and np.allclose(df["mu_composed"], 2.0, atol=1e-12)
    assert df["N"].between(100, 200).all() and (df["n_min"] >= 20).all() and (df["n_max"] <= 40).all()
    meta = pq.read_metadata(out).metadata
    params = json.loads(meta[b"params"])
    assert params["m"] == 5 and params["sizes"] == "uniform(20,40)" and params["tau1"] > 0
    assert meta[b"fedgdp_version"] == b"0.1.0"
    assert not list(tmp_path.glob(".*tmp"))


def test_params_file_and_flags(tmp_path):
    cfg = tmp_path / "p.yaml"
    cfg.write_text("m: 4\nsizes: equal(25)\nmethod_settings:\n  fedsgd: {eta: 0.25}\n")
    out = tmp_path / "c.parquet"
    assert main(["simulate", "--params", str(cfg), "--m", "3", "--methods", "fedsgd", "--K", "3",
                 "--seeds", "0", "--out", str(out)]) == 0
    params = json.loads(pq.read_metadata(out).metadata[b"params"])
    assert params["m"] == 3 and params["sizes"] == "equal(25)"
    assert params["method_settings"]["fedsgd"] == {"K": 3, "eta": 0.25}


GROUP = [  # three cells unlike each other: model, sizes, mu = inf, K, certified FedNewton
    {"model": "poisson", "sizes": "equal(20)", "m": 4, "mu": 2, "K": 5, "study": "g",
     "methods": ["fedsgd", "fednewton", "fednewton_certified"]},
    {"model": "logistic", "sizes": "uniform(20,40)", "m": 5, "mu": "inf", "K": 6, "study": "g",
     "methods": ["fedavg", "fedhybrid"]},
    {"model": "logistic", "sizes": "lognormal(3,0.5)", "m": 3, "mu": 6, "K": 4, "study": "g",
     "methods": ["fedsgd", "fednewton"]},
]


def _simulate_cells(tmp_path, name, cells):
    params, out = tmp_path / f"{name}.json", tmp_path / f"{name}.parquet"
    params.write_text(json.dumps(cells if len(cells) > 1 else cells[0]))
    assert main(["simulate", "--params", str(params), "--seeds", "1-3", "--out", str(out)]) == 0
    return out


def test_a_cell_has_the_same_rows_alone_and_in_a_group(tmp_path):
    """Several cells in one process (one simulate job of the workflow): each cell's rows
    equal those of the cell run alone, bit for bit (every column but the timing), in
    any grouping and order; the file lists every cell's parameters."""
    from fedgdp.simulation.summary import read_cells, summarise

    alone = [_simulate_cells(tmp_path, f"alone{i}", [c]) for i, c in enumerate(GROUP)]
    group = _simulate_cells(tmp_path, "group", GROUP)
    other = _simulate_cells(tmp_path, "other", [GROUP[2], GROUP[0]])
    cols = [c for c in COLUMNS if c != "elapsed_s"]
    expect = [read_cell(f)[cols] for f in alone]
    got = read_cell(group)[cols]
    assert len(got) == sum(map(len, expect)) == 3 * (3 + 2 + 2)
    assert got.equals(pd.concat(expect, ignore_index=True))
    assert read_cell(other)[cols].equals(pd.concat([expect[2], expect[0]], ignore_index=True))
    params = json.loads(pq.read_metadata(group).metadata[b"params"])
    assert [(p["model"], p["sizes"], p["m"]) for p in params] == [(c["model"], c["sizes"], c["m"]) for c in GROUP]
    assert summarise(read_cells([group])).equals(summarise(read_cells(alone)))


def test_a_bad_cell_of_a_group_stops_the_job_before_any_work(tmp_path, capsys):
    params, out = tmp_path / "p.json", tmp_path / "c.parquet"
    params.write_text(json.dumps([GROUP[0], dict(GROUP[1], m=0)]))
    assert main(["simulate", "--params", str(params), "--seeds", "0", "--out", str(out)]) == 2
    assert "m=0" in capsys.readouterr().err and not out.exists()


def test_ledger_command_prints_every_release(capsys):
    assert main(["ledger", *CELL, "--seed", "3", "--method", "fednewton"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["clients"]) == 5
    for client in report["clients"]:
        assert len(client["releases"]) == 6 + 1                      # K local steps + Newton
        mu = np.sqrt(sum((r["sensitivity"] / r["sigma"]) ** 2 for r in client["releases"]))
        assert mu == pytest.approx(2.0, abs=1e-12) and client["mu"] == pytest.approx(2.0, abs=1e-12)
        assert {"sensitivity", "sigma"} <= set(client["releases"][0])


BAD = [
    (["--m", "0"], "m=0"),
    (["--mu", "0"], "mu=0"),
    (["--mu", "-2"], "mu=-2"),
    (["--methods", "fedsgd,fedprox"], "'fedprox'"),
    (["--sizes", "unifrom(1,5)"], "'unifrom(1,5)'"),
    (["--sizes", "uniform(9,3)"], "a=9 > b=3"),
    (["--seeds", "9-3"], "'9-3'"),
    (["--model", "probit"], "'probit'"),
    (["--K", "0"], "K=0"),
    (["--m", "ten"], "'ten'"),
]


@pytest.mark.parametrize("args,named", BAD)
def test_bad_input_exits_with_one_line_and_no_file(tmp_path, args, named):
    out = tmp_path / "never.parquet"
    proc = subprocess.run([sys.executable, "-m", "fedgdp", "simulate", *CELL, *args, "--out", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], proc.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_corrupt_cell_file_is_named(tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(ValueError, match="bad.parquet"):
        read_cell(bad)


# ------------------------------------------------------------------ help, --out, signals
def _subcommands():
    from fedgdp.commands.cli import build_parser

    ap = build_parser()
    sub = next(a for a in ap._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    return ap, sub


def test_help_lists_every_subcommand_with_a_summary(capsys):
    ap, sub = _subcommands()
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    listed = {a.dest: a.help for a in sub._choices_actions}
    assert set(listed) == set(sub.choices) and len(listed) >= 14
    for name, summary in listed.items():
        assert summary and "\n" not in summary, name
        assert f"    {name}" in text, name
        assert " ".join(summary.split()[:3]) in " ".join(text.split()), name
        assert sub.choices[name].description == summary          # the command's own --help too


def test_every_option_of_every_subcommand_shows_its_default():
    import argparse

    _, sub = _subcommands()
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction) or action.required:
                continue
            entry = " ".join(parser._get_formatter()._format_action(action).split())   # its lines in --help
            assert "default" in entry, (name, entry)


def test_simulate_help_shows_the_resolved_defaults(capsys):
    from fedgdp.simulation.params import DEFAULTS

    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"number of clients (default: {DEFAULTS['m']})" in text
    assert f"(default: {DEFAULTS['model']})" in text and "(default: 0-99)" in text
    assert "(default: quantile:0.9)" in text and "(default: fedsgd,fedhybrid,fedavg,fednewton)" in text


def _run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fedgdp", *args], capture_output=True, text=True, **kw)


OUT_CASES = [   # (command line before the output, option, bad value -> message)
    (["simulate", *CELL, "--seeds", "0"], "--out", "{dir}", "is a folder"),
    (["simulate", *CELL, "--seeds", "0"], "--out", "{dir}/a.csv", "must end in .parquet"),
    (["simulate", *CELL, "--seeds", "0"], "--out", "{file}/a.parquet", "is a file, not a folder"),
    (["summarise", "x.parquet"], "--out", "{dir}/s.csv", "must end in .parquet"),
    (["plot", "x.parquet", "--spec", "{}"], "--png", "{dir}/f.pdf", "must end in .png"),
    (["plot", "x.parquet", "--spec", "{}"], "--pdf", "{dir}", "is a folder"),
    (["table", "table1", "x.parquet", "--spec", "{}"], "--tex", "{dir}/t.md", "must end in .tex"),
    (["table", "rates", "x.parquet", "--spec", "{}"], "--csv", "{dir}", "is a folder"),
    (["realdata", "--split", "0"], "--out", "{dir}/r.csv", "must end in .parquet"),
    (["realdata-plot", "x.parquet", "--task", "binary"], "--medians", "{dir}/m.parquet", "must end in .csv"),
    (["bench"], "--out", "{dir}/b.txt", "must end in .json"),
    (["nn-run"], "--out", "{dir}", "is a folder"),
    (["nn-summarise", "x.parquet"], "--csv", "{dir}/s.txt", "must end in .csv"),
    (["nn-plot", "x.parquet", "--figure", "fig09"], "--out", "{dir}/f.png", "must end in .pdf"),
    (["fetch-mnist"], "--dir", "{file}", "is a file, not a folder"),
    (["nn-fetch", "--dataset", "digits"], "--data-dir", "{file}", "is a file, not a folder"),
]


@pytest.mark.parametrize("before,option,value,message", OUT_CASES)
def test_bad_output_path_is_one_line_exit_2_and_no_file(tmp_path, before, option, value, message):
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("a file")
    value = value.format(dir=tmp_path / "d", file=tmp_path / "f")
    proc = _run_cli(*before, option, value, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and option in lines[0] and repr(value) in lines[0] and message in lines[0], lines
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["d", "f"]        # nothing written


def test_every_file_writing_option_is_checked():
    """An option that names an output file or folder gets a checking type (output_path,
    output_dir), so the checks above cover new subcommands too."""
    from fedgdp.commands.cli import output_dir

    _, sub = _subcommands()
    outputs = {"out", "pdf", "png", "csv", "md", "tex", "medians", "dir"}
    for name, parser in sub.choices.items():
        for action in parser._actions:
            if action.dest in outputs or (action.dest == "data_dir" and name == "nn-fetch"):
                assert action.type is not None and (action.type is output_dir
                                                    or action.type.__name__ == "output path"), (name, action.dest)


def test_ctrl_c_exits_130_with_one_line_and_no_output(tmp_path):
    """SIGINT during a long simulate: one line, exit 130, no output and no temporary file."""
    import signal
    import time

    out = tmp_path / "cell.parquet"
    proc = subprocess.Popen([sys.executable, "-m", "fedgdp", "simulate", "--model", "logistic",
                             "--sizes", "equal(200)", "--m", "50", "--methods", "fedsgd,fedavg",
                             "--seeds", "0-99999", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Ctrl-C as in a terminal, even where this test runs with SIGINT ignored
                            # (a background job without job control: the child would inherit SIG_IGN)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(3)              # well inside main(): started, not finished (100000 replicates)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err.strip().splitlines() == ["fedgdp: interrupted"], err
    assert list(tmp_path.iterdir()) == []


def test_sigterm_exits_143_with_one_line(tmp_path):
    import signal
    import time

    proc = subprocess.Popen([sys.executable, "-m", "fedgdp", "simulate", "--sizes", "equal(200)", "--m", "50",
                             "--methods", "fedsgd", "--seeds", "0-99999", "--out", str(tmp_path / "c.parquet")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip().splitlines() == ["fedgdp: terminated"], err
    assert list(tmp_path.iterdir()) == []


def test_interrupt_while_writing_leaves_no_file(tmp_path, monkeypatch):
    """Ctrl-C inside the writer (after the temporary file is opened): no file left, exit 130."""
    import pyarrow.parquet as pq_mod

    def interrupted(table, where, *a, **k):
        open(where, "wb").write(b"PAR1 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq_mod, "write_table", interrupted)
    out = tmp_path / "c.parquet"
    assert main(["simulate", *CELL, "--methods", "fedsgd", "--seeds", "0", "--out", str(out)]) == 130
    assert list(tmp_path.iterdir()) == []


def test_main_runs_outside_the_main_thread(tmp_path):
    """No signal handler can be set there; the command still runs."""
    import threading

    out = tmp_path / "c.parquet"
    result = []
    t = threading.Thread(target=lambda: result.append(
        main(["simulate", *CELL, "--methods", "fedsgd", "--seeds", "0", "--out", str(out)])))
    t.start()
    t.join()
    assert result == [0] and out.exists()


@pytest.mark.parametrize("signum,code,line", [(15, 143, "fedgdp: terminated"), (2, 130, "fedgdp: interrupted")])
def test_a_stop_wrapped_by_a_library_still_exits_as_stopped(monkeypatch, capsys, signum, code, line):
    """A SIGTERM or Ctrl-C raised inside numba's compiler comes back as its RuntimeError (seen
    in CI: exit 1 with a traceback, or a crash at teardown): the run still ends as stopped, one
    line, 143 or 130; the next call's errors are errors again."""
    import types

    from fedgdp.commands import cli

    def wrapped(args):
        try:
            cli._on_stop(signum, None)
        except (cli._Terminated, KeyboardInterrupt) as exc:
            raise RuntimeError("Failed in nopython mode pipeline") from exc

    def broken(args):
        raise RuntimeError("a bug")

    for func, want, text in ((wrapped, code, line), (broken, 1, "internal error")):
        monkeypatch.setattr(cli, "build_parser", lambda f=func: types.SimpleNamespace(
            parse_args=lambda argv: types.SimpleNamespace(func=f)))
        assert cli.main([]) == want
        err = capsys.readouterr().err
        assert text in err.strip().splitlines()[-1], err


@pytest.mark.parametrize("signum,stop", [("SIGTERM", "_Terminated"), ("SIGINT", "KeyboardInterrupt")])
def test_a_stop_inside_a_numba_compile_waits_for_the_compile(monkeypatch, signum, stop):
    """Raised inside numba's compiler a SIGTERM crashed the process (SIGSEGV), and a Ctrl-C hung
    it at teardown or printed LLVM's errors (3 runs in 40 on a cold kernel cache); while the
    compiler lock is held the handler only arms a timer, and the timer's handler raises once
    the compile is over (and does nothing without a pending stop)."""
    import builtins
    import signal

    from fedgdp.commands import cli

    expected = getattr(cli, stop, None) or getattr(builtins, stop)
    armed = []
    monkeypatch.setattr(signal, "setitimer", lambda which, seconds: armed.append(seconds))
    monkeypatch.setattr(cli, "_STOPPING", None)
    cli._on_alarm(signal.SIGALRM, None)                   # no stop pending: nothing
    assert armed == []
    monkeypatch.setattr(cli, "_compiling", lambda: True)
    cli._on_stop(getattr(signal, signum), None)           # compiling: deferred, not raised
    cli._on_alarm(signal.SIGALRM, None)                   # still compiling: looks again
    assert cli._STOPPING is expected and armed == [cli._RECHECK_S, cli._RECHECK_S]
    monkeypatch.setattr(cli, "_compiling", lambda: False)
    with pytest.raises(expected):
        cli._on_alarm(signal.SIGALRM, None)
