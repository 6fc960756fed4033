# Helpers of the claims report (workflow/rules/claims.smk): input and parameter
# functions. No rules here. Uses common.smk (summary_file), realdata_common.smk
# (realdata_split_file) and nn_common.smk (NN_SUMMARY, NN_FIGURES).
from fedgdp.claims import DEFAULT_STUDIES as CLAIM_STUDIES


def claims_studies():
    """Claim -> studies of the config it reads (missing studies are left out)."""
    return {claim: [s for s in studies if s in config["studies"]]
            for claim, studies in CLAIM_STUDIES.items()}


def claims_summaries(wildcards):
    studies = dict.fromkeys(s for ss in claims_studies().values() for s in ss)
    return [summary_file(model, s) for s in studies for model in config["studies"][s]["models"]]


def claims_realdata_files(wildcards):
    rd = config.get("realdata")
    if not rd:
        return []
    return [realdata_split_file(task, split) for task in rd["tasks"] for split in range(rd["splits"])]


def claims_nn_summaries(wildcards):
    s = config.get("nn", {})
    if not s.get("in_default_target"):
        return []
    return [NN_SUMMARY.format(dataset=ds, nfig=nfig) for ds in s["datasets"] for nfig in NN_FIGURES]


def claims_spec(wildcards):
    models = list(dict.fromkeys(m for s in config["studies"].values() for m in s["models"]))
    return json.dumps({"models": models, "studies": claims_studies()}, sort_keys=True)
