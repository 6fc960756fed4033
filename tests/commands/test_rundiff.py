"""fedgdp.commands.rundiff: two output trees compared file by file (cell files as one table)."""
import math

import pyarrow as pa
import pyarrow.parquet as pq

from fedgdp.commands import rundiff


def _tree(root, mse=(0.1, 0.2), elapsed=(1.0, 2.0), csv="a,b\n1,2\n"):
    summary = root / "results" / "paper" / "summary"
    summary.mkdir(parents=True)
    table = pa.table({"method": ["fedsgd", "fedavg"], "sq_error": list(mse), "elapsed_s": list(elapsed)})
    pq.write_table(table.replace_schema_metadata({"commit": str(root)}), summary / "c.parquet")
    (root / "tables" / "paper").mkdir(parents=True)
    (root / "tables" / "paper" / "t.csv").write_text(csv)
    return root


def _cells(root, groups, theta_last=math.nan):
    """Cell files holding replicates 0-3 of one cell, cut into files by ``groups``."""
    rows = [dict(model="logistic", study="s", sizes="equal(30)", m=20, mu=2.0, K=50, replicate=r,
                 method="fedsgd", theta_hat=[0.5, theta_last if r == 3 else 0.1], elapsed_s=float(r))
            for r in range(4)]
    for i, (a, b) in enumerate(groups):
        folder = root / "results" / "paper" / "cells" / f"g{i}"
        folder.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows[a:b]), folder / "f.parquet")
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


def test_cells_compare_as_rows_whatever_their_files_and_nan_equals_nan(tmp_path):
    a = _cells(tmp_path / "a", [(0, 4)])
    b = _cells(tmp_path / "b", [(2, 4), (0, 2)])          # other files, other order
    assert rundiff.compare_trees(a, b)[1] == []
    c = _cells(tmp_path / "c", [(0, 4)], theta_last=0.3)
    (diff,) = rundiff.compare_trees(a, c)[1]
    assert diff.path.endswith("cells") and "theta_hat" in diff.why


def test_an_empty_first_tree_is_an_error(tmp_path):
    assert rundiff.main([str(tmp_path), str(tmp_path)]) == 2


def test_timing_columns_of_summaries_and_csv_tables_are_not_numbers(tmp_path):
    """``mean_elapsed_s`` (CNN summaries) is a time, like ``elapsed_s``; a CSV table that
    differs only there is identical, one that differs elsewhere too is named."""
    csv = "method,acc,mean_elapsed_s\nfedavg,0.9,{t}\n"
    a = _tree(tmp_path / "a", csv=csv.format(t=1.5))
    b = _tree(tmp_path / "b", csv=csv.format(t=2.25))
    assert rundiff.compare_trees(a, b) == (2, [])
    c = _tree(tmp_path / "c", csv="method,acc,mean_elapsed_s\nfedavg,0.8,2.25\n")
    (diff,) = rundiff.compare_trees(a, c)[1]
    assert diff.path.endswith("t.csv") and "beyond its timing" in diff.why
    assert rundiff.volatile("mean_elapsed_s") and rundiff.volatile("elapsed_s") and not rundiff.volatile("mse")
