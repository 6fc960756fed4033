"""Careless inputs (issue 24): every mistake is one line, exit status 2, before any work,
and leaves no output file; only a genuine bug shows a traceback.

One parametrised test per command: the command line, the expected exit status, the words
the message must contain. Every output of a case goes under ``<out>/``, and the test checks
that the folder is still empty afterwards. A new subcommand gets its cases here
(``test_every_subcommand_has_careless_cases`` fails until it has some).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedgdp.commands.cli import build_parser, main
from paths import ROOT

CELL = ["--model", "logistic", "--sizes", "equal(20)", "--m", "4", "--K", "3"]
PLOT_SPEC = {"layout": "m_by_method", "model": "logistic", "study": "s", "panels": [{}]}
T1_SPEC = {"model": "logistic", "study": "s", "cell": {"sizes": "equal(20)", "m": 4}}
COV = {"families": {"logistic": [0.0, 1.0]}, "m": [3], "n": [20], "mu": [2], "methods": ["auto"], "replicates": 1,
       "base_seed": 0, "alpha": 0.05, "cov_type": "model"}


def spec(base: dict, drop=(), **extra) -> str:
    return json.dumps({**{k: v for k, v in base.items() if k not in drop}, **extra})


def case(command, argv, words, status=2, marks=(), id=None):
    return pytest.param(command, argv, words, status, marks=marks, id=id)


# (command, argv with <out>, <summary>, <cell>, <notyaml>, <file>, ... for paths, words, status)
CASES = [
    # simulate
    case("simulate", ["simulate", *CELL, "--seeds", "0", "--out", "/sys/x.parquet"],
         ["--out", "cannot write in folder '/sys'"], id="simulate-unwritable-out"),
    case("simulate", ["simulate", "--params", "<notyaml>", "--out", "<out>/c.parquet"],
         ["--params", "not valid YAML", "line 2"], id="simulate-params-not-yaml"),
    case("simulate", ["simulate", "--params", "<emptylist>", "--out", "<out>/c.parquet"],
         ["empty list"], id="simulate-params-empty-list"),
    case("simulate", ["simulate", "--params", "<empty>", "--out", "<out>/c.parquet"],
         ["is empty"], id="simulate-params-empty-file"),
    case("simulate", ["simulate", "--params", "<out>/none.yaml", "--out", "<out>/c.parquet"],
         ["cannot read --params"], id="simulate-params-missing"),
    case("simulate", ["simulate", "--m", "100000000", "--seeds", "0", "--out", "<out>/c.parquet"],
         ["needs about", "memory", "--m"], id="simulate-huge-m"),
    case("simulate", ["simulate", *CELL, "--sizes", "equal(1)", "--methods", "fednewton", "--seeds", "0",
                      "--out", "<out>/c.parquet"], ["equal(1)"], id="simulate-fednewton-equal-1"),
    case("simulate", ["simulate", *CELL, "--seeds", "5-2", "--out", "<out>/c.parquet"], ["5-2"],
         id="simulate-bad-seeds"),
    case("simulate", ["simulate", *CELL, "--seeds", "0-", "--out", "<out>/c.parquet"], ["bad seeds '0-'"],
         id="simulate-open-seed-range"),
    # ledger
    case("ledger", ["ledger", *CELL, "--method", "fedfoo"], ["fedfoo"], id="ledger-unknown-method"),
    case("ledger", ["ledger", "--m", "100000000", "--method", "fedsgd"], ["memory"], id="ledger-huge-m"),
    case("ledger", ["ledger", *CELL, "--method", "fedsgd", "--seed", "-1"], ["--seed"], id="ledger-negative-seed"),
    # audit
    case("audit", ["audit", "--quik"], ["--quik"], id="audit-unknown-option"),
    # bench
    case("bench", ["bench", "--suite", "--replicates", "0", "--config", "<config>", "--out", "<out>/b.json"],
         ["--replicates", ">= 1", "got 0"], id="bench-zero-replicates"),
    case("bench", ["bench", "--suite", "--replicates", "-1", "--config", "<config>", "--out", "<out>/b.json"],
         ["--replicates", "got -1"], id="bench-negative-replicates"),
    case("bench", ["bench", "--suite", "--config", "<notyaml>"], ["--config", "not valid YAML"],
         id="bench-config-not-yaml"),
    case("bench", ["bench", "--suite", "--config", "<out>/none.yaml"], ["--config"], id="bench-config-missing"),
    case("bench", ["bench", "--suite", "--config", "<config>", "--studies", "nosuch"], ["no cells"],
         id="bench-unknown-study"),
    case("bench", ["bench"], ["--suite"], id="bench-without-suite"),
    # summarise
    case("summarise", ["summarise", "<notyaml>", "--out", "<out>/s.parquet"], ["cannot read", "notyaml"],
         id="summarise-not-parquet"),
    case("summarise", ["summarise", "<out>/none.parquet", "--out", "<out>/s.parquet"], ["none.parquet"],
         id="summarise-missing-file"),
    # plot
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC, drop=["model"]), "--png", "<out>/f.png"],
         ["--spec lacks 'model'"], id="plot-spec-without-model"),
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC, panels=[]), "--png", "<out>/f.png"],
         ["panels is empty"], id="plot-spec-no-panels"),
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC, modle="x"), "--png", "<out>/f.png"],
         ["unknown key 'modle'", "did you mean 'model'"], id="plot-spec-unknown-key"),
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC, panels={}), "--png", "<out>/f.png"],
         ["panels must be a list"], id="plot-spec-wrong-type"),
    case("plot", ["plot", "<summary>", "--spec", "{layout:", "--png", "<out>/f.png"], ["not valid JSON"],
         id="plot-spec-not-json"),
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC)], ["--pdf"], id="plot-no-output"),
    case("plot", ["plot", "<summary>", "--spec", spec(PLOT_SPEC, study="other"), "--png", "<out>/f.png"],
         ["no summary rows"], id="plot-study-not-in-summaries"),
    # table
    case("table", ["table", "table1", "<summary>", "--spec", spec(T1_SPEC, drop=["cell"]), "--csv", "<out>/t.csv"],
         ["--spec lacks 'cell'"], id="table1-spec-without-cell"),
    case("table", ["table", "table1", "<summary>", "--spec", spec(T1_SPEC, cell={}), "--csv", "<out>/t.csv"],
         ["cell is empty"], id="table1-spec-empty-cell"),
    case("table", ["table", "rates", "<summary>", "--spec", "{}", "--csv", "<out>/t.csv"],
         ["--spec lacks 'fits'"], id="rates-spec-without-fits"),
    case("table", ["table", "table1", "<summary>", "--spec", spec(T1_SPEC)], ["--csv"], id="table-no-output"),
    case("table", ["table", "tabel1", "<summary>", "--spec", "{}"], ["did you mean 'table1'"], id="table-unknown-kind"),
    # claims
    case("claims", ["claims", "--md", "<out>/c.md"], ["no data"], id="claims-no-data"),
    case("claims", ["claims", "--summaries", "<summary>", "--nn-readings", "<notyaml>", "--md", "<out>/c.md"],
         ["--nn-readings", "lacks the column"], id="claims-readings-not-a-readings-table"),
    case("claims", ["claims", "--summaries", "<summary>", "--spec", '{"titel": "x"}', "--md", "<out>/c.md"],
         ["unknown key 'titel'", "did you mean 'title'"], id="claims-spec-unknown-key"),
    # claims-map
    case("claims-map", ["claims-map", "--spec", '{"designs": {"s": {}}}', "--md", "<out>/m.md"], ["no data"],
         id="claims-map-no-data"),
    case("claims-map", ["claims-map", "--summaries", "<summary>", "--spec", "{}", "--md", "<out>/m.md"],
         ["--spec lacks 'designs'"], id="claims-map-spec-without-designs"),
    # decompose
    case("decompose", ["decompose", "<cell>", "--spec", '{"studies": {"private": "s"}}', "--csv", "<out>/d.csv"],
         ["--spec lacks 'K_conv'"], id="decompose-spec-without-K_conv"),
    case("decompose", ["decompose", "<cell>", "--spec", '{"studies": {}, "K_conv": 3}', "--csv", "<out>/d.csv"],
         ["studies is empty"], id="decompose-spec-no-studies"),
    # coverage-cell, coverage
    case("coverage-cell", ["coverage-cell", "--spec", spec({"settings": COV}), "--out", "<out>/c.parquet"],
         ["--spec lacks 'cell'"], id="coverage-cell-spec-without-cell"),
    case("coverage-cell", ["coverage-cell", "--spec", spec({"settings": COV, "cell": "logistic_m3_n9_mu2_auto"}),
                           "--out", "<out>/c.parquet"], ["logistic_m3_n9_mu2_auto", "is not a cell"],
         id="coverage-cell-unknown-cell"),
    case("coverage-cell", ["coverage-cell", "--spec", spec({"settings": {**COV, "m": [0]}, "cell": "x"}),
                           "--out", "<out>/c.parquet"], ["coverage.m", "positive integers"],
         id="coverage-cell-bad-m"),
    case("coverage", ["coverage", "<cell>", "--spec", spec({"settings": COV})], ["give at least one of"],
         id="coverage-no-output"),
    case("coverage", ["coverage", "<cell>", "--spec", spec({"settings": {**COV, "mu": [0]}}), "--csv",
                      "<out>/c.csv"], ["coverage.mu"], id="coverage-bad-mu"),
    # realdata
    case("realdata", ["realdata", "--split", "-1", "--out", "<out>/r.parquet"], ["--split"],
         id="realdata-negative-split"),
    case("realdata", ["realdata", "--params", "<notyaml>", "--split", "0", "--out", "<out>/r.parquet"],
         ["not valid YAML"], id="realdata-params-not-yaml"),
    case("realdata", ["realdata", "--spec", '{"m": 0}', "--split", "0", "--out", "<out>/r.parquet"], ["m"],
         id="realdata-bad-setting"),
    # realdata-plot
    case("realdata-plot", ["realdata-plot", "<summary>", "--task", "binary"], ["--pdf"],
         id="realdata-plot-no-output"),
    case("realdata-plot", ["realdata-plot", "<notyaml>", "--task", "binary", "--png", "<out>/f.png"],
         ["cannot read"], id="realdata-plot-not-parquet"),
    # fetch-mnist
    case("fetch-mnist", ["fetch-mnist", "--dir", "<file>"], ["is a file, not a folder"], id="fetch-mnist-dir-is-file"),
    # nn-* (torch missing: the torch_missing fixture hides it)
    case("nn-run", ["nn-run", "--n", "30", "--out", "<out>/n.parquet"], ["PyTorch", "fedgdp[nn]"],
         id="nn-run-without-torch"),
    case("nn-bench", ["nn-bench", "--datasets", "digits"], ["PyTorch", "fedgdp[nn]"], id="nn-bench-without-torch"),
    case("nn-bench", ["nn-bench", "--datasets", "imagenet"], ["--datasets", "imagenet"], id="nn-bench-unknown-network"),
    case("nn-bench", ["nn-bench", "--sizes", "100,1"], ["--sizes", ">= 2"], id="nn-bench-size-one"),
    case("nn-bench", ["nn-bench", "--repeats", "0"], ["--repeats"], id="nn-bench-zero-repeats"),
    case("nn-summarise", ["nn-summarise", "<notyaml>", "--out", "<out>/s.parquet"], ["notyaml"],
         id="nn-summarise-not-parquet"),
    case("nn-plot", ["nn-plot", "<out>/none.parquet", "--figure", "fig09", "--out", "<out>/f.pdf"],
         ["none.parquet"], id="nn-plot-missing-file"),
    case("nn-fetch", ["nn-fetch", "--dataset", "digits", "--data-dir", "<file>"], ["is a file"],
         id="nn-fetch-dir-is-file"),
    case("nn-readings", ["nn-readings", "<out>/none.yaml", "--runs-dir", "<out>/runs", "--out-dir", "<out>/rd"],
         ["cannot read the readings config", "none.yaml"], id="nn-readings-missing-config"),
    case("nn-readings", ["nn-readings", "<notyaml>", "--runs-dir", "<out>/runs", "--out-dir", "<out>/rd"],
         ["not valid YAML"], id="nn-readings-not-yaml"),
    case("nn-readings", ["nn-readings", "<emptylist>", "--runs-dir", "<out>/runs", "--out-dir", "<out>/rd"],
         ["is a mapping"], id="nn-readings-not-a-mapping"),
    case("nn-restore", ["nn-restore", "<out>/nosuch", "--configfile", "<out>/none.yaml"],
         ["nosuch is not a folder"], id="nn-restore-missing-folder"),
    case("nn-restore", ["nn-restore", "<out>", "--configfile", "<out>/none.yaml"], ["--configfile", "none.yaml"],
         id="nn-restore-missing-config"),
    case("nn-restore", ["nn-restore", "--configfile", "<notyaml>"], ["give a folder"], id="nn-restore-no-folder"),
    # fit
    case("fit", ["fit", "<out>/none.csv", "--target", "y", "--client", "c"], ["none.csv"], id="fit-missing-file"),
    case("fit", ["fit", "<notyaml>", "--target", "y", "--client", "c"], ["notyaml"], id="fit-not-a-table"),
    case("fit", ["fit", "<table>", "--target", "nosuch", "--client", "c"], ["nosuch"], id="fit-missing-column"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--mu", "-1"], ["mu"], id="fit-negative-mu"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--mu", "1e200"], ["mu must be at most 1e+100"],
         id="fit-mu-above-max"),
    case("fit", ["fit", "<tablena>", "--target", "y", "--client", "c"], ["target column 'y'", "1 missing value"],
         id="fit-missing-label"),
    case("fit", ["fit", "<tablena>", "--target", "y", "--client", "c", "--family", "poisson"],
         ["target column 'y'", "1 missing value"], id="fit-missing-count"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--classes", "a,b"],
         ["--classes 'a,b'", "column 'y' holds int64", "must be an integer"], id="fit-classes-not-numbers"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--classes", "0,2"],
         ["y holds the label 1 at row 1", "not in classes=[0, 2]"], id="fit-label-outside-classes"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--classes", "1"],
         ["needs exactly 2 classes", "classes=[1]"], id="fit-one-class"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--classes", "0,1", "--family", "poisson"],
         ["classes is for the classifiers"], id="fit-classes-with-poisson"),
    # issue 30: the certified solve's accepted ranges (docs/methods.md §2), refused before any work
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--hessian-clip", "1e-300"],
         ["hessian_clip", "1e-300", "[1e-08, 1e+08]"], id="fit-hessian-clip-tiny"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--hessian-clip", "1e300"],
         ["hessian_clip", "1e+300"], id="fit-hessian-clip-huge"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--clip", "inf"],
         ["clip=inf", "(0, 1e+100]"], id="fit-clip-inf"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--clip", "1e200"],
         ["clip=1e+200"], id="fit-clip-huge"),
    # issue 45: --features names columns, each once
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--features", ""],
         ["--features", "--features=''"], id="fit-features-empty"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--features", "x,,x"],
         ["--features", "--features='x,,x'"], id="fit-features-empty-name"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--features", "x,x"],
         ["--features", "'x' more than once", "--features='x,x'"], id="fit-features-duplicate"),
    # issue 45: one parser for every entry point (booleans are not numbers; one range of mu and clip)
    case("nn-run", ["nn-run", "--spec", '{"methods": 5}', "--out", "<out>/n.parquet"], ["methods=5"],
         id="nn-run-methods-number"),
    case("nn-run", ["nn-run", "--spec", '{"methods": null}', "--out", "<out>/n.parquet"], ["methods=None"],
         id="nn-run-methods-null"),
    case("nn-run", ["nn-run", "--params", "<yesmu>", "--out", "<out>/n.parquet"], ["not a boolean", "mu=True"],
         id="nn-run-mu-yes"),
    case("nn-run", ["nn-run", "--spec", '{"figure": "fig10", "rounds": true}', "--out", "<out>/n.parquet"],
         ["not a boolean", "rounds=True"], id="nn-run-rounds-true"),
    case("nn-run", ["nn-run", "--spec", '{"figure": "fig10", "local_batch": true}', "--out", "<out>/n.parquet"],
         ["not a boolean", "local_batch=True"], id="nn-run-local-batch-true"),
    case("nn-run", ["nn-run", "--spec", '{"figure": "fig10", "mu": 1e300}', "--out", "<out>/n.parquet"],
         ["mu must be at most 1e+100", "mu=1e+300"], id="nn-run-mu-above-max"),
    case("nn-run", ["nn-run", "--spec", '{"figure": "fig10", "clip": 1e-320}', "--out", "<out>/n.parquet"],
         ["clip must be a number in [1e-10", "clip=1e-320"], id="nn-run-clip-subnormal"),
    case("realdata", ["realdata", "--spec", '{"mu": [true]}', "--split", "0", "--out", "<out>/r.parquet"],
         ["not a boolean", "mu=True"], id="realdata-mu-true"),
    case("realdata", ["realdata", "--spec", '{"clip": {"rule": "fixed", "value": 1e-320}}', "--split", "0",
                      "--out", "<out>/r.parquet"], ["clip value", "1e-10", "value=1e-320"],
         id="realdata-clip-subnormal"),
    case("simulate", ["simulate", "--params", "<yesmu>", "--seeds", "0", "--out", "<out>/c.parquet"],
         ["not a boolean", "mu=True"], id="simulate-mu-yes"),
    case("nn-readings", ["nn-readings", "<yesruns>", "--runs-dir", "<out>/runs", "--out-dir", "<out>/rd"],
         ["runs=True"], id="nn-readings-runs-yes"),
    case("fit", ["fit", "<table>", "--target", "y", "--client", "c", "--clip", "1e-320"],
         ["clip value", "value=1e-320"], id="fit-clip-subnormal"),
    # fedgdp itself
    case("fedgdp", ["simulat"], ["invalid choice: 'simulat'", "did you mean 'simulate'"], id="unknown-command"),
    case("fedgdp", [], ["COMMAND"], id="no-command"),
]


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A tiny cell file and its summary (study s), a non-YAML file, an empty file."""
    d = tmp_path_factory.mktemp("inputs")
    cell, summary = d / "cell.parquet", d / "summary.parquet"
    assert main(["simulate", *CELL, "--seeds", "0-1", "--study", "s", "--methods", "fedsgd",
                 "--out", str(cell)]) == 0
    assert main(["summarise", str(cell), "--out", str(summary)]) == 0
    (d / "notyaml").write_text("a: [b\n")
    (d / "empty.yaml").write_text("")
    (d / "emptylist.yaml").write_text("[]\n")
    (d / "file").write_text("a file")
    (d / "yesmu.yaml").write_text("mu: yes\n")            # YAML 1.1's yes is a boolean, not mu = 1
    (d / "yesruns.yaml").write_text("dataset: digits\npoints: [{figure: fig10, x: 5}]\nruns: yes\n"
                                     "readings: {private: {}}\n")
    (d / "table.csv").write_text("x,y,c\n" + "".join(f"{i / 10},{i % 2},{i % 3}\n" for i in range(30)))
    (d / "tablena.csv").write_text("x,y,c\n" + "".join(f"{i / 10},{'' if i == 4 else i % 2},{i % 3}\n"
                                                         for i in range(30)))
    return {"table": d / "table.csv", "tablena": d / "tablena.csv", "cell": cell, "summary": summary,
            "notyaml": d / "notyaml", "empty": d / "empty.yaml",
            "emptylist": d / "emptylist.yaml", "file": d / "file", "config": ROOT / "config.yaml",
            "yesmu": d / "yesmu.yaml", "yesruns": d / "yesruns.yaml"}


class _NoTorch:
    """A finder that fails every ``import torch`` as a missing package does."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


@pytest.fixture
def torch_missing(monkeypatch):
    """Make ``import torch`` fail as it does where the nn extra is not installed."""
    for name in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_NoTorch(), *sys.meta_path])


def run(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:       # argparse's own errors exit from inside parse_args
        return exc.code


@pytest.mark.parametrize("command, argv, words, status", CASES)
def test_careless_input_is_one_line_and_leaves_no_file(command, argv, words, status, inputs, tmp_path,
                                                         capsys, torch_missing):
    out = tmp_path / "out"
    out.mkdir()
    fill = {k: str(v) for k, v in inputs.items()} | {"out": str(out)}
    for key, value in fill.items():
        argv = [a.replace(f"<{key}>", value) for a in argv]
    rc = run(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == status, err
    assert len(lines) == 1 and lines[0].startswith("fedgdp: error:"), err
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    assert list(out.rglob("*")) == [], "a careless command left a file"
    assert not Path("/sys/x.parquet").exists()


def test_every_subcommand_has_careless_cases():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    covered = {p.values[0] for p in CASES}
    assert set(sub.choices) <= covered, sorted(set(sub.choices) - covered)


def test_version(capsys):
    from fedgdp import __version__

    assert run(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"fedgdp {__version__}"


def test_an_internal_error_shows_its_traceback_and_says_it_is_a_bug(monkeypatch, capsys):
    import fedgdp.commands.cli as cli

    def broken(args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "_cmd_audit", broken)
    assert run(["audit"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: boom" in err
    assert err.strip().splitlines()[-1].startswith("fedgdp: internal error (RuntimeError): a bug in fedgdp")


@pytest.mark.parametrize("exc, words", [
    (ModuleNotFoundError("No module named 'torch'", name="torch"), ["PyTorch", "fedgdp[nn]"]),
    (ModuleNotFoundError("x", name="snakemake_executor_plugin_slurm"), ["fedgdp[slurm]"]),
    (ModuleNotFoundError("x", name="sklearn.datasets"), ["scikit-learn", "fedgdp[pipeline]"]),
    (MemoryError("Unable to allocate 1.46 TiB for an array"), ["not enough memory", "1.46 TiB", "--m"]),
    (PermissionError(13, "Permission denied", "/sys/.x.tmp"), ["/sys/.x.tmp", "Permission denied"]),
    (BrokenPipeError(32, "Broken pipe"), ["output pipe closed"]),
    (ValueError("bad\nvalue"), ["bad value"]),
])
def test_user_errors_are_one_line(exc, words):
    from fedgdp.common.arguments import user_error

    line = user_error(exc)
    assert line is not None and "\n" not in line
    for word in words:
        assert word in line, (word, line)
    assert user_error(KeyError("model")) is None and user_error(ZeroDivisionError()) is None


def test_yaml_errors_are_input_errors():
    import yaml

    from fedgdp.common.arguments import user_error

    try:
        yaml.safe_load("a: [b")
    except yaml.YAMLError as exc:
        assert user_error(exc).startswith("not valid YAML")


def test_a_closed_pipe_is_one_line_and_no_traceback():
    """``fedgdp ledger ... | head -c 10``: stdout closes while about 1 MB is still to come."""
    cmd = (f"{sys.executable} -m fedgdp ledger --sizes 'equal(20)' --m 2000 --K 3 --method fedsgd --pretty "
           "| head -c 10 > /dev/null; echo ${PIPESTATUS[0]}")
    proc = subprocess.run(cmd, shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "2", proc.stderr
    assert proc.stderr.strip().splitlines() == ["fedgdp: error: output pipe closed before the command finished "
                                                "(e.g. `| head`); output truncated"], proc.stderr


def test_ledger_and_bench_json_are_strict(capsys, tmp_path):
    """No Infinity or NaN tokens: infinity is the string "inf"."""
    assert run(["ledger", *CELL, "--mu", "inf", "--method", "fedsgd"]) == 0
    text = capsys.readouterr().out
    assert "Infinity" not in text and "NaN" not in text
    report = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON token {c}"))
    assert report["mu"] == "inf" and report["clients"][0]["releases"][0]["sensitivity"] == "inf"

    from fedgdp.commands.bench import write_json

    write_json({"a": float("inf"), "b": float("nan"), "c": [float("-inf"), 1.5]}, str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == {"a": "inf", "b": None, "c": ["-inf", 1.5]}


def test_parquet_params_are_strict_json(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "c.parquet"
    assert run(["simulate", *CELL, "--mu", "inf", "--seeds", "0", "--methods", "fedsgd", "--out", str(out)]) == 0
    text = pq.read_metadata(out).metadata[b"params"].decode()
    assert "Infinity" not in text and json.loads(text)["mu"] == "inf"


def test_an_output_folder_that_cannot_be_written_is_refused_before_the_work(tmp_path, monkeypatch):
    """The probe creates and removes a file: nothing is left behind in a writable folder."""
    import argparse

    from fedgdp.common.arguments import output_path

    check = output_path(".parquet")
    assert check(str(tmp_path / "new" / "a.parquet"))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(argparse.ArgumentTypeError, match="cannot write in folder"):
        check("/proc/a.parquet")


def test_bench_suite_runs_with_an_explicit_count(tmp_path):
    """--replicates 1 is honoured (0 no longer silently becomes the config's 100)."""
    import yaml

    from fedgdp.commands.bench import run_suite

    cfg = yaml.safe_load((ROOT / "config" / "smoke.yaml").read_text())
    full = yaml.safe_load((ROOT / "config.yaml").read_text())
    full["studies"] = {"iterations": dict(full["studies"]["iterations"], models=["logistic"],
                                          grid={"m": [3], "sizes": ["equal(20)"], "K": [3], "mu": [2]})}
    del cfg
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(full))
    result = run_suite(config=str(path), replicates=1, out=str(tmp_path / "b.json"))
    assert result["replicates"] == 1 and result["cells"] == 1


# ------------------------------------------------------------------ the Snakemake entry points
def _plans():
    from fedgdp import plan as wp
    from shipped_configs import SCHEMA, merged

    return (wp.load(merged(), SCHEMA, []),
            wp.load(merged("config/smoke.yaml"), SCHEMA, [{"run": "smoke"}]))


@pytest.fixture(scope="module")
def paper_and_smoke():
    return _plans()


RULES = ["all", "save_config", "simulate_cell", "fetch_mnist"]

# (run, targets, keywords of check_request, words of the RequestError; None: accepted)
REQUESTS = [
    pytest.param("paper", ["fig3"], {}, ["unknown target 'fig3'", "did you mean 'fig03'"], id="fig3"),
    pytest.param("paper", ["tabel1"], {}, ["unknown target 'tabel1'", "did you mean 'table1'"], id="tabel1"),
    pytest.param("paper", ["fig03", "table1", "all", "save_config"], {}, None, id="known-names"),
    pytest.param("paper", ["figures/paper/fig03.pdf"], {}, None, id="a-file-path"),
    pytest.param("paper", ["gallery"], {}, None, id="gallery-of-paper"),
    pytest.param("smoke", ["gallery"], {}, ["target gallery", "run paper", "not run smoke"], id="gallery-of-smoke"),
    pytest.param("smoke", ["docs/gallery/fig03.png"], {}, ["run paper"], id="gallery-file-of-smoke"),
    pytest.param("paper", ["fig09"], {"torch": False}, ["fig09", "PyTorch", "fedgdp[nn]"], id="fig09-no-torch"),
    pytest.param("paper", ["fig10", "fig03"], {"torch": False}, ["fig10"], id="fig10-no-torch"),
    pytest.param("paper", ["results/paper/nn/digits/fig09/m~10/n~30/rep~0.parquet"], {"torch": False},
                 ["PyTorch"], id="nn-run-file-no-torch"),
    pytest.param("paper", ["fig09"], {"torch": False, "dry_run": True}, None, id="fig09-dry-run"),
    pytest.param("paper", ["fig09"], {"torch": False, "use_conda": True}, None, id="fig09-conda"),
    pytest.param("paper", [], {"torch": False}, None, id="default-target-has-no-cnns"),
    pytest.param("paper", ["fig03"], {"torch": False}, None, id="fig03-no-torch"),
]


@pytest.mark.parametrize("run_name, targets, kwargs, words", REQUESTS)
def test_snakemake_request_checks(paper_and_smoke, run_name, targets, kwargs, words):
    from fedgdp.plan import RequestError

    p = dict(zip(("paper", "smoke"), paper_and_smoke))[run_name]
    if words is None:
        p.check_request(targets, rule_names=RULES, **kwargs)
        return
    with pytest.raises(RequestError) as info:
        p.check_request(targets, rule_names=RULES, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)


def test_a_run_holding_another_config_is_warned_about(paper_and_smoke, tmp_path):
    paper, _ = paper_and_smoke
    assert paper.run_warning(tmp_path) is None                       # no results yet
    path = tmp_path / paper.paths.config
    path.parent.mkdir(parents=True)
    path.write_text(paper.resolved_config_text())
    assert paper.run_warning(tmp_path) is None                       # same config
    path.write_text(paper.resolved_config_text().replace(paper.sha, "0badc0de"))
    line = paper.run_warning(tmp_path)
    assert "run paper already holds results of config 0badc0de" in line and paper.sha in line
    assert "\n" not in line


def test_titles_are_derived_from_the_cells_drawn(paper_and_smoke):
    paper, smoke = paper_and_smoke
    assert paper.figure_title("fig03").endswith("mean client size about 400")
    assert smoke.figure_title("fig03").endswith("mean client size about 100")
    assert paper.figure_title("fig05").endswith("N = 20000") and smoke.figure_title("fig05").endswith("N = 2000")
    assert smoke.figure_title("fig16").endswith("N = 2000")
    labels = [f.get("label") for f in smoke.rates_fits()]
    assert "MSE vs m, mean n about 100" in labels and "MSE vs m, N = 2000 fixed" in labels
    spec = json.loads(smoke.figure_spec(type("W", (), {"fig": "fig05"})()))
    assert "N = 2000 [smoke" in spec["title"]
    assert "N = 2000" in smoke.figure_caption(type("W", (), {"fig": "fig05"})())
    assert "mean n about 100" in json.dumps(json.loads(smoke.rates_spec())["fits"])


@pytest.mark.parametrize("title, words", [
    ("Figure 3: about {mean_m}", ["figures.fig03.title", "unknown placeholder {mean_m}", "{mean_n}"]),
    ("Figure 3: {", ["figures.fig03.title"]),
])
def test_a_bad_title_placeholder_names_its_key(title, words):
    from fedgdp import plan as wp
    from shipped_configs import SCHEMA, merged

    cfg = merged()
    cfg["figures"]["fig03"]["title"] = title
    with pytest.raises(wp.ConfigError) as info:
        wp.load(cfg, SCHEMA, [])
    for word in words:
        assert word in str(info.value)


def test_plan_specs_pass_the_command_schemas(paper_and_smoke):
    """What the plan writes for each command is what the command's --spec schema accepts."""
    from types import SimpleNamespace as W

    from fedgdp.commands.cli import SPECS
    from fedgdp.common.arguments import check_spec

    def strict(text):   # the specs are strict JSON too (mu = inf is "inf")
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON token {c}"))

    for p in paper_and_smoke:
        for fig in p.figures("simulation"):
            check_spec(strict(p.figure_spec(W(fig=fig))), SPECS["plot"])
        check_spec(strict(p.table1_spec()), SPECS["table1"])
        check_spec(strict(p.rates_spec()), SPECS["rates"])
        check_spec(strict(p.claims_spec()), SPECS["claims"])
        check_spec(strict(p.decomposition_spec()), SPECS["decompose"])
        check_spec(strict(p.coverage_spec()), SPECS["coverage"])
        check_spec(strict(p.coverage_cell_spec(W(cell=p.coverage_cells()[0]))), SPECS["coverage-cell"])
    check_spec(strict(paper_and_smoke[0].sensitivity_map_spec()), SPECS["claims-map"])
    smoke = paper_and_smoke[1]
    for study, s in smoke.config["studies"].items():
        for a, b in smoke.cell_groups(study):
            strict(smoke.cell_params(W(model=s["models"][0], study=study, cells=f"{a}-{b}",
                                       first=smoke.seed_blocks(study)[0][0], last=smoke.seed_blocks(study)[0][1])))


def _workdir(path: Path) -> Path:
    import shutil

    for name in ["Snakefile", "config.yaml", "config", "workflow", "README.md", "docs"]:
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, path / name)
    return path


SNAKEMAKE_CASES = [   # (arguments, words of the one error line)
    pytest.param(["-n", "fig3"], ["unknown target 'fig3'", "did you mean 'fig03'"], id="fig3"),
    pytest.param(["gallery", "--configfile=config/smoke.yaml"], ["target gallery", "run paper"], id="gallery-smoke"),
    pytest.param(["-n", "gallery", "--config", "run=mine"], ["target gallery", "not run mine"], id="gallery-named-run"),
    pytest.param(["-n", "--configfile=bad.yaml"], ["invalid config at replicates"], id="bad-config"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, words", SNAKEMAKE_CASES)
def test_snakemake_mistakes_are_named_before_any_job(tmp_path, args, words):
    d = _workdir(tmp_path)
    (d / "bad.yaml").write_text("replicates: 0\n")
    before = {p.name: p.read_bytes() for p in (d / "docs" / "gallery").iterdir()}
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", *args], cwd=d,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text, text[-3000:]
    for word in words:
        assert word in text, (word, text[-3000:])
    assert not (d / "results").exists() and not (d / "logs").exists()
    assert {p.name: p.read_bytes() for p in (d / "docs" / "gallery").iterdir()} == before


def test_a_degenerate_size_anywhere_in_a_grid_is_a_config_error():
    """The config checks resolve every sizes scheme and m of a grid, not only the first cell's."""
    from fedgdp import plan as wp
    from shipped_configs import SCHEMA, merged

    cfg = merged()
    cfg["studies"]["equal_n"]["grid"]["sizes"] = ["equal(30)", "equal(1)"]
    with pytest.raises(wp.ConfigError, match=r"studies\.equal_n\.grid.*equal\(1\)"):
        wp.load(cfg, SCHEMA, [])
