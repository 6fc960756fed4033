"""CNN runs say what a known seed means (docs/privacy.md, the seed rule): the rows'
``noise_secret``, `privacy_of`'s text, ``nn-run --fresh-noise``, and committed run files
written before the column still load."""
import math

import pytest

from fedgdp.nn.readings import collect, load_readings, privacy_of
from fedgdp.nn.run import read_runs
from paths import ROOT

COMMITTED = ROOT / "docs/results/nn-readings"


def test_privacy_of_says_a_derived_seed_voids_the_guarantee_for_private_data():
    mu, text = privacy_of("private", 2.0, "printed")          # default: the derived seed
    assert mu == 2.0 and "derived seed (known)" in text and "void for private data" in text
    mu, text = privacy_of("private", 2.0, "printed", True)
    assert mu == 2.0 and "fresh entropy (secret)" in text and "void" not in text
    assert math.isinf(privacy_of("clip_only", 2.0, "printed", True)[0])


def test_committed_pieces_load_with_noise_secret_false():
    """The pieces committed before the column ran on derived seeds: they read False."""
    piece = next((COMMITTED / "runs").rglob("*.parquet"))
    df = read_runs([piece])
    assert "noise_secret" in df and df["noise_secret"].dtype == bool and not df["noise_secret"].any()
    table, _ = collect(load_readings(ROOT / "config/nn-readings.yaml"), COMMITTED / "runs")
    assert len(table) and not table["noise_secret"].any()
    # rows of a guarantee (paper_sum's rows carry a finite true mu but no guarantee, so no seed clause)
    private = table[table["privacy"].str.startswith("record-level")]
    assert len(private) and private["privacy"].str.contains("derived seed").all()
    assert not table.loc[table["privacy"].str.startswith("not mu-GDP"), "noise_secret"].any()


def test_old_and_new_run_files_concatenate(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    old = next((COMMITTED / "runs").rglob("*.parquet"))
    t = pq.read_table(old)
    new = t.append_column("noise_secret", pa.array([True] * t.num_rows))
    pq.write_table(new, tmp_path / "new.parquet")
    df = read_runs([old, tmp_path / "new.parquet"])
    assert df["noise_secret"].tolist() == [False] * t.num_rows + [True] * t.num_rows


def test_fresh_noise_draws_new_noise_and_says_so():
    pytest.importorskip("torch")
    from fedgdp.nn.data import load_images
    from fedgdp.nn.run import noise_seed, run_nn
    from fedgdp.nn.settings import resolve

    p = resolve({"figure": "fig09", "m": 3, "n": 20, "rounds": 2, "local_epochs": 1, "methods": "fedsgd"})
    assert noise_seed(p, "fedsgd") == noise_seed(p, "fedsgd")            # derived: known, the same
    assert noise_seed(p, "fedsgd", fresh=True) != noise_seed(p, "fedsgd", fresh=True)
    data = load_images("digits")
    a, b = (run_nn(p, device="cpu", threads=1, data=data)[0] for _ in range(2))
    assert a["test_loss"] == b["test_loss"] and a["noise_secret"] is False
    f, g = (run_nn(p, device="cpu", threads=1, data=data, fresh_noise=True)[0] for _ in range(2))
    assert f["noise_secret"] is True and g["noise_secret"] is True
    assert len({a["test_loss"], f["test_loss"], g["test_loss"]}) == 3     # the noise is not regenerable
    assert f["grad_evals"] == a["grad_evals"]                  # the public schedule stays derived
