"""MkDocs hooks of the documentation site (mkdocs.yml ``hooks``).

- ``<!-- fedgdp-cli-help -->`` in a page becomes the ``--help`` of ``fedgdp`` and of
  every command, rendered from the argparse parser (:func:`fedgdp.commands.cli.build_parser`),
  so the reference never drifts from the code.
- ``<!-- include config/README.md -->`` becomes that file (the workflow catalog's
  configuration page, kept beside the configs).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI_MARK = "<!-- fedgdp-cli-help -->"
CONFIG_MARK = "<!-- include config/README.md -->"


def cli_reference() -> str:
    """Markdown: one section per command, its ``--help`` as a text block (100 columns)."""
    os.environ["COLUMNS"] = "100"
    from fedgdp.commands.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    parts = ["## `fedgdp`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for name, cmd in sub.choices.items():
        parts += [f"## `fedgdp {name}`", "", "```text", cmd.format_help().rstrip(), "```", ""]
    return "\n".join(parts)


def config_readme() -> str:
    """config/README.md without its title (the page has its own)."""
    text = (ROOT / "config" / "README.md").read_text()
    lines = text.splitlines()
    return "\n".join(lines[1:] if lines and lines[0].startswith("# ") else lines)


def on_page_markdown(markdown, page, config, files):
    if CLI_MARK in markdown:
        markdown = markdown.replace(CLI_MARK, cli_reference())
    if CONFIG_MARK in markdown:
        markdown = markdown.replace(CONFIG_MARK, config_readme())
    return markdown
