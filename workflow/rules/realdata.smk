# Real-data logistic regression (paper 5.1, Figures 7-8; SPEC 6): one job per task and
# client split runs every method on every fold (private methods at every mu, the
# non-private baselines once); one job per figure draws it from all splits.
#   snakemake --cores 2 fig07 fig08                                 digits (offline default)
#   snakemake --cores 8 fig07 fig08 --configfile config/mnist.yaml     the paper's MNIST layout
# Input and parameter functions: workflow/rules/realdata_common.smk.


include: "realdata_common.smk"


rule fetch_mnist:
    output:
        [os.path.join(config["realdata"]["path"], f) for f in MNIST_FILES],
    params:
        folder=mnist_folder,
    log:
        "logs/realdata/fetch_mnist.log",
    conda:
        "../../environment.yml"
    shell:
        "fedgdp fetch-mnist --dir {params.folder:q} > {log} 2>&1 || {{ cat {log} >&2; exit 1; }}"


rule fit_realdata:
    input:
        realdata_data_files,
    output:
        REALDATA_FILE,
    params:
        spec=realdata_spec,
    wildcard_constraints:
        dataset=re.escape(config["realdata"]["dataset"]),
        task=_alternatives(config["realdata"]["tasks"]),
        split=_alternatives(range(config["realdata"]["splits"])),
    threads: 1
    log:
        "logs/realdata/{dataset}/{task}/split~{split}.log",
    benchmark:
        "benchmarks/realdata/{dataset}/{task}/split~{split}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp realdata --spec {params.spec:q} --task {wildcards.task} --split {wildcards.split}"
        " --threads {threads} --verbose --out {output} > {log} 2>&1"


rule plot_realdata:
    input:
        realdata_figure_files,
    output:
        pdf=report(
            "figures/{rfig}.pdf",
            caption="../report/realdata.rst",
            category=realdata_category,
            labels=realdata_labels_pdf,
        ),
        png=report(
            "figures/{rfig}.png",
            caption="../report/realdata.rst",
            category=realdata_category,
            labels=realdata_labels_png,
        ),
        medians="figures/{rfig}_medians.csv",
    params:
        task=realdata_figure_task,
        title=realdata_figure_title,
        caption=realdata_caption,
    wildcard_constraints:
        rfig=_alternatives(realdata_figures()),
    log:
        "logs/plot/{rfig}.log",
    benchmark:
        "benchmarks/plot/{rfig}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp realdata-plot {input:q} --task {params.task} --title {params.title:q}"
        " --pdf {output.pdf} --png {output.png} --medians {output.medians} > {log} 2>&1"


# A named target per figure: `snakemake --cores 2 fig07`.
for _rfig in realdata_figures():

    rule:
        name:
            _rfig
        input:
            expand("figures/{fig}{ext}", fig=_rfig, ext=[".pdf", ".png", "_medians.csv"]),
        localrule: True
