"""The command line: wires settings, the analysis, fixes and reporters together."""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cachelint import __version__
from cachelint.config import OUTPUT_FORMATS, ConfigError, Settings, SettingsFinder, checked_option
from cachelint.finding import Finding
from cachelint.output.printable import printable

if TYPE_CHECKING:
    from cachelint.engine import Analysis
    from cachelint.fixes import FixOutcome

EXIT_CLEAN = 0
EXIT_FINDINGS = 1
EXIT_ERROR = 2
# What a shell reports for a Unix tool that a closed pipe stopped (128 + SIGPIPE): not 0, so that
# `set -o pipefail; cachelint check | head` never passes on findings it did not get to print.
EXIT_BROKEN_PIPE = 141

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> None:
    report("error", message)
    sys.exit(EXIT_ERROR)


def report(kind: str, message: str) -> None:
    """One line on stderr; control characters (from file names, values, code) shown as pictures."""
    click.echo(f"cachelint: {kind}: {printable(message)}", err=True)


def handles_errors(command: F) -> F:
    """Turn expected errors into one line and exit 2; never show a traceback to the user."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from cachelint.discovery import MissingPathError
        from cachelint.stdout import OutputError

        try:
            try:
                return command(*args, **kwargs)
            finally:
                sys.stdout.flush()  # here rather than at exit, where a closed pipe would be reported
        except BrokenPipeError:
            stop_on_broken_pipe()
        except OutputError as error:
            stop_on_failed_output(error)
        except (ConfigError, MissingPathError) as error:
            fail(str(error))
        except KeyboardInterrupt:
            from cachelint.interrupts import interrupted

            interrupted()
        except Exception as error:
            if os.environ.get("CACHELINT_DEBUG"):
                raise
            fail(f"internal error: {type(error).__name__}: {error} (set CACHELINT_DEBUG=1 for a traceback)")

    return wrapper  # type: ignore[return-value]


def writes_output_file(command: F) -> F:
    """Add -o/--output-file: what the command prints on stdout goes to that file instead (never in
    colour), written once the command has run to its end (exit 0 or 1); an error leaves it alone."""

    @click.option(
        "-o",
        "--output-file",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Write the report to this file instead of stdout (the exit code stays the same).",
    )
    @wraps(command)
    def wrapper(*args: Any, output_file: Path | None, **kwargs: Any) -> Any:
        if output_file is None:
            return command(*args, **kwargs)
        real_stdout, sys.stdout = sys.stdout, io.StringIO()
        code: int | str | None = EXIT_CLEAN
        try:
            command(*args, **{**kwargs, "no_color": True})
        except SystemExit as done:
            if done.code not in (None, EXIT_CLEAN, EXIT_FINDINGS):
                raise
            code = done.code
        finally:
            report, sys.stdout = sys.stdout.getvalue(), real_stdout
        from cachelint.writing import write_file

        try:  # whole or not at all: a failed write leaves the old report, and no new file or folder
            write_file(output_file, report.encode("utf-8", "backslashreplace"))
        except OSError as error:
            fail(f"--output-file {output_file}: cannot write the report: {error.strerror or error}")
        sys.exit(code)

    return wrapper  # type: ignore[return-value]


def stop_on_broken_pipe() -> None:
    """The reader of stdout went away (`cachelint check | head -1`): stop quietly, as Unix tools do."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # Python flushes stdout once more on exit
    sys.exit(EXIT_BROKEN_PIPE)


def stop_on_failed_output(error: OSError) -> None:
    """Standard output cannot be written (`> /dev/full`): say so, and exit 2 as for any error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what is left to flush on exit goes nowhere, silently
    fail(f"cannot write to standard output: {error.strerror or error}")


def _codes(value: str | None, option: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    selectors = [code for code in value.split(",") if code.strip()]
    # `--select "$RULES"` with RULES unset is a mistake (an empty list in a file or `Settings` is not:
    # `select = []` with `extend-select` is how ruff users pick rules).
    if not selectors:
        raise ConfigError(f"{option} holds no rule selector")
    checked: tuple[str, ...] = checked_option(option.removeprefix("--"), selectors, option)
    return checked


def settings_finder(config: Path | None, isolated: bool, overrides: dict[str, Any]) -> SettingsFinder:
    """Each file's settings: its nearest config file's (or `config`'s, or none), then the flags."""
    if config is not None and isolated:
        raise ConfigError("--config and --isolated cannot be used together")
    changes = {key: value for key, value in overrides.items() if value is not None}
    for name in ("vllm", "sglang", "output_format"):
        if name in changes:
            flag = "--" + name.replace("_", "-")
            changes[name] = checked_option(flag.removeprefix("--"), changes[name], flag)
    for name in ("vllm", "sglang"):
        if name in changes:
            changes.setdefault(f"{name}_origin", f"--{name}")  # the language server names the editor
    return SettingsFinder(config, isolated, changes)


def resolve_settings(
    paths: Sequence[Path],
    config: Path | None,
    isolated: bool,
    overrides: dict[str, Any],
) -> Settings:
    """The settings of the first path: the run's own (output format, ...)."""
    return settings_finder(config, isolated, overrides)(paths[0] if paths else Path.cwd())


def read_stdin(paths: Sequence[Path], stdin_filename: Path | None) -> tuple[Path, bytes] | None:
    """The path to report and the source, when the source comes from stdin (`-` or --stdin-filename)."""
    if stdin_filename is None and Path("-") not in paths:
        return None
    for path in paths:
        if path != Path("-"):
            report("warning", f"ignoring {path}: the source is read from stdin")
    path = stdin_filename or Path("-")
    if path.is_dir():
        raise ConfigError(f"--stdin-filename {path}: is a folder, expected a file name")
    return path, sys.stdin.buffer.read()


def run_add_noqa(analysis: Analysis, quiet: bool) -> int:
    from cachelint.baseline import add_noqa

    outcome = add_noqa(analysis)
    for message in [*analysis.warnings, *analysis.range_warnings(), *outcome.warnings]:
        report("warning", message)
    for message in outcome.errors:
        report("error", message)
    if not quiet:
        noun = "directive" if outcome.added == 1 else "directives"
        click.echo(f"Added {outcome.added} noqa {noun}.", err=True)
    return EXIT_ERROR if outcome.errors else EXIT_CLEAN


def use_color(no_color: bool) -> bool:
    if no_color or os.environ.get("NO_COLOR"):  # https://no-color.org: set and not empty
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="cachelint")
def main() -> None:
    """Find and fix vLLM cache-reset bugs in RL post-training code."""
    from cachelint import stdout

    stdout.install()


class FormatName(click.Choice):  # type: ignore[type-arg]
    """The formats, for --help and shell completion; a bad name is reported as the settings check words
    it (the same message as from a config file or the API), not by click."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return value


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--output-format", type=FormatName(OUTPUT_FORMATS), help="How to print findings.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when there are findings.")
@click.option("--vllm", help='The supported vLLM releases, e.g. ">=0.18" (overrides the project pins).')
@click.option("--sglang", help='The supported SGLang releases, e.g. ">=0.5" (overrides the project pins).')
@click.option("--select", help="Comma-separated rule codes or prefixes to enable.")
@click.option("--extend-select", help="Rule codes or prefixes to enable in addition.")
@click.option("--ignore", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--config", type=click.Path(path_type=Path), help="Use this config file.")
@click.option("--isolated", is_flag=True, help="Ignore all config files.")
@click.option("--no-cache", is_flag=True, help="Neither read nor write the cache (`cachelint clean` removes it).")
@click.option("--force-exclude", is_flag=True, help="Apply excludes even to paths named on the command line.")
@click.option("--no-color", is_flag=True, help="Never colour the output.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary.")
@click.option("--statistics", is_flag=True, help="Count findings per rule instead of listing them.")
@click.option("--show-fixes", is_flag=True, help="Show each fix as a diff under its finding.")
@click.option("--fix", is_flag=True, help="Apply safe fixes.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply (or, without --fix, count as fixable) unsafe fixes.")
@click.option("--diff", "show_diff", is_flag=True, help="Print the diff --fix would make; write nothing.")
@click.option("--fix-only", is_flag=True, help="Apply fixes and report nothing else.")
@click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when any fix was applied.")
@click.option("--show-settings", is_flag=True, help="Print the resolved settings and exit.")
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path),
    help="Read the source from stdin and check it as if it were this file (`-` as a path reads stdin too).",
)
@click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODES` to every line with a finding (baseline).")
@click.option("-v", "--verbose", is_flag=True, help="Print on stderr how many files each stage touched, and its time.")
@writes_output_file
@handles_errors
def check(
    paths: tuple[Path, ...],
    output_format: str | None,
    exit_zero: bool,
    vllm: str | None,
    sglang: str | None,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    config: Path | None,
    isolated: bool,
    no_cache: bool,
    force_exclude: bool,
    no_color: bool,
    quiet: bool,
    statistics: bool,
    show_fixes: bool,
    fix: bool,
    unsafe_fixes: bool,
    show_diff: bool,
    fix_only: bool,
    exit_non_zero_on_fix: bool,
    show_settings: bool,
    stdin_filename: Path | None,
    add_noqa: bool,
    verbose: bool,
) -> None:
    """Check PATHS (default: the current folder) for cache-reset bugs."""
    import gc

    gc.disable()  # this process ends after one analysis, which makes no garbage cycles worth collecting
    from cachelint import parallel
    from cachelint.engine import analyze
    from cachelint.output import HUMAN_FORMATS, STATISTICS_FORMATS, ReportContext, preload, render

    stdin = read_stdin(paths, stdin_filename)
    targets = [stdin[0]] if stdin else list(paths) or [Path()]
    overlay = {Path(os.path.abspath(stdin[0])): stdin[1]} if stdin else None
    overrides = {
        "vllm": vllm,
        "sglang": sglang,
        "select": _codes(select, "--select"),
        "extend_select": _codes(extend_select, "--extend-select"),
        "ignore": _codes(ignore, "--ignore"),
        "output_format": output_format,
    }
    finder = settings_finder(config, isolated, overrides)
    settings = finder(targets[0])
    if statistics and settings.output_format not in STATISTICS_FORMATS:
        fail(f"--statistics cannot be used with the {settings.output_format} format (only with full, concise or json)")
    if show_settings:
        show_resolved_settings(settings, targets[0])
        return
    if verbose:
        print_stats_at_exit()
    color = use_color(no_color)
    parallel.load_while_waiting(functools.partial(preload, settings.output_format, color))
    use_cache = not no_cache
    writes = [flag for flag, given in (("--fix", fix), ("--fix-only", fix_only), ("--diff", show_diff)) if given]
    if stdin and add_noqa:
        fail("--add-noqa cannot be used with source read from stdin")
    if add_noqa:
        if writes:
            fail(f"--add-noqa cannot be used with {writes[0]}")
        analysis = analyze(targets, settings, force_exclude=force_exclude, use_cache=use_cache, settings_for=finder)
        sys.exit(run_add_noqa(analysis, quiet))
    fixed = 0
    write_errors: list[str] = []
    if fix or fix_only or show_diff:
        from cachelint.fixes import fix_to_fixed_point, unified_diff, write_changes

        outcome = fix_to_fixed_point(
            targets,
            settings,
            unsafe_fixes,
            force_exclude,
            use_cache=use_cache,
            settings_for=finder,
            overlay=overlay,
        )
        for message in [*outcome.analysis.warnings, *outcome.analysis.range_warnings(), *outcome.errors]:
            report("warning", message)
        if stdin:
            options = {"show_diff": show_diff, "fix_only": fix_only, "exit_zero": exit_zero}
            sys.exit(fix_stdin(outcome, stdin, settings, quiet, show_fixes, exit_non_zero_on_fix, **options))
        if show_diff:
            for file in outcome.changed:
                click.echo(unified_diff(file), nl=False)
            if not quiet:
                noun = "problem" if outcome.fixed == 1 else "problems"
                click.echo(f"Would fix {outcome.fixed} {noun}.", err=True)
            sys.exit(EXIT_FINDINGS if outcome.changed else EXIT_CLEAN)
        write_errors = write_changes(outcome)
        for message in write_errors:
            report("error", message)
        analysis, fixed = outcome.analysis, outcome.fixed
        if write_errors:
            before = len(analysis.findings) + fixed
            analysis = analyze(targets, settings, force_exclude=force_exclude, use_cache=use_cache, settings_for=finder)
            fixed = max(0, before - len(analysis.findings))
        if fix_only:
            if not quiet:
                click.echo(f"Fixed {fixed} {'problem' if fixed == 1 else 'problems'}.")
            sys.exit(EXIT_ERROR if write_errors else EXIT_FINDINGS if exit_non_zero_on_fix and fixed else EXIT_CLEAN)
        if not quiet and settings.output_format not in HUMAN_FORMATS:  # the report on stdout stays machine-readable
            click.echo(f"Fixed {fixed} {'problem' if fixed == 1 else 'problems'}.", err=True)
    else:
        from cachelint.progress import progress_bar

        with progress_bar(settings.output_format, quiet, no_color) as progress:
            analysis = analyze(
                targets,
                settings,
                force_exclude=force_exclude,
                overlay=overlay,
                progress=progress,
                use_cache=use_cache,
                settings_for=finder,
                with_edits=shows_edits(settings, show_fixes),
            )
        for warning in [*analysis.warnings, *analysis.range_warnings()]:
            report("warning", warning)
    context = ReportContext(
        root=report_root(analysis.root),
        sources={path: source.text for path, source in analysis.sources.items()},
        color=color,
        show_fixes=show_fixes,
        files_checked=analysis.files_checked,
        fixed_count=fixed,
        unsafe_fixable_hidden=0 if unsafe_fixes else _unsafe_fixable(analysis.findings),
        statistics=statistics,
        quiet=quiet,
        unsafe_fixes=unsafe_fixes,
        projects=tuple((project.root, project.supported) for project in analysis.projects),
        sglang_projects=tuple((p.root, p.sglang) for p in analysis.projects if p.sglang is not None),
        ranges=analysis.range_of(),
    )
    render(reported(analysis, settings, show_fixes), settings.output_format, sys.stdout, context)
    failed = bool(analysis.findings) and not exit_zero
    if write_errors:
        sys.exit(EXIT_ERROR)  # a fix was not written: every file of it is as it was
    sys.exit(EXIT_FINDINGS if failed or (exit_non_zero_on_fix and fixed) else EXIT_CLEAN)


def print_stats_at_exit() -> None:
    """`--verbose`: what the analyses of this command did, stage by stage, on stderr when it ends."""
    from cachelint.engine import recording

    context = click.get_current_context()
    stats = context.with_resource(recording())

    def print_stats() -> None:
        for line in stats.lines():
            click.echo(f"cachelint: {line}", err=True)

    context.call_on_close(print_stats)


def show_resolved_settings(settings: Settings, start: Path) -> None:
    """`--show-settings`: the settings of the first path, with the supported vLLM range of its project
    and where that came from."""
    import json

    from cachelint.engine import analyze, resolve_range, resolve_sglang_range
    from cachelint.vllm_range import find_project_root, shown_path

    while not start.exists() and start != start.parent:
        start = start.parent
    root = find_project_root(start)
    supported = resolve_range(settings, root)
    if supported.widenable and root.is_dir():  # the code's tests of vLLM's version may widen it
        checked = analyze([root], settings, project_root=root)
        supported = checked.supported
    sglang = resolve_sglang_range(settings, root)
    shown = settings.to_display()
    shown["supported-vllm"] = {"project-root": shown_path(root), **supported.to_json()}
    if not sglang.assumed:  # the project pins SGLang, or the range is set
        shown["supported-sglang"] = {"project-root": shown_path(root), **sglang.to_json()}
    click.echo(json.dumps(shown, indent=2, sort_keys=True, ensure_ascii=False))
    for warning in [*supported.warnings(root), *(sglang.warnings(root) if not sglang.assumed else [])]:
        report("warning", warning)


def shows_edits(settings: Settings, show_fixes: bool) -> bool:
    """Whether the output prints each fix's text edits."""
    from cachelint.codemod import EDIT_FORMATS

    return settings.output_format in EDIT_FORMATS or (show_fixes and settings.output_format == "full")


def reported(analysis: Analysis, settings: Settings, show_fixes: bool) -> list[Finding]:
    """The findings to print: with each fix's text edits when the format shows them."""
    from cachelint.codemod import reader, with_edits

    if shows_edits(settings, show_fixes):
        return with_edits(analysis.findings, reader(analysis.sources))
    return analysis.findings


def fix_stdin(
    outcome: FixOutcome,
    stdin: tuple[Path, bytes],
    settings: Settings,
    quiet: bool,
    show_fixes: bool,
    exit_non_zero_on_fix: bool,
    show_diff: bool,
    fix_only: bool,
    exit_zero: bool,
) -> int:
    """`--fix` on source read from stdin: the fixed source on stdout (or with --diff its diff), the
    findings left on stderr (none with --fix-only), as ruff does for editors' fix-on-save."""
    from cachelint.fixes import unified_diff
    from cachelint.output import ReportContext, render

    path, data = stdin
    fixed = outcome.files.get(Path(os.path.abspath(path)))
    changed = fixed is not None and fixed.text != fixed.source.text
    if show_diff:
        if fixed is not None and changed:
            click.echo(unified_diff(fixed), nl=False)
        if not quiet:
            noun = "problem" if outcome.fixed == 1 else "problems"
            click.echo(f"Would fix {outcome.fixed} {noun}.", err=True)
        return EXIT_FINDINGS if changed else EXIT_CLEAN
    sys.stdout.buffer.write(fixed.source.encode(fixed.text) if fixed is not None and changed else data)
    sys.stdout.flush()
    analysis = outcome.analysis
    if not fix_only:
        context = ReportContext(
            root=report_root(analysis.root),
            sources={name: source.text for name, source in analysis.sources.items()},
            show_fixes=show_fixes,
            files_checked=analysis.files_checked,
            fixed_count=outcome.fixed,
            statistics=False,
            quiet=quiet,
        )
        render(reported(analysis, settings, show_fixes), settings.output_format, sys.stderr, context)
    failed = bool(analysis.findings) and not exit_zero and not fix_only
    return EXIT_FINDINGS if failed or (exit_non_zero_on_fix and outcome.fixed) else EXIT_CLEAN


def report_root(project_root: Path) -> Path:
    """Paths in SARIF and GitHub annotations are relative to the repository holding the project."""
    for folder in (project_root, *project_root.resolve().parents):
        if (folder / ".git").exists():
            return folder
    return project_root


def _unsafe_fixable(findings: Sequence[Finding]) -> int:
    from cachelint.finding import Applicability

    return sum(
        1 for f in findings if f.fix is not None and f.fix.changes and f.fix.applicability is Applicability.UNSAFE
    )


@main.command()
@click.argument("code")
@handles_errors
def rule(code: str) -> None:
    """Explain the rule CODE (a code such as CL001, or a rule name).

    On a terminal the page is rendered; otherwise (`cachelint rule CL001 > CL001.md`) it is printed
    as the Markdown it is written in."""
    from cachelint.docs import load_page

    page = load_page(code)  # a code: no need to import the rules
    if page is None:
        from cachelint.rules import rule_by_code

        found = rule_by_code(code)
        page = load_page(found.info.code) if found else None
    if page is None:
        fail(f"unknown rule {code!r} (see `cachelint rules`)")
        return
    if not sys.stdout.isatty():
        click.echo(page.text, nl=False)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console(no_color=not use_color(False)).print(Markdown(page.text))


@main.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--config", type=click.Path(path_type=Path), help="Use this config file.")
@click.option("--isolated", is_flag=True, help="Ignore all config files.")
@handles_errors
def clean(path: Path | None, config: Path | None, isolated: bool) -> None:
    """Remove the analysis cache of the project holding PATH.

    PATH defaults to the current folder."""
    from cachelint.cache import CacheError, cache_folder, remove_cache
    from cachelint.vllm_range import find_project_root

    start = path or Path()
    if not start.exists():  # its project would be the nearest folder that exists, maybe `/`
        fail(f"{start}: No such file or directory")
    settings = resolve_settings([start], config, isolated, {})
    root = find_project_root(start)
    folder = cache_folder(settings, root)
    try:
        outcome = remove_cache(root, folder)
    except (CacheError, OSError) as error:
        fail(str(error))
        return
    done = {
        "removed": f"Removed {folder}",
        "kept-folder": f"Removed the cache files in {folder}; the folder holds other files and stays",
        "none": f"No cache to remove at {folder}",
    }
    click.echo(printable(done[outcome]))


@main.command(name="rules")
@handles_errors
def list_rules() -> None:
    """List every rule with its name, fixability and summary."""
    from cachelint.rules import ALL_RULES

    header = ("Code", "Name", "Fix", "Summary")
    rows = [(item.info.code, item.info.name, item.info.fix_column, item.info.summary) for item in ALL_RULES]
    width = _columns()
    if width is None and not sys.stdout.isatty():  # piped, no COLUMNS: one line per rule, never wrapped
        widths = [max(len(row[index]) for row in (header, *rows)) for index in range(len(header) - 1)]
        for row in (header, *rows):
            click.echo("  ".join([*(cell.ljust(size) for cell, size in zip(row[:-1], widths, strict=True)), row[-1]]))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in header:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console = Console(no_color=not use_color(False), width=width)
    with console.capture() as captured:
        console.print(table)
    click.echo("\n".join(line.rstrip() for line in captured.get().splitlines()))


def _columns() -> int | None:
    """The width `COLUMNS` asks for, when it holds a number."""
    value = os.environ.get("COLUMNS", "")
    return int(value) if value.isdigit() and int(value) > 0 else None


@main.command()
@handles_errors
def server() -> None:
    """Run the language server over stdio, for editors.

    It needs the server extra: pip install 'cachelint-rl[server]'."""
    from cachelint.server import INSTALL_HINT, missing_dependency

    missing = missing_dependency()
    if missing is not None:
        fail(f"`cachelint server` needs {missing}, which the server extra installs: {INSTALL_HINT}")
    from cachelint.server.app import serve

    sys.exit(serve())
