# The simulation figures (kind: simulation), drawn from study summaries only; named
# targets for every figure and table, and the gallery (docs/gallery.md).


rule plot_figure:
    input:
        summaries=PLAN.figure_summaries,
        config=PLAN.paths.config,
    output:
        pdf=report(
            f"figures/{RUN}/{{fig}}.pdf",
            caption="../report/figure.rst",
            category=PLAN.category,
            labels=PLAN.labels_pdf,
        ),
        png=report(
            f"figures/{RUN}/{{fig}}.png",
            caption="../report/figure.rst",
            category=PLAN.category,
            labels=PLAN.labels_png,
        ),
    log:
        f"{LOGS}/plot_figure/{{fig}}.log",
    benchmark:
        f"{BENCH}/plot_figure/{{fig}}.tsv"
    wildcard_constraints:
        fig=PLAN.figure_constraint("simulation"),
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.short_runtime,
    params:
        spec=PLAN.figure_spec,
        caption=PLAN.figure_caption,
    shell:
        "fedgdp plot {input.summaries:q} --spec {params.spec:q} --pdf {output.pdf} --png {output.png}"
        " > {log} 2>&1"


# The gallery (docs/gallery.md): a small PNG of every figure of the default target (no CNNs), from
# this run's figures. Only run paper (plan.GALLERY_RUN, what docs/gallery.md shows) has the
# rule; `snakemake gallery` on another run is refused before any job (requests.smk).
if PLAN.gallery_allowed():

    rule gallery_png:
        input:
            f"figures/{RUN}/{{fig}}.png",
        output:
            "docs/gallery/{fig}.png",
        log:
            f"{LOGS}/gallery_png/{{fig}}.log",
        wildcard_constraints:
            fig=plan.alternatives(PLAN.gallery_figures()),
        localrule: True
        conda:
            "../envs/fedgdp.yaml"
        params:
            python=sys.executable,
        shell:
            "{params.python:q} -m fedgdp.plan shrink-png {input} {output} > {log} 2>&1"


# A named target per figure and table (`snakemake --cores 2 fig03`, `table1`, `rates`)
# and `gallery`: the files of fedgdp.plan.Plan.targets() for this run.
for _name in [n for n in TARGETS if n != "all"]:

    rule:
        name:
            _name
        input:
            TARGETS[_name],
        localrule: True
