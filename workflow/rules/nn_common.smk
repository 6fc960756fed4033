# Helpers of the CNN stage (workflow/rules/nn.smk, Figures 9-10): checks of the config's
# nn section, input and parameter functions. No rules here. Kept beside common.smk
# (whose helpers it uses: config_error, _check_in, _alternatives, _figure_number) so
# the stages can change independently. Imports only torch-free parts of fedgdp.nn, so
# planning (snakemake -n) works without PyTorch; the jobs need the nn extra.
from fedgdp.datasets import MNIST_FILES
from fedgdp.nn.calibration import LABELS
from fedgdp.nn.settings import resolve as resolve_nn

NN_FILE = "results/nn/{dataset}/{nfig}/m~{m}/n~{n}/run~{run}.parquet"
NN_SUMMARY = "results/nn/summary/{dataset}_{nfig}.parquet"
NN_FIGURES = ("fig09", "fig10")
_NN_TRAIN_IMAGES = {"digits": 1437, "mnist": 60000, "cifar10": 50000}
_CIFAR_BATCHES = [f"data_batch_{k}" for k in range(1, 6)] + ["test_batch"]


def nn_section():
    return config.get("nn", {})


def nn_settings(dataset, nfig, m, n, run):
    """`fedgdp nn-run` settings of one run (fedgdp.nn.settings keys)."""
    s = nn_section()
    p = dict(s.get("settings", {}))
    p.update(s.get("dataset_settings", {}).get(dataset, {}))
    p.update(figure=nfig, dataset=dataset, m=int(m), n=None if n == "full" else int(n), run=int(run),
             base_seed=s["base_seed"], methods=s["methods"])
    return p


def nn_axes(dataset, nfig):
    """(m values, n values) of a figure's grid for one dataset; n 'full' for fig10."""
    f = nn_section()[nfig]
    if nfig == "fig09":
        return [int(f["m"])], [int(n) for n in f["n"][dataset]]
    return [int(m) for m in f["m"][dataset]], ["full"]


def nn_runs(nfig):
    return list(range(nn_section()[nfig]["runs"]))


def check_nn():
    """What the schema cannot say: every run's settings resolve and fit the data."""
    s = nn_section()
    if not s:
        return
    for i, name in enumerate(s["methods"]):
        _check_in(f"nn.methods[{i}]", name, list(LABELS), "method")
    for ds in s["datasets"]:
        for nfig in NN_FIGURES:
            f = s[nfig]
            key = "n" if nfig == "fig09" else "m"
            if ds not in f[key]:
                raise config_error(f"nn.{nfig}.{key}", f"no values for dataset {ds!r}")
            ms, ns = nn_axes(ds, nfig)
            for m in ms:
                for n in ns:
                    try:
                        resolve_nn(nn_settings(ds, nfig, m, n, 0))
                    except ValueError as exc:
                        raise config_error(f"nn.{nfig}", f"{ds}, m={m}, n={n}: {exc}") from None
                    need = m * (1 if n == "full" else n)
                    if need > _NN_TRAIN_IMAGES[ds]:
                        raise config_error(f"nn.{nfig}", f"{ds}: m * n = {need} exceeds its "
                                           f"{_NN_TRAIN_IMAGES[ds]} training images")
    for name in s.get("dataset_settings", {}):
        _check_in(f"nn.dataset_settings.{name}", name, list(_NN_TRAIN_IMAGES), "dataset")


check_nn()


def nn_targets():
    """Figures 9-10 (PDF, PNG) and their summary CSVs."""
    return [f"figures/{nfig}{ext}" for nfig in NN_FIGURES for ext in (".pdf", ".png", "_summary.csv")]


def nn_default_targets():
    """Part of `rule all` only when nn.in_default_target is true (the jobs need PyTorch)."""
    return nn_targets() if nn_section().get("in_default_target", False) else []


def _nn_values(axis):
    out = set()
    for ds in nn_section().get("datasets", []):
        for nfig in NN_FIGURES:
            ms, ns = nn_axes(ds, nfig)
            out.update(ms if axis == "m" else ns)
    return out


def nn_wildcards():
    s = nn_section()
    return {
        "dataset": _alternatives(s.get("datasets", [])),
        "nfig": _alternatives(NN_FIGURES),
        "m": _alternatives(_nn_values("m")),
        "n": _alternatives(_nn_values("n")),
        "run": _alternatives(range(max([s[f]["runs"] for f in NN_FIGURES] or [0]))),
    }


def nn_run_files(dataset, nfig):
    ms, ns = nn_axes(dataset, nfig)
    return [NN_FILE.format(dataset=dataset, nfig=nfig, m=m, n=n, run=r)
            for m in ms for n in ns for r in nn_runs(nfig)]


def _nn_check_run(w):
    ms, ns = nn_axes(w.dataset, w.nfig)
    if int(w.m) not in ms or w.n not in [str(n) for n in ns] or int(w.run) not in nn_runs(w.nfig):
        raise WorkflowError(f"{w.nfig}/m~{w.m}/n~{w.n}/run~{w.run} is not a run of {w.dataset} in the config")


def nn_run_spec(wildcards):
    """JSON settings of one run (checked against the grid)."""
    _nn_check_run(wildcards)
    return json.dumps(nn_settings(wildcards.dataset, wildcards.nfig, wildcards.m, wildcards.n, wildcards.run),
                      sort_keys=True)


def nn_data_files(wildcards):
    """The dataset's files (fetched by fetch_nn_data when absent); nothing for digits."""
    root = nn_section()["data_dir"]
    if wildcards.dataset == "mnist":
        folder = os.path.join(root, "mnist")
        if os.path.isfile(os.path.join(folder, "mnist.npz")):
            return [os.path.join(folder, "mnist.npz")]
        plain = [os.path.join(folder, f.removesuffix(".gz")) for f in MNIST_FILES]
        if all(os.path.isfile(f) for f in plain):
            return plain
        return [os.path.join(folder, f) for f in MNIST_FILES]
    if wildcards.dataset == "cifar10":
        return [os.path.join(root, "cifar10", "cifar-10-batches-py", b) for b in _CIFAR_BATCHES]
    return []


def nn_cifar_files():
    """CIFAR-10's python batches under nn.data_dir (made by rule fetch_cifar10)."""
    return [os.path.join(nn_section().get("data_dir", "data"), "cifar10", "cifar-10-batches-py", b)
            for b in _CIFAR_BATCHES]


def nn_mnist_fetch_files():
    """MNIST's IDX files for rule fetch_nn_mnist; empty (no such rule) when the real-data
    stage's fetch_mnist already makes them (nn.data_dir/mnist is realdata.path)."""
    folder = os.path.join(nn_section().get("data_dir", "data"), "mnist")
    if os.path.normpath(folder) == os.path.normpath(config.get("realdata", {}).get("path", "")):
        return []
    return [os.path.join(folder, f) for f in MNIST_FILES]


def nn_fetch_root(wildcards, output):
    """nn.data_dir, from a fetch rule's outputs (<root>/mnist/<file> or
    <root>/cifar10/cifar-10-batches-py/<file>)."""
    path = os.path.dirname(output[0])
    if path.endswith("cifar-10-batches-py"):
        path = os.path.dirname(path)
    return os.path.dirname(path) or "."


def nn_summary_inputs(wildcards):
    return nn_run_files(wildcards.dataset, wildcards.nfig)


def nn_figure_summaries(wildcards):
    return [NN_SUMMARY.format(dataset=ds, nfig=wildcards.nfig) for ds in nn_section()["datasets"]]


def nn_category(wildcards):
    return _figure_number(wildcards.nfig)


def nn_caption(wildcards):
    s = nn_section()
    nfig = wildcards.nfig
    f = s[nfig]
    parts = []
    for ds in s["datasets"]:
        p = resolve_nn(nn_settings(ds, nfig, *[v[0] for v in nn_axes(ds, nfig)], 0))
        grid = (f"m = {f['m']}, n per client in {{{', '.join(map(str, f['n'][ds]))}}}" if nfig == "fig09"
                else f"full training split over m in {{{', '.join(map(str, f['m'][ds]))}}} clients")
        parts.append(f"{ds}: {grid}; q = {p['q']:g}, R = {p['rounds']} rounds of K = {p['local_epochs']} "
                     f"full-batch local steps, lr {p['lr']:g}, server lr {p['server_lr']:g}, B = {p['clip']:g}, "
                     f"mu = {p['mu']:g}, FedNewton-Iter {p['newton_cycles']} cycles with ridge "
                     f"{p['ridge']:g} and damping {p['damping']:g}, FedHybrid local share "
                     f"{p['hybrid_local_share']:g}")
    x = "samples per client" if nfig == "fig09" else "the number of clients (total fixed)"
    return (f"{'Figure 9' if nfig == 'fig09' else 'Figure 10'}: final accuracy on the standard test set "
            f"of private federated CNNs against {x}; median over {f['runs']} runs (band: range over runs), "
            f"one line per method ({', '.join(LABELS[mth] for mth in s['methods'])}). Each client keeps 10% "
            f"for validation and 10% for a local test. Noise calibrated so every client is mu-GDP "
            f"when drawn in every round (no amplification by sampling). {'; '.join(parts)}; "
            f"base_seed {s['base_seed']}.")


def nn_labels_pdf(wildcards):
    return {"figure": _figure_number(wildcards.nfig), "format": "PDF"}


def nn_labels_png(wildcards):
    return {"figure": _figure_number(wildcards.nfig), "format": "PNG"}
