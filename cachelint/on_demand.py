"""Loading on demand: the files a weight-update path may reach that the up-front pass did not parse.

Up front only the files holding a trigger word are summarized. Each round then asks which calls on the
refit paths the index cannot resolve, and summarizes only the files that the call-resolution policy
(project.py) could resolve them to, found by their bytes (never parsed to be ruled out):
- a name imported from a project module, `module.func()`: that module's file, and no other;
- a method of `self`, `cls` or `super()`: the files defining the class's bases that the index lacks,
  and the files that define the method and name the class (its subclasses' overrides);
- a method on an object built from (or annotated as) a class the index lacks: the files defining that
  class, else as below; on an object of a class imported from another library: nothing;
- a name resolved project-wide (a bare name neither defined nor imported, a method on another object):
  the files defining it in the nearest package;
- `collective_rpc("name")`: every file defining the name.
Of these, a file is summarized only when it may matter (`Search.matters`): it imports vLLM (reaching
it is evidence that vLLM is the engine), may sleep or wake an engine itself, names a function that may
reach a cache reset, pause or sleep (`ReachingNames`: an indexed function holding one, or calling by
name one that may), or imports (up to two files deep) a file that does. A file left out is asked about
again in the next round, when more functions may reach a reset.
Always summarized: what a call named like a pause, abort, drain or sleep runs, overrides of a method
holding a processor-cache workaround (CL004), and for CL007 the files that call a refit root whose path
holds a prefix reset that may do nothing and hold a pause, abort, drain or sleep word. Names imported
from outside the project, builtins, class names and names too generic to resolve are never searched
for. The index grows by each round's files; a round that finds none ends the search.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from cachelint import provenance
from cachelint.project import GENERIC_NAMES, ProjectIndex, shared_prefix
from cachelint.rules.cl007_prefix_reset_may_noop import NOT_ENGINES, QUIESCE_PREFIXES

if TYPE_CHECKING:
    from cachelint.engine import LoadedFile
    from cachelint.summary import CallSite, FileSummary, FunctionSummary, ResetEvent

# A round reaches one call further; as deep as the rules follow a path (ProjectIndex.reachable).
MAX_ROUNDS = 9
# How many more files without a trigger word, imported one by the other, a chain of calls may pass
# through before it reaches a function known to reset a cache.
LOOKAHEAD = 2
_QUIESCE_NAMES = (*QUIESCE_PREFIXES, "abort")
_VAGUE_NAMES = GENERIC_NAMES | {"<module>"}
_BUILTIN_NAMES = frozenset(dir(builtins))
_WORD = re.compile(rb"\w+")
# `from ..a.b import (c, d)`: the leading dots, the module and what it imports; `import a.b`: the module.
_FROM_IMPORT = re.compile(rb"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+\(?([\w, \t\r\n]*)", re.MULTILINE)
_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([\w.]+)", re.MULTILINE)
_IMPORTS_VLLM = re.compile(rb"^[ \t]*(?:from|import)[ \t]+vllm\b", re.MULTILINE)
_LIFECYCLE_CALLS = (b".sleep(", b".wake_up(", b".resume_generation(")
# A sleep, wake-up or resume on something that is not a timer (`time.sleep(`, `asyncio.sleep(`).
_ENGINE_LIFECYCLE = re.compile(
    rb"(?<!time)(?<!asyncio)(?<!trio)(?<!anyio)(?<!gevent)(?<!eventlet)\.sleep\(|\.(?:wake_up|resume_generation)\("
)
Request = TypeVar("Request", str, tuple[str, str])
Reaching = Callable[[], AbstractSet[bytes]]  # the names of the indexed functions that reach a reset


@dataclass
class Wants:
    """What one round's refit paths ask for."""

    modules: set[str] = field(default_factory=set)  # project modules, by dotted name
    classes: set[str] = field(default_factory=set)  # class definitions, by name
    # (class, method, calling module): the class's definition when a file holds one, else `nearest`
    receivers: set[tuple[str, str, str]] = field(default_factory=set)
    nearest: set[tuple[str, str]] = field(default_factory=set)  # (name, calling module)
    anywhere: set[str] = field(default_factory=set)  # every definition of the name
    overrides: set[tuple[str, str]] = field(default_factory=set)  # (method, class)
    # CL004: (method, class) of methods holding a processor-cache workaround, which an override may drop
    workaround_overrides: set[tuple[str, str]] = field(default_factory=set)
    callers: set[str] = field(default_factory=set)  # CL007: refit roots that callers may pause before
    always: bool = False  # the files matter whatever they hold (CL007 asks what a quiesce call runs)


def grow(
    index: ProjectIndex,
    search: Search,
    summarize: Callable[[list[LoadedFile]], None],
    roots: frozenset[str],
    callers_matter: bool,
) -> tuple[int, int]:
    """Add to `index` the files the refit paths may reach, round by round; (files summarized, rounds)."""
    summarized = rounds = 0
    reaching = ReachingNames()
    reaching.add(index.files.values())
    for _ in range(MAX_ROUNDS):
        wants, quiesces = refit_wants(index, roots, search.modules, callers_matter)
        for summary in index.files.values():
            for workaround in summary.workarounds:
                if workaround.cls:
                    method = workaround.function.rsplit(".", 1)[-1]
                    for cls in (workaround.cls, *(sub.name for _, sub in index.subclasses(workaround.cls))):
                        wants.workaround_overrides.add((method, cls))
        search.next_round()
        chosen = list(
            {id(f): f for f in (*search.choose(wants, reaching), *search.choose(quiesces, reaching))}.values()
        )
        if not chosen:
            break
        rounds += 1
        summarize(chosen)
        summarized += len(chosen)
        added = [loaded.summary for loaded in chosen if loaded.summary is not None]
        index.add(added)
        reaching.add(added)
    return summarized, rounds


def refit_wants(
    index: ProjectIndex, roots: frozenset[str], project_modules: set[str], callers_matter: bool
) -> tuple[Wants, Wants]:
    """What the calls on refit paths that the index cannot resolve ask for, and (for CL007) the refit
    roots whose paths hold a prefix reset that may do nothing; then what the calls named like a pause,
    abort, drain or sleep ask for (CL007 reads what those run)."""
    from cachelint.rules.cl007_prefix_reset_may_noop import may_noop

    wants, quiesces = Wants(), Wants(always=True)
    refits = index.refit_roots(roots)
    may_do_nothing = set()
    for reached in index.reachable_from(refits):  # each function once, whichever refit reaches it
        file, function = reached.ref.file, reached.ref.function
        if callers_matter and any(may_noop(event, index) for event in function.resets):
            may_do_nothing.add(reached.ref.key)
        for call in function.calls:
            if (
                not call.receiver_class
                and _may_be_defined_in_project(file, call, project_modules)
                and not index.resolve(file, function, call)
            ):
                asking = quiesces if call.name.startswith(_QUIESCE_NAMES) else wants
                _want_definition(index, file, function, call, project_modules, asking)
    if may_do_nothing:  # the refits whose own paths hold such a reset
        for ref in refits:
            if any(reached.ref.key in may_do_nothing for reached in index.reachable(ref)):
                wants.callers.update(ref.function.called_as())
    return wants, quiesces


def _want_definition(
    index: ProjectIndex,
    file: FileSummary,
    function: FunctionSummary,
    call: CallSite,
    project_modules: set[str],
    wants: Wants,
) -> None:
    """What may define the callee of `call`, which the index does not resolve (see the module doc)."""
    name, chain = call.name, call.chain
    if call.via == "rpc":
        wants.anywhere.add(name)
        return
    if function.cls and (chain in (["self"], ["cls"]) or chain[:2] == ["super", "()"]):
        _want_hierarchy(index, function.cls, name, project_modules, wants)
        return
    if not chain and call.via == "direct":
        imported = file.imports.get(name)
        if imported is not None:
            if "." in imported:
                wants.modules.add(imported.rpartition(".")[0])
        elif name not in GENERIC_NAMES:
            wants.nearest.add((name, file.module))
        return
    if len(chain) == 1 and chain[0] in file.imports:
        wants.modules.add(file.imports[chain[0]])
        return
    origin, where = provenance.find_origin(index, file, function, chain)
    if origin:
        module, cls = provenance.origin_class_name(origin)
        if provenance.module_engine(module):
            return  # vLLM's or another engine's object: never a project method
        known = provenance.project_class(index, where or file, origin)
        if known is not None:
            _want_hierarchy(index, known.cls.name, name, project_modules, wants)
            return
        if call.via == "direct" and index.imported_from_outside(where or file, module):
            return  # another library's object (as ProjectIndex resolves it)
        if cls and name not in GENERIC_NAMES:
            wants.receivers.add((cls, name, file.module))
            return
    if name not in GENERIC_NAMES:
        wants.nearest.add((name, file.module))


def _want_hierarchy(index: ProjectIndex, cls: str, method: str, project_modules: set[str], wants: Wants) -> None:
    """The class's bases the index lacks (not imported from outside the project), and overrides of
    `method` in files that name the class."""
    wants.overrides.add((method, cls))
    for owner in (cls, *index.base_classes(cls)):
        for summary, found in index.classes_by_name.get(owner, []):
            for base in found.bases:
                base_name = base.rsplit(".", 1)[-1]
                if base_name in index.classes_by_name or not base_name.isidentifier():
                    continue
                imported = provenance.resolve_dotted(base, summary.imports)
                if imported == base or imported.rpartition(".")[0] in project_modules:
                    wants.classes.add(base_name)


def _may_be_defined_in_project(file: FileSummary, call: CallSite, project_modules: set[str]) -> bool:
    """False for what can only live outside the project: builtins, classes (constructors are not
    followed), and functions of modules imported from elsewhere (`torch.cuda.synchronize()`).
    `project_modules` holds every project module and package name."""
    if call.name in _BUILTIN_NAMES or call.name[:1].isupper():
        return False
    imported = file.imports.get(call.chain[0] if call.chain else call.name)
    if imported is None:
        return True
    module = imported if call.chain else imported.rpartition(".")[0]
    return module in project_modules


class Search:
    """The project files that may still be summarized, and what their bytes say they define."""

    def __init__(
        self,
        files: Iterable[LoadedFile],
        defined_words: Callable[[LoadedFile], frozenset[str]],
        names_after_quiesce_word: Callable[[LoadedFile, Sequence[bytes]], bool],
    ) -> None:
        self.files = list(files)
        self.by_module = {loaded.module: loaded for loaded in self.files}
        self.modules = {  # every module and package name
            ".".join(parts[:end])
            for loaded in self.files
            for parts in [loaded.module.split(".")]
            for end in range(1, len(parts) + 1)
        }
        self._defined_words = defined_words
        self._names_after_quiesce_word = names_after_quiesce_word
        self._definers: dict[str, list[LoadedFile]] | None = None
        self._asked_modules: set[str] = set()
        self._asked_classes: set[str] = set()
        self._asked_anywhere: set[str] = set()
        self._asked_overrides: set[tuple[str, str]] = set()
        self._asked_workarounds: set[tuple[str, str]] = set()
        self._asked_callers: set[str] = set()
        self._words: dict[int, frozenset[bytes]] = {}
        self._lifecycle: dict[int, bool] = {}
        self._imported: dict[int, list[LoadedFile]] = {}
        self._looked_ahead: set[tuple[int, int]] = set()

    @staticmethod
    def open(loaded: LoadedFile) -> bool:
        """Whether the file may still be summarized: read, neither summarized nor failed."""
        return loaded.summary is None and loaded.error is None and loaded.record is not None

    def definers(self, name: str) -> list[LoadedFile]:
        """The open files whose bytes hold `def name` or `class name` (for ASCII names, from an index
        built on first use)."""
        if not name.isascii():
            pattern = re.compile(rb"(?:def|class) " + re.escape(name.encode()) + rb"\b")
            return [loaded for loaded in self.files if self.open(loaded) and pattern.search(loaded.raw)]
        if self._definers is None:
            self._definers = {}
            for loaded in self.files:
                if self.open(loaded):
                    for word in self._defined_words(loaded):
                        self._definers.setdefault(word, []).append(loaded)
        return [loaded for loaded in self._definers.get(name, []) if self.open(loaded)]

    def class_files(self, name: str) -> list[LoadedFile]:
        """The open files whose bytes hold `class name`."""
        pattern = re.compile(re.escape(f"class {name}".encode()) + rb"\b")
        return [loaded for loaded in self.definers(name) if pattern.search(loaded.raw)]

    def matters(self, loaded: LoadedFile, reaching: Reaching, hops: int = LOOKAHEAD) -> bool:
        """Whether a file may matter on a refit path: it imports vLLM (a path that reaches it is
        evidence that vLLM is the engine) or may lead to a reset (`leads_to_reset`)."""
        raw = loaded.raw
        if b"vllm" in raw and _IMPORTS_VLLM.search(raw):
            return True
        return self.leads_to_reset(loaded, reaching, hops)

    def leads_to_reset(self, loaded: LoadedFile, reaching: Reaching, hops: int) -> bool:
        """Whether the file names a function that reaches a cache reset, pause or sleep, may sleep or
        wake an engine itself, or calls a function of another file not summarized yet that does,
        `hops` files deep."""
        key = id(loaded)
        raw = loaded.raw
        if key not in self._words:
            self._words[key] = frozenset(_WORD.findall(raw))
            self._lifecycle[key] = bool(any(call in raw for call in _LIFECYCLE_CALLS) and _ENGINE_LIFECYCLE.search(raw))
        if self._lifecycle[key] or not self._words[key].isdisjoint(reaching()):
            return True
        if hops == 0 or (key, hops) in self._looked_ahead:
            return False
        self._looked_ahead.add((key, hops))  # once per round and depth, and no cycles
        return any(
            self.leads_to_reset(other, reaching, hops - 1)
            for other in self.imported_files(loaded)
            if other is not loaded and self.open(other)
        )

    def imported_files(self, loaded: LoadedFile) -> list[LoadedFile]:
        """The project files whose modules the file's import statements name (read from its bytes)."""
        key = id(loaded)
        if key not in self._imported:
            package = loaded.module.split(".")
            modules = [module.decode() for module in _IMPORT.findall(loaded.raw)]
            for dots, module, names in _FROM_IMPORT.findall(loaded.raw):
                base = package[: len(package) - len(dots)] if dots else []
                dotted = ".".join([*base, module.decode()] if module else base)
                modules.append(dotted)  # and a submodule it may import by name
                modules.extend(f"{dotted}.{name.decode()}" for name in _WORD.findall(names))
            found = (self.by_module.get(module) for module in modules)
            self._imported[key] = list({id(file): file for file in found if file is not None}.values())
        return self._imported[key]

    def next_round(self) -> None:
        self._looked_ahead.clear()

    def choose(self, wants: Wants, reaching: Reaching) -> list[LoadedFile]:
        """The files to summarize for `wants` that may matter (`matters`; `reaching()` names the indexed
        functions that reach a reset). A request is answered once all its files were taken; one whose
        files did not matter yet is asked again in the next round, when more may reach a reset."""
        chosen: dict[int, LoadedFile] = {}

        def take(files: Iterable[LoadedFile], always: bool = False) -> bool:
            """Choose the open files of `files` that may matter; whether none was left out."""
            complete = True
            for loaded in files:
                if self.open(loaded):
                    if always or self.matters(loaded, reaching):
                        chosen[id(loaded)] = loaded
                    else:
                        complete = False
            return complete

        def answer(
            requests: set[Request], asked: set[Request], files: Callable[[Request], Iterable[LoadedFile]]
        ) -> None:
            for request in sorted(requests - asked):
                if take(files(request), always=wants.always):
                    asked.add(request)

        answer(wants.modules, self._asked_modules, lambda module: filter(None, [self.by_module.get(module)]))
        answer(wants.classes, self._asked_classes, self.class_files)
        for cls, name, module in sorted(wants.receivers):
            defining = self.class_files(cls)
            if defining:
                take(defining, always=wants.always)
            else:
                wants.nearest.add((name, module))
        answer(wants.anywhere, self._asked_anywhere, self.definers)
        answer(wants.overrides, self._asked_overrides, self._overriders)
        for request in _fresh(wants.workaround_overrides, self._asked_workarounds):
            take(self._overriders(request), always=True)
        for name, module in sorted(wants.nearest):
            take(_nearest(self.definers(name), module), always=wants.always)
        callers = [name.encode() for name in _fresh(wants.callers, self._asked_callers)]
        if callers:
            take(
                (
                    loaded
                    for loaded in self.files
                    if self.open(loaded) and self._names_after_quiesce_word(loaded, callers)
                ),
                always=True,
            )
        return list(chosen.values())

    def _overriders(self, request: tuple[str, str]) -> list[LoadedFile]:
        """The open files that define the method and name the class."""
        method, cls = request
        word = cls.encode()
        return [loaded for loaded in self.definers(method) if word in loaded.raw]


class ReachingNames:
    """The names of the indexed functions that may reach a cache reset, pause or sleep: those holding
    one, then those calling a function of such a name (by name, which says more than the call graph
    would, and costs a fraction of resolving every call); names too generic to tell anything left out.
    Kept up to date as files are indexed."""

    def __init__(self) -> None:
        self._holding: set[str] = set()
        self._callers: dict[str, set[str]] = {}
        self._names: frozenset[bytes] | None = None
        self._pending: list[FileSummary] = []  # added, not looked at yet: most runs never ask

    def add(self, files: Iterable[FileSummary]) -> None:
        self._pending.extend(files)
        self._names = None

    def __call__(self) -> frozenset[bytes]:
        for summary in self._pending:
            for function in summary.functions:
                if function.name in _VAGUE_NAMES:
                    continue
                if any(map(_engine_event, function.resets)):
                    self._holding.add(function.name)
                for call in function.calls:
                    self._callers.setdefault(call.name, set()).add(function.name)
        self._pending.clear()
        if self._names is None:
            names = set(self._holding)
            frontier = list(names)
            while frontier:
                for caller in self._callers.get(frontier.pop(), ()):
                    if caller not in names:
                        names.add(caller)
                        frontier.append(caller)
            self._names = frozenset(name.encode() for name in names if not name.startswith("__"))
        return self._names


def _engine_event(event: ResetEvent) -> bool:
    """A reset, pause or sleep that may be an engine's, not a timer's (`time.sleep`, `asyncio.sleep`)."""
    return event.method != "sleep" or (bool(event.chain) and event.chain[0] not in NOT_ENGINES)


def _fresh(requests: Iterable[Request], asked: set[Request]) -> list[Request]:
    """The requests not asked before, in a stable order; from now on asked."""
    fresh = sorted(set(requests) - asked)
    asked.update(fresh)
    return fresh


def _nearest(files: list[LoadedFile], module: str) -> list[LoadedFile]:
    """Those of `files` sharing the longest module prefix with `module` (as ProjectIndex._nearest)."""
    if not files:
        return []
    best = max(shared_prefix(module, loaded.module) for loaded in files)
    return [loaded for loaded in files if shared_prefix(module, loaded.module) == best]
