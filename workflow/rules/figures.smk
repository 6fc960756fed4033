# The simulation figures of config.yaml, drawn from study summaries only.


rule plot_figure:
    input:
        figure_summaries,
    output:
        pdf=report(
            "figures/{fig}.pdf",
            caption="../report/figure.rst",
            category=figure_category,
            labels=figure_labels_pdf,
        ),
        png=report(
            "figures/{fig}.png",
            caption="../report/figure.rst",
            category=figure_category,
            labels=figure_labels_png,
        ),
    params:
        spec=figure_spec,
        caption=figure_caption,
    log:
        "logs/plot/{fig}.log",
    benchmark:
        "benchmarks/plot/{fig}.tsv"
    conda:
        "../../environment.yml"
    shell:
        "fedgdp plot {input:q} --spec {params.spec:q} --pdf {output.pdf} --png {output.png}"
        " > {log} 2>&1"


# A named target per figure: `snakemake --cores 2 fig03`.
for _fig in figure_names():

    rule:
        name:
            _fig
        input:
            expand("figures/{fig}.{ext}", fig=_fig, ext=["pdf", "png"]),
        localrule: True
