"""Launches: where a project starts SGLang, so that a fix can configure it there (CL202).

In this process: SGLang's `Engine(...)`, `launch_server(...)` or `_launch_subprocesses(...)` (its
schedulers are child processes that inherit the environment), or a `Process` (of `multiprocessing`, a
context of it, or torch's) whose target is one of them, imported at the top or inside the function. In a
subprocess: `subprocess.Popen` (`run`, `call`, ...) whose command names SGLang (a string argument such as
`"sglang.launch_server"`, or a local command list holding one or built by a call that names SGLang:
`cmd = SGLangConfig.build_cmd(...)`), or whose command the code does not show (a parameter, an
attribute) in a function named for launching or serving inside a function, class or module that names
SGLang (`SGLangBackend.launch_server`, `launch_server_cmd` of `.../sglang_server.py`). A command whose
program is spelled out and is not Python or SGLang (`["which", cmd]`, `[sys.executable, user_code]` in
no launching function) is never SGLang's launch.

What the launch turns off is kept too: `disable_radix_cache=True` (`--disable-radix-cache`), an engine
without the radix cache that CL201 is about.
"""

from __future__ import annotations

import ast

from cachelint import provenance
from cachelint.summary.model import FileSummary, Launch
from cachelint.summary.nodes import last_name, string_parts
from cachelint.summary.positions import SourcePositions
from cachelint.summary.requests import Requests
from cachelint.version_tests import dotted_name

IN_PROCESS = frozenset({"Engine", "launch_server", "_launch_subprocesses"})
SUBPROCESS_CALLS = frozenset({"Popen", "run", "call", "check_call", "check_output"})
_LAUNCH_NAMES = IN_PROCESS | SUBPROCESS_CALLS | {"Process"}
# Words of a function or class name that say it launches a server.
_LAUNCHING_WORDS = ("launch", "serve", "server", "start", "spawn")
# Server options a launch may turn off, by ServerArgs field; the command-line flag is the field with dashes.
OPTIONS = ("disable_radix_cache",)


class Launches(Requests):
    """SGLang launch sites."""

    def __init__(self, summary: FileSummary, source: SourcePositions, helpers: tuple[str, ...]) -> None:
        super().__init__(summary, source, helpers)
        # Most files never name SGLang in a string: their values are not searched for it.
        self.sglang_lines = _lines_naming_sglang(source.lines) if "sglang" in source.text.lower() else frozenset()

    def visit_Call(self, node: ast.Call) -> None:
        self._note_launch(node)
        super().visit_Call(node)

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        super().bind(target, value)
        if isinstance(target, ast.Name) and self.sglang_lines:
            if self._names_sglang_in(value) or _built_by_sglang(value, self.summary.imports):
                self.frame.sglang_commands.add(target.id)
            else:
                self.frame.sglang_commands.discard(target.id)

    def _note_launch(self, node: ast.Call) -> None:
        name = last_name(node.func)
        if name not in _LAUNCH_NAMES:
            return
        dotted = dotted_name(node.func)
        assert dotted is not None  # a call with a last name is a dotted name's
        resolved = provenance.resolve_dotted(dotted, self.summary.imports)
        module = resolved.split(".")[0]
        in_process = name in IN_PROCESS and provenance.module_engine(resolved) == "sglang"
        if in_process or (name == "Process" and self._targets_sglang(node)):
            self._launch(node, "in-process")
        elif name in SUBPROCESS_CALLS and module == "subprocess" and self._launches_sglang(node):
            self._launch(node, "subprocess")

    def _targets_sglang(self, node: ast.Call) -> bool:
        for keyword in node.keywords:
            if keyword.arg == "target":
                target = dotted_name(keyword.value) or ""
                return provenance.module_engine(provenance.resolve_dotted(target, self.summary.imports)) == "sglang"
        return False

    def _launches_sglang(self, node: ast.Call) -> bool:
        """Whether a subprocess call starts SGLang (see the module doc)."""
        for value in (*node.args, *(keyword.value for keyword in node.keywords)):
            if not self.sglang_lines:
                break
            if self._names_sglang_in(value) or (isinstance(value, ast.Name) and value.id in self.frame.sglang_commands):
                return True
        if node.args and _spelled_program(node.args[0]):
            return False
        function = self.frame.function
        cls = self.classes[-1].name if self.classes else ""
        launching = any(word in text.lower() for text in (function.name, cls) for word in _LAUNCHING_WORDS)
        around = (function.qualname, cls, self.summary.module)
        return launching and any("sglang" in text.lower() for text in around)

    def _names_sglang_in(self, value: ast.expr) -> bool:
        """`_names_sglang(value)`, asked only when a line of the value names SGLang."""
        end = value.end_lineno or value.lineno
        lines = self.sglang_lines
        return any(line in lines for line in range(value.lineno, end + 1)) and _names_sglang(value)

    def _launch(self, node: ast.Call, kind: str) -> None:
        statement = self.statement()
        env = next((keyword for keyword in node.keywords if keyword.arg == "env"), None)
        chain, branch, branches = self._branch_holding(statement)
        self.summary.launches.append(
            Launch(
                function=self.frame.function.qualname,
                kind=kind,
                span=self.source.span(node),
                statement_span=self.statement_span(),
                at_statement_level=statement is not None and self.header() is None,
                env_span=self.source.span(env) if env is not None else None,
                env_value=self.source.segment(env.value) if env is not None else "",
                chain_span=self.source.span(chain) if chain is not None else None,
                branch=branch,
                branches=branches,
                turned_off=_turned_off(node),
            )
        )

    def _branch_holding(self, statement: ast.stmt | None) -> tuple[ast.If | None, int, int]:
        """The `if` opening the if/elif/else chain a branch of which holds `statement` as its own, the
        branch, and the chain's branches (Launch.chain_span); (None, 0, 0) when no branch holds it."""
        conditions = self.frame.conditions
        if statement is None or not conditions:
            return None, 0, 0
        _, positive, kind, owner = conditions[-1]
        if kind not in ("if", "else") or not isinstance(owner, ast.If):
            return None, 0, 0
        if not any(item is statement for item in (owner.body if positive else owner.orelse)):
            return None, 0, 0
        branch = 0 if positive else 1
        level = len(conditions) - 1
        while id(owner) in self.elifs and level > 0:  # climb to the `if` of the chain
            _, _, kind, parent = conditions[level - 1]
            if kind != "else" or not isinstance(parent, ast.If):
                break
            owner, level, branch = parent, level - 1, branch + 1
        branches = 2  # the `if` and its `else`, written or not
        current = owner
        while (
            len(current.orelse) == 1 and isinstance(current.orelse[0], ast.If) and id(current.orelse[0]) in self.elifs
        ):
            current = current.orelse[0]
            branches += 1
        return owner, branch, branches


def _turned_off(node: ast.Call) -> list[str]:
    """The OPTIONS a launch sets: `disable_radix_cache=True`, or `--disable-radix-cache` in its command."""
    found = [
        keyword.arg
        for keyword in node.keywords
        if keyword.arg in OPTIONS and isinstance(keyword.value, ast.Constant) and keyword.value.value is True
    ]
    texts = {
        text
        for argument in node.args
        for item in ast.walk(argument)
        if isinstance(item, ast.expr)
        for text in string_parts(item)
    }
    found += [option for option in OPTIONS if "--" + option.replace("_", "-") in texts and option not in found]
    return found


def _spelled_program(command: ast.expr) -> bool:
    """Whether a command spells out its program and it is neither Python nor SGLang: `["which", cmd]`,
    `"nvidia-smi"`, `[sys.executable, path]` (SGLang's server is started as `python -m sglang...`, and
    a command naming SGLang was accepted before)."""
    first = command.elts[0] if isinstance(command, (ast.List, ast.Tuple)) and command.elts else command
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        program = first.value.split()[0] if first.value.split() else ""
        return "python" not in program and "sglang" not in program
    if isinstance(command, (ast.List, ast.Tuple)):
        return dotted_name(first) == "sys.executable" and not any(
            "sglang" in text.lower() for item in command.elts[1:] for text in string_parts(item)
        )
    return False


def _built_by_sglang(value: ast.expr, imports: dict[str, str]) -> bool:
    """A command built by a call that names SGLang (`SGLangConfig.build_cmd(...)`) or is SGLang's own."""
    if not isinstance(value, ast.Call):
        return False
    dotted = dotted_name(value.func) or ""
    resolved = provenance.resolve_dotted(dotted, imports)
    return "sglang" in dotted.lower() or provenance.module_engine(resolved) == "sglang"


def _names_sglang(value: ast.expr) -> bool:
    """Whether a string in `value` (a literal, an f-string, a list of them) names SGLang."""
    return any(
        isinstance(item, ast.expr) and any("sglang" in text.lower() for text in string_parts(item))
        for item in ast.walk(value)
    )


def _lines_naming_sglang(lines: list[str]) -> frozenset[int]:
    """The numbers of the `lines` that name SGLang in any case."""
    return frozenset(number for number, line in enumerate(lines, 1) if "sglang" in line.lower())
