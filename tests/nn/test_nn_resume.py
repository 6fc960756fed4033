"""Resuming the CNN grid from committed run files (`fedgdp nn-restore`,
`fedgdp.plan.nn.NNPart.nn_restore`): a file is put back only when the settings it
recorded are the ones this config gives that run, and never over a file already there."""
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedgdp import plan as wp
from fedgdp.commands.cli import main
from fedgdp.common.io import write_parquet
from fedgdp.nn.run import piece_settings
from fedgdp.nn.settings import resolve
from shipped_configs import ROOT, SCHEMA, merged

FIG10 = "mnist/fig10/m~100/n~full/rep~0.parquet"


def _piece(folder, rel, settings):
    """A stand-in run file: one row, the settings recorded as `write_runs` records them."""
    path = os.path.join(folder, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_parquet(pa.table({"test_accuracy": [0.5]}), path, resolve(settings).as_dict())
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


# ------------------------------------------------------------ the readings map as a target
def test_the_readings_map_is_a_target_of_one_job_per_piece(monkeypatch):
    """Target nn_readings: one run file per (reading, point, run) of config/nn-readings.yaml
    (a point with its own ``readings`` list has those only), each run with the settings
    `fedgdp nn-readings --run` gives it (the same seeds)."""
    from fedgdp.nn.readings import load_readings, pieces

    monkeypatch.chdir(ROOT)
    the_plan = wp.load(merged(), SCHEMA, [])
    cfg = load_readings("config/nn-readings.yaml")
    files = the_plan.nn_reading_files()
    per_run = sum(len(cfg.readings if p.readings is None else p.readings) for p in cfg.points)
    assert len(files) == per_run * cfg.runs == len(pieces(cfg))
    assert len(set(files)) == len(files)
    assert the_plan.targets()["nn_readings"] == [f"tables/paper/nn_readings/readings.{e}"
                                                 for e in ("csv", "md", "pdf", "png")]
    name, fig, x, run, settings = pieces(cfg)[5]
    w = type("W", (), {"reading": name, "fig": fig, "x": str(x), "rep": str(run)})
    assert json.loads(the_plan.nn_reading_spec(w)) == settings
    assert f"results/paper/nn_readings/{name}/{fig}-{x}-run{run}.parquet" in files
    assert the_plan.nn_requested(["nn_readings"]) == ["nn_readings"]
    assert "nn_readings" not in the_plan.nn_requested([])          # not in `all`


def test_without_a_readings_file_there_is_no_target(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    the_plan = wp.load(merged(), SCHEMA, [])
    assert "nn_readings" not in the_plan.targets() and the_plan.nn_reading_files() == []


def test_committed_readings_pieces_are_restored_by_the_same_rule(tmp_path, monkeypatch):
    from fedgdp.nn.readings import load_readings, pieces

    cfg_file = tmp_path / "readings.yaml"
    cfg_file.write_text((ROOT / "config/nn-readings.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    the_plan = wp.load(merged(nn={"readings": str(cfg_file)}), SCHEMA, [])
    name, fig, x, run, settings = pieces(load_readings(cfg_file))[0]
    _piece(tmp_path / "committed", f"{name}/{fig}-{x}-run{run}.parquet", settings)
    _piece(tmp_path / "committed", f"{name}/{fig}-{x}-run{run + 1}.parquet", settings)   # run 0's settings
    rows = {r["file"]: r for r in the_plan.nn_restore(None, readings=tmp_path / "committed")}
    assert rows[f"results/paper/nn_readings/{name}/{fig}-{x}-run{run}.parquet"]["action"] == "restored"
    assert rows[f"results/paper/nn_readings/{name}/{fig}-{x}-run{run + 1}.parquet"]["action"] == "differs"


def test_a_setting_added_since_counts_at_its_default(grid):
    """A file written before ``reduction`` existed ran the mean: it restores at reduction
    mean, and not at reduction sum."""
    from fedgdp.nn.settings import resolve as resolve_nn

    the_plan, pieces = grid
    settings = the_plan.nn_settings("mnist", "fig10", 100, "full", 0)
    old = {k: v for k, v in resolve_nn(settings).as_dict().items() if k != "reduction"}
    path = os.path.join(pieces, FIG10)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_parquet(pa.table({"test_accuracy": [0.5]}), path, old)
    row = next(r for r in the_plan.nn_restore(pieces, dry_run=True) if r["file"].endswith(FIG10))
    assert row["action"] == "restored"
    the_plan.config["nn"]["settings"] = {"reduction": "sum"}
    row = next(r for r in the_plan.nn_restore(pieces, dry_run=True) if r["file"].endswith(FIG10))
    assert row["action"] == "differs" and "reduction: None committed, 'sum' here" in row["reason"]
