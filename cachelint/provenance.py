"""Receiver provenance: what the object a call is made on is, and why that is known.

A receiver is one of four things:
- a vLLM class: built from a `vllm` import (`LLM(...)`, `AsyncLLM.from_vllm_config(...)`), annotated as
  one (`engine: EngineClient`), or reached through a known accessor (`app.state.engine_client`,
  `llm.llm_engine`, `.model_runner`, ...);
- a project class: built from a class the project defines (`RemoteEngineClient(...)`), `self` in a
  project class, or an unknown object whose method the project defines; the method's body then says
  what the call does (forwards to vLLM, posts to an HTTP route, or neither);
- SGLang's (`Kind.SGLANG`, with its SGLang class): built from or annotated as an `sglang` class (`Engine`,
  `TokenizerManager`), `self` in a subclass of one, reached as `.tokenizer_manager`, or used in a module
  that imports SGLang and not vLLM;
- another engine: built from TensorRT-LLM or LMDeploy, or used in a module (or a class) that imports
  one of them and not vLLM;
- unknown: a finding on it needs evidence that vLLM is the engine (`vllm_evidence`).

The walk records how names and `self.` attributes were bound, as origin strings (`bind_*`); this
module reads them: `local_class` without the project (the summary's `receiver_class`), `receiver`
with it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cachelint.facts import EngineClass, SglangClass

if TYPE_CHECKING:
    from collections.abc import Iterable

    from cachelint.project import FunctionRef, ProjectIndex
    from cachelint.summary.model import CallSite, ClassSummary, FileSummary, FunctionSummary, HasattrProbe, ResetEvent

ENGINE_BASES = {
    "AsyncLLM": EngineClass.ASYNC_LLM,
    "LLM": EngineClass.LLM,
    "LLMEngine": EngineClass.LLM_ENGINE,
}
WORKER_BASES = frozenset({"Worker", "WorkerBase", "WorkerWrapperBase", "GPUWorker", "WorkerExtension"})
CONSTRUCTORS = {
    "AsyncLLM": EngineClass.ASYNC_LLM,
    "AsyncLLMEngine": EngineClass.ASYNC_LLM,
    "LLM": EngineClass.LLM,
    "LLMEngine": EngineClass.LLM_ENGINE,
    "EngineCore": EngineClass.ENGINE_CORE,
    "EngineCoreProc": EngineClass.ENGINE_CORE,
}
ANNOTATIONS = CONSTRUCTORS | {
    "EngineClient": EngineClass.ASYNC_LLM,
    "AsyncEngineClient": EngineClass.ASYNC_LLM,
}
# The vLLM object an attribute of this name is, wherever it is reached from.
CHAIN_CLASSES = {
    "model_runner": EngineClass.MODEL_RUNNER,
    "driver_worker": EngineClass.WORKER,
    "worker": EngineClass.WORKER,
    "model_executor": EngineClass.EXECUTOR,
    "executor": EngineClass.EXECUTOR,
    "llm_engine": EngineClass.LLM_ENGINE,
    "scheduler": EngineClass.SCHEDULER,
    "encoder_cache_manager": EngineClass.ENCODER_CACHE_MANAGER,
}
# vLLM's API server keeps its engine at `app.state.engine_client` (an EngineClient: AsyncLLM's protocol).
ACCESSORS = {("state", "engine_client"): EngineClass.ASYNC_LLM}
OTHER_ENGINES = ("tensorrt_llm", "sglang", "lmdeploy")
# SGLang's objects by class name (a class of the module `sglang.srt.entrypoints.engine` is its Engine), and
# by the attribute an object is reached through.
SGLANG_CLASSES = {
    "Engine": SglangClass.ENGINE,
    "TokenizerManager": SglangClass.TOKENIZER_MANAGER,
    "Scheduler": SglangClass.SCHEDULER,
}
SGLANG_CHAIN = {"tokenizer_manager": SglangClass.TOKENIZER_MANAGER}
# Names an annotation wraps a class in.
TYPING_NAMES = frozenset(
    {"Optional", "Union", "None", "Any", "Type", "type", "ClassVar", "Final", "Annotated", "Awaitable", "Coroutine"}
)


def module_engine(module: str) -> str:
    """`vllm` for a vLLM module (or a `vllm_*` plugin), `sglang` for SGLang's, `other` for another
    engine's, else ``."""
    top = module.split(".")[0]
    if top == "vllm" or top.startswith("vllm_"):
        return "vllm"
    if top == "sglang":
        return "sglang"
    return "other" if top in OTHER_ENGINES else ""


def is_other_engine(engine: str) -> bool:
    """Whether `module_engine` / `class_engine` named an engine that is not vLLM."""
    return engine in ("sglang", "other")


def resolve_dotted(dotted: str, imports: dict[str, str]) -> str:
    """`LLM` -> `vllm.LLM` when the module did `from vllm import LLM`."""
    head, _, rest = dotted.partition(".")
    if head in imports:
        return f"{imports[head]}.{rest}" if rest else imports[head]
    return dotted


# -- origins: how a name or attribute was bound ----------------------------------------------------


def call_origin(dotted: str) -> str:
    """A value built by calling `dotted` (a class, or a class's `from_*` constructor); "" otherwise."""
    parts = dotted.split(".")
    if parts[-1][:1].isupper() or (len(parts) >= 2 and parts[-1].startswith("from_") and parts[-2][:1].isupper()):
        return f"call:{dotted}"
    return ""


def type_origin(dotted: str) -> str:
    return f"type:{dotted}" if dotted[:1].isupper() or "." in dotted else ""


def chain_origin(chain: list[str]) -> str:
    """A value read through an attribute chain that names a vLLM object (`llm.llm_engine`)."""
    return f"get:{'.'.join(chain)}" if chain_class(chain) is not None else ""


def resolve_origin(origin: str, imports: dict[str, str]) -> str:
    """The origin with its class name resolved through the module's imports."""
    kind, _, dotted = origin.partition(":")
    if kind in ("call", "type"):
        return f"{kind}:{resolve_dotted(dotted, imports)}"
    return origin


def origin_class_name(origin: str) -> tuple[str, str]:
    """(module, class name) an origin names: `call:vllm.AsyncLLM.from_vllm_config` -> (`vllm`, `AsyncLLM`)."""
    kind, _, dotted = origin.partition(":")
    if kind not in ("call", "type"):
        return "", ""
    parts = dotted.split(".")
    if kind == "call" and len(parts) >= 2 and parts[-1].startswith("from_"):
        parts = parts[:-1]
    return ".".join(parts[:-1]), parts[-1]


def origin_class(origin: str, local_classes: frozenset[str] = frozenset()) -> EngineClass | None:
    """The vLLM class an origin names, judged without the project: a vLLM class name not imported from
    another engine and not a class of the module itself."""
    if origin.startswith("get:"):
        return chain_class(origin[4:].split("."))
    module, name = origin_class_name(origin)
    if not name or is_other_engine(module_engine(module)) or (not module and name in local_classes):
        return None
    table = CONSTRUCTORS if origin.startswith("call:") else ANNOTATIONS
    return table.get(name)


def named_like_engine(name: str) -> bool:
    """A name an engine is held under (`self.engine`, `llm`, `engine_client`, `inference_engine`)."""
    lowered = name.lower()
    return "engine" in lowered or "llm" in lowered


def named_like_client(name: str) -> bool:
    """A name a client of a server is held under (`self.vllm_client`), not vLLM's `EngineClient`."""
    lowered = name.lower()
    return "client" in lowered and "engine" not in lowered


def likeliest_engine(chain: list[str], is_async: bool) -> EngineClass:
    """The likeliest vLLM class of an object of unknown class: an `AsyncLLM` in async code, a `vllm.LLM`
    when named like one (`self.llm`, `rollout_llm`: the usual spelling of the sync class), else an
    `LLMEngine`."""
    if is_async:
        return EngineClass.ASYNC_LLM
    last = chain[-1].lower() if chain else ""
    return EngineClass.LLM if last == "llm" or last.endswith("_llm") else EngineClass.LLM_ENGINE


def defined_by_no_class(project: ProjectIndex, methods: Iterable[str]) -> list[str]:
    """The methods no class of the project defines."""
    return [
        method for method in methods if not any(ref.function.cls for ref in project.functions_by_name.get(method, []))
    ]


def chain_class(chain: list[str]) -> EngineClass | None:
    """The vLLM class an attribute chain reaches by its last names (`x.llm_engine`, `app.state.engine_client`)."""
    if not chain:
        return None
    last = chain[-1]
    if last == "engine_core":
        inner = len(chain) >= 2 and chain[-2] == "engine_core"
        return EngineClass.ENGINE_CORE if inner else EngineClass.ENGINE_CORE_CLIENT
    if last in CHAIN_CLASSES:
        return CHAIN_CLASSES[last]
    if len(chain) >= 2:
        return ACCESSORS.get((chain[-2], last))
    return None


def local_class(
    chain: list[str],
    scopes: list[dict[str, str]],
    current: ClassSummary | None,
    local_classes: frozenset[str],
) -> EngineClass | None:
    """Which vLLM class a receiver is, from the module alone: how it was built, annotated or reached.
    `scopes`: the bindings open around it, innermost last; `current`: the class it is in."""
    if not chain:
        return None
    reached = chain_class(chain)
    if reached is not None:
        return reached
    if len(chain) == 1:
        if chain[0] == "self" and current is not None:
            if current.engine_class:
                return EngineClass(current.engine_class)
            return EngineClass.WORKER if current.worker_like else None
        for scope in reversed(scopes):
            if chain[0] in scope:
                return origin_class(scope[chain[0]], local_classes)
        return None
    if len(chain) == 2 and chain[0] == "self" and current is not None and chain[1] in current.attributes:
        return origin_class(current.attributes[chain[1]], local_classes)
    return None


# -- receivers within the project -------------------------------------------------------------------


class Kind(str, enum.Enum):
    VLLM = "vLLM"
    SGLANG = "SGLang"
    PROJECT = "project"
    OTHER_ENGINE = "another engine"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProjectClass:
    file: FileSummary
    cls: ClassSummary


@dataclass(frozen=True)
class Receiver:
    """What a call's receiver is, and why (a phrase for a note: "built by `LLM(...)`")."""

    kind: Kind
    why: str
    engine_class: EngineClass | None = None
    project_class: ProjectClass | None = None
    by_name: bool = False  # a project class only because the project defines the method
    sglang_class: SglangClass | None = None

    @property
    def is_vllm(self) -> bool:
        return self.kind is Kind.VLLM

    @property
    def is_other_engine(self) -> bool:
        """SGLang's or another engine's object: never vLLM's."""
        return self.kind in (Kind.SGLANG, Kind.OTHER_ENGINE)


def method_of(item: ResetEvent | CallSite | HasattrProbe) -> str:
    name = getattr(item, "method", None) or getattr(item, "name", None) or getattr(item, "attribute", "")
    return str(name)


def receiver(
    project: ProjectIndex, file: FileSummary, function: FunctionSummary, item: ResetEvent | CallSite | HasattrProbe
) -> Receiver:
    """The provenance of `item`'s receiver (computed once per item and index)."""
    key = f"provenance:{id(file)}:{id(item)}"
    return project.memoized(key, lambda: _receiver(project, file, function, item))


def _receiver(
    project: ProjectIndex, file: FileSummary, function: FunctionSummary, item: ResetEvent | CallSite | HasattrProbe
) -> Receiver:
    """Known origins first; an unknown object whose method the project defines is taken for the
    project's, unless the module or class says vLLM is the engine."""
    chain = item.chain
    text = item.receiver or "self"
    origin, where = find_origin(project, file, function, chain)
    if item.receiver_class:
        cls = EngineClass(item.receiver_class)
        return Receiver(Kind.VLLM, _vllm_reason(text, chain, cls, origin, where), cls)
    if getattr(item, "via", "") in ("rpc", "http", "dispatch"):
        return Receiver(Kind.UNKNOWN, "")
    reached = next((SGLANG_CHAIN[name] for name in reversed(chain) if name in SGLANG_CHAIN), None)
    if reached is not None:
        at = next(name for name in reversed(chain) if name in SGLANG_CHAIN)
        return Receiver(Kind.SGLANG, f"`{text}` is SGLang's {reached.value} (reached as `.{at}`)", sglang_class=reached)
    if origin:
        module, name = origin_class_name(origin)
        engine = module_engine(module)
        if engine == "sglang":
            how = "built by" if origin.startswith("call:") else "annotated"
            sglang_class = SGLANG_CLASSES.get(name, SglangClass.ENGINE)
            why = f"`{text}` is SGLang's {sglang_class.value}, {how} `{name}` from `{module}`"
            return Receiver(Kind.SGLANG, why, sglang_class=sglang_class)
        if engine == "other":
            return Receiver(Kind.OTHER_ENGINE, f"`{text}` is built by `{name}` from `{module}`")
        target = project_class(project, where or file, origin)
        if target is not None:
            found = _project_receiver(project, target, method_of(item), f"`{text}` is the project's")
            if found is not None:
                return found
    if chain == ["self"] and function.cls:
        own = file.class_named(function.cls)
        if own is not None:
            engine = class_engine(file, own)
            if engine == "sglang":
                why = f"`self` is SGLang's Engine (`{own.name}` subclasses it)"
                return Receiver(Kind.SGLANG, why, sglang_class=SglangClass.ENGINE)
            if engine == "other":
                return Receiver(Kind.OTHER_ENGINE, f"`{own.name}` subclasses another engine's class")
            found = _project_receiver(project, ProjectClass(file, own), method_of(item), "`self` is the project's")
            if found is not None:
                return found
    if file.engine == "other":
        if file.imports_sglang:
            return Receiver(Kind.SGLANG, "this module imports SGLang and not vLLM", sglang_class=SglangClass.ENGINE)
        return Receiver(Kind.OTHER_ENGINE, "this module imports another engine and not vLLM")
    enclosing = file.class_named(function.cls) if function.cls else None
    if enclosing is not None and is_other_engine(class_engine(file, enclosing)):
        return Receiver(Kind.OTHER_ENGINE, f"`{enclosing.name}` subclasses another engine's class")
    method = method_of(item)
    defined = [ref for ref in project.functions_by_name.get(method, []) if ref.function.cls]
    if defined and chain[:1] not in (["self"], ["cls"], ["super"]) and not vllm_evidence(project, file, function):
        owner = _nearest_class(file, defined)
        return Receiver(
            Kind.PROJECT,
            f"`{text}` is not known, and the project defines `{owner.function.qualname}` ({_located_ref(owner)})",
            project_class=ProjectClass(owner.file, owner.file.class_named(owner.function.cls) or _stub(owner)),
            by_name=True,
        )
    return Receiver(Kind.UNKNOWN, "")


def _project_receiver(project: ProjectIndex, target: ProjectClass, method: str, lead: str) -> Receiver | None:
    """A project class as a receiver: vLLM's when it subclasses a vLLM engine, the project's when it (or a
    project base) defines the method; None when the method must come from a base outside the project."""
    cls = target.cls
    located = f"`{cls.name}` ({_located(target)})"
    for name in (cls.name, *project.base_classes(cls.name)):
        for owner, summary in project.classes_by_name.get(name, []):
            if summary.engine_class:
                engine = EngineClass(summary.engine_class)
                return Receiver(Kind.VLLM, f"{lead} {located}, a subclass of vLLM's {engine.short}", engine)
            if class_engine(owner, summary) == "sglang":
                why = f"{lead} {located}, a subclass of SGLang's Engine"
                return Receiver(Kind.SGLANG, why, project_class=target, sglang_class=SglangClass.ENGINE)
    if defines(project, cls.name, method):
        return Receiver(Kind.PROJECT, f"{lead} {located}", project_class=target)
    return None


def _stub(ref: FunctionRef) -> ClassSummary:
    from cachelint.summary.model import ClassSummary

    return ClassSummary(ref.function.cls, [], ref.function.span, "", False)


def _nearest_class(file: FileSummary, refs: list[FunctionRef]) -> FunctionRef:
    from cachelint.project import shared_prefix

    return max(refs, key=lambda ref: shared_prefix(file.module, ref.file.module))


def _located(target: ProjectClass) -> str:
    return f"{target.file.path.rsplit('/', 1)[-1]}:{target.cls.span.line}"


def _located_ref(ref: FunctionRef) -> str:
    return f"{ref.file.path.rsplit('/', 1)[-1]}:{ref.function.span.line}"


def _vllm_reason(text: str, chain: list[str], cls: EngineClass, origin: str, where: FileSummary | None) -> str:
    name = cls.short
    if chain_class(chain) is not None:
        return f"`{text}` is vLLM's {name} (reached as `.{chain[-1]}`)"
    if chain == ["self"]:
        return f"`self` is a vLLM {name} (the class subclasses it)"
    kind, _, dotted = origin.partition(":")
    if kind == "call":
        return f"`{text}` is vLLM's {name}, built by `{_short(dotted)}(...)`"
    if kind == "type":
        return f"`{text}` is vLLM's {name}, annotated `{_short(dotted)}`"
    if kind == "get":
        return f"`{text}` is vLLM's {name}, read from `{dotted}`"
    return f"`{text}` is vLLM's {name}"


def _short(dotted: str) -> str:
    parts = dotted.split(".")
    if len(parts) >= 2 and parts[-1].startswith("from_"):
        return ".".join(parts[-2:])
    return parts[-1]


def find_origin(
    project: ProjectIndex, file: FileSummary, function: FunctionSummary, chain: list[str]
) -> tuple[str, FileSummary | None]:
    """How the receiver `chain` was bound, and the file whose imports resolve it: a local of the function
    or of an enclosing one, or a `self.` attribute of its class or of a project base class."""
    if len(chain) == 1 and chain[0] not in ("self", "cls"):
        qualname = function.qualname
        while True:
            scope = file.function(qualname) if qualname != "<module>" else None
            if scope is not None and chain[0] in scope.bindings:
                return scope.bindings[chain[0]], file
            if ".<locals>." not in qualname:
                break
            qualname = qualname.rsplit(".<locals>.", 1)[0]
        module = file.function("<module>")
        if module is not None and chain[0] in module.bindings:
            return module.bindings[chain[0]], file
        return "", None
    if len(chain) == 2 and chain[0] == "self" and function.cls:
        for owner_file, cls in _class_and_bases(project, file, function.cls):
            if chain[1] in cls.attributes:
                return cls.attributes[chain[1]], owner_file
    return "", None


def _class_and_bases(project: ProjectIndex, file: FileSummary, name: str) -> list[tuple[FileSummary, ClassSummary]]:
    own = file.class_named(name)
    found = [(file, own)] if own is not None else []
    for base in project.base_classes(name):
        found.extend(project.classes_by_name.get(base, []))
    return found


def project_class(project: ProjectIndex, file: FileSummary, origin: str) -> ProjectClass | None:
    """The project class an origin builds or annotates: a class of the module itself, or of the module
    (or package) it was imported from, else the project's only class of that name."""
    module, name = origin_class_name(origin)
    candidates = project.classes_by_name.get(name, [])
    if not candidates:
        return None
    if not module:
        for summary, cls in candidates:
            if summary is file:
                return ProjectClass(summary, cls)
    best = max(candidates, key=lambda entry: _module_match(module or file.module, entry[0].module))
    return ProjectClass(*best)


def _module_match(wanted: str, module: str) -> tuple[bool, int]:
    from cachelint.project import shared_prefix

    return (module == wanted or module.startswith(wanted + "."), shared_prefix(wanted, module))


def class_engine(file: FileSummary, cls: ClassSummary) -> str:
    """`vllm`, `sglang` or `other` when the class subclasses an engine's class (its bases' modules), else ``."""
    for base in cls.bases:
        engine = module_engine(resolve_dotted(base, file.imports))
        if engine:
            return engine
    return ""


# -- whose server a route is ---------------------------------------------------------------------------

# Words that name an engine's server in a module path or a class or function name, by engine.
SERVER_WORDS = {"sglang": ("sglang",), "vLLM": ("vllm",), "another engine": ("lmdeploy", "tensorrt", "trtllm")}


def route_receiver(file: FileSummary, function: FunctionSummary, method: str, sole_engine: bool) -> Receiver:
    """Whose server a request to the route `/method` (one of SGLang's route names) goes to, judged by what
    the code around it points at rather than by the route's name, which other engines share (LMDeploy's
    `update_weights_from_distributed`): SGLang's when the module imports SGLang and not vLLM, or the
    nearest of the function, its class (or a base class) and its module that names an engine names
    SGLang (`SGLangClient._post`, `.../sglang_remote.py`), or, with nothing naming an engine,
    `sole_engine` (the project uses SGLang and imports no other engine). Another engine's or vLLM's
    when the module imports it, or the nearest name names it; unknown otherwise."""
    route = f"`/{method}`"
    if file.imports_sglang and file.engine != "vllm":
        why = f"{route} is a route of SGLang's server (this module imports SGLang and not vLLM)"
        return Receiver(Kind.SGLANG, why, sglang_class=SglangClass.HTTP)
    cls = file.class_named(function.cls) if function.cls else None
    named = [function.qualname, *([cls.name, *cls.bases] if cls is not None else []), file.module]
    for text in named:
        lowered = text.lower()
        engine = next((name for name, words in SERVER_WORDS.items() if any(w in lowered for w in words)), "")
        if engine == "sglang":
            why = f"{route} is a route of SGLang's server (`{text}` names SGLang)"
            return Receiver(Kind.SGLANG, why, sglang_class=SglangClass.HTTP)
        if engine:
            kind = Kind.VLLM if engine == "vLLM" else Kind.OTHER_ENGINE
            return Receiver(kind, f"{route} goes to {engine}'s server (`{text}` names it)")
    if file.engine == "vllm":
        return Receiver(Kind.VLLM, f"{route} goes to vLLM's server (this module imports vLLM)")
    if file.engine == "other":
        return Receiver(Kind.OTHER_ENGINE, f"{route} goes to another engine's server (this module imports one)")
    if sole_engine:
        why = f"{route} is a route of SGLang's server (SGLang is the only engine the project imports)"
        return Receiver(Kind.SGLANG, why, sglang_class=SglangClass.HTTP)
    return Receiver(Kind.UNKNOWN, f"nothing says whose server {route} is")


# -- what a project method does ---------------------------------------------------------------------


class Behaviour(str, enum.Enum):
    FORWARDS = "forwards to vLLM"
    POSTS = "posts to an HTTP route"
    NEITHER = "neither"
    MISSING = "not defined"


def methods(project: ProjectIndex, cls: str, method: str) -> list[FunctionRef]:
    """The project's definitions of `cls.method`, in the class or its nearest base that has one."""
    for name in (cls, *project.base_classes(cls)):
        refs = project.methods_by_class.get((name, method), [])
        if refs:
            return list(refs)
    return []


def defines(project: ProjectIndex, cls: str, method: str) -> bool:
    return bool(methods(project, cls, method))


def behaviour(project: ProjectIndex, cls: str, method: str) -> Behaviour:
    """What the project's `cls.method` does with the engine, read from its body."""
    refs = methods(project, cls, method)
    if not refs:
        return Behaviour.MISSING
    for ref in refs:
        for event in [*ref.function.resets, *ref.function.lifecycle]:
            if event.via == "http":
                return Behaviour.POSTS
            if event.receiver_class or ref.file.engine == "vllm":
                return Behaviour.FORWARDS
    return Behaviour.NEITHER


def posts_http(project: ProjectIndex, cls: str) -> bool:
    """Whether the class (or a base) talks to a server over HTTP: one of its methods posts to a route."""
    for name in (cls, *project.base_classes(cls)):
        for _, summary in project.classes_by_name.get(name, []):
            for method in summary.methods:
                for ref in project.methods_by_class.get((name, method), []):
                    if any(event.via == "http" for event in ref.function.resets):
                        return True
    return False


def vllm_evidence(project: ProjectIndex, file: FileSummary, function: FunctionSummary) -> str:
    """Why an unknown receiver may be vLLM's: the module imports vLLM, or its class holds a vLLM object;
    "" when nothing says so."""
    if file.engine == "vllm":
        return "this module imports vllm"
    cls = file.class_named(function.cls) if function.cls else None
    if cls is not None:
        for owner_file, owner in _class_and_bases(project, file, cls.name):
            for attribute, origin in owner.attributes.items():
                if origin_class(origin) is not None:
                    return f"`{cls.name}` holds a vLLM object (`self.{attribute}`)"
            if class_engine(owner_file, owner) == "vllm":
                return f"`{cls.name}` subclasses a vLLM class"
    return ""
