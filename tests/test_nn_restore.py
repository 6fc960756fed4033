"""Resuming the CNN grid from committed run files (`fedgdp nn-restore`,
`fedgdp.plan.nn.NNPart.nn_restore`): a file is put back only when the settings it
recorded are the ones this config gives that run, and never over a file already there."""
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedgdp import plan as wp
from fedgdp.cli import main
from fedgdp.io import write_parquet
from fedgdp.nn.run import piece_settings
from fedgdp.nn.settings import resolve
from shipped_configs import ROOT, SCHEMA, merged

FIG10 = "mnist/fig10/m~100/n~full/rep~0.parquet"


def _piece(folder, rel, settings):
    """A stand-in run file: one row, the settings recorded as `write_runs` records them."""
    path = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_parquet(pa.table({"test_accuracy": [0.5]}), path, resolve(settings))
    return path


@pytest.fixture
def grid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    the_plan = wp.load(merged("config/nn-mnist.yaml"), SCHEMA, [{"run": "nn-mnist"}])
    return the_plan, tmp_path / "pieces"


def test_a_matching_piece_is_restored_once_and_never_over_a_file(grid):
    the_plan, pieces = grid
    _piece(pieces, FIG10, the_plan.nn_settings("mnist", "fig10", 100, "full", 0))
    rows = {r["file"]: r for r in the_plan.nn_restore(pieces)}
    target = "results/nn-mnist/nn/" + FIG10
    assert rows[target]["action"] == "restored" and os.path.exists(target)
    assert piece_settings(target)[0] == piece_settings(pieces / FIG10)[0]
    assert sum(r["action"] == "absent" for r in rows.values()) == len(rows) - 1   # 59 run files, one committed
    with open(target, "ab") as fh:                    # a file already there is kept as it is
        fh.write(b"local")
    again = {r["file"]: r for r in the_plan.nn_restore(pieces)}
    assert again[target]["action"] == "kept" and open(target, "rb").read().endswith(b"local")


def test_a_piece_of_other_settings_is_named_and_not_used(grid):
    the_plan, pieces = grid
    other = {**the_plan.nn_settings("mnist", "fig10", 100, "full", 0), "lr": 0.1}
    _piece(pieces, FIG10, other)
    row = next(r for r in the_plan.nn_restore(pieces) if r["file"].endswith(FIG10))
    assert row["action"] == "differs" and "lr: 0.1 committed, 0.01 here" in row["reason"]
    assert not os.path.exists("results/nn-mnist/nn/" + FIG10)


def test_the_command_restores_and_a_dry_run_copies_nothing(grid, capsys):
    the_plan, pieces = grid
    _piece(pieces, FIG10, the_plan.nn_settings("mnist", "fig10", 100, "full", 0))
    files = [str(ROOT / "config.yaml"), str(ROOT / "config/nn-mnist.yaml")]
    assert main(["nn-restore", str(pieces), "--configfile", *files, "--schema", str(SCHEMA), "--dry-run"]) == 0
    assert "would restore 1" in capsys.readouterr().out and not os.path.exists("results")
    assert main(["nn-restore", str(pieces), "--configfile", *files, "--schema", str(SCHEMA)]) == 0
    assert "run nn-mnist: restored 1, kept 0" in capsys.readouterr().out
    assert os.path.exists("results/nn-mnist/nn/" + FIG10)


def test_a_file_without_recorded_settings_is_refused(tmp_path):
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"a": [1]}), path)
    with pytest.raises(ValueError, match="no recorded settings"):
        piece_settings(path)
