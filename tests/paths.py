"""The repository root, for the tests in every folder under tests/ (they import it as
``from paths import ROOT``: pytest puts tests/ on the path, pyproject's ``pythonpath``)."""
from pathlib import Path

#: The repository root (this file is tests/paths.py).
ROOT = Path(__file__).resolve().parents[1]
