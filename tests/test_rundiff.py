"""fedgdp.rundiff: two output trees compared file by file."""
import pyarrow as pa
import pyarrow.parquet as pq

from fedgdp import rundiff


def _tree(root, mse=(0.1, 0.2), elapsed=(1.0, 2.0), csv="a,b\n1,2\n"):
    cells = root / "results" / "paper" / "cells"
    cells.mkdir(parents=True)
    table = pa.table({"method": ["fedsgd", "fedavg"], "sq_error": list(mse), "elapsed_s": list(elapsed)})
    pq.write_table(table.replace_schema_metadata({"commit": str(root)}), cells / "c.parquet")
    (root / "tables" / "paper").mkdir(parents=True)
    (root / "tables" / "paper" / "t.csv").write_text(csv)
    return root


def test_identical_data_with_other_times_and_metadata(tmp_path):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b", elapsed=(5.0, 6.0))
    assert rundiff.compare_trees(a, b) == (2, [])
    assert rundiff.main([str(a), str(b)]) == 0


def test_a_changed_number_a_changed_table_and_a_missing_file_are_named(tmp_path, capsys):
    a = _tree(tmp_path / "a")
    b = _tree(tmp_path / "b", mse=(0.1, 0.2 + 1e-15), csv="a,b\n1,3\n")
    n, diffs = rundiff.compare_trees(a, b)
    assert n == 2 and [d.path.split("/")[-1] for d in diffs] == ["c.parquet", "t.csv"]
    assert "sq_error" in diffs[0].why
    (b / "tables" / "paper" / "t.csv").unlink()
    assert rundiff.main([str(a), str(b)]) == 1
    assert "missing" in capsys.readouterr().out


def test_an_empty_first_tree_is_an_error(tmp_path):
    assert rundiff.main([str(tmp_path), str(tmp_path)]) == 2
