# Helpers of the real-data stage (workflow/rules/realdata.smk): checks of the config's
# realdata section, input and parameter functions. No rules here. Kept beside
# common.smk (whose helpers it uses: config_error, _check_in, _alternatives,
# _figure_number) so the two stages can change independently.
from fedgdp.datasets import MNIST_FILES
from fedgdp.realdata import TASKS
from fedgdp.realdata import resolve as resolve_realdata

REALDATA_FILE = "results/realdata/{dataset}/{task}/split~{split}.parquet"
_REALDATA_IMAGES = {"digits": 1797, "mnist": 70000}
_REALDATA_PIPELINE_KEYS = ("tasks", "splits", "figures")


def realdata_settings():
    """The realdata section without the pipeline-only keys: `fedgdp realdata` parameters."""
    return {k: v for k, v in config["realdata"].items() if k not in _REALDATA_PIPELINE_KEYS}


def check_realdata():
    """What the schema cannot say: the parameters resolve, the layout fits the data,
    figures draw configured tasks."""
    rd = config["realdata"]
    for i, task in enumerate(rd["tasks"]):
        _check_in(f"realdata.tasks[{i}]", task, list(TASKS), "task")
    try:
        resolve_realdata(realdata_settings())
    except ValueError as exc:
        raise config_error("realdata", str(exc)) from None
    need, have = rd["m"] * rd["n_min"], _REALDATA_IMAGES[rd["dataset"]]
    if need > have:
        raise config_error("realdata.n_min", f"m * n_min = {need} exceeds the {have} images of {rd['dataset']}")
    for fig, f in rd["figures"].items():
        _check_in(f"realdata.figures.{fig}.task", f["task"], rd["tasks"], "task of realdata.tasks:")
        if fig in config.get("figures", {}):
            raise config_error(f"realdata.figures.{fig}", "name already used by a simulation figure")


check_realdata()


def realdata_figures():
    return list(config["realdata"]["figures"])


def realdata_targets():
    """Figures 7-8 (PDF, PNG) and their medians tables: part of `rule all`."""
    return [f"figures/{fig}{ext}" for fig in realdata_figures()
            for ext in (".pdf", ".png", "_medians.csv")]


def realdata_split_file(task, split):
    return REALDATA_FILE.format(dataset=config["realdata"]["dataset"], task=task, split=split)


def realdata_data_files(wildcards):
    """MNIST's files (fetched by fetch_mnist when absent); nothing for digits."""
    rd = config["realdata"]
    if rd["dataset"] != "mnist":
        return []
    if os.path.isfile(os.path.join(rd["path"], "mnist.npz")):
        return [os.path.join(rd["path"], "mnist.npz")]
    plain = [os.path.join(rd["path"], f.removesuffix(".gz")) for f in MNIST_FILES]
    if all(os.path.isfile(f) for f in plain):
        return plain
    return [os.path.join(rd["path"], f) for f in MNIST_FILES]


def realdata_spec(wildcards):
    return json.dumps(realdata_settings(), sort_keys=True)


def realdata_figure_task(wildcards):
    return config["realdata"]["figures"][wildcards.rfig]["task"]


def realdata_figure_files(wildcards):
    task = realdata_figure_task(wildcards)
    return [realdata_split_file(task, s) for s in range(config["realdata"]["splits"])]


def realdata_figure_title(wildcards):
    return config["realdata"]["figures"][wildcards.rfig].get("title", "")


def realdata_category(wildcards):
    return _figure_number(wildcards.rfig)


def realdata_caption(wildcards):
    rd = config["realdata"]
    task = realdata_figure_task(wildcards)
    s = resolve_realdata(dict(realdata_settings(), task=task))
    metric = {"binary": "AUC (label 1 = odd digit)", "multiclass": "accuracy (10 classes)"}[task]
    clip = s["clip"]
    clip_text = (f"B = max over clients of the {clip['q']:g}-quantile of per-sample gradient norms at 0"
                 if clip["rule"] == "quantile" else f"B = {clip['value']:g}")
    settings = "; ".join(f"{name} {json.dumps(v, sort_keys=True)}" for name, v in s["method_settings"].items())
    return (f"{rd['figures'][wildcards.rfig].get('title', wildcards.rfig)}. Client-level out-of-fold "
            f"{metric}, averaged over {s['folds']} folds within each client; boxes over the "
            f"m x S = {s['m']} x {rd['splits']} client values per method, one panel per mu "
            f"({', '.join(f'{mu:g}' for mu in s['mu'])}), non-private baselines shaded. Data "
            f"{s['dataset']}: pixels scaled to [0, 1] plus an intercept; {s['m']} clients of at least "
            f"{s['n_min']} images, the rest by Dirichlet({s['alpha']:g}) proportions. Clipping {clip_text}; "
            f"FedNewton tau1 = {s['tau1']:g} (Newton solver {s['newton']['solver']}); base_seed "
            f"{s['base_seed']}. Settings: {settings}.")


def mnist_folder(wildcards, output):
    """The folder fetch_mnist writes to (that of its outputs)."""
    return os.path.dirname(output[0])


def realdata_labels_pdf(wildcards):
    return {"figure": _figure_number(wildcards.rfig), "format": "PDF"}


def realdata_labels_png(wildcards):
    return {"figure": _figure_number(wildcards.rfig), "format": "PNG"}
