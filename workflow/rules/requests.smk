# The invocation's own checks, run after every rule is defined and before any job
# (fedgdp.plan.Plan.check_request, unit-tested without Snakemake): each target is a
# file or a known name ("did you mean"), the gallery is written by run paper only,
# and PyTorch is importable when CNN training jobs would run. No rules here.
import contextlib
import importlib.util
import io


def _command_line():
    """This `snakemake` command line, parsed as Snakemake parses it (None when Snakemake
    runs from its Python API, or the arguments cannot be read)."""
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    if name != "snakemake" and not sys.argv[0].endswith(
        os.path.join("snakemake", "__main__.py")
    ):
        return None
    from snakemake.cli import get_argument_parser

    try:
        with contextlib.redirect_stderr(
            io.StringIO()
        ):  # argparse's usage, should it fail
            return get_argument_parser().parse_args(sys.argv[1:])
    except (
        SystemExit
    ):  # Snakemake itself accepted them; a parser of another version may not
        return None


_cli = _command_line()
if _cli is not None:
    try:
        PLAN.check_request(
            [str(t) for t in _cli.targets],
            rule_names=[r.name for r in workflow.rules],
            dry_run=bool(_cli.dryrun),
            torch=importlib.util.find_spec("torch") is not None,
            use_conda=any(
                m.name == "CONDA"
                for m in workflow.deployment_settings.deployment_method
            ),
        )
    except plan.RequestError as exc:
        raise WorkflowError(str(exc)) from None
