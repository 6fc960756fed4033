"""The built API page is readable: no literal Sphinx role, no type parsed into an
expression, the classifiers' methods rendered as methods with parameters."""
import importlib.util
import re
import subprocess
import sys

import pytest

from paths import ROOT

# a role as the HTML shows it: ":attr:" then its target, in backticks or already a <code>
ROLE = re.compile(r":(?:py:)?(?:attr|func|mod|class|meth|data|obj|exc):(?:`|<code>|&#96;)")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_no_literal_cross_reference_reaches_the_html(tmp_path):
    site = tmp_path / "site"
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    found = {str(p.relative_to(site)): ROLE.findall(p.read_text()) for p in site.rglob("*.html")}
    found = {page: hits for page, hits in found.items() if hits}
    assert not found, found
    api = (site / "api" / "index.html").read_text()
    assert "array - like" not in api and "shape(n" not in api          # types kept as written
    for name in ("predict_proba", "decision_function", "predict_log_proba"):
        assert f'id="fedgdp.api.estimator.FederatedGLM.{name}"' in api, name


def test_the_role_pattern_catches_both_spellings():
    assert ROLE.search(":attr:<code>privacy_</code>") and ROLE.search(":func:`f`")
    assert not ROLE.search("privacy_ : PrivacyReport")
