"""Bindings: imports, and how names and `self.` attributes were bound (receiver origins and aliases).

Receivers are recorded as chains of names (`self.server_handle` -> ["self", "server_handle"]),
following local aliases and `getattr(obj, "name", default)`. How each name was bound is kept as an
origin string (cachelint.provenance reads them); when the walk ends, every recorded call's receiver
gets the vLLM class the module alone tells (`receiver_class`).
"""

from __future__ import annotations

import ast
import re

from cachelint import provenance
from cachelint.summary.model import PAUSE_METHODS, RESET_METHODS, ClassSummary, FunctionSummary
from cachelint.summary.nodes import getattr_target, last_name
from cachelint.summary.walker import Walker
from cachelint.version_tests import dotted_name

_IDENTIFIER = re.compile(r"[A-Za-z_][\w.]*")
# Calls whose result is a new object: `from_engine_args`, `_prepare_vllm_engine`, `create_engine`, ...
_BUILDER_NAME = re.compile(r"_*(from_|prepare|create|build|make|init|load|launch|spawn|start|setup|new)")
# Calls that bind their first argument to an object or to arguments, as installed functions are.
_BINDERS = frozenset({"MethodType", "types.MethodType", "partial", "functools.partial"})


def _local_name(scope: str, name: str) -> str:
    """The qualified name of a function `name` defined in the function `scope`."""
    return name if scope == "<module>" else f"{scope}.<locals>.{name}"


def annotation_name(node: ast.expr) -> str:
    """The class an annotation names: a vLLM one if any (`AsyncLLM | None`, `"EngineClient"`), else the
    first class-like name that is not a typing wrapper; "" when none."""
    names: list[str] = []
    for child in (node,) if isinstance(node, ast.Name) else ast.walk(node):
        if isinstance(child, (ast.Name, ast.Attribute)):
            dotted = dotted_name(child)
            if dotted:
                names.append(dotted)
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            names.extend(_IDENTIFIER.findall(child.value))
    candidates = [name for name in names if name.rsplit(".", 1)[-1] not in provenance.TYPING_NAMES]
    for name in candidates:
        if name.rsplit(".", 1)[-1] in provenance.ANNOTATIONS:
            return name
    return next((name for name in candidates if name.rsplit(".", 1)[-1][:1].isupper()), "")


class Bindings(Walker):
    """Imports, assignments and receivers."""

    # -- receivers -----------------------------------------------------------------------------------

    def chain(self, node: ast.expr) -> list[str]:
        """The receiver as a list of names, following aliases and getattr with a literal name."""
        if isinstance(node, ast.Name):
            alias = self.frame.aliases.get(node.id)
            return list(alias) if alias is not None else [node.id]
        if isinstance(node, ast.Attribute):
            return [*self.chain(node.value), node.attr]
        target = getattr_target(node)
        if target is not None:
            return [*self.chain(target[0]), target[1]]
        if isinstance(node, ast.Call):
            return [*self.chain(node.func), "()"]
        if isinstance(node, ast.Subscript):
            return [*self.chain(node.value), "[]"]
        return ["?"]

    def receiver_text(self, node: ast.expr) -> str:
        dotted = dotted_name(node)
        return dotted if dotted is not None else self.source.segment(node)

    def finish(self) -> None:
        """Resolve the origins through the module's imports, classify every recorded receiver, and keep
        the local bindings that name a receiver (provenance reads no other)."""
        imports = self.summary.imports
        for function in self.summary.functions:
            for name, origin in function.bindings.items():
                function.bindings[name] = provenance.resolve_origin(origin, imports)
        for cls in self.summary.classes:
            for name, origin in cls.attributes.items():
                cls.attributes[name] = provenance.resolve_origin(origin, imports)
        local_classes = frozenset(cls.name for cls in self.summary.classes)
        receivers: dict[int, set[str]] = {}
        # In a module of another engine (SGLang's `self.scheduler`, `tp_worker.model_runner`), names that
        # reach vLLM's objects in vLLM code reach that engine's.
        other_only = self.imports_other and not self.imports_vllm
        for item, scopes, current in self.pending:
            kind = None if other_only else provenance.local_class(item.chain, scopes, current, local_classes)
            item.receiver_class = kind.value if kind else ""
            if len(item.chain) == 1:
                for scope in scopes:
                    receivers.setdefault(id(scope), set()).add(item.chain[0])
        self._resolve_installs()
        for function in self.summary.functions:
            used = receivers.get(id(function.bindings), set())
            function.bindings = {name: origin for name, origin in function.bindings.items() if name in used}
        if self.imports_vllm:
            self.summary.engine = "vllm"
        elif self.imports_other:
            self.summary.engine = "other"
        self.summary.imports_sglang = self.imports_sglang

    def _resolve_installs(self) -> None:
        """Give each function stored into an attribute that attribute's name (`installed_as`)."""
        functions = {function.qualname: function for function in self.summary.functions}
        for attribute, name, scopes, factory in self.installs:
            found = next((functions[q] for q in (_local_name(scope, name) for scope in scopes) if q in functions), None)
            if found is None:
                continue
            installed = [found]
            if factory:
                returned = self.returned.get(found.qualname, ())
                installed = [functions[q] for q in (_local_name(found.qualname, r) for r in returned) if q in functions]
            for function in installed:
                if attribute != function.name and attribute not in function.installed_as:
                    function.installed_as.append(attribute)

    # -- imports -------------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._note_module(alias.name)
            name = alias.asname or alias.name.split(".")[0]
            self.summary.imports[name] = alias.name if alias.asname else alias.name.split(".")[0]
            for reader in (self.frame.reader, self.frame.sglang_reader):
                reader.note_import(alias.name, name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            base = self.summary.module.split(".")
            base = base[: len(base) - node.level] if node.level <= len(base) else []
            module = ".".join([*base, module] if module else base)
        self._note_module(module)
        for alias in node.names:
            if alias.name == "*":
                continue
            local = alias.asname or alias.name
            self.summary.imports[local] = f"{module}.{alias.name}"
            for reader in (self.frame.reader, self.frame.sglang_reader):
                reader.note_import_from(module, alias.name, local)

    def _note_module(self, module: str) -> None:
        engine = provenance.module_engine(module)
        if engine == "vllm":
            self.imports_vllm = True
        elif provenance.is_other_engine(engine):
            self.imports_other = True
            self.imports_sglang = self.imports_sglang or engine == "sglang"

    # -- classes and functions -----------------------------------------------------------------------

    def bind_class_attributes(self, node: ast.ClassDef, summary: ClassSummary) -> None:
        """What the class is (a vLLM engine or worker subclass) and its annotated attributes."""
        last_bases = [base.rsplit(".", 1)[-1] for base in summary.bases]
        engine = next((provenance.ENGINE_BASES[b] for b in last_bases if b in provenance.ENGINE_BASES), None)
        summary.engine_class = engine.value if engine else ""
        summary.worker_like = any(b in provenance.WORKER_BASES for b in last_bases) or node.name.endswith(
            "WorkerExtension"
        )
        for statement in node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                origin = provenance.type_origin(annotation_name(statement.annotation))
                if origin:
                    summary.attributes[statement.target.id] = origin

    def bind_parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef, function: FunctionSummary) -> None:
        arguments = node.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs):
            if arg.annotation is not None:
                origin = provenance.type_origin(annotation_name(arg.annotation))
                if origin:
                    function.bindings[arg.arg] = origin

    # -- assignments ---------------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self.bind(target, node.value)
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """A vLLM class in the annotation wins over the value; another class only when the value tells
        nothing."""
        origin = provenance.type_origin(annotation_name(node.annotation))
        if origin and provenance.origin_class(origin) is not None:
            self._bind_origin(node.target, origin)
        else:
            if node.value is not None:
                self.bind(node.target, node.value)
            if origin and (node.value is None or not self.value_origin(node.value)):
                self._bind_origin(node.target, origin)
        if node.value is not None:
            self.visit(node.value)

    def visit_Return(self, node: ast.Return) -> None:
        if isinstance(node.value, ast.Name):
            self.returned.setdefault(self.frame.function.qualname, set()).add(node.value.id)
        self.generic_visit(node)

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Attribute):
            self._note_install(target.attr, value)
        if isinstance(target, (ast.Name, ast.Attribute)):
            self._note_built(target, value)
        origin = self.value_origin(value)
        if origin:
            self._bind_origin(target, origin)
        if isinstance(target, ast.Name):
            for reader in (self.frame.reader, self.frame.sglang_reader):
                reader.note_assignment(target.id, value)
            if isinstance(value, (ast.Name, ast.Attribute)) or getattr_target(value):
                chain = self.chain(value)
                if chain and chain[-1] in RESET_METHODS | PAUSE_METHODS and isinstance(value, ast.Attribute):
                    receiver = self.receiver_text(value.value)
                    self.frame.method_aliases[target.id] = (chain[:-1], chain[-1], receiver)
                elif len(chain) > 1:
                    self.frame.aliases[target.id] = chain

    def _note_built(self, target: ast.Name | ast.Attribute, value: ast.expr) -> None:
        """An object named like an engine assigned what a call builds: a class (`LLM(...)`,
        `AsyncLLM.from_engine_args(...)`) or a function named for building (`self._prepare_vllm_engine()`)."""
        call = value.value if isinstance(value, ast.Await) else value
        if not isinstance(call, ast.Call):
            return
        if not provenance.named_like_engine(target.id if isinstance(target, ast.Name) else target.attr):
            return
        name = last_name(call.func)
        if name[:1].isupper() or _BUILDER_NAME.match(name):
            self.frame.function.built.append((self.receiver_text(target), self.source.span(call)))

    def _note_install(self, attribute: str, value: ast.expr) -> None:
        """A function stored into an attribute: by its name, through a lambda calling it, bound as a
        method (`types.MethodType(f, obj)`, `functools.partial(f, ...)`), or made by a factory `make(...)`."""
        factory = False
        if isinstance(value, ast.Lambda):
            value = value.body.func if isinstance(value.body, ast.Call) else value.body
        elif isinstance(value, ast.Call):
            if dotted_name(value.func) in _BINDERS and value.args:
                value = value.args[0]
            else:
                value, factory = value.func, True
        if isinstance(value, ast.Name):
            scopes = tuple(frame.function.qualname for frame in reversed(self.frames))
            self.installs.append((attribute, value.id, scopes, factory))

    def value_origin(self, value: ast.expr) -> str:
        """How `value` was made, when that can tell what it is: a class (or its `from_*`) called, or a
        name or chain whose own origin is known."""
        if isinstance(value, ast.Await):
            return self.value_origin(value.value)
        if isinstance(value, ast.Call):
            dotted = dotted_name(value.func)
            return provenance.call_origin(dotted) if dotted else ""
        if not isinstance(value, (ast.Name, ast.Attribute)):
            return ""
        chain = self.chain(value)
        if len(chain) == 1:
            for frame in reversed(self.frames):
                if chain[0] in frame.function.bindings:
                    return frame.function.bindings[chain[0]]
            return ""
        if len(chain) == 2 and chain[0] == "self" and self.classes:
            return self.classes[-1].attributes.get(chain[1], "")
        return provenance.chain_origin(chain)

    def _bind_origin(self, target: ast.expr, origin: str) -> None:
        if isinstance(target, ast.Name):
            self.frame.function.bindings[target.id] = origin
        elif (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
            and self.classes
        ):
            self.classes[-1].attributes[target.attr] = origin
