"""``fedgdp fit``: a `fedgdp.api.estimator.FederatedGLM` on a CSV or Parquet file.

One row per record: a response (``--target``), a client (``--client``) and feature
columns (``--features``, default every other). It prints the estimate and its privacy
report (``--json``), ``--out`` writes the coefficients. Options and what each costs in
privacy: ``fedgdp fit --help`` and docs/real-data.md. Bad input raises ValueError with
one line (exit status 2).

`add_parser` registers the command (`fedgdp.commands.cli` calls it);
`fit_table` is the command without the parser.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from pathlib import Path

from ..core.families import get_family

__all__ = ["add_parser", "read_table", "feature_columns", "fit_table", "coefficient_rows", "report", "format_report",
           "format_summary", "parse_classes", "parse_features", "read_scaling", "standardize", "SCALING_UNACCOUNTED"]

READERS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def read_table(path: str):
    """The data file as a pandas DataFrame; ValueError naming the file otherwise.

    Parameters
    ----------
    path : str
        A ``.csv`` file (comma-separated, a header row) or a ``.parquet`` / ``.pq`` file.
    """
    import pandas as pd

    p = Path(path)
    kind = READERS.get(p.suffix.lower())
    if kind is None:
        raise ValueError(f"DATA {path!r} must end in .csv, .parquet or .pq")
    if not p.is_file():
        raise ValueError(f"DATA {path!r}: no such file")
    try:
        return pd.read_csv(p) if kind == "csv" else pd.read_parquet(p)
    except Exception as exc:            # a parser's own error, as one line
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueError(f"cannot read {path!r} as {kind}: {first}") from None


def parse_features(text: str | None) -> list[str] | None:
    """``--features``: the comma-separated feature columns (None: every other column); ValueError for an empty
    value or name (``''``, ``'a,,b'``).

    Parameters
    ----------
    text : str or None
        The option's value.
    """
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not any(names) or not all(names):
        raise ValueError(f"--features must name one or more columns, comma-separated, with no empty name "
                         f"(leave the option out for every other column), got --features={text!r}")
    return names


def feature_columns(df, target: str, client: str, features: list[str] | None) -> list[str]:
    """The feature columns, checked: none, or distinct names, present, numeric, no missing values.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    target, client : str
        The target and client columns (never features).
    features : list of str or None
        The features named (None: every other column).
    """
    names = [str(c) for c in df.columns]
    if features is not None:
        if isinstance(features, str) or not list(features):
            raise ValueError(f"--features must name one or more columns, got --features={features!r}")
        twice = sorted({c for c in features if list(features).count(c) > 1})
        if twice:
            raise ValueError(f"--features names column(s) {', '.join(map(repr, twice))} more than once, got "
                             f"--features={','.join(map(str, features))!r}")
    for what, col in (("--target", target), ("--client", client)):
        if col not in names:
            raise ValueError(f"{what} column {col!r} is not in the data; columns: {', '.join(names)}")
    if features is None:
        features = [c for c in names if c not in (target, client)]
        if not features:
            raise ValueError("the data have no feature columns besides the target and the client")
    for col in features:
        if col not in names:
            raise ValueError(f"feature column {col!r} is not in the data; columns: {', '.join(names)}")
        if col in (target, client):
            raise ValueError(f"feature column {col!r} is also the {'target' if col == target else 'client'}")
        kind = df[col].dtype.kind
        if kind not in "biuf":
            raise ValueError(f"feature column {col!r} is not numeric (dtype {df[col].dtype}); "
                             "encode it as numbers or leave it out with --features")
        if df[col].isna().any():
            raise ValueError(f"feature column {col!r} has {int(df[col].isna().sum())} missing value(s)")
    for what, col in (("target", target), ("client", client)):
        if df[col].isna().any():
            raise ValueError(f"{what} column {col!r} has {int(df[col].isna().sum())} missing value(s)")
    return list(features)


def parse_classes(text: str | None, column=None) -> list | None:
    """``--classes``: the comma-separated public label domain, typed like the target column; ValueError for an
    empty label, or one that is not a number for a numeric column.

    Parameters
    ----------
    text : str or None
        E.g. ``"0,1"`` or ``"benign,malignant"``; None: no domain given.
    column : pandas.Series or None
        The target column: a numeric (or boolean) column types every class like itself;
        otherwise each class is the stripped text between the commas.
    """
    if text is None:
        return None
    items = [t.strip() for t in text.split(",")]
    if any(not t for t in items):
        raise ValueError(f"bad --classes {text!r}: an empty label; give the labels separated by commas, e.g. 0,1")
    kind = column.dtype.kind if column is not None else "O"
    if kind not in "biuf":
        return items
    name = getattr(column, "name", "target")
    out: list = []
    for t in items:
        value: bool | int | float
        try:
            if kind == "b":
                value = {"true": True, "1": True, "false": False, "0": False}[t.lower()]
            else:
                value = float(t)
                if kind in "iu":
                    if value != round(value):
                        raise ValueError(t)
                    value = int(value)
        except (KeyError, ValueError):
            what = "true or false" if kind == "b" else "an integer" if kind in "iu" else "a number"
            raise ValueError(f"bad --classes {text!r}: the target column {name!r} holds "
                             f"{column.dtype} values, so each class must be {what}, got {t!r}") from None
        out.append(value)
    return out


#: The ledger's ``unaccounted`` entry of a fit on features scaled by the data's own means and sds
SCALING_UNACCOUNTED = ("feature scaling: --standardize data centres and scales every feature by the data's own mean "
                       "and sd, a release accounted by no ledger (one record moves them, and with them every "
                       "coefficient); give public numbers instead (--standardize FILE.json)")


def read_scaling(path: str) -> dict:
    """``--standardize FILE.json``: public centring and scaling ``{column: (mean, sd)}``, one entry per feature
    column (ValueError naming the file and entry for anything else).

    Parameters
    ----------
    path : str
        A JSON object ``{"column": {"mean": m, "sd": s}, ...}`` (numbers fixed without the
        data: a published reference, a design's range); columns not fitted are ignored.
    """
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"--standardize {path!r}: no such file (give FILE.json with each feature's public mean and "
                         f"sd, or 'data')")
    try:
        spec = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"--standardize {path!r} is not JSON: {exc}") from None
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"--standardize {path!r} must hold a JSON object {{\"column\": {{\"mean\": m, \"sd\": s}}, "
                         f"...}}, got {type(spec).__name__}")
    out = {}
    for col, entry in spec.items():
        if not isinstance(entry, dict) or set(entry) != {"mean", "sd"}:
            raise ValueError(f"--standardize {path!r}: column {col!r} must be {{\"mean\": m, \"sd\": s}}, "
                             f"got {entry!r}")
        mean, sd = entry["mean"], entry["sd"]
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
            raise ValueError(f"--standardize {path!r}: column {col!r} has mean {mean!r}; it must be a finite number")
        if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not (math.isfinite(sd) and sd > 0):
            raise ValueError(f"--standardize {path!r}: column {col!r} has sd {sd!r}; it must be a finite number > 0")
        out[str(col)] = (float(mean), float(sd))
    return out


def standardize(df, cols: list[str], how: str | dict):
    """The feature columns centred and scaled, ``(x - mean) / sd`` per column, and the scaling used,
    ``{column: {"mean": m, "sd": s}}``.

    Parameters
    ----------
    df : pandas.DataFrame
        The table (checked by `fit_table`).
    cols : list of str
        The feature columns.
    how : "data" or dict
        ``"data"``: each column's own mean and sd (not covered, `SCALING_UNACCOUNTED`), or
        public ``{column: (mean, sd)}`` (`read_scaling`).
    """
    X = df[cols].astype(float)
    scaling: dict[str, tuple[float, float]]
    if isinstance(how, str):
        if how != "data":
            raise ValueError(f"--standardize must be a JSON file or 'data', got {how!r}")
        sd = X.std(ddof=0)
        flat = [c for c in cols if not sd[c] > 0]
        if flat:
            raise ValueError(f"--standardize data: feature column {flat[0]!r} is constant (sd 0); leave it out with "
                             f"--features")
        scaling = {c: (float(X[c].mean()), float(sd[c])) for c in cols}
    else:
        missing = [c for c in cols if c not in how]
        if missing:
            raise ValueError(f"--standardize: feature column {missing[0]!r} has no mean and sd in the file "
                             f"({len(missing)} of {len(cols)} columns missing)")
        scaling = {c: (float(how[c][0]), float(how[c][1])) for c in cols}
    for c in cols:
        X[c] = (X[c] - scaling[c][0]) / scaling[c][1]
    return X, {c: {"mean": m, "sd": s} for c, (m, s) in scaling.items()}


def fit_table(df, *, target: str, client: str, features: list[str] | None = None,
              standardize_with: str | dict | None = None, **params):
    """Fit a `FederatedGLM` on a table.

    Parameters
    ----------
    df : pandas.DataFrame of shape (n, columns)
    target, client : str
        The response's and the client label's columns.
    features : list of str or None
        The feature columns, distinct (default: every other column).
    standardize_with : None, "data" or dict
        Centre and scale the features first (`standardize`); ``"data"`` is not certified.
    **params
        The estimator's parameters (``family``, ``method``, ``mu``, ...).

    Returns
    -------
    estimator : FederatedGLM
        Fitted; ``feature_names_in_`` the feature columns, ``scaling_`` the scaling used or None.
    """
    import dataclasses

    from .estimator import FederatedGLM, PrivacyLeakWarning

    cols = feature_columns(df, target, client, features)
    X, scaling = (df[cols], None) if standardize_with is None else standardize(df, cols, standardize_with)
    est = FederatedGLM(**params).fit(X, df[target].to_numpy(), df[client].to_numpy())
    est.scaling_ = None
    if scaling is not None:
        covered = standardize_with != "data"
        est.scaling_ = {"source": "public (given)" if covered else "data (not covered)", "covered": covered,
                        "columns": scaling}
        if not covered and est.privacy_.ledger.releases:
            ledger = est.privacy_.ledger
            est.privacy_ = dataclasses.replace(
                est.privacy_, ledger=dataclasses.replace(ledger, unaccounted=[*ledger.unaccounted,
                                                                              SCALING_UNACCOUNTED]))
            warnings.warn("the features were scaled by the data's own means and sds (--standardize data), a release "
                          "no ledger accounts for, so the fit is not covered (privacy certified: False); certified "
                          "alternative: --standardize FILE.json with public numbers", PrivacyLeakWarning,
                          stacklevel=2)
    return est


def coefficient_rows(est) -> list[dict]:
    """One dict per (class, term): ``term``, ``class`` (multinomial only) and ``coef``, in ``theta_``'s order.

    Parameters
    ----------
    est : fedgdp.api.estimator.FederatedGLM
        A fitted estimator.
    """
    names = ["(intercept)"] * bool(est.fit_intercept) + [str(c) for c in est.feature_names_in_]
    theta = est.theta_
    rows = []
    if get_family(est.family).classes:
        for j, cls in enumerate(est.classes_):
            rows += [{"class": _plain(cls), "term": t, "coef": float(v)} for t, v in zip(names, theta[:, j])]
    else:
        rows = [{"term": t, "coef": float(v)} for t, v in zip(names, theta[:, 0])]
    return rows


def _plain(x):
    return x.item() if hasattr(x, "item") else x


def _num(x: float):
    return float(x) if math.isfinite(x) else str(x)


def report(est, *, delta: float, rows: int, data: str) -> dict:
    """The JSON report: the estimate, its fit and its privacy report at ``delta``: ``data``, ``rows``,
    ``family``, ``method``, ``n_clients``, ``client_sizes``, ``features``, ``coefficients``, ``communication``,
    ``settings``, ``fit`` (``fit_info_``), ``privacy``, ``standardize`` (``scaling_``), ``summary`` and, for
    classifiers, ``classes``.

    Parameters
    ----------
    est : fedgdp.api.estimator.FederatedGLM
        A fitted estimator.
    delta : float
        The delta of the privacy report's epsilon.
    rows : int
        Rows of the data file.
    data : str
        The data file's path, as given.
    """
    out = {"data": data, "rows": rows, "family": est.family, "method": est.method_,
           "n_clients": int(est.n_clients_), "client_sizes": [int(n) for n in est.client_sizes_],
           "features": [str(c) for c in est.feature_names_in_], "coefficients": coefficient_rows(est),
           "communication": est.communication_, "settings": est.settings_.method_settings[est.method_],
           "fit": {k: _num(v) if isinstance(v, float) else v.tolist() if hasattr(v, "tolist") else v
                   for k, v in est.fit_info_.items()},
           "privacy": est.privacy_.as_dict(delta), "standardize": getattr(est, "scaling_", None)}
    if get_family(est.family).labelled:
        out["classes"] = [_plain(c) for c in est.classes_]
    out["summary"] = _summary(est)
    return out


def _summary(est) -> dict:
    """``est.summary()`` as JSON-ready data (`fedgdp.api.inference.summary_records`; non-finite
    numbers as strings)."""
    from .inference import summary_records

    rec = summary_records(est.summary())
    rec["rows"] = [{k: _num(v) if isinstance(v, float) else _plain(v) for k, v in r.items()} for r in rec["rows"]]
    return rec


def format_summary(summary: dict) -> str:
    """The ``summary`` of a report (`report`) as the header and table ``FederatedGLM.summary()`` prints.

    Parameters
    ----------
    summary : dict
        ``header`` (lines) and ``rows``.
    """
    import pandas as pd

    df = pd.DataFrame([{k: float(v) if v in ("nan", "inf", "-inf") else v for k, v in r.items()}
                       for r in summary["rows"]])
    df = df.set_index(["class", "term"] if "class" in df.columns else "term")
    table = df.to_string(float_format=lambda v: f"{v:.4g}")
    return "\n".join([*summary["header"], table])


def format_report(rep: dict) -> str:
    """The report as a plain-text table: the coefficients, then the privacy summary.

    Parameters
    ----------
    rep : dict
        The report (`report`).
    """
    pv = rep["privacy"]
    lines = [f"{rep['method']} ({pv['privacy_mode']}), family {rep['family']}: {rep['rows']} rows, "
             f"{rep['n_clients']} clients (sizes {min(rep['client_sizes'])}-{max(rep['client_sizes'])}), "
             f"mu = {pv['mu'] if isinstance(pv['mu'], str) else format(pv['mu'], 'g')}", ""]
    coefs = rep["coefficients"]
    has_class = "class" in coefs[0]
    width = max(len("term"), *(len(r["term"]) for r in coefs))
    head = (f"{'class':>8}  " if has_class else "") + f"{'term':<{width}}  {'coef':>12}"
    lines += [head, "-" * len(head)]
    for r in coefs:
        lines.append((f"{str(r['class']):>8}  " if has_class else "") + f"{r['term']:<{width}}  {r['coef']:>12.6g}")
    mu_c, mu_cert = pv["mu_composed"], pv["mu_certified"]

    def worst(v):
        return "inf" if any(isinstance(x, str) for x in v) else f"{max(v):.6g}"

    lines += ["", f"guarantee: {pv['guarantee']}",
              f"privacy: composed mu per client (max) {worst(mu_c)}; certified mu (max) {worst(mu_cert)}; "
              f"epsilon {pv['epsilon'] if isinstance(pv['epsilon'], str) else format(pv['epsilon'], '.4g')} "
              f"at delta {pv['delta']:g} ({'certified' if pv['certified'] else 'NOT certified'})",
              "noise: " + ("fresh (operating system entropy)" if pv["noise_secret"] else
                           "from --seed, NOT secret: anyone who knows the seed can remove it")
              + (f"; label domain: {pv['label_domain']}" if pv["label_domain"] else ""),
              f"clipping bound B = "
                f"{pv['clip_bound'] if isinstance(pv['clip_bound'], str) else format(pv['clip_bound'], '.6g')}"
              f" (rule {pv['clip']['rule']}); rounds {rep['communication']['rounds']}"]
    lines += [f"  not accounted / assumed: {a}" for a in pv["assumptions"]]
    if rep.get("standardize"):
        sc = rep["standardize"]
        lines.append(f"features standardised ({len(sc['columns'])} columns, coefficients on that scale): "
                     + ("public centring and scaling (--standardize FILE)" if sc["covered"] else
                        "by the data's own means and sds (--standardize data), NOT covered by the ledger"))
    if "fit" in rep:
        from .diagnostics import format_info

        info = {k: float(v) if v in ("nan", "inf") else v for k, v in rep["fit"].items()}
        lines.append(format_info(info))
    if "summary" in rep:
        lines += ["", format_summary(rep["summary"])]
    return "\n".join(lines)


def _write_coefficients(est, path: str) -> None:
    from ..common.io import atomic_path, write_text

    rows = coefficient_rows(est)
    if path.lower().endswith(".json"):
        write_text(path, json.dumps(rows, indent=1) + "\n")
        return
    import pandas as pd

    with atomic_path(path) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)


def _settings(text: str | None) -> dict | None:
    from ..common.arguments import _spec

    if text is None:
        return None
    return _spec(text, flag="--settings", example=', e.g. \'{"K": 50, "eta": 0.5}\'')


def _clip(text: str | None):
    """``--clip``: none (the public rule), quantile, private_quantile[:Q[:SHARE]] or a number B."""
    if text is None:
        return None
    if text == "quantile":
        return "quantile"
    if text.startswith("quantile:"):
        try:
            return {"rule": "quantile", "q": float(text.split(":", 1)[1])}
        except ValueError:
            raise ValueError(f"bad --clip {text!r}: use quantile:Q, e.g. quantile:0.9") from None
    if text.startswith("private_quantile"):
        parts = text.split(":")
        try:
            rule = {"rule": "private_quantile", "q": float(parts[1]) if len(parts) > 1 else 0.9}
            if len(parts) > 2:
                rule["share"] = float(parts[2])
        except ValueError:
            raise ValueError(f"bad --clip {text!r}: "
                             f"use private_quantile:Q:SHARE, e.g. private_quantile:0.9:0.1") from None
        return rule
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"bad --clip {text!r}: a number B (public bound), quantile[:Q] or "
                         "private_quantile[:Q[:SHARE]]") from None


def forecast_file(path: str, *, client: str, target: str, features: list[str] | None, family: str, mu: float,
                  classes: list | None = None, **settings):
    """``fedgdp fit --forecast``: `fedgdp.api.forecast.forecast` from the header and client column only.

    Parameters
    ----------
    path : str
        The data file (``.csv``, ``.parquet``).
    client, target : str
        The client and response columns (the response is not read).
    features : list of str or None
        The feature columns (None: every other column of the header).
    family : str
    mu : float
    classes : list or None
        The public label domain (its size is softmax's number of classes).
    **settings
        The forecast's other settings (`fedgdp.api.forecast.SETTINGS`) and a plan's guesses
        (``outcome_mean``, ``signal_sd``).
    """
    import pandas as pd

    from .forecast import forecast

    p = Path(path)
    kind = READERS.get(p.suffix.lower())
    if kind is None or not p.is_file():
        read_table(path)                  # its one-line error
    try:
        if kind == "csv":
            names = [str(c) for c in pd.read_csv(p, nrows=0).columns]
        else:
            import pyarrow.parquet as pq

            names = [str(c) for c in pq.read_schema(p).names]
    except Exception as exc:
        raise ValueError(f"cannot read the header of {path!r}: {str(exc).strip().splitlines()[0]}") from None
    for what, col in (("--target", target), ("--client", client)):
        if col not in names:
            raise ValueError(f"{what} column {col!r} is not in the data; columns: {', '.join(names)}")
    cols = features if features is not None else [c for c in names if c not in (target, client)]
    missing = [c for c in cols if c not in names]
    if missing or not cols:
        raise ValueError(f"feature column {missing[0]!r} is not in the data" if missing else
                         "the data have no feature columns besides the target and the client")
    labels = (pd.read_csv(p, usecols=[client]) if kind == "csv" else pd.read_parquet(p, columns=[client]))[client]
    if labels.isna().any():
        raise ValueError(f"client column {client!r} has {int(labels.isna().sum())} missing value(s)")
    sizes = labels.value_counts(sort=False).sort_index().to_numpy()
    if get_family(family).classes:
        if classes is None:
            raise ValueError(f"--forecast with --family {family} needs --classes (the number of classes is public "
                             "only when the label domain is)")
        settings["n_classes"] = len(classes)
    return forecast(family, sizes, len(cols), mu, **settings)


def _print_forecast(args, features) -> int:
    from ..core.privacy import parse_mu

    classes = None if args.classes is None else parse_classes(args.classes)
    table = forecast_file(args.data, client=args.client, target=args.target, features=features,
                          family=args.family, mu=parse_mu(args.mu), classes=classes,
                          clip=None if args.clip is None else _clip_number(args.clip),
                          privacy_mode=args.privacy_mode, tau1=args.tau1, hessian_clip=args.hessian_clip,
                          method_settings=_settings(args.settings), outcome_mean=args.outcome_mean,
                          signal_sd=args.signal_sd, **({} if args.method == "auto" else {"method": args.method}))
    print(f"forecast read only the header and the client column of {args.data} (no feature, no response): "
          f"the privacy noise each method would add (model: {table.attrs['model']})")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print(f"recommended: {table.attrs['recommended']} (the lowest noise_rmse); a noise_rmse above "
          f"{_noise_limit():g} drowns the effects one can hope to estimate")
    return 0


def _noise_limit() -> float:
    from .forecast import NOISE_LIMIT

    return NOISE_LIMIT


def _clip_number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"bad --clip {text!r} with --forecast: the forecast needs a public bound, a number B "
                         "(or none: the public rule)") from None


def _cmd_fit(args) -> int:
    from ..core.privacy import parse_mu

    if args.forecast:
        features = [c.strip() for c in args.features.split(",") if c.strip()] if args.features else None
        return _print_forecast(args, features)
    if args.outcome_mean is not None or args.signal_sd:
        raise ValueError("--outcome-mean and --signal-sd are a plan's guesses for --forecast; a fit reads its data")
    df = read_table(args.data)
    features = parse_features(args.features)
    if not 0 < args.delta < 1:
        raise ValueError(f"--delta must lie in (0, 1), got {args.delta}")
    params = dict(family=args.family, method=args.method, mu=parse_mu(args.mu), privacy_mode=args.privacy_mode,
                  clip=_clip(args.clip), hessian_clip=args.hessian_clip, tau1=args.tau1,
                  method_settings=_settings(args.settings), random_state=args.seed,
                  inference_share=args.inference_share,
                  classes=parse_classes(args.classes, df[args.target] if args.target in df.columns else None))
    scale = None if args.standardize is None else "data" if args.standardize == "data" else \
        read_scaling(args.standardize)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = fit_table(df, target=args.target, client=args.client, features=features, standardize_with=scale,
                        **params)
    from .diagnostics import FeatureScaleWarning

    for w in caught:        # the leak and convergence warnings: one line each, on stderr
        hint = " (fedgdp fit --standardize FILE.json, or --standardize data)" \
            if issubclass(w.category, FeatureScaleWarning) else ""
        sys.stderr.write(f"fedgdp fit: warning: {w.message}{hint}\n")
    rep = report(est, delta=args.delta, rows=len(df), data=args.data)
    if args.json:
        json.dump(rep, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(format_report(rep))
    if args.out:
        _write_coefficients(est, args.out)
    return 0


def add_parser(sub) -> argparse.ArgumentParser:
    """Register ``fedgdp fit`` on the subparsers ``sub``.

    Parameters
    ----------
    sub : argparse._SubParsersAction
        The subparsers of the ``fedgdp`` parser.
    """
    from ..common.arguments import output_path
    from ..core.privacy import HESSIAN_CLIP
    from ..methods import REALDATA, registry
    from .estimator import FAMILIES
    from .inference import DEFAULT_SHARE

    fits = {n: m for n, m in registry(REALDATA).items() if not m.tags.per_client}      # one global estimate
    private = ", ".join(n for n, m in fits.items() if m.tags.private)
    plain = ", ".join(n for n, m in fits.items() if not m.tags.private)
    ap = sub.add_parser("fit", help="fit a private federated GLM on your own CSV or Parquet file: the "
                                    "estimate and its privacy report")
    ap.add_argument("data", metavar="DATA", help="a .csv or .parquet file, one row per record")
    ap.add_argument("--target", required=True, help="the response column")
    ap.add_argument("--client", required=True, help="the column of client labels (one client per value)")
    ap.add_argument("--features", help="comma-separated feature columns (default: every other column)")
    ap.add_argument("--family", choices=FAMILIES, default="logistic", help="the model")
    ap.add_argument("--classes", help="the classifier's public label domain, comma-separated, e.g. 0,1 (numbers "
                                      "when the target column holds numbers, else text); a row with another label "
                                      "is refused; without it the label set is taken from the data, not covered")
    ap.add_argument("--method", default="auto", help=f"auto (the lowest forecast noise: fedgdp.forecast), {private}; "
                                                     f"{plain} with --mu inf")
    ap.add_argument("--mu", default="2", help="mu-GDP budget of every client (inf: non-private)")
    ap.add_argument("--privacy-mode", dest="privacy_mode", choices=["certified", "paper"], default="certified",
                    help="certified: every release's sensitivity holds for all inputs; paper: as printed")
    ap.add_argument("--clip", help="clipping bound: a number B (public), quantile[:Q] (data-driven, not "
                                   "accounted), private_quantile[:Q[:SHARE]] (default: the public rule B = sqrt(d), "
                                   "2 sqrt(d) for poisson, d design columns; standardise your features)")
    ap.add_argument("--hessian-clip", dest="hessian_clip", type=float, default=HESSIAN_CLIP,
                    help="certified FedNewton's per-sample Hessian bound, times tau1")
    ap.add_argument("--tau1", type=float, default=0.5, help="FedNewton's eigenvalue floor / ridge")
    ap.add_argument("--settings", help='the method\'s settings as JSON, e.g. \'{"K": 50, "eta": 0.5}\' '
                                       "(default: the real-data defaults)")
    ap.add_argument("--standardize", metavar="FILE.json|data",
                    help="centre and scale the features first: FILE.json gives each column's public mean and sd "
                         "({\"col\": {\"mean\": m, \"sd\": s}}, covered); 'data' uses the data's own means and sds, a "
                         "release no ledger covers (the report says so); the coefficients are on that scale")
    ap.add_argument("--seed", type=int, default=None,
                    help="random_state, to reproduce an analysis: anyone who knows the seed can remove the noise, "
                         "so the report marks the guarantee void (default: fresh noise from the OS's entropy)")
    ap.add_argument("--inference-share", dest="inference_share", type=float, default=DEFAULT_SHARE,
                    help="the share of mu^2 spent on the private moments behind the summary's standard errors "
                         "(the estimation gets the rest; 0: none, se_sampling from a public model)")
    ap.add_argument("--delta", type=float, default=1e-5, help="delta of the reported (epsilon, delta)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    ap.add_argument("--forecast", action="store_true",
                    help="print each method's forecast privacy noise (fedgdp.forecast) and fit nothing: it reads "
                         "only the file's header and the client column")
    ap.add_argument("--outcome-mean", dest="outcome_mean", type=float,
                    help="with --forecast: a plan's guess of the outcome's mean (share of ones, or mean count); "
                         "the curvature is read there (default: theta = 0)")
    ap.add_argument("--signal-sd", dest="signal_sd", type=float, default=0.0,
                    help="with --forecast and --outcome-mean: a plan's guess of the linear predictor's sd")
    ap.add_argument("--out", type=output_path(".csv", ".json"), help="write the coefficients (.csv or .json)")
    ap.set_defaults(func=_cmd_fit)
    return ap
