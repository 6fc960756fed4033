# Real data sets from R packages (Debian: apt-get install r-cran-aer r-cran-cardata), each split into its
# natural clients, written as CSV for scripts/bench_outside_data.py: columns y, client, then the design's
# feature columns (model.matrix: factors as dummies, no intercept). Not redistributed: made on your machine.
#   Rscript scripts/export_r_data.R OUT_DIR
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "outside-data"
dir.create(out, showWarnings = FALSE, recursive = TRUE)
write_set <- function(name, df, y, client, formula) {
  df <- df[complete.cases(df[, c(all.vars(formula), client)]), ]
  X <- model.matrix(formula, df)[, -1, drop = FALSE]
  colnames(X) <- make.names(colnames(X))
  res <- data.frame(y = as.numeric(y(df)), client = as.character(df[[client]]), X, check.names = FALSE)
  write.csv(res, file.path(out, paste0(name, ".csv")), row.names = FALSE)
  cat(name, nrow(res), "rows,", length(unique(res$client)), "clients,", ncol(X), "features\n")
}
data("Arrests", package = "carData")
write_set("arrests", Arrests, function(d) d$released == "Yes", "year",
          ~ colour + age + sex + employed + citizen + checks)
data("TitanicSurvival", package = "carData")
write_set("titanic", TitanicSurvival, function(d) d$survived == "yes", "passengerClass", ~ sex + age)
data("Vocab", package = "carData")
write_set("vocab", Vocab, function(d) d$vocabulary, "year", ~ sex + education)
data("HealthInsurance", package = "AER")
write_set("healthinsurance", HealthInsurance, function(d) d$insurance == "yes", "region",
          ~ health + age + limit + gender + married + selfemp + family + ethnicity + education)
data("CPS1988", package = "AER")
write_set("cps1988", CPS1988, function(d) d$parttime == "yes", "region",
          ~ education + experience + ethnicity + smsa)
data("PSID7682", package = "AER")
write_set("psid7682", PSID7682, function(d) d$union == "yes", "year",
          ~ experience + weeks + occupation + industry + south + smsa + married + gender + education + ethnicity)
data("NMES1988", package = "AER")
write_set("nmes1988", NMES1988, function(d) d$visits, "region",
          ~ hospital + health + chronic + adl + age + gender + married + school + income + insurance + medicaid)
data("DoctorVisits", package = "AER")
write_set("doctorvisits", DoctorVisits, function(d) d$visits, "gender",
          ~ age + income + illness + reduced + health + private + freepoor + freerepat + nchronic + lchronic)
