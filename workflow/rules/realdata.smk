# Real-data logistic regression (paper 5.1; figures of kind realdata, Figures 7-8): one
# job per task and client split runs every method on every fold (private methods at
# every mu, the non-private baselines once); one job per figure draws it from all splits.
#   snakemake --cores 2 fig07 fig08                                     digits (offline default)
#   snakemake --cores 8 fig07 fig08 --configfile=config/mnist.yaml      the paper's MNIST layout


rule fetch_mnist:
    output:
        PLAN.mnist_fetch_files(),
    log:
        f"{LOGS}/fetch_mnist/fetch_mnist.log",
    conda:
        "../envs/fedgdp.yaml"
    params:
        folder=PLAN.fetch_folder,
    shell:
        "fedgdp fetch-mnist --dir {params.folder:q} > {log} 2>&1 || {{ cat {log} >&2; exit 1; }}"


rule fit_realdata:
    input:
        PLAN.realdata_data_files,
    output:
        PLAN.paths.realdata,
    log:
        f"{LOGS}/fit_realdata/{{dataset}}/{{task}}/split~{{split}}.log",
    benchmark:
        f"{BENCH}/fit_realdata/{{dataset}}/{{task}}/split~{{split}}.tsv"
    wildcard_constraints:
        dataset=PLAN.realdata_constraints()["dataset"],
        task=PLAN.realdata_constraints()["task"],
        split=PLAN.realdata_constraints()["split"],
    conda:
        "../envs/fedgdp.yaml"
    threads: PLAN.realdata_workers
    resources:
        runtime=PLAN.realdata_runtime,
        mem_mb=PLAN.realdata_mem_mb,
    params:
        spec=PLAN.realdata_spec,
    shell:
        "fedgdp realdata --spec {params.spec:q} --task {wildcards.task} --split {wildcards.split}"
        " --workers {threads} --verbose --out {output} > {log} 2>&1"


rule plot_realdata:
    input:
        splits=PLAN.realdata_figure_files,
        config=PLAN.paths.config,
    output:
        pdf=report(
            f"figures/{RUN}/{{fig}}.pdf",
            caption="../report/realdata.rst",
            category=PLAN.category,
            labels=PLAN.labels_pdf,
        ),
        png=report(
            f"figures/{RUN}/{{fig}}.png",
            caption="../report/realdata.rst",
            category=PLAN.category,
            labels=PLAN.labels_png,
        ),
        medians=f"{TABLES}/{{fig}}_medians.csv",
    log:
        f"{LOGS}/plot_realdata/{{fig}}.log",
    benchmark:
        f"{BENCH}/plot_realdata/{{fig}}.tsv"
    wildcard_constraints:
        fig=PLAN.figure_constraint("realdata"),
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        task=PLAN.realdata_figure_task,
        title=PLAN.realdata_figure_title,
        caption=PLAN.realdata_caption,
    shell:
        "fedgdp realdata-plot {input.splits:q} --task {params.task} --title {params.title:q}"
        " --pdf {output.pdf} --png {output.png} --medians {output.medians} > {log} 2>&1"
