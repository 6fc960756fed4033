"""The CNN readings map (fedgdp.nn.readings, fedgdp nn-readings): a config declares each
reading once; pieces are resumable files; the table says what each run protects."""
import dataclasses
import math

import pytest

from fedgdp.nn.readings import load_readings, pieces, privacy_of
from paths import ROOT

CONFIG = """
dataset: digits
points:
  - {figure: fig09, x: 20}
runs: 2
band: {fig09: [0.5, 0.9]}
readings:
  plain: {release: plain}
  clip_only: {release: clip_only, clip: 0.5}
  schedule: {accounting: schedule, rounds: 2, local_epochs: 1, newton_cycles: 1, m: 6}
"""


def _config(tmp_path, text=CONFIG):
    path = tmp_path / "readings.yaml"
    path.write_text(text)
    return path


def test_config_is_checked_before_any_run(tmp_path):
    cfg = load_readings(_config(tmp_path))
    assert list(cfg.readings) == ["plain", "clip_only", "schedule"]
    got = [(r, f, x, run) for r, f, x, run, _ in pieces(cfg)]
    assert got[:3] == [("plain", "fig09", 20, 0), ("clip_only", "fig09", 20, 0), ("schedule", "fig09", 20, 0)]
    assert len(got) == 6
    with pytest.raises(ValueError, match="reading 'bad'.*stpes"):
        load_readings(_config(tmp_path, CONFIG + "  bad: {stpes: 3}\n"))
    with pytest.raises(ValueError, match="unknown key"):
        load_readings(_config(tmp_path, CONFIG + "extra: 1\n"))
    with pytest.raises(ValueError, match="runs must be"):
        load_readings(_config(tmp_path, CONFIG.replace("runs: 2", "runs: 0")))


def test_a_point_may_run_some_readings_only(tmp_path):
    """A point's ``readings`` list: those readings at that point, the others nowhere there;
    a name that is not a declared reading is refused before any run."""
    text = CONFIG.replace("  - {figure: fig09, x: 20}\n",
                          "  - {figure: fig09, x: 20}\n  - {figure: fig10, x: 30, readings: [plain, clip_only]}\n")
    got = [(r, f, x, run) for r, f, x, run, _ in pieces(load_readings(_config(tmp_path, text)))]
    assert len(got) == 2 * (3 + 2)
    assert [(r, run) for r, f, x, run in got if f == "fig10"] == [("plain", 0), ("clip_only", 0),
                                                                  ("plain", 1), ("clip_only", 1)]
    with pytest.raises(ValueError, match=r"point fig10 x=30: readings=\['plian'\]"):
        load_readings(_config(tmp_path, text.replace("[plain, clip_only]", "[plian]")))
    with pytest.raises(ValueError, match="readings=\\[\\] must be a non-empty list"):
        load_readings(_config(tmp_path, text.replace("[plain, clip_only]", "[]")))
    with pytest.raises(ValueError, match="a point is"):
        load_readings(_config(tmp_path, text.replace("readings: [plain", "rnus: [plain")))


def test_a_point_may_have_its_own_runs(tmp_path):
    """A point's ``runs`` (the paper's grid: 5 runs at Figure 9, 4 at Figure 10) overrides the map's;
    pieces still come run by run, so a partial map has whole runs."""
    points = "  - {figure: fig09, x: 20, runs: 3}\n  - {figure: fig10, x: 30, readings: [plain], runs: 1}\n"
    text = CONFIG.replace("  - {figure: fig09, x: 20}\n", points)
    got = [(r, f, x, run) for r, f, x, run, _ in pieces(load_readings(_config(tmp_path, text)))]
    assert [(r, run) for r, f, x, run in got if f == "fig10"] == [("plain", 0)]
    assert [run for r, f, x, run in got if f == "fig09" and r == "schedule"] == [0, 1, 2]
    assert got.index(("plain", "fig10", 30, 0)) < got.index(("plain", "fig09", 20, 1))
    with pytest.raises(ValueError, match="point fig09 x=20: runs must be a positive integer"):
        load_readings(_config(tmp_path, text.replace("runs: 3", "runs: 0")))


def test_privacy_of_each_release():
    assert privacy_of("private", 2.0, "printed")[0] == 2.0
    assert "schedule" in privacy_of("private", 2.0, "schedule")[1]
    assert privacy_of("clip_only", 2.0, "printed") == (math.inf, "not mu-GDP as run: clipped without noise")
    assert math.isinf(privacy_of("private", math.inf, "printed")[0])


@pytest.mark.slow
def test_readings_command_runs_resumes_and_tabulates(tmp_path):
    pytest.importorskip("torch")
    import pandas as pd

    from fedgdp.commands.cli import main

    cfg = str(_config(tmp_path, CONFIG.replace("runs: 2", "runs: 1").replace(
        "{release: plain}", "{release: plain, rounds: 2, local_epochs: 1, newton_cycles: 1, m: 6}").replace(
        "clip: 0.5}", "clip: 0.5, rounds: 2, local_epochs: 1, newton_cycles: 1, m: 6}")))
    runs, out = tmp_path / "runs", tmp_path / "out"
    assert main(["nn-readings", cfg, "--runs-dir", str(runs), "--out-dir", str(out), "--run", "--threads", "1",
                 "--device", "cpu"]) == 0
    table = pd.read_csv(out / "readings.csv")
    assert len(table) == 3 * 4 and (out / "readings.png").stat().st_size > 1000
    md = (out / "readings.md").read_text()
    assert "| plain | Fig. 9, n = 20 |" in md and "| schedule | Fig. 9, n = 20 |" in md
    by = table.groupby("reading")
    assert set(by["certified_mu"].max()) == {math.inf, 2.0}
    sched = table[table["reading"] == "schedule"]
    assert (abs(sched["mu_spent_min"] - 2.0) < 1e-9).all()
    assert (table[table["reading"] == "clip_only"]["clipped_frac"] > 0).all()
    stamp = {p: p.stat().st_mtime_ns for p in runs.rglob("*.parquet")}
    assert main(["nn-readings", cfg, "--runs-dir", str(runs), "--out-dir", str(out), "--run"]) == 0
    assert {p: p.stat().st_mtime_ns for p in runs.rglob("*.parquet")} == stamp      # nothing rerun


def test_claims_c6_names_the_ceiling_and_the_best_private_reading(tmp_path):
    """fedgdp claims --nn-readings: C6's evidence gets a line per point of the map with the
    ceiling (plain), clipping alone and the best private reading with its certified mu."""
    import pandas as pd

    from fedgdp.reports import claims

    rows = []
    for reading, release, cert, acc in (("plain", "plain", math.inf, 0.8), ("clip_only", "clip_only", math.inf, 0.3),
                                        ("private", "private", 2.0, 0.31), ("private_B10", "private", 2.0, 0.6)):
        for run in (0, 1):
            rows.append({"reading": reading, "figure": "fig09", "x": 100, "mu": 2.0, "run": run,
                         "method": "fedavg", "accuracy": acc + 0.01 * run, "certified_mu": cert,
                         "dataset": "mnist", "release": release})
    lines = claims.readings_evidence(pd.DataFrame(rows))
    assert lines == ["readings at Fig 9, n = 100 (median over runs and methods): ceiling without clipping "
                     "or noise 0.805 (plain, 2 runs); clipped, no noise 0.305 (clip_only, 2 runs); best private 0.605 "
                     "(private_B10, 2 runs, certified mu = 2)"]
    rows = [r for r in rows if not (r["reading"] == "plain" and r["run"] == 1)]     # each reading its own runs
    assert "0.800 (plain, 1 run); clipped, no noise 0.305 (clip_only, 2 runs)" in claims.readings_evidence(
        pd.DataFrame(rows))[0]


def test_a_budget_stops_starting_pieces_and_keeps_whole_ones(tmp_path, monkeypatch):
    """run_missing(budget_s=...): a piece started before the budget is spent is written
    whole; none is started after (fake training, so no torch is needed)."""
    import time

    import fedgdp.nn.data as data
    import fedgdp.nn.run as run
    from fedgdp.nn.readings import piece_path, run_missing

    cfg = load_readings(_config(tmp_path))
    ran = []

    def fake_run(p, **kw):
        ran.append((p.run, p.release))
        time.sleep(0.05)
        return [{"fake": 1}]

    monkeypatch.setattr(data, "load_images", lambda *a, **k: None)
    monkeypatch.setattr(run, "run_nn", fake_run)
    monkeypatch.setattr(run, "write_runs", lambda rows, p, out: (out.parent.mkdir(parents=True, exist_ok=True),
                                                                  out.write_text("whole")))
    runs = tmp_path / "runs"
    assert run_missing(cfg, runs, budget_s=0) == [] and ran == []
    written = run_missing(cfg, runs, budget_s=0.01)          # the first piece takes 0.05 s: one piece only
    assert written == [piece_path(runs, "plain", "fig09", 20, 0)] and len(ran) == 1
    assert written[0].read_text() == "whole"
    assert len(run_missing(cfg, runs)) == len(pieces(cfg)) - 1  # no budget: the rest, the written one kept


def test_paper_sum_rows_carry_the_mu_really_spent():
    """``noise_for: mean`` (reading ``paper_sum``): the row's certified mu is the ledger's
    composition, never the target, and its privacy text says why."""
    from fedgdp.nn.readings import privacy_of

    cert, text = privacy_of("private", 2.0, "printed", noise_for="mean", mu_composed=960.0)
    assert cert == 960.0 and "not mu-GDP at mu = 2" in text and "960" in text
    assert privacy_of("private", 2.0, "printed")[0] == 2.0
    assert privacy_of("clip_only", 2.0, "printed", noise_for="mean", mu_composed=960.0)[0] == float("inf")


def test_the_summary_table_ranges_the_methods_medians():
    """summary.md: per reading, the range over methods of the median over runs at each
    point, the runs' count, and the mu really spent ('not run' where no piece is)."""
    import pandas as pd

    from fedgdp.nn.readings import Point, Readings, summary_markdown

    cfg = Readings("mnist", [Point("fig09", 100), Point("fig10", 100)], 1,
                   {"private": {}, "plain": {"release": "plain"}}, summary=["private", "plain"])
    rows = [{"reading": "private", "figure": "fig10", "x": 100, "run": r, "method": m, "accuracy": a,
             "certified_mu": 2.0} for r, (m, a) in enumerate([("fedsgd", 0.5), ("fedsgd", 0.7), ("fedavg", 0.2)])]
    rows.append({"reading": "plain", "figure": "fig09", "x": 100, "run": 0, "method": "fedsgd", "accuracy": 0.9,
                 "certified_mu": float("inf")})
    text = summary_markdown(pd.DataFrame(rows), cfg)
    assert text.startswith("| reading | what it changes | mu really spent | Fig. 10, m = 100 | Fig. 9, n = 100 |\n")
    assert "| private | nothing (the settings as printed) | 2 | 0.20-0.60 (3) | not run |" in text
    assert "| plain | release plain | none (not private) | not run | 0.90-0.90 (1) |" in text
    with_c6 = summary_markdown(pd.DataFrame(rows), cfg, c6={"private": ("holds (Fig. 10 only)", "two points")})
    assert with_c6.splitlines()[0].endswith("| C6 (two points) |")
    assert "| private | nothing (the settings as printed) | 2 | 0.20-0.60 (3) | not run | holds (Fig. 10 only) |" \
        in with_c6
    assert "| plain | release plain | none (not private) | not run | 0.90-0.90 (1) | not run |" in with_c6
    # one verdict per reading, in the column of the test that gave it; a column no reading uses is left out
    mixed = summary_markdown(pd.DataFrame(rows), cfg, c6={"private": ("partly", "whole grid"),
                                                          "plain": ("holds", "two points")})
    assert mixed.splitlines()[0].endswith("| C6 (whole grid) | C6 (two points) |")
    assert "| 0.20-0.60 (3) | not run | partly |  |" in mixed and "| not run | 0.90-0.90 (1) |  | holds |" in mixed
    grid_only = summary_markdown(pd.DataFrame(rows), cfg, c6={"private": ("partly", "whole grid"),
                                                             "plain": ("holds", "whole grid")})
    assert grid_only.splitlines()[0].endswith("| C6 (whole grid) |") and "two points" not in grid_only


def test_claims_c6_is_judged_per_reading_where_both_points_ran():
    """C6's two trends per reading (two points each: a direction, not the grid's slope): a
    reading that falls by more than ACC_TOL from m = 100 to 1000 agrees, one that rises
    contradicts; a reading run at one point only gets no line."""
    import pandas as pd

    from fedgdp.reports import claims

    rows = []
    for reading, acc in (("falls", {100: 0.9, 1000: 0.8}), ("rises", {100: 0.3, 1000: 0.35}), ("one", {100: 0.5})):
        for x, a in acc.items():
            for method in ("fedavg", "fednewton_iter"):
                rows.append({"reading": reading, "figure": "fig10", "x": x, "run": 0, "method": method,
                             "accuracy": a, "certified_mu": 2.0, "privacy": "record-level mu-GDP",
                             "dataset": "mnist", "release": "private"})
    lines = claims.reading_trends(pd.DataFrame(rows))
    trend = [line for line in lines if "accuracy falls" in line]
    assert len(trend) == 2 and not any("reading one" in line for line in lines)
    assert trend[0].startswith("reading falls (certified mu = 2), fig10, two points: accuracy falls from m = 100 to "
                               "1000: holds")
    assert "FedAvg 0.900 -> 0.800" in trend[0]
    assert trend[1].startswith("reading rises (certified mu = 2), fig10, two points: accuracy falls from m = 100 to "
                               "1000: fails")


def test_the_panels_draw_the_grid_beside_the_readings(tmp_path):
    """nn-readings --grid: figures.png from the committed grid summaries and readings table,
    only when both are there (a user's clone has them: they are tracked files); a grid
    folder without its summaries is one error naming the file."""
    import pandas as pd

    from fedgdp.nn.panels import plot_panels, read_grid

    cfg = load_readings(ROOT / "config/nn-readings.yaml")
    assert cfg.panels and set(cfg.panels) <= set(cfg.readings)
    grid = read_grid(ROOT / "docs/results/paper-nn-mnist")
    assert set(grid["figure"]) == {"fig09", "fig10"}
    table = pd.read_csv(ROOT / "docs/results/nn-readings/readings.csv")
    files = plot_panels(grid, table, cfg, cfg.panels, tmp_path / "figures.png")
    assert {f.name for f in files} == {"figures.png", "figures.pdf"} and all(f.stat().st_size > 10_000 for f in files)
    with pytest.raises(ValueError, match="fig09_summary.csv"):
        read_grid(tmp_path)


def test_panels_must_name_declared_readings(tmp_path):
    text = (ROOT / "config/nn-readings.yaml").read_text().replace("panels: [schedule_B10_lr0.1, paper_sum]",
                                                                   "panels: [nope]")
    (tmp_path / "r.yaml").write_text(text)
    with pytest.raises(ValueError, match=r"panels=\['nope'\] must be a list of declared readings"):
        load_readings(tmp_path / "r.yaml")


def test_claims_c6_verdict_per_reading_names_the_figure_it_rests_on():
    """`reading_c6` on the map alone: `combine` of a reading's two-point sub-claims, "(Fig. 10 only)" where
    Figure 9 ran at one point; "not run" where nothing can be judged."""
    import pandas as pd

    from fedgdp.reports import claims

    rows = []
    for reading, fig, acc in (("both", "fig10", {100: 0.9, 1000: 0.8}), ("both", "fig09", {100: 0.5, 600: 0.4}),
                              ("ten", "fig10", {100: 0.9, 1000: 0.8}), ("ten", "fig09", {100: 0.5}),
                              ("one", "fig10", {100: 0.5})):
        for x, a in acc.items():
            for method in ("fedavg", "fednewton_iter"):
                rows.append({"reading": reading, "figure": fig, "x": x, "run": 0, "method": method,
                             "accuracy": a, "certified_mu": 2.0, "privacy": "record-level mu-GDP",
                             "dataset": "mnist", "release": "private"})
    verdicts = claims.reading_c6(pd.DataFrame(rows))
    # both: fig10 falls (holds), Newton-Iter = FedAvg at m = 1000 (holds), fig09 falls (fails)
    assert verdicts == {"both": ("partly", "two points"), "ten": ("holds (Fig. 10 only)", "two points"),
                        "one": ("not run", "two points")}


def test_the_grid_config_runs_the_maps_readings_at_the_papers_runs():
    """config/nn-readings-grid.yaml reads each reading as the map does (the pieces share a runs folder),
    over the paper's grid: Figure 9 at 7 n x 5 runs, Figure 10 at 6 m x 4 runs."""
    grid, readings_map = (load_readings(ROOT / f"config/{f}.yaml") for f in ("nn-readings-grid", "nn-readings"))
    for name, over in grid.readings.items():
        assert over == readings_map.readings[name], name
    points = {(p.figure, p.x): p.runs for p in grid.points}
    assert points == {**{("fig09", n): 5 for n in (50, 75, 100, 200, 300, 400, 600)},
                      **{("fig10", m): 4 for m in (100, 200, 300, 500, 800, 1000)}}
    assert len(pieces(grid)) == len(grid.readings) * (7 * 5 + 6 * 4)


def test_a_whole_reading_is_summarised_as_the_grid_is(tmp_path):
    """nn-readings --summaries: a figure whose pieces of a reading are all on disk gets the grid's summary
    file (median over its runs, as `summarise_runs`), with the reading's name and the mu it really spends; a
    figure with a piece missing gets none. On the committed pieces (3 runs at Figure 10, m = 100; fewer than
    9 at Figure 9, n = 100)."""
    import pandas as pd

    from fedgdp.commands.cli import main

    runs = ROOT / "docs/results/nn-readings/runs"
    text = """
dataset: mnist
points:
  - {figure: fig10, x: 100, runs: RUNS}
  - {figure: fig09, x: 100, runs: 9}
runs: 1
readings:
  schedule_B10_lr0.1: {clip: 10, lr: 0.1, accounting: schedule}
  paper_sum: {reduction: sum, noise_for: mean}
"""
    cfg = _config(tmp_path, text.replace("RUNS", "3"))
    assert main(["nn-readings", str(cfg), "--runs-dir", str(runs), "--out-dir", str(tmp_path / "out"),
                 "--summaries", str(tmp_path / "s")]) == 0
    table = pd.read_csv(tmp_path / "out" / "readings.csv")
    for reading, lowest in (("schedule_B10_lr0.1", 2.0), ("paper_sum", 480.0)):   # paper_sum: n_i = 480 or more
        s = pd.read_csv(tmp_path / "s" / f"paper-nn-mnist-{reading}" / "fig10_summary.csv")
        assert list(s.columns[:2]) == ["reading", "figure"] and list(s.columns[-2:]) == ["certified_mu", "privacy"]
        assert s["privacy"].str.startswith("record-level").all() == (reading == "schedule_B10_lr0.1")
        assert (s["reading"] == reading).all() and (s["runs"] == 3).all() and len(s) == 4
        ours = table[(table["reading"] == reading) & (table["figure"] == "fig10")].groupby("method")
        assert (s["mu"] == 2.0).all() and (s["certified_mu"] >= lowest - 1e-9).all()
        assert s.set_index("method")["certified_mu"].to_dict() == pytest.approx(ours["certified_mu"].max().to_dict())
        medians = ours["accuracy"].median()
        assert s.set_index("method")["median_accuracy"].to_dict() == pytest.approx(medians.to_dict(), abs=5e-5)
    assert not (tmp_path / "s" / "paper-nn-mnist-schedule_B10_lr0.1" / "fig09_summary.csv").exists()
    # A piece that lands after `collect` read the folder (a map still running) is not summarised: the table's
    # missing list decides, not the folder at summary time.
    from fedgdp.nn.readings import collect, reading_summaries

    whole = load_readings(cfg)
    table, missing = collect(whole, runs)
    both = {("schedule_B10_lr0.1", "fig10"), ("paper_sum", "fig10")}
    assert {m[1] for m in missing} == {"fig09"} and set(reading_summaries(whole, runs, table, missing)) == both
    late = [*missing, ("paper_sum", "fig10", 100, 2)]
    assert set(reading_summaries(whole, runs, table, late)) == {("schedule_B10_lr0.1", "fig10")}
    cfg = _config(tmp_path, text.replace("RUNS", "9"))                    # 6 pieces of 18 missing: not whole
    assert main(["nn-readings", str(cfg), "--runs-dir", str(runs), "--out-dir", str(tmp_path / "out2"),
                 "--summaries", str(tmp_path / "s2")]) == 0
    assert not (tmp_path / "s2").exists() or not any((tmp_path / "s2").iterdir())


def test_the_newton_config_changes_only_the_ridge_of_the_certified_reading():
    """config/nn-readings-newton.yaml: FedNewton-Iter at the map's schedule_B10_lr0.1 with the ridge
    alone changed (and only that method run), at a point of the map, at the map's runs."""
    newton, readings_map = (load_readings(ROOT / f"config/{f}.yaml") for f in ("nn-readings-newton", "nn-readings"))
    base = readings_map.readings["schedule_B10_lr0.1"]
    assert newton.readings["schedule_B10_lr0.1"] == base
    assert newton.readings["schedule_B10_lr0.1_ridge30"] == {**base, "ridge": 30, "methods": "fednewton_iter"}
    assert newton.runs == readings_map.runs
    assert all((p.figure, p.x) in [(q.figure, q.x) for q in readings_map.points] for p in newton.points)


def _reading_summary(reading, slope9, slope10, privacy="record-level mu-GDP at each client", mu=2.0):
    """A reading's whole-grid summaries as `reading_summaries` writes them: accuracy = 0.5 + slope log x."""
    import pandas as pd

    from fedgdp.nn.plots import SUMMARY_COLUMNS

    rows = []
    for fig, xs, slope in (("fig09", (50, 100, 200, 600), slope9), ("fig10", (100, 300, 500, 1000), slope10)):
        for method in ("fedsgd", "fedhybrid", "fedavg", "fednewton_iter"):
            for x in xs:
                acc = 0.5 + slope * math.log(x) + (0.02 if method == "fednewton_iter" else 0.0)
                rows.append({c: 0 for c in SUMMARY_COLUMNS} | {
                    "reading": reading, "figure": fig, "dataset": "mnist", "method": method, "label": method, "x": x,
                    "runs": 5 if fig == "fig09" else 4, "median_accuracy": acc, "min_accuracy": acc - 0.01,
                    "max_accuracy": acc + 0.01, "certified_mu": mu, "privacy": privacy})
    return pd.DataFrame(rows)


def test_claims_c6_is_judged_on_a_readings_whole_grid(tmp_path, capsys):
    """fedgdp claims --nn-reading-summaries: a C6 row per reading from its whole-grid summaries, by the printed
    grid's test (slopes over every point), naming the mu the reading really spends; a reading given one figure
    only says so in its verdict; a file without a reading's columns is refused naming it."""
    import pandas as pd

    from fedgdp.commands.cli import main
    from fedgdp.reports import claims

    good = _reading_summary("good", 0.05, -0.05)
    bad = _reading_summary("bad", -0.05, 0.05, privacy="not mu-GDP at mu = 2: ...", mu=960.0)
    rows = claims.claim_c6_readings(pd.concat([good, bad[bad["figure"] == "fig10"]], ignore_index=True))
    assert [(r["model"], r["verdict"]) for r in rows] == [("CNN (mnist), reading good", "holds"),
                                                          ("CNN (mnist), reading bad", "partly (Fig. 10 only)")]
    assert rows[0]["evidence"][0] == ("the whole grid under reading good (certified mu = 2); fig09: 4 points, "
                                      "5 runs each, fig10: 4 points, 4 runs each")
    assert "mu really spent 960, no guarantee at the printed mu" in rows[1]["evidence"][0]
    assert rows[1]["evidence"][1].startswith("fig10: accuracy falls with m (N fixed): fails")
    files = []
    for reading, df in (("good", good), ("bad", bad)):
        for fig, f in df.groupby("figure"):
            files.append(tmp_path / f"{reading}-{fig}.csv")
            f.to_csv(files[-1], index=False)
    md = tmp_path / "claims.md"
    assert main(["claims", "--nn-reading-summaries", *map(str, files), "--md", str(md), "--csv",
                 str(tmp_path / "c.csv")]) == 0
    text = md.read_text()
    assert "| C6 | CNN (mnist), reading good |" in text and "### C6, CNN (mnist), reading bad: partly" in text
    assert "4 whole-grid CNN summaries under other readings" in text
    good.drop(columns="privacy").to_csv(files[0], index=False)
    assert main(["claims", "--nn-reading-summaries", str(files[0]), "--md", str(tmp_path / "no.md")]) == 2
    assert "good-fig09.csv lacks the column(s) ['privacy']" in capsys.readouterr().err
    assert not (tmp_path / "no.md").exists()


def test_one_c6_verdict_per_reading_wherever_its_grid_is_whole(tmp_path):
    """A reading whose whole grid is given is judged on it, and only on it: `reading_c6` gives the whole-grid
    verdict (the one `claim_c6_readings` shows), the printed grid's C6 row drops that reading's two-point lines,
    and ``nn-readings --reading-summaries`` puts that verdict in summary.md under "C6 (whole grid)", the other
    readings under "C6 (two points)". Here the two points of reading ``good`` hold while its whole grid fails
    at m = 1000 (FedNewton-Iter below FedAvg's worst run)."""
    import pandas as pd

    from fedgdp.commands.cli import main
    from fedgdp.reports import claims

    rows = []
    for reading in ("good", "other"):
        for fig, acc in (("fig10", {100: 0.9, 1000: 0.8}), ("fig09", {100: 0.5, 600: 0.6})):
            for x, a in acc.items():
                for method in ("fedsgd", "fedhybrid", "fedavg", "fednewton_iter"):
                    rows.append({"reading": reading, "figure": fig, "x": x, "run": 0, "method": method,
                                 "accuracy": a, "certified_mu": 2.0, "privacy": "record-level mu-GDP",
                                 "dataset": "mnist", "release": "private"})
    table = pd.DataFrame(rows)
    grid = _reading_summary("good", 0.05, -0.05)
    low = (grid["method"] == "fednewton_iter") & (grid["figure"] == "fig10")
    grid.loc[low, ["median_accuracy", "min_accuracy", "max_accuracy"]] -= 0.2     # trails FedAvg at every m
    assert claims.reading_c6(table) == {"good": ("holds", "two points"), "other": ("holds", "two points")}
    both = claims.reading_c6(table, grid)
    assert both == {"good": ("partly", "whole grid"), "other": ("holds", "two points")}
    assert [r["verdict"] for r in claims.claim_c6_readings(grid)] == [both["good"][0]]
    nn = grid.drop(columns=["reading", "certified_mu", "privacy"])
    report = claims.assess(None, nn=nn, readings=table, reading_summaries=grid)
    evidence = report[report["model"] == "CNN (mnist)"]["evidence"].iloc[0]
    assert not any(line.startswith("reading good") for line in evidence)
    assert any(line.startswith("reading other (certified mu = 2), fig09, two points") for line in evidence)
    assert "C6 of reading(s) good: on their whole grid (their own rows), not on two points" in evidence
    # the command: summary.md of a map whose reading `good` has its whole grid in a file
    files = []
    for fig, f in grid.groupby("figure"):
        files.append(str(tmp_path / f"{fig}_summary.csv"))
        f.to_csv(files[-1], index=False)
    assert claims.reading_c6(table, pd.concat([pd.read_csv(f) for f in files]))["good"] == ("partly", "whole grid")
    # the command, on committed pieces and the certified reading's committed whole grid
    cfg = _config(tmp_path, "dataset: mnist\npoints:\n  - {figure: fig10, x: 100}\nruns: 3\n"
                            "summary: [schedule_B10_lr0.1, private]\nreadings:\n"
                            "  schedule_B10_lr0.1: {clip: 10, lr: 0.1, accounting: schedule}\n  private: {}\n")
    committed = sorted(str(p) for p in (ROOT / "docs/results/paper-nn-mnist-schedule_B10_lr0.1").glob("fig*.csv"))
    out = tmp_path / "out"
    assert main(["nn-readings", str(cfg), "--runs-dir", str(ROOT / "docs/results/nn-readings/runs"),
                 "--out-dir", str(out), "--reading-summaries", *committed]) == 0
    head, _, sched, private = (out / "summary.md").read_text().splitlines()
    whole = claims.reading_c6(None, pd.concat([pd.read_csv(f) for f in committed]))["schedule_B10_lr0.1"][0]
    assert head.endswith("| C6 (whole grid) | C6 (two points) | code |")
    cells = {name: [c.strip() for c in line.strip("|").split("|")] for name, line in (("s", sched), ("p", private))}
    assert cells["s"][-3:-1] == [whole, ""] and cells["p"][-3:-1] == ["", "not run"]    # private: one point here
    assert all(c[-1] for c in cells.values())              # each says which code its pieces ran
    assert main(["nn-readings", str(cfg), "--runs-dir", str(ROOT / "docs/results/nn-readings/runs"),
                 "--out-dir", str(tmp_path / "o2"), "--reading-summaries", str(tmp_path / "nope.csv")]) == 2
    assert not (tmp_path / "o2" / "readings.csv").exists()          # refused before any work


def test_levels_give_each_methods_first_last_and_range_and_the_points_in_the_papers_range():
    """levels.md (`levels_markdown`): per reading and figure, each method's median at the first and last point,
    its range over the points and the points inside the config's band; a figure without a band says so."""
    from fedgdp.nn.panels import levels_markdown
    from fedgdp.nn.readings import Point, Readings

    grid = _reading_summary("x", 0.05, -0.05).drop(columns=["reading", "certified_mu", "privacy"])
    good = _reading_summary("good", 0.05, -0.05)
    cfg = Readings("mnist", [Point("fig10", 100)], 1, {"good": {}}, band={"fig10": [0.6, 0.9]})
    text = levels_markdown(grid, good, cfg)
    rows = [line for line in text.splitlines() if line.startswith("| as printed") or line.startswith("| good")]
    assert [r.split(" | ")[1] for r in rows] == ["Fig. 9", "Fig. 10", "Fig. 9", "Fig. 10"]
    assert rows[2].startswith("| good (certified mu = 2) |")
    # FedSGD at Figure 10: 0.5 - 0.05 log m over m = 100, 300, 500, 1000
    acc = [0.5 - 0.05 * math.log(m) for m in (100, 300, 500, 1000)]
    assert f"{acc[0]:.3f} -> {acc[-1]:.3f} ({acc[-1]:.3f}-{acc[0]:.3f}; 0 of 4 in 0.6-0.9)" in rows[1]
    newton = [a + 0.02 for a in (0.5 + 0.05 * math.log(n) for n in (50, 100, 200, 600))]
    assert rows[0].endswith(f"| {newton[0]:.3f} -> {newton[-1]:.3f} ({newton[0]:.3f}-{newton[-1]:.3f}; "
                            "no range read) |")
    assert levels_markdown(grid, None, dataclasses.replace(cfg, band={})).count("\n| as printed") == 2


def test_pieces_say_which_code_they_ran_and_whether_it_predates_the_noise_fix():
    """The committed map: a piece run before the noise fix is marked so, one from after it is not, and a
    commit git does not know is "fix unknown" (skipped where the checkout has no history, e.g. a shallow clone)."""
    import subprocess

    import pandas as pd

    from fedgdp.nn.readings import NOISE_FIX, code_label, collect, predates_noise_fix

    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", NOISE_FIX + "^{commit}"],
                      capture_output=True).returncode:
        pytest.skip("no git history with the noise fix in this checkout")
    assert predates_noise_fix("405c39a5db9cf17795c089e0cbd1d1b0d9e4b1cf") is True
    assert predates_noise_fix(NOISE_FIX) is False
    assert predates_noise_fix("unknown") is None
    rows = pd.DataFrame({"git_commit": ["405c39a5db9c", NOISE_FIX, "unknown"], "before_noise_fix": [True, False, None]})
    assert code_label(rows) == "55f946e; before the noise fix: 405c39a; fix unknown: unknown"
    table, _ = collect(load_readings(ROOT / "config" / "nn-readings.yaml"), ROOT / "docs/results/nn-readings/runs")
    plain = table[table["reading"] == "plain"]
    assert plain["before_noise_fix"].all() and len(plain)          # the map's oldest reading: all before the fix
