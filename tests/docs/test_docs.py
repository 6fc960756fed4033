"""The documentation: config/README.md covers every config file and key group, the CLI
reference covers every command, the site builds strictly (where mkdocs is installed)."""
import importlib.util
import re
import subprocess
import sys

import pytest
import yaml

from paths import ROOT


def _hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "scripts" / "mkdocs_hooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_config_readme_names_every_config_file_and_key_group():
    text = (ROOT / "config" / "README.md").read_text()
    for f in ["config.yaml", *(f"config/{p.name}" for p in sorted((ROOT / "config").glob("*.yaml")))]:
        assert f"`{f}`" in text, f
    keys = yaml.safe_load((ROOT / "config.yaml").read_text())
    table = set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.M))
    assert set(keys) <= table, sorted(set(keys) - table)


def test_catalog_file_is_the_standardized_usage():
    usage = yaml.safe_load((ROOT / ".snakemake-workflow-catalog.yml").read_text())["usage"]
    assert set(usage) == {"mandatory-flags", "software-stack-deployment", "report"}
    assert usage["software-stack-deployment"]["conda"] is True and usage["report"] is True


def test_cli_reference_renders_every_command():
    from fedgdp.commands.cli import build_parser

    ref = _hooks().cli_reference()
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    for name in sub.choices:
        assert f"## `fedgdp {name}`" in ref and f"usage: fedgdp {name}" in ref, name
    assert "--target TARGET" in ref and "fedgdp fit" in ref


def test_every_nav_page_exists_and_the_markers_are_used():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(items):
        for item in items:
            for value in item.values():
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = list(pages(nav))
    for page in listed:
        assert (ROOT / "docs" / page).is_file(), page
    assert {"methods.md", "ARCHITECTURE.md", "api.md", "cli.md", "configs.md"} <= set(listed)
    hooks = _hooks()
    assert hooks.CLI_MARK in (ROOT / "docs" / "cli.md").read_text()
    assert hooks.CONFIG_MARK in (ROOT / "docs" / "configs.md").read_text()


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="the docs extra is not installed (pip install -e '.[docs]')")
def test_site_builds_strictly(tmp_path):
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("FederatedGLM") > 5


def test_the_readings_table_in_the_cnn_page_is_the_generated_one():
    """docs/cnns.md quotes docs/results/nn-readings/readings.md (made by fedgdp nn-readings)
    row for row, so its numbers never drift from the committed pieces."""
    rows = [line for line in (ROOT / "docs/results/nn-readings/readings.md").read_text().splitlines()
            if line.startswith("|")]
    assert len(rows) > 2
    assert "\n".join(rows) + "\n" in (ROOT / "docs" / "cnns.md").read_text()


def test_the_cnn_page_quotes_the_generated_levels():
    """docs/cnns.md's level-and-trend table is docs/results/nn-readings-grid/levels.md (fedgdp nn-readings
    with --grid and --summaries) row for row: its words stand next to the numbers they describe."""
    rows = [line for line in (ROOT / "docs/results/nn-readings-grid/levels.md").read_text().splitlines()
            if line.startswith("|")]
    assert len(rows) > 2
    assert "\n".join(rows) + "\n" in (ROOT / "docs" / "cnns.md").read_text()


def test_the_readme_quotes_the_generated_readings_summary():
    """The README's CNN table is docs/results/nn-readings/summary.md (fedgdp nn-readings)."""
    rows = (ROOT / "docs/results/nn-readings/summary.md").read_text().splitlines()
    readme = [line.strip() for line in (ROOT / "README.md").read_text().splitlines()]
    assert rows and all(row in readme for row in rows), [row for row in rows if row not in readme]


def test_no_readme_paragraph_or_bullet_is_over_120_words():
    """A newcomer reads the README in minutes: prose blocks (paragraphs and bullets, not
    code or tables) stay at most 120 words."""
    blocks, cur, code = [], [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        fence = line.startswith("```")
        code = code != fence
        if code or fence or line.strip().startswith("|") or not line.strip() or line.startswith(("- ", "#")):
            blocks.append(" ".join(cur))
            cur = [line] if line.startswith("- ") else []
        else:
            cur.append(line)
    blocks.append(" ".join(cur))
    long = [b[:60] for b in blocks if len(b.split()) > 120]
    assert not long, long


def test_the_readme_is_at_most_100_lines():
    """A newcomer reads the README in two minutes; everything else is in docs/."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 100


def test_the_readme_claims_table_is_the_generated_verdicts():
    """Each README claim row gives the models' verdicts of the committed reports (C1-C5:
    docs/reproduces.md's copy of the default run's claims.md; C6: the MNIST grid's
    claims.csv, its rows at the printed settings: a row under another reading is that
    reading's, in the README's CNN part) and their `combine`."""
    import csv

    from fedgdp.reports.claims import combine

    rows = [line.split("|")[1:-1] for line in (ROOT / "docs" / "reproduces.md").read_text().splitlines()
            if re.match(r"\| C[1-5] \|", line)]
    got: dict[str, list[tuple[str, str]]] = {}
    for cells in rows:
        got.setdefault(cells[0].strip(), []).append((cells[1].strip(), cells[-1].strip().strip("*")))
    with open(ROOT / "docs/results/paper-nn-mnist/claims.csv", newline="") as f:
        got["C6"] = [(r["model"], r["verdict"]) for r in csv.DictReader(f)
                     if r["claim"] == "C6" and ", reading " not in r["model"]]
    readme = {cells[0].strip(): [c.strip() for c in cells[1:]]
              for line in (ROOT / "README.md").read_text().splitlines()
              if re.match(r"\| C[1-6] \|", line) for cells in [line.split("|")[1:-1]]}
    assert sorted(readme) == [f"C{k}" for k in range(1, 7)] and sorted(got) == sorted(readme)
    for claim, models in got.items():
        _, verdict, by_model = readme[claim]
        assert verdict == combine([v for _, v in models]), claim
        assert by_model == ", ".join(f"{m} {v}" for m, v in models), claim


def test_license_and_citation_match_pyproject():
    """LICENSE is the MIT text pyproject names; CITATION.cff (CFF 1.2.0) cites this version
    of the software and, as preferred citation, the paper."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "the fedgdp authors" in text
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software" and cff["license"] == "MIT"
    assert str(cff["version"]) == project["version"]
    paper = cff["preferred-citation"]
    assert paper["title"].startswith("Statistical Limits and Efficient Algorithms")
    assert [a["family-names"] for a in paper["authors"]] == ["Peng", "Paul", "Auddy"]
    assert any(r["title"] == paper["title"] for r in cff["references"])
