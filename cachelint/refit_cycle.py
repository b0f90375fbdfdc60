"""The refit cycle: where a project pushes new weights into a running vLLM engine, what runs before the
engine generates again, and which caches that leaves stale on which release (per the facts).

A weight push is a call that loads new weights into a running engine: vLLM's weight-transfer methods
(`update_weights`, `start_weight_update` / `finish_weight_update`, `start_draft_weight_update`; not
`init_weight_transfer_engine`, which only sets the transfer up), vLLM's weight-sync clients,
`collective_rpc` of a method that loads weights (a worker extension's included), a worker's
`model_runner.model.load_weights`, and a method of a project HTTP client named as a weight update.
From a push the cycle follows what runs before the engine generates again: the rest of the pushing
function and what it calls there, its callers' following statements (MAX_CALLER_DEPTH levels up), the
`__exit__` of a context manager whose `__enter__` pushes, and the lifecycle methods a loop calls around
generation (`finish_generation`, `release`, `sleep`, `wake_up`, `offload*`, `onload*`) of the classes on
the way. A clearing pause right before the push (no generation request in between) counts, and so does a
rebuilt engine, scheduler or KV cache. When no function of the project calls the pushing function (an
endpoint others call), a reset that another entry point of its class or module offers counts: the
caller is expected to call it next (a separate route).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from packaging.version import Version

from cachelint import provenance
from cachelint.facts import CacheEffects, EngineClass, Facts, Scope, load_facts
from cachelint.project import FunctionRef, ProjectIndex
from cachelint.provenance import Kind
from cachelint.summary import CallSite, FunctionSummary, Gate, ResetEvent

PREFIX = "prefix"
ENCODER = "encoder"
CACHES = (PREFIX, ENCODER)

NATIVE_PUSHES = frozenset(
    {"update_weights", "start_weight_update", "finish_weight_update", "start_draft_weight_update"}
)
# Names only vLLM's weight transfer uses: an object of unknown class named like an engine counts.
DISTINCT_PUSHES = NATIVE_PUSHES - {"update_weights"}
SYNC_CLIENTS = frozenset({"HTTPVLLMWeightSyncClient", "RayVLLMWeightSyncClient"})
WORKER_LOADERS = frozenset({"load_weights", "reload_weights"})
SETUP = frozenset({"init_weight_transfer_engine"})
LIFECYCLE_PREFIXES = ("finish_generation", "release", "sleep", "wake_up", "offload", "onload")
EXITS = {"__enter__": "__exit__", "__aenter__": "__aexit__"}
# Calls that build the KV cache or the scheduler anew: every cache starts empty after them.
REBUILDS = frozenset({"initialize_kv_cache", "_initialize_kv_caches", "init_cache_engine", "reinitialize_kv_cache"})
MAX_CALLER_DEPTH = 3
RESET_ENTRY_WORDS = ("reset", "clear", "flush", "invalidate")

ENGINE_LEVEL_CLASSES = (EngineClass.ASYNC_LLM, EngineClass.LLM_ENGINE, EngineClass.LLM)


@dataclass(frozen=True)
class Push:
    """A call that loads new weights into a running engine."""

    ref: FunctionRef
    call: CallSite
    kind: str  # native, rpc, driver-worker, sync-client, client
    engine: str  # the source of the engine the weights go to ("" when not known)
    engine_class: EngineClass | None
    why: str  # why the call is taken for a push into vLLM, for a note

    @property
    def shown(self) -> str:
        call = self.call
        if call.via == "rpc":
            return f'{call.receiver}.collective_rpc("{call.name}", ...)'
        return f"{call.receiver}.{call.name}(...)" if call.receiver else f"{call.name}(...)"


@dataclass(frozen=True)
class Step:
    """A reset, pause or sleep on a refit cycle, with the function holding it."""

    ref: FunctionRef
    event: ResetEvent


@dataclass(frozen=True)
class Cycle:
    """What runs between a push and the next generation that may clear a cache."""

    push: Push
    steps: tuple[Step, ...]
    rebuilt: bool  # an engine, scheduler or KV cache is built anew on the way

    def cleared(self, facts: Facts, effects: CacheEffects, release: Version) -> frozenset[str]:
        if self.rebuilt:
            return frozenset(CACHES)
        found: set[str] = set()
        for step in self.steps:
            found |= clears(step.event, facts, effects, release)
        return frozenset(found)

    def resets_prefix(self, facts: Facts) -> bool:
        """Whether an engine-level prefix reset runs on the cycle (CL003 judges what it leaves)."""
        return any(
            step.event.method == "reset_prefix_cache" and is_engine_level(facts, step.event) for step in self.steps
        )


# -- judging events ---------------------------------------------------------------------------------


def assumed_class(event: ResetEvent) -> EngineClass:
    """The receiver's class, or the likeliest engine class for an unknown receiver
    (`provenance.likeliest_engine`)."""
    if event.receiver_class:
        return EngineClass(event.receiver_class)
    return provenance.likeliest_engine(event.chain, event.awaited or event.in_async)


def is_worker_side(event: ResetEvent) -> bool:
    if event.via == "rpc":
        return True
    return bool(event.receiver_class) and EngineClass(event.receiver_class).is_worker_side


def is_engine_level(facts: Facts, event: ResetEvent) -> bool:
    """A reset that clears the scheduler's and the workers' records (or an HTTP route that does)."""
    if event.via in ("http", "dispatch"):
        return True
    if event.via not in ("direct", "alias") or is_worker_side(event):
        return False
    if not event.receiver_class:
        return True
    fact = facts.get(event.method, event.receiver_class)
    return fact is None or fact.scope is Scope.ENGINE


def looks_like_engine(event: ResetEvent) -> bool:
    """A receiver known to be a vLLM engine, or named like one (`self.engine`, `llm`, `engine_client`).

    `sleep` is too common a name to trust otherwise: `asyncio.sleep`, `time.sleep`, a replica's own
    `sleep()` are not engine sleeps."""
    if event.receiver_class:
        return EngineClass(event.receiver_class) in ENGINE_LEVEL_CLASSES
    return bool(event.chain) and provenance.named_like_engine(event.chain[-1])


_FALSE_TEXTS = frozenset({"false", "0", "0.0", "off", "no", "n", "f"})  # as FastAPI reads a bool


def route(method: str) -> str:
    """vLLM's API server route for an engine method."""
    return "/pause" if method == "pause_generation" else f"/{method}"


def argument(event: ResetEvent, name: str) -> str | None:
    """The source text of the argument `name` the call passes, or None. An HTTP request to a vLLM route
    that reads `name` from the query string only (`/pause`, `/sleep`: the facts' `query_params`) passes
    nothing through a JSON body: vLLM's server ignores it there."""
    value = event.keywords.get(name)
    if value is None or event.via != "http" or event.sent_in.get(name) != "body":
        return value
    fact = load_facts().route(route(event.method))
    return None if fact is not None and fact.param_source(name) == "query" else value


def is_false(text: str) -> bool:
    """Whether an argument's source text is a false literal (`False`, `"false"`, `0`, ...)."""
    return text.strip("\"'").lower() in _FALSE_TEXTS


def clears_caches(event: ResetEvent) -> bool:
    """An engine pause or sleep that clears the caches as a side effect (on the releases where it does; an
    HTTP request's arguments read where vLLM's route reads them)."""
    if event.method not in ("pause_generation", "sleep") or is_worker_side(event):
        return False
    if event.method == "sleep" and event.via != "http" and not looks_like_engine(event):
        return False
    if event.via not in ("direct", "alias", "http"):
        return False
    if event.method == "pause_generation":
        clear_cache = argument(event, "clear_cache")
        return clear_cache is None or not is_false(clear_cache)
    level = argument(event, "level") or (event.positional[0] if event.positional and event.via != "http" else "1")
    return not is_false(level)


_COMPARE = {
    ">=": lambda release, threshold: release >= threshold,
    ">": lambda release, threshold: release > threshold,
    "<=": lambda release, threshold: release <= threshold,
    "<": lambda release, threshold: release < threshold,
    "==": lambda release, threshold: release == threshold,
    "!=": lambda release, threshold: release != threshold,
}


def gates_allow(gates: list[Gate], release: Version) -> bool:
    """Whether every version gate around a call lets it run on `release` (a string comparison is read
    as the version comparison it meant)."""
    for gate in gates:
        compare = _COMPARE.get(gate.operator)
        if compare is not None and not compare(release, Version(gate.threshold)):
            return False
    return True


def clears(event: ResetEvent, facts: Facts, effects: CacheEffects, release: Version) -> frozenset[str]:
    """The caches (PREFIX, ENCODER) `event` clears at engine level on `release`."""
    if not gates_allow(event.gates, release):
        return frozenset()
    if event.method == "reset_prefix_cache" and is_engine_level(facts, event):
        return frozenset({PREFIX})
    if event.method == "reset_encoder_cache" and is_engine_level(facts, event):
        first = facts.first_release(event.method, assumed_class(event)) if event.via != "http" else None
        return frozenset({ENCODER}) if first is None or release >= first else frozenset()
    if not clears_caches(event):
        return frozenset()
    if event.via == "http":
        effect = effects.implicit_clear("POST /pause", "OpenAI API server route") if event.method != "sleep" else None
        effect = effect or effects.implicit_clear(event.method, EngineClass.ASYNC_LLM)
    else:
        effect = effects.implicit_clear(event.method, assumed_class(event))
    if effect is None:
        return frozenset()
    return frozenset(cache for cache in CACHES if effect.clears_on(cache, release))


# -- what the next generation needs -------------------------------------------------------------------

# `enable_prefix_caching=False`, `"enable_prefix_caching": True`, `enable_prefix_caching: false` (a config
# file), `no_enable_prefix_caching: bool = True` (a config class's default, the opposite way round).
_PREFIX_SETTING = re.compile(rb"""enable_prefix_caching["']?\s*(?::\s*[\w| ]+?\s*=|[:=])\s*(True|False|true|false)\b""")


def prefix_caching_setting(files: Iterable[tuple[str, bytes]]) -> bool | None:
    """Whether the project turns prefix caching on (True) or off (False) where it sets it to a literal (a
    keyword, a dict or config key, a config class's default); None when it never does, or does both ways."""
    found: set[bool] = set()
    for _, raw in files:
        if b"enable_prefix_caching" not in raw:
            continue
        for match in _PREFIX_SETTING.finditer(raw):
            negated = raw[max(match.start() - 3, 0) : match.start()] == b"no_"
            found.add((match[1].lower() == b"true") != negated)
    return found.pop() if len(found) == 1 else None


_ENGINE_BUILT = re.compile(
    rb"\b(?:LLM|AsyncLLM\.from_(?:vllm_config|engine_args)|(?:Async)?EngineArgs|LLMEngine\.from_engine_args)\("
)


def builds_engine(raw: bytes) -> bool:
    """Whether a file builds a vLLM engine itself (`LLM(...)`, `AsyncEngineArgs(...)`, ...): its own
    prefix-caching setting, or vLLM's default where it sets none, is the one its pushes meet."""
    return _ENGINE_BUILT.search(raw) is not None


def salts_prefix(files: Iterable[tuple[str, bytes]]) -> bool:
    """Whether requests carry a `cache_salt` (per weight version, it isolates prefix blocks, never encoder
    outputs), as far as `files` (those of the pushing code) show."""
    return any(b"cache_salt" in raw for _, raw in files)


@dataclass(frozen=True)
class Needs:
    """What the next generation needs cleared after a weight update, per release."""

    effects: CacheEffects
    prefix_setting: bool | None
    multimodal: bool
    salted: bool

    def on(self, release: Version) -> frozenset[str]:
        needed = set()
        prefix = self.effects.stale_cache(PREFIX)
        default_on = prefix.default_on_since is None or release >= prefix.default_on_since
        prefix_on = self.prefix_setting if self.prefix_setting is not None else default_on
        if prefix_on and release >= prefix.since and not self.salted:
            needed.add(PREFIX)
        if self.multimodal and release >= self.effects.stale_cache(ENCODER).since:
            needed.add(ENCODER)
        return frozenset(needed)


# -- pushes -------------------------------------------------------------------------------------------


def pushes(project: ProjectIndex, refit_names: frozenset[str]) -> list[Push]:
    """Every weight push of the project, in file and line order; of several pushes in one function, the
    last (what follows it follows them all). Computed once per index."""

    def find() -> list[Push]:
        found = []
        for ref in project.functions():
            if ref.file.engine == "other":
                continue
            own = [push for call in ref.function.calls if (push := _push(project, ref, call, refit_names))]
            if own:
                found.append(max(own, key=lambda push: (push.call.span.line, push.call.span.col)))
        return sorted(found, key=lambda push: (push.ref.file.path, push.call.span.line, push.call.span.col))

    return project.memoized(f"refit:pushes:{','.join(sorted(refit_names))}", find)


def _push(project: ProjectIndex, ref: FunctionRef, call: CallSite, refit_names: frozenset[str]) -> Push | None:
    name = call.name
    if name in SETUP or name.startswith("init"):
        return None
    function = ref.function
    if call.via == "rpc":
        loads = name in WORKER_LOADERS or name in NATIVE_PUSHES or name in refit_names
        targets = project.resolve(ref.file, function, call)
        if not loads and not any(_loads_weights(project, target) for target in targets):
            return None
        cls = EngineClass(call.receiver_class) if call.receiver_class else None
        if cls is not None and cls.is_worker_side:
            return Push(ref, call, "rpc", "", None, f'`collective_rpc("{name}")` loads weights in every worker')
        engine_cls = cls or provenance.likeliest_engine(call.chain, call.awaited or function.is_async)
        return Push(ref, call, "rpc", call.receiver, engine_cls, f'`collective_rpc("{name}")` loads weights')
    if call.via != "direct" or not (name in NATIVE_PUSHES or name in refit_names or "weight" in name):
        return None  # judged by name first: a receiver's provenance costs more than the rest of the search
    if name == "load_weights":
        return _driver_worker_push(project, ref, call)
    found = provenance.receiver(project, ref.file, function, call)
    origin, _ = provenance.find_origin(project, ref.file, function, call.chain)
    if origin and provenance.origin_class_name(origin)[1] in SYNC_CLIENTS and "weight" in name:
        client = provenance.origin_class_name(origin)[1]
        return Push(ref, call, "sync-client", "", None, f"`{call.receiver}` is vLLM's {client}")
    if found.engine_class is not None and found.engine_class.is_worker_side:
        return None  # inside a worker: the collective_rpc that runs it is the push
    if name in NATIVE_PUSHES and found.kind is Kind.VLLM:
        return Push(ref, call, "native", call.receiver, found.engine_class, f"receiver: {found.why}")
    if found.kind is Kind.UNKNOWN and name in NATIVE_PUSHES and call.chain:
        engine_like = provenance.named_like_engine(call.chain[-1])
        evidence = provenance.vllm_evidence(project, ref.file, function)
        distinct = name in DISTINCT_PUSHES or not project.resolve(ref.file, function, call)
        if engine_like and evidence and distinct:
            engine_cls = provenance.likeliest_engine(call.chain, call.awaited or function.is_async)
            why = f"receiver: `{call.receiver}` is not known to be vLLM's, but {evidence}"
            return Push(ref, call, "native", call.receiver, engine_cls, why)
    if found.kind is Kind.PROJECT and not found.by_name and found.project_class is not None:
        cls_name = found.project_class.cls.name
        if (name in refit_names or name in NATIVE_PUSHES) and provenance.posts_http(project, cls_name):
            why = f"{found.why}, an HTTP client of a vLLM server"
            return Push(ref, call, "client", "", None, why)
    return None


def _driver_worker_push(project: ProjectIndex, ref: FunctionRef, call: CallSite) -> Push | None:
    """`llm.llm_engine.model_executor.driver_worker.model_runner.model.load_weights(...)`, or the model
    held in a local first: a runner reached through the engine, not a worker's own (a worker's load is
    pushed by the collective_rpc that runs it)."""
    chain = list(call.chain)
    if "model_runner" not in chain:
        origin, _ = provenance.find_origin(project, ref.file, ref.function, chain)
        if not origin.startswith("get:"):
            return None
        chain = origin[4:].split(".")
        if "model_runner" not in chain:
            return None
    cls = ref.file.class_named(ref.function.cls) if ref.function.cls else None
    if cls is not None and project.is_worker_extension(cls):
        return None
    if not {"driver_worker", "model_executor", "llm_engine"} & set(chain):
        return None  # a worker's own runner (`self.model_runner`): its caller's collective_rpc is the push
    why = "a worker's model runner loads the weights into the running engine"
    for accessor, engine_cls in (("llm_engine", EngineClass.LLM), ("model_executor", EngineClass.LLM_ENGINE)):
        if accessor in chain:
            at = chain.index(accessor)
            engine = ".".join(chain[:at])
            if engine and "()" not in chain[:at]:
                return Push(ref, call, "driver-worker", engine, engine_cls, why)
    return Push(ref, call, "driver-worker", "", None, why)


def _loads_weights(project: ProjectIndex, target: FunctionRef) -> bool:
    """Whether a worker-side function loads weights: it, or what it calls, calls `load_weights`."""
    return project.memoized(
        f"refit:loads:{target.key}",
        lambda: any(
            any(call.name in WORKER_LOADERS for call in reached.ref.function.calls)
            for reached in project.reachable(target, max_depth=3)
        ),
    )


# -- what follows a push ------------------------------------------------------------------------------


def cycle(project: ProjectIndex, push: Push, refit_names: frozenset[str]) -> Cycle:
    """The resets, pauses and sleeps that run between `push` and the next generation (computed once)."""
    return project.memoized(
        f"refit:cycle:{push.ref.key}:{push.call.span}", lambda: _Walk(project).cycle(push, refit_names)
    )


def _after(item: ResetEvent | CallSite, line: int, col: int) -> bool:
    return (item.span.line, item.span.col) > (line, col)


class _Walk:
    def __init__(self, project: ProjectIndex) -> None:
        self.project = project
        self.steps: dict[tuple[str, str, int, int], Step] = {}
        self.rebuilt = False
        self.visited: set[tuple[str, str]] = set()

    def cycle(self, push: Push, refit_names: frozenset[str]) -> Cycle:
        span = push.call.span
        self._from(push.ref, span.end_line, span.end_col, span.line, 0)
        # A weight-update root that reaches the push: what else it reaches runs around the push too (the
        # order of the functions of a path is not known, and layers linked through Ray or HTTP are not
        # followed up from the push).
        for root in project_roots_reaching(self.project, push.ref, refit_names):
            self._reach(root)
        if not self.steps and not self.rebuilt and not _callers(self.project, push.ref):
            self._siblings(push.ref)
        return Cycle(push, tuple(self.steps.values()), self.rebuilt)

    def _add(self, ref: FunctionRef, event: ResetEvent) -> None:
        if event.method in ("reset_prefix_cache", "reset_encoder_cache", "pause_generation", "sleep"):
            self.steps[(ref.key[0], ref.key[1], event.span.line, event.span.col)] = Step(ref, event)

    def _reach(self, ref: FunctionRef) -> None:
        """Everything a call of `ref` runs."""
        for reached in self.project.reachable(ref):
            if reached.ref.key in self.visited:
                continue
            self.visited.add(reached.ref.key)
            for event in reached.ref.function.resets:
                self._add(reached.ref, event)
            if any(call.name in REBUILDS for call in reached.ref.function.calls):
                self.rebuilt = True

    def _from(self, ref: FunctionRef, line: int, col: int, start_line: int, depth: int) -> None:
        """What runs in `ref` after the point (line, col), where the push (or the call leading to it)
        started at `start_line`; then in its callers."""
        function = ref.function
        for event in function.resets:
            if _after(event, line, col):
                self._add(ref, event)
            elif (
                event.span.end_line < start_line
                and clears_caches(event)
                and not _generates_between(function, event.span.line, start_line)
            ):
                self._add(ref, event)  # a clearing pause right before the push
        for call in function.calls:
            if not _after(call, line, col):
                if call.span.end_line < start_line and not _generates_between(function, call.span.line, start_line):
                    self._pauses_in(call, ref)
                continue
            if call.name in REBUILDS:
                self.rebuilt = True
            for target in self.project.resolve(ref.file, function, call):
                self._reach(target)
        self._lifecycle(ref)
        if depth >= MAX_CALLER_DEPTH:
            return
        for caller, call in _callers(self.project, ref):
            self._from(caller, call.span.end_line, call.span.end_col, call.span.line, depth + 1)

    def _pauses_in(self, call: CallSite, ref: FunctionRef) -> None:
        """The clearing pauses and sleeps a call made right before the push runs."""
        for target in self.project.resolve(ref.file, ref.function, call):
            for reached in self.project.reachable(target, max_depth=3):
                for event in reached.ref.function.resets:
                    if clears_caches(event):
                        self._add(reached.ref, event)

    def _lifecycle(self, ref: FunctionRef) -> None:
        """The lifecycle methods of the function's class, and the exit of the context manager it enters."""
        function = ref.function
        if not function.cls:
            return
        for method in _class_methods(self.project, ref):
            name = method.function.name
            if name.lstrip("_").startswith(LIFECYCLE_PREFIXES) or name == EXITS.get(function.name):
                self._reach(method)

    def _siblings(self, ref: FunctionRef) -> None:
        """Resets another entry point of the pushing function's class or module offers: one named for
        resetting (`reset_caches`, `clear_kv_cache`), which nothing in the project calls."""
        function = ref.function
        if function.cls:
            others = _class_methods(self.project, ref)
        else:
            others = [FunctionRef(ref.file, other) for other in ref.file.functions if not other.cls]
        for other in others:
            named = other.function.name.lower()
            resetting = any(word in named for word in RESET_ENTRY_WORDS)
            if other.key != ref.key and resetting and not _callers(self.project, other):
                self._reach(other)


def project_roots_reaching(project: ProjectIndex, ref: FunctionRef, refit_names: frozenset[str]) -> list[FunctionRef]:
    """The weight-update roots whose paths reach `ref`."""
    reached = project.memoized(
        f"refit:root-reach:{','.join(sorted(refit_names))}",
        lambda: {
            root.key: {item.ref.key for item in project.reachable(root)} for root in project.refit_roots(refit_names)
        },
    )
    return [root for root in project.refit_roots(refit_names) if ref.key in reached[root.key]]


def _generates_between(function: FunctionSummary, first: int, last: int) -> bool:
    return any(first <= request.line <= last for request in function.requests)


def _class_methods(project: ProjectIndex, ref: FunctionRef) -> list[FunctionRef]:
    """The methods of the function's class (in its file) and of its project base classes."""
    cls = ref.function.cls
    own = [FunctionRef(ref.file, function) for function in ref.file.functions if function.cls == cls]
    return own + [base for name in project.base_classes(cls) for base in _methods_of(project, name)]


def _methods_of(project: ProjectIndex, cls: str) -> Iterator[FunctionRef]:
    for (owner, _), refs in project.methods_by_class.items():
        if owner == cls:
            yield from refs


def _callers(project: ProjectIndex, ref: FunctionRef) -> list[tuple[FunctionRef, CallSite]]:
    """The project's calls that may run `ref`, with the function making each."""

    def find() -> list[tuple[FunctionRef, CallSite]]:
        by_name = _calls_by_name(project)
        found = []
        for name in ref.function.called_as():
            for caller, call in by_name.get(name, []):
                if any(target.key == ref.key for target in project.resolve(caller.file, caller.function, call)):
                    found.append((caller, call))
        return found

    return project.memoized(f"refit:callers:{ref.key}", find)


def _calls_by_name(project: ProjectIndex) -> dict[str, list[tuple[FunctionRef, CallSite]]]:
    def find() -> dict[str, list[tuple[FunctionRef, CallSite]]]:
        index: dict[str, list[tuple[FunctionRef, CallSite]]] = {}
        for ref in project.functions():
            for call in ref.function.calls:
                index.setdefault(call.name, []).append((ref, call))
        return index

    return project.memoized("refit:calls-by-name", find)


def stale_releases(
    found: Cycle, needs: Needs, facts: Facts, effects: CacheEffects, releases: Iterable[Version]
) -> dict[str, list[Version]]:
    """Per cache, the releases on which it is needed and nothing on the cycle clears it."""
    stale: dict[str, list[Version]] = {cache: [] for cache in CACHES}
    for release in releases:
        for cache in needs.on(release) - found.cleared(facts, effects, release):
            stale[cache].append(release)
    return {cache: releases for cache, releases in stale.items() if releases}
