"""fedgdp.common.io: the one atomic writer, the Parquet writer's provenance, and what a write imports."""
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedgdp import __version__
from fedgdp.common.io import atomic_path, read_parquet_files, write_parquet, write_text


def test_a_failed_write_leaves_nothing_behind(tmp_path):
    target = tmp_path / "sub" / "t.csv"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert not target.exists() and list((tmp_path / "sub").iterdir()) == []
    write_text(target, "whole\n")
    assert target.read_text() == "whole\n" and len(list((tmp_path / "sub").iterdir())) == 1


def test_parquet_provenance_and_reader_errors(tmp_path):
    out = tmp_path / "a.parquet"
    write_parquet(pa.table({"x": [1.0, 2.0]}).replace_schema_metadata({"own": "kept"}), out, {"m": 3})
    meta = pq.read_schema(out).metadata
    assert meta[b"fedgdp_version"].decode() == __version__ and meta[b"own"] == b"kept"
    assert meta[b"params"] == b'{"m": 3}'
    assert read_parquet_files([out, out], ["x"], "test")["x"].tolist() == [1.0, 2.0, 1.0, 2.0]
    with pytest.raises(ValueError, match="test file .*a.parquet lacks columns \\['y'\\]"):
        read_parquet_files(out, ["x", "y"], "test")
    (tmp_path / "bad.parquet").write_text("not parquet")
    with pytest.raises(ValueError, match="cannot read test file .*bad.parquet"):
        read_parquet_files(tmp_path / "bad.parquet", ["x"], "test")


SIMULATION_ESTIMATORS = ("fedgdp.simulation.backend", "fedgdp.simulation.kernels", "fedgdp.simulation.run")


@pytest.mark.parametrize("module, name, forbidden", [
    # the CNN methods are methods of the core (fedgdp.methods, numpy only): a CNN result may load its
    # registry, never the simulation's estimators (numba)
    ("fedgdp.nn.run", "write_runs", SIMULATION_ESTIMATORS),
    ("fedgdp.simulation.summary", "write_summary", SIMULATION_ESTIMATORS + ("fedgdp.methods",))])
def test_writing_a_cnn_result_or_a_summary_imports_no_estimator(module, name, forbidden):
    code = (f"import sys; from {module} import {name}; "
            f"print(sorted(m for m in sys.modules if m in {forbidden!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
