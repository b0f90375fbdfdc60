"""The project index: every file's summary, and a call graph resolved across files.

Resolution policy, in order: a `self.` (or `super()`) call resolves to the method of the same class,
its project base classes and their overrides in project subclasses; a bare name to the module's own
function, then to what the module imports, then to module-level functions of that name anywhere in
the project; `module.func()` to the imported module's function; `collective_rpc("name")` to the
`name` methods of worker-extension classes; a method call on a receiver whose origin is known
(cachelint.provenance) to that project class's method, and to nothing when it is vLLM's or another
engine's object; a Ray `.remote()` call, a dispatch helper (`run_all_workers("name")`) or a method
call on another object to the project's methods of that name, other than the caller's own class.
Project-wide candidates are narrowed to the nearest package (longest shared module prefix).
When several candidates remain, a path counts as resetting a cache if any candidate does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from cachelint import provenance
from cachelint.summary import (
    CallSite,
    ClassSummary,
    FileSummary,
    FunctionSummary,
)

# Method names too generic to resolve project-wide from an unknown receiver.
GENERIC_NAMES = frozenset(
    {
        "get",
        "set",
        "update",
        "append",
        "extend",
        "pop",
        "items",
        "keys",
        "values",
        "copy",
        "clear",
        "add",
        "remove",
        "join",
        "split",
        "format",
        "read",
        "write",
        "close",
        "put",
        "send",
        "run",
        "start",
        "stop",
        "wait",
        "result",
        "cuda",
        "cpu",
        "to",
        "item",
        "forward",
        "generate",
        "call",
        "submit",
        "info",
        "debug",
        "warning",
        "error",
        "exception",
        "encode",
        "decode",
        "load",
        "save",
        "state_dict",
        "load_state_dict",
        "parameters",
        "named_parameters",
        "eval",
        "train",
        "__init__",
        "__call__",
        "__enter__",
        "__exit__",
        "replace",
        "strip",
        "lower",
        "upper",
        "sum",
        "mean",
        "view",
        "reshape",
        "tolist",
        "numpy",
        "barrier",
        "broadcast",
        "all_reduce",
    }
)


T = TypeVar("T")


@dataclass(frozen=True)
class FunctionRef:
    file: FileSummary
    function: FunctionSummary

    @property
    def key(self) -> tuple[str, str]:
        return (self.file.path, self.function.qualname)

    def describe(self) -> str:
        return f"{self.function.name} ({self.file.path.rsplit('/', 1)[-1]}:{self.function.span.line})"


@dataclass(frozen=True)
class Reached:
    """A function reached from a root, with the path of functions that led there."""

    ref: FunctionRef
    path: tuple[FunctionRef, ...]

    def describe_path(self) -> str:
        return " -> ".join(step.describe() for step in self.path)


def shared_prefix(a: str, b: str) -> int:
    count = 0
    for left, right in zip(a.split("."), b.split("."), strict=False):
        if left != right:
            break
        count += 1
    return count


class ProjectIndex:
    def __init__(
        self,
        files: Iterable[FileSummary],
        worker_extension_classes: Iterable[str] = (),
        packages: Iterable[str] | None = None,
    ) -> None:
        """`packages`: every name in the module names of the project's files, indexed or not (a
        package of the project may lie in a folder below its root); None when not known."""
        self.files: dict[str, FileSummary] = {summary.path: summary for summary in files}
        self.packages = frozenset(packages) if packages is not None else None
        self.modules: dict[str, FileSummary] = {}
        self.functions_by_name: dict[str, list[FunctionRef]] = {}
        self.methods_by_class: dict[tuple[str, str], list[FunctionRef]] = {}
        self.classes_by_name: dict[str, list[tuple[FileSummary, ClassSummary]]] = {}
        self.worker_extensions: set[str] = set(worker_extension_classes)
        self._memo: dict[str, Any] = {}
        self._bases: dict[str, list[str]] = {}
        self._subclasses: dict[str, list[tuple[FileSummary, ClassSummary]]] | None = None
        self._resolved: dict[tuple[int, int, int], tuple[FileSummary, FunctionSummary, CallSite, list[FunctionRef]]]
        self._resolved = {}
        self._index(self.files.values())

    def add(self, files: Iterable[FileSummary]) -> None:
        """Index more files; what was resolved or memoized before is worked out again."""
        added = [summary for summary in files if summary.path not in self.files]
        self.files.update((summary.path, summary) for summary in added)
        self._memo.clear()
        self._bases.clear()
        self._subclasses = None
        self._resolved.clear()
        self._index(added)

    def _index(self, files: Iterable[FileSummary]) -> None:
        for summary in files:
            self.modules[summary.module] = summary
            self.worker_extensions.update(summary.worker_extension_refs)
            for cls in summary.classes:
                self.classes_by_name.setdefault(cls.name, []).append((summary, cls))
            for function in summary.functions:
                ref = FunctionRef(summary, function)
                self.functions_by_name.setdefault(function.name, []).append(ref)
                if function.cls:
                    self.methods_by_class.setdefault((function.cls, function.name), []).append(ref)

    # -- classes ------------------------------------------------------------------------------------

    def is_worker_extension(self, cls: ClassSummary) -> bool:
        return cls.worker_like or cls.name in self.worker_extensions

    def base_classes(self, name: str) -> list[str]:
        """Project classes `name` inherits from, nearest first."""
        if name not in self._bases:
            self._bases[name] = self._find_base_classes(name)
        return list(self._bases[name])

    def _find_base_classes(self, name: str) -> list[str]:
        seen: dict[str, None] = {}  # ordered, and a membership test that stays O(1) in deep hierarchies
        queue = deque([name])
        while queue:
            current = queue.popleft()
            for _, cls in self.classes_by_name.get(current, []):
                for base in cls.bases:
                    base_name = base.rsplit(".", 1)[-1]
                    if base_name in self.classes_by_name and base_name not in seen and base_name != name:
                        seen[base_name] = None
                        queue.append(base_name)
        return list(seen)

    def subclasses(self, name: str) -> list[tuple[FileSummary, ClassSummary]]:
        """Project classes inheriting from `name`, directly or not, in index order."""
        if self._subclasses is None:
            self._subclasses = {}
            for entries in self.classes_by_name.values():
                for summary, cls in entries:
                    for base in self.base_classes(cls.name):
                        self._subclasses.setdefault(base, []).append((summary, cls))
        return list(self._subclasses.get(name, []))

    # -- call resolution ----------------------------------------------------------------------------

    def resolve(self, file: FileSummary, function: FunctionSummary, call: CallSite) -> list[FunctionRef]:
        """The project functions `call` (made in `function` of `file`) may run, computed once per call."""
        key = (id(file), id(function), id(call))
        if key not in self._resolved:  # the entry holds the objects, so that their ids stay theirs
            self._resolved[key] = (file, function, call, self._resolve(file, function, call))
        return list(self._resolved[key][3])

    def _resolve(self, file: FileSummary, function: FunctionSummary, call: CallSite) -> list[FunctionRef]:
        name = call.name
        chain = call.chain
        if call.via == "rpc":
            return [
                ref
                for ref in self.functions_by_name.get(name, [])
                if ref.function.cls and self._class_is_worker_extension(ref)
            ]
        if chain in (["self"], ["cls"]) and function.cls:
            return self._method_in_hierarchy(function.cls, name)
        if chain[:2] == ["super", "()"] and function.cls:
            return [ref for base in self.base_classes(function.cls) for ref in self._own_method(base, name)]
        if not chain and call.via == "direct":
            return self._resolve_bare_name(file, name)
        if len(chain) == 1 and chain[0] in file.imports:
            target = self.modules.get(file.imports[chain[0]])
            if target is None:
                return []
            return [FunctionRef(target, f) for f in target.functions if f.qualname == name]
        if call.receiver_class:
            return []
        known = self._known_receiver(file, function, call)
        if known is not None:
            return known
        if name in GENERIC_NAMES:
            return []
        candidates = [
            ref for ref in self.functions_by_name.get(name, []) if ref.function.cls and ref.function.cls != function.cls
        ]
        return self._nearest(file, candidates)

    def _known_receiver(self, file: FileSummary, function: FunctionSummary, call: CallSite) -> list[FunctionRef] | None:
        """The methods a call on a receiver of known origin runs: the project class's (none when the
        receiver is another engine's object or the class lacks the method); None when the origin is
        not known or names no project class."""
        origin, where = provenance.find_origin(self, file, function, call.chain)
        if not origin:
            return None
        module, _ = provenance.origin_class_name(origin)
        if provenance.module_engine(module):
            return []
        target = provenance.project_class(self, where or file, origin)
        if target is None:
            # another library's object; not a Ray actor handle, whose `.remote()` calls run project code
            return [] if call.via == "direct" and self.imported_from_outside(where or file, module) else None
        return self._method_in_hierarchy(target.cls.name, call.name)

    def imported_from_outside(self, file: FileSummary, module: str) -> bool:
        """Whether `module` (a class's module, resolved through the file's imports) is a package the
        file imports that is not the project's: `torch`, `aiohttp`, ..."""
        if self.packages is None or not module:
            return False
        top = module.split(".", 1)[0]
        return top not in self.packages and any(imported.split(".", 1)[0] == top for imported in file.imports.values())

    def _class_is_worker_extension(self, ref: FunctionRef) -> bool:
        cls = ref.file.class_named(ref.function.cls)
        return cls is not None and self.is_worker_extension(cls)

    def _own_method(self, cls: str, name: str) -> list[FunctionRef]:
        return self.methods_by_class.get((cls, name), [])

    def _method_in_hierarchy(self, cls: str, name: str) -> list[FunctionRef]:
        found = list(self._own_method(cls, name))
        if not found:
            for base in self.base_classes(cls):
                found = list(self._own_method(base, name))
                if found:
                    break
        for _, sub in self.subclasses(cls):
            found.extend(self._own_method(sub.name, name))
        return found

    def _resolve_bare_name(self, file: FileSummary, name: str) -> list[FunctionRef]:
        own = [FunctionRef(file, f) for f in file.functions if f.qualname == name]
        if own:
            return own
        imported = file.imports.get(name)
        if imported and "." in imported:
            module, _, attr = imported.rpartition(".")
            target = self.modules.get(module)
            if target is not None:
                return [FunctionRef(target, f) for f in target.functions if f.qualname == attr]
            return []
        if name in GENERIC_NAMES:
            return []
        candidates = [ref for ref in self.functions_by_name.get(name, []) if not ref.function.cls]
        return self._nearest(file, candidates)

    def _nearest(self, file: FileSummary, candidates: list[FunctionRef]) -> list[FunctionRef]:
        if not candidates:
            return []
        best = max(shared_prefix(file.module, ref.file.module) for ref in candidates)
        return [ref for ref in candidates if shared_prefix(file.module, ref.file.module) == best]

    # -- reachability -------------------------------------------------------------------------------

    def reachable(self, root: FunctionRef, max_depth: int = 8) -> Iterator[Reached]:
        """Every function reachable from `root` (itself included), breadth first."""
        return self.reachable_from([root], max_depth)

    def reachable_from(self, roots: Iterable[FunctionRef], max_depth: int = 8) -> Iterator[Reached]:
        """Every function reachable from one of `roots` (themselves included), breadth first: each once,
        by a shortest path from the nearest root."""
        starts = {root.key: root for root in roots}
        seen = set(starts)
        queue: deque[Reached] = deque(Reached(root, (root,)) for root in starts.values())
        while queue:
            current = queue.popleft()
            yield current
            if len(current.path) > max_depth:
                continue
            for call in current.ref.function.calls:
                for target in self.resolve(current.ref.file, current.ref.function, call):
                    if target.key not in seen:
                        seen.add(target.key)
                        queue.append(Reached(target, (*current.path, target)))

    def memoized(self, key: str, compute: Callable[[], T]) -> T:
        """`compute()` once per index: project-wide results the rules share across files."""
        if key not in self._memo:
            self._memo[key] = compute()
        result: T = self._memo[key]
        return result

    def refit_roots(self, names: frozenset[str]) -> list[FunctionRef]:
        """The functions named as weight-update roots, or installed under such a name, in a stable order."""
        return sorted(
            (ref for ref in self.functions() if not names.isdisjoint(ref.function.called_as())),
            key=lambda ref: (ref.file.path, ref.function.span.line),
        )

    def functions(self) -> Iterator[FunctionRef]:
        for summary in self.files.values():
            for function in summary.functions:
                yield FunctionRef(summary, function)
