# Private federated CNNs (paper 5.2; figures of kind nn, Figures 9-10), the optional
# `nn` extra (PyTorch): one job per (dataset, figure, m, n, repetition) trains every
# method on one partition; one job per dataset and figure summarises the runs (median
# accuracy); one job per figure draws it.
#   snakemake --cores 2 fig09 fig10                                    digits (offline default)
#   snakemake --cores 8 fig09 fig10 --configfile config/paper-nn.yaml  the paper's MNIST / CIFAR-10 grid
# Not in the default target unless nn.in_default_target is true (the jobs need PyTorch:
# pip install -e '.[nn]'). Planning (snakemake -n) works without PyTorch.


rule fetch_cifar10:
    output:
        PLAN.nn_cifar_files(),
    log:
        f"{LOGS}/fetch_cifar10/fetch_cifar10.log",
    conda:
        "../envs/nn.yaml"
    params:
        data_dir=PLAN.nn_fetch_root,
    shell:
        "fedgdp nn-fetch --dataset cifar10 --data-dir {params.data_dir:q} > {log} 2>&1"
        " || {{ cat {log} >&2; exit 1; }}"


if PLAN.nn_mnist_fetch_files():

    rule fetch_nn_mnist:
        output:
            PLAN.nn_mnist_fetch_files(),
        log:
            f"{LOGS}/fetch_nn_mnist/fetch_nn_mnist.log",
        conda:
            "../envs/nn.yaml"
        params:
            data_dir=PLAN.nn_fetch_root,
        shell:
            "fedgdp nn-fetch --dataset mnist --data-dir {params.data_dir:q} > {log} 2>&1"
            " || {{ cat {log} >&2; exit 1; }}"


rule train_nn:
    input:
        PLAN.nn_data_files,
    output:
        PLAN.paths.nn_run,
    log:
        f"{LOGS}/train_nn/{{dataset}}/{{fig}}/m~{{m}}/n~{{n}}/rep~{{rep}}.log",
    benchmark:
        f"{BENCH}/train_nn/{{dataset}}/{{fig}}/m~{{m}}/n~{{n}}/rep~{{rep}}.tsv"
    wildcard_constraints:
        dataset=PLAN.nn_constraints()["dataset"],
        fig=PLAN.nn_constraints()["fig"],
        m=PLAN.nn_constraints()["m"],
        n=PLAN.nn_constraints()["n"],
        rep=PLAN.nn_constraints()["rep"],
    conda:
        "../envs/nn.yaml"
    threads: 1
    resources:
        runtime=PLAN.nn_runtime,
        mem_mb=PLAN.nn_mem_mb,
        gpu=PLAN.nn_gpus,
    params:
        spec=PLAN.nn_run_spec,
        device=config["nn"]["device"],
        data_dir=config["nn"]["data_dir"],
    shell:
        "fedgdp nn-run --spec {params.spec:q} --device {params.device} --threads {threads}"
        " --data-dir {params.data_dir:q} --out {output} > {log} 2>&1"


rule summarise_nn:
    input:
        PLAN.nn_summary_inputs,
    output:
        PLAN.paths.nn_summary,
    log:
        f"{LOGS}/summarise_nn/{{dataset}}_{{fig}}.log",
    wildcard_constraints:
        dataset=PLAN.nn_constraints()["dataset"],
        fig=PLAN.nn_constraints()["fig"],
    conda:
        "../envs/nn.yaml"
    resources:
        runtime=PLAN.short_runtime,
    shell:
        "fedgdp nn-summarise {input:q} --out {output} > {log} 2>&1"


rule plot_nn:
    input:
        summaries=PLAN.nn_figure_summaries,
        config=PLAN.paths.config,
    output:
        pdf=report(
            f"figures/{RUN}/{{fig}}.pdf",
            caption="../report/nn.rst",
            category=PLAN.category,
            labels=PLAN.labels_pdf,
        ),
        png=report(
            f"figures/{RUN}/{{fig}}.png",
            caption="../report/nn.rst",
            category=PLAN.category,
            labels=PLAN.labels_png,
        ),
        csv=f"{TABLES}/{{fig}}_summary.csv",
    log:
        f"{LOGS}/plot_nn/{{fig}}.log",
    benchmark:
        f"{BENCH}/plot_nn/{{fig}}.tsv"
    wildcard_constraints:
        fig=PLAN.figure_constraint("nn"),
    conda:
        "../envs/nn.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        figure=PLAN.nn_figure_id,
        caption=PLAN.nn_caption,
    shell:
        "fedgdp nn-plot {input.summaries:q} --figure {params.figure} --out {output.pdf}"
        " --csv {output.csv} > {log} 2>&1"


# The CNN readings map (fedgdp.nn.readings, docs/cnns.md): every (reading, point, run) of
# nn.readings' file is one job; the table and figure gather them. Not in `all`: hours of
# CNN runs on CPUs (`snakemake --cores 2 nn_readings`).
rule nn_reading:
    output:
        PLAN.paths.nn_reading,
    log:
        f"{LOGS}/nn_reading/{{reading}}/{{fig}}-{{x}}-run{{rep}}.log",
    benchmark:
        f"{BENCH}/nn_reading/{{reading}}/{{fig}}-{{x}}-run{{rep}}.tsv"
    wildcard_constraints:
        reading=PLAN.nn_reading_constraints()["reading"],
        fig=PLAN.nn_reading_constraints()["fig"],
        x=PLAN.nn_reading_constraints()["x"],
        rep=PLAN.nn_reading_constraints()["rep"],
    conda:
        "../envs/nn.yaml"
    threads: 1
    resources:
        runtime=PLAN.nn_runtime,
        mem_mb=PLAN.nn_mem_mb,
        gpu=PLAN.nn_gpus,
    params:
        spec=PLAN.nn_reading_spec,
        device=config["nn"]["device"],
        data_dir=PLAN.nn_reading_data_dir(),
    shell:
        "fedgdp nn-run --spec {params.spec:q} --device {params.device} --threads {threads}"
        " --data-dir {params.data_dir:q} --out {output} > {log} 2>&1"


rule nn_readings_table:
    input:
        PLAN.nn_reading_files(),
    output:
        PLAN.nn_readings_files(),
    log:
        f"{LOGS}/nn_readings_table/nn_readings.log",
    conda:
        "../envs/nn.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        readings=config["nn"]["readings"],
        # the pieces' folder and the table's, from the files (<runs>/<reading>/<piece>)
        runs_dir=lambda w, input: os.path.dirname(os.path.dirname(input[0])),
        out_dir=lambda w, output: os.path.dirname(output[0]),
    shell:
        "fedgdp nn-readings {params.readings:q} --runs-dir {params.runs_dir:q}"
        " --out-dir {params.out_dir:q} > {log} 2>&1"
