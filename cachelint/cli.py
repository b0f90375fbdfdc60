"""The command line: wires settings, the analysis, fixes and reporters together."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from cachelint import __version__
from cachelint.config import OUTPUT_FORMATS, ConfigError, Settings, load_settings

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> None:
    click.echo(f"cachelint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def handles_errors(command: F) -> F:
    """Turn expected errors into one line and exit 2; never show a traceback to the user."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from cachelint.discovery import MissingPathError

        try:
            return command(*args, **kwargs)
        except (ConfigError, MissingPathError) as error:
            fail(str(error))
        except KeyboardInterrupt:
            fail("interrupted")
        except Exception as error:
            if os.environ.get("CACHELINT_DEBUG"):
                raise
            fail(f"internal error: {type(error).__name__}: {error} (set CACHELINT_DEBUG=1 for a traceback)")

    return wrapper  # type: ignore[return-value]


def _codes(value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    return tuple(code.strip().upper() for code in value.split(",") if code.strip())


def resolve_settings(
    paths: Sequence[Path],
    config: Path | None,
    isolated: bool,
    overrides: dict[str, Any],
) -> Settings:
    start = paths[0] if paths else Path.cwd()
    settings = load_settings(start if start.exists() else Path.cwd(), config, isolated)
    changes = {key: value for key, value in overrides.items() if value is not None}
    if "vllm" in changes:
        from cachelint.vllm_range import from_specifier

        try:
            from_specifier(changes["vllm"], "--vllm")
        except ValueError as error:
            raise ConfigError(f"--vllm: {error}") from error
    return dataclasses.replace(settings, **changes)


def use_color(no_color: bool) -> bool:
    if no_color or "NO_COLOR" in os.environ:
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="cachelint")
def main() -> None:
    """Find and fix vLLM cache-reset bugs in RL post-training code."""


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), help="How to print findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--vllm", help='The supported vLLM releases, e.g. ">=0.18" (overrides the project pins).')
@click.option("--select", help="Comma-separated rule codes or prefixes to enable.")
@click.option("--extend-select", help="Rule codes or prefixes to enable in addition.")
@click.option("--ignore", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--config", type=click.Path(path_type=Path), help="Use this config file.")
@click.option("--isolated", is_flag=True, help="Ignore all config files.")
@click.option("--force-exclude", is_flag=True, help="Apply excludes even to paths named on the command line.")
@click.option("--no-color", is_flag=True, help="Never colour the output.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("--show-fixes", is_flag=True, help="Show each fix as a diff under its finding.")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings and exit.")
@handles_errors
def check(
    paths: tuple[Path, ...],
    output_format: str | None,
    exit_zero: bool,
    vllm: str | None,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    config: Path | None,
    isolated: bool,
    force_exclude: bool,
    no_color: bool,
    quiet: bool,
    statistics: bool,
    show_fixes: bool,
    show_settings: bool,
) -> None:
    """Check PATHS (default: the current folder) for cache-reset bugs."""
    from cachelint.engine import analyze
    from cachelint.output import ReportContext, render

    targets = list(paths) or [Path()]
    overrides = {
        "vllm": vllm,
        "select": _codes(select),
        "extend_select": _codes(extend_select),
        "ignore": _codes(ignore),
        "output_format": output_format,
    }
    settings = resolve_settings(targets, config, isolated, overrides)
    if show_settings:
        import json

        click.echo(json.dumps(settings.to_display(), indent=2, sort_keys=True))
        return
    analysis = analyze(targets, settings, force_exclude=force_exclude)
    context = ReportContext(
        root=analysis.root,
        sources={path: source.text for path, source in analysis.sources.items()},
        color=use_color(no_color),
        show_fixes=show_fixes,
        files_checked=analysis.files_checked,
        statistics=statistics,
        quiet=quiet,
    )
    render(analysis.findings, settings.output_format, sys.stdout, context)
    sys.exit(EXIT_FINDINGS if analysis.findings and not exit_zero else EXIT_CLEAN)


@main.command()
@click.argument("code")
@handles_errors
def rule(code: str) -> None:
    """Explain the rule CODE (e.g. CL001 or worker-only-cache-reset)."""
    from rich.console import Console
    from rich.markdown import Markdown

    from cachelint.docs import load_page
    from cachelint.rules import rule_by_code

    found = rule_by_code(code)
    page = load_page(found.info.code) if found else None
    if found is None or page is None:
        fail(f"unknown rule {code!r} (see `cachelint rules`)")
        return
    Console(no_color=not use_color(False)).print(Markdown(page.text))


@main.command(name="rules")
@handles_errors
def list_rules() -> None:
    """List every rule with its name, fixability and summary."""
    from rich.console import Console
    from rich.table import Table

    from cachelint.rules import ALL_RULES

    table = Table(box=None, pad_edge=False)
    for column in ("Code", "Name", "Fix", "Summary"):
        table.add_column(column)
    for item in ALL_RULES:
        info = item.info
        table.add_row(info.code, info.name, info.fixable, info.summary)
    Console(no_color=not use_color(False), width=200 if not sys.stdout.isatty() else None).print(table)
