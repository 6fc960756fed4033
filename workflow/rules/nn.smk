# Private federated CNNs (paper 5.2, Figures 9-10; SPEC 7), the optional `nn` extra
# (PyTorch): one job per (dataset, figure, m, n, run) trains every method on one
# partition; one job per dataset and figure summarises the runs (median accuracy);
# one job per figure draws it.
#   snakemake --cores 2 fig09 fig10                                    digits (offline default)
#   snakemake --cores 8 fig09 fig10 --configfile config/paper-nn.yaml  the paper's MNIST / CIFAR-10 grid
# Not in the default target unless nn.in_default_target is true (the jobs need PyTorch:
# pip install -e '.[nn]'). Input and parameter functions: workflow/rules/nn_common.smk.


include: "nn_common.smk"


rule fetch_cifar10:
    output:
        nn_cifar_files(),
    params:
        data_dir=nn_fetch_root,
    log:
        "logs/nn/fetch_cifar10.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp nn-fetch --dataset cifar10 --data-dir {params.data_dir:q} > {log} 2>&1"
        " || {{ cat {log} >&2; exit 1; }}"


if nn_mnist_fetch_files():

    rule fetch_nn_mnist:
        output:
            nn_mnist_fetch_files(),
        params:
            data_dir=nn_fetch_root,
        log:
            "logs/nn/fetch_mnist.log",
        conda:
            "../../environment.yml"
        shell:
            "fedgdp nn-fetch --dataset mnist --data-dir {params.data_dir:q} > {log} 2>&1"
            " || {{ cat {log} >&2; exit 1; }}"


rule train_nn:
    input:
        nn_data_files,
    output:
        NN_FILE,
    params:
        spec=nn_run_spec,
        device=nn_section().get("device", "auto"),
        data_dir=nn_section().get("data_dir", "data"),
    wildcard_constraints:
        dataset=nn_wildcards()["dataset"],
        nfig=nn_wildcards()["nfig"],
        m=nn_wildcards()["m"],
        n=nn_wildcards()["n"],
        run=nn_wildcards()["run"],
    threads: 1
    log:
        "logs/nn/{dataset}/{nfig}/m~{m}/n~{n}/run~{run}.log",
    benchmark:
        "benchmarks/nn/{dataset}/{nfig}/m~{m}/n~{n}/run~{run}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp nn-run --spec {params.spec:q} --device {params.device} --threads {threads}"
        " --data-dir {params.data_dir:q} --out {output} > {log} 2>&1"


rule summarise_nn:
    input:
        nn_summary_inputs,
    output:
        NN_SUMMARY,
    wildcard_constraints:
        dataset=nn_wildcards()["dataset"],
        nfig=nn_wildcards()["nfig"],
    log:
        "logs/nn/summary/{dataset}_{nfig}.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp nn-summarise {input:q} --out {output} > {log} 2>&1"


rule plot_nn:
    input:
        nn_figure_summaries,
    output:
        pdf=report(
            "figures/{nfig}.pdf",
            caption="../report/nn.rst",
            category=nn_category,
            labels=nn_labels_pdf,
        ),
        png=report(
            "figures/{nfig}.png",
            caption="../report/nn.rst",
            category=nn_category,
            labels=nn_labels_png,
        ),
        csv="figures/{nfig}_summary.csv",
    params:
        caption=nn_caption,
    wildcard_constraints:
        nfig=nn_wildcards()["nfig"],
    log:
        "logs/plot/{nfig}.log",
    benchmark:
        "benchmarks/plot/{nfig}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp nn-plot {input:q} --figure {wildcards.nfig} --out {output.pdf} --csv {output.csv}"
        " > {log} 2>&1"


# A named target per figure: `snakemake --cores 2 fig09`.
for _nfig in NN_FIGURES:

    rule:
        name:
            _nfig
        input:
            expand("figures/{fig}{ext}", fig=_nfig, ext=[".pdf", ".png", "_summary.csv"]),
        localrule: True
