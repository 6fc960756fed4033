# One job per group of cells of a study (model x study x cells_per_job consecutive grid
# cells) and block of replicates, run in one process: every method of the study runs on
# the same replicate data, and a cell's numbers do not depend on its group.


rule simulate_cell:
    output:
        PLAN.paths.cell,
    log:
        f"{LOGS}/simulate_cell/{{model}}/{{study}}/cells~{{cells}}/seeds~{{first}}-{{last}}.log",
    benchmark:
        f"{BENCH}/simulate_cell/{{model}}/{{study}}/cells~{{cells}}/seeds~{{first}}-{{last}}.tsv"
    conda:
        "../envs/fedgdp.yaml"
    resources:
        runtime=PLAN.cell_runtime,
        mem_mb=PLAN.cell_mem_mb,
    params:
        cells=PLAN.cell_params,
    shell:
        "printf '%s\\n' {params.cells:q}"
        " | fedgdp simulate --params /dev/stdin --seeds {wildcards.first}-{wildcards.last}"
        " --out {output} > {log} 2>&1"
