"""The file summary's data model: what one walk over a file records, serializable for the cache.

The summary holds each function's calls (for the project call graph) and its cache-reset events
(which cache, on what receiver, under which version gates), plus the project-level facts the rules
need (worker-extension classes, processor-cache workarounds), with the positions fixes need. The walk
that builds it is in `cachelint.summary.walk`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cachelint.finding import Span
from cachelint.version_tests import VersionTest

RESET_METHODS = frozenset({"reset_prefix_cache", "reset_mm_cache", "reset_encoder_cache"})
PAUSE_METHODS = frozenset({"pause_generation", "sleep"})
# Engine coroutines with no cache effect, recorded (as FunctionSummary.lifecycle) for the await checks:
# resuming, waking up, and the steps of vLLM's weight-transfer API.
WEIGHT_TRANSFER_METHODS = frozenset(
    {
        "init_weight_transfer_engine",
        "start_weight_update",
        "start_draft_weight_update",
        "update_weights",
        "finish_weight_update",
    }
)
LIFECYCLE_METHODS = frozenset({"resume_generation", "wake_up"}) | WEIGHT_TRANSFER_METHODS
# vLLM's methods that load new weights into a running engine (and a worker's `load_weights`): their calls
# keep an anchor, where a fix inserts the resets after the push (cachelint.refit_cycle).
WEIGHT_PUSH_NAMES = frozenset(
    {"update_weights", "start_weight_update", "finish_weight_update", "start_draft_weight_update", "load_weights"}
)
# SGLang's weight-update and cache methods (and routes), recorded as FunctionSummary.sglang.
SGLANG_UPDATES = frozenset(
    {
        "update_weights_from_tensor",
        "update_weights_from_distributed",
        "update_weights_from_disk",
        "update_weights_from_ipc",
    }
)
SGLANG_METHODS = SGLANG_UPDATES | {
    "flush_cache",
    "release_memory_occupation",
    "begin_weight_update",
    "end_weight_update",
}


@dataclass
class Gate:
    """A version test that must pass for an event to run."""

    kind: str  # if, elif, else, ternary, guard, kwargs
    operator: str
    threshold: str
    raw_string: bool
    text: str
    test_span: Span
    statement_span: Span  # the whole if statement (or the kwargs assignment)
    only_reset: bool = False  # the gated branch holds nothing but this reset
    has_else: bool = False
    else_resets: bool = False
    keyword: str = ""  # for kwargs gates: the keyword filled under the test
    pure: bool = False  # the test is the version comparison alone (no and/or/not around it)

    @property
    def test(self) -> VersionTest:
        from packaging.version import Version

        return VersionTest(self.operator, Version(self.threshold), self.raw_string)


@dataclass
class VersionComparison:
    """A comparison of an engine's installed version with a literal release, wherever it is (an `if`,
    an `assert`, an assignment): what the code itself says about the releases it runs on."""

    engine: str  # vllm, sglang
    operator: str  # normalized: the installed version on the left
    threshold: str
    raw_string: bool  # compares version strings lexicographically
    text: str  # the comparison as written
    span: Span
    installed: str  # the installed version's side as written (`vllm.__version__`)
    literal: str  # the release's side as written (`"0.8.1"`)
    installed_span: Span
    literal_span: Span
    single: bool  # the comparison has one operator (not `a <= v < b`)


@dataclass
class Anchor:
    """The statement holding a call: where a fix inserts code after it or removes it. A simple
    statement, or a `with` statement whose header holds the call."""

    statement_span: Span
    leaves_block: bool = False  # a return, raise, break or continue: nothing after it in the block runs


@dataclass
class CallSite:
    name: str
    receiver: str  # source of the receiver, "" for a bare call
    chain: list[str]  # receiver as names: ["self", "server_handle"]; "()" marks a call
    via: str  # direct, remote, rpc, dispatch
    span: Span
    awaited: bool
    receiver_class: str = ""  # an EngineClass value when the receiver is a known vLLM object
    anchor: Anchor | None = None  # where code can be inserted after it (collective_rpc calls and weight pushes)

    def as_row(self) -> list[Any]:
        """The fields in order: summaries hold thousands of calls, and a row decodes faster than a dict."""
        return [
            self.name,
            self.receiver,
            self.chain,
            self.via,
            self.span,
            self.awaited,
            self.receiver_class,
            self.anchor,
        ]


@dataclass
class ResetEvent:
    """A call that resets (or may reset) a vLLM cache: a reset method, a pause, a sleep or a clear."""

    method: str  # reset_prefix_cache, reset_mm_cache, reset_encoder_cache, pause_generation, sleep, clear
    receiver: str
    chain: list[str]
    receiver_class: str  # an EngineClass value, or "" when unknown
    via: str  # direct, remote, rpc, dispatch, http, alias
    awaited: bool
    in_async: bool
    span: Span  # the call expression
    callee_span: Span  # the called expression (`x.reset_encoder_cache`)
    statement_span: Span  # the simple statement holding the call
    anchor: Anchor | None = None
    keywords: dict[str, str] = field(default_factory=dict)
    positional: list[str] = field(default_factory=list)
    star_kwargs: list[str] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)
    hasattr_guarded: bool = False
    consumed: bool = False  # awaited (now or later), gathered or scheduled
    result_ignored: bool = False  # the call (or its await) is a statement of its own
    passed_on: bool = False  # its result is handed to another call (`loop.run_until_complete(<call>)`)
    runner: str = ""  # the callee of a statement `runner(<call>)`, the call its only argument
    keyword_spans: dict[str, Span] = field(default_factory=dict)  # `name=value` of each keyword
    compat_guards: list[str] = field(default_factory=list)  # see _Summarizer.compat_guards
    # of an HTTP request: where each of its `keywords` was sent, "query" (the URL's query string or
    # `params=`) or "body" (`json=` / `data=`)
    sent_in: dict[str, str] = field(default_factory=dict)


@dataclass
class HasattrProbe:
    """`hasattr(<object>, "<attribute>")`, or `getattr(<object>, "<attribute>", <default>)`."""

    attribute: str
    receiver: str  # source of the object
    chain: list[str]
    receiver_class: str
    kind: str  # hasattr, getattr
    span: Span  # the call
    object_span: Span  # its first argument
    statement_span: Span  # the if statement whose test holds it, else the simple statement
    polarity: str = ""  # in an if test: "positive" (body runs when it is true), "negative", or "" (unclear)
    fallback_calls: list[str] = field(default_factory=list)  # what the branch taken when it is false calls


@dataclass
class ArgumentUse:
    """An engine argument named in code: a call keyword, a dict key, a subscript key or a setdefault key."""

    name: str
    kind: str  # keyword, dict, subscript, setdefault
    callee: str  # the called name for keywords and setdefault (EngineArgs, LLM, Namespace, dict, ...)
    function: str  # qualname of the enclosing function
    span: Span  # the keyword (`name=value`) or the key's string literal
    key_text: str  # source of the key literal (with its quotes); "" for keywords
    value: str  # source of the value
    value_span: Span
    siblings: list[str] = field(default_factory=list)  # the other names in the same call or dict
    gates: list[Gate] = field(default_factory=list)
    compat_guards: list[str] = field(default_factory=list)


@dataclass
class Request:
    """A generation request: a call of a generation method (`generate`, `chat`, a vLLM OpenAI front
    end's `create_chat_completion`, ...) or a post to a generation route (`/v1/chat/completions`)."""

    target: str  # the method called, or the route posted to
    chain: list[str]  # the receiver of a method call; [] for a post
    line: int
    # Its prompt (or body) comes from the function's parameters, whole or in a part that may hold media:
    # the function forwards what its callers built, which the summary cannot see.
    forwarded: bool
    receiver_class: str = ""  # an EngineClass value when the receiver is a known vLLM object
    # The module functions (called by name, or on an imported module) its prompt is built from: one
    # defined where multimodal input shows may put media in it.
    helpers: list[str] = field(default_factory=list)


@dataclass
class FunctionSummary:
    name: str
    qualname: str
    cls: str  # enclosing class name, "" for functions
    is_async: bool
    span: Span  # the def line's name
    calls: list[CallSite] = field(default_factory=list)
    resets: list[ResetEvent] = field(default_factory=list)
    super_calls: list[str] = field(default_factory=list)
    lifecycle: list[ResetEvent] = field(default_factory=list)  # resume_generation, wake_up (no cache effect)
    probes: list[HasattrProbe] = field(default_factory=list)
    sglang: list[ResetEvent] = field(default_factory=list)  # SGLANG_METHODS called, or their routes posted to
    # Local names (parameters included) and how they were bound, as origins (see cachelint.provenance).
    bindings: dict[str, str] = field(default_factory=dict)
    end_line: int = 0  # the last line of the body
    requests: list[Request] = field(default_factory=list)
    # How a method leaves itself to subclasses: "abstractmethod" (decorated so), "raise" (its body only
    # raises NotImplementedError), or "".
    abstract: str = ""
    # Attribute names the module installs this function under (`VLLMGeneration.sync_weights = patched`,
    # `gen.sync_weights = make_sync(...)` for the function `make_sync` returns): what callers call it by.
    installed_as: list[str] = field(default_factory=list)
    # Objects named like an engine (`self.engine`, `llm`) assigned the result of a call here, with the
    # call: the receiver text and where it was built.
    built: list[tuple[str, Span]] = field(default_factory=list)
    # Locks held by a `with` statement (`async with self.engine_lock:`), by their last name (`engine_lock`),
    # with the span of the statement's body.
    locks: list[tuple[str, Span]] = field(default_factory=list)
    raises: bool = False  # a `raise` statement in its body (not in a nested function)

    def called_as(self) -> tuple[str, ...]:
        """The names calls reach this function by: its own, and those it is installed under."""
        return (self.name, *self.installed_as)


@dataclass
class ClassSummary:
    name: str
    bases: list[str]
    span: Span
    engine_class: str  # AsyncLLM etc. when it subclasses a vLLM engine, else ""
    worker_like: bool  # subclasses a vLLM worker class or is named like a worker extension
    methods: list[str] = field(default_factory=list)
    # `self.<name>` attributes and how they were bound, as origins (see cachelint.provenance).
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Launch:
    """Where the project starts SGLang: an `Engine(...)` (or SGLang's `launch_server`,
    `_launch_subprocesses`) in this process, or a subprocess that runs its server."""

    function: str  # qualname of the enclosing function
    kind: str  # "in-process" or "subprocess"
    span: Span  # the call
    statement_span: Span  # the simple statement holding it: code to run first goes before it
    at_statement_level: bool  # the statement is a line of its own in a block (code can go before it)
    env_span: Span | None = None  # the `env=...` keyword of a subprocess call, if any
    env_value: str = ""
    # The `if` statement opening the if/elif/else chain one of whose branches holds the statement as its
    # own, which branch (0 for the `if`), and how many the chain has (a missing `else` counts).
    chain_span: Span | None = None
    branch: int = 0
    branches: int = 0
    turned_off: list[str] = field(default_factory=list)  # server options it turns off (disable_radix_cache)


@dataclass
class Workaround:
    """Where the processor cache is disabled (mm_processor_cache_gb=0 or the legacy switch)."""

    function: str
    cls: str
    span: Span
    kind: str


@dataclass
class FileSummary:
    path: str
    module: str
    engine: str  # vllm, other, unknown
    imports: dict[str, str] = field(default_factory=dict)
    functions: list[FunctionSummary] = field(default_factory=list)
    classes: list[ClassSummary] = field(default_factory=list)
    worker_extension_refs: list[str] = field(default_factory=list)
    workarounds: list[Workaround] = field(default_factory=list)
    engine_arguments: list[ArgumentUse] = field(default_factory=list)
    imports_sglang: bool = False
    launches: list[Launch] = field(default_factory=list)
    version_comparisons: list[VersionComparison] = field(default_factory=list)

    def encode(self) -> str:
        """The JSON text the cache keeps; `from_json(json.loads(text))` reads it back."""
        from cachelint.cache import plain

        return json.dumps(self, default=plain)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileSummary:
        def span(raw: Any) -> Span:
            return Span(**raw) if isinstance(raw, dict) else Span(*raw)

        def gate(raw: dict[str, Any]) -> Gate:
            return Gate(**{**raw, "test_span": span(raw["test_span"]), "statement_span": span(raw["statement_span"])})

        def anchor(raw: dict[str, Any] | None) -> Anchor | None:
            return Anchor(**{**raw, "statement_span": span(raw["statement_span"])}) if raw else None

        def event(raw: dict[str, Any]) -> ResetEvent:
            spans = {k: span(raw[k]) for k in ("span", "callee_span", "statement_span")}
            gates = [gate(g) for g in raw["gates"]]
            keyword_spans = {k: span(v) for k, v in raw.get("keyword_spans", {}).items()}
            return ResetEvent(
                **{**raw, **spans, "gates": gates, "anchor": anchor(raw["anchor"]), "keyword_spans": keyword_spans}
            )

        def probe(raw: dict[str, Any]) -> HasattrProbe:
            spans = {k: span(raw[k]) for k in ("span", "object_span", "statement_span")}
            return HasattrProbe(**{**raw, **spans})

        def argument(raw: dict[str, Any]) -> ArgumentUse:
            spans = {k: span(raw[k]) for k in ("span", "value_span")}
            return ArgumentUse(**{**raw, **spans, "gates": [gate(g) for g in raw["gates"]]})

        def call(raw: list[Any]) -> CallSite:
            name, receiver, chain, via, where, awaited, receiver_class, at = raw
            return CallSite(name, receiver, chain, via, Span(*where), awaited, receiver_class, anchor(at))

        def function(raw: dict[str, Any]) -> FunctionSummary:
            return FunctionSummary(
                **{
                    **raw,
                    "span": span(raw["span"]),
                    "calls": [call(c) for c in raw["calls"]],
                    "resets": [event(e) for e in raw["resets"]],
                    "lifecycle": [event(e) for e in raw.get("lifecycle", [])],
                    "probes": [probe(h) for h in raw.get("probes", [])],
                    "requests": [Request(**r) for r in raw.get("requests", [])],
                    "sglang": [event(e) for e in raw.get("sglang", [])],
                    "built": [(text, span(where)) for text, where in raw.get("built", [])],
                    "locks": [(name, span(where)) for name, where in raw.get("locks", [])],
                }
            )

        def launch(raw: dict[str, Any]) -> Launch:
            spans = {k: span(raw[k]) for k in ("span", "statement_span")}
            env = span(raw["env_span"]) if raw.get("env_span") else None
            chain = span(raw["chain_span"]) if raw.get("chain_span") else None
            return Launch(**{**raw, **spans, "env_span": env, "chain_span": chain})

        return cls(
            path=data["path"],
            module=data["module"],
            engine=data["engine"],
            imports=data["imports"],
            functions=[function(f) for f in data["functions"]],
            classes=[ClassSummary(**{**c, "span": span(c["span"])}) for c in data["classes"]],
            worker_extension_refs=data["worker_extension_refs"],
            workarounds=[Workaround(**{**w, "span": span(w["span"])}) for w in data["workarounds"]],
            engine_arguments=[argument(a) for a in data.get("engine_arguments", [])],
            imports_sglang=data.get("imports_sglang", False),
            launches=[launch(item) for item in data.get("launches", [])],
            version_comparisons=[
                VersionComparison(**{**item, **{k: span(item[k]) for k in ("span", "installed_span", "literal_span")}})
                for item in data.get("version_comparisons", [])
            ],
        )

    def function(self, qualname: str) -> FunctionSummary | None:
        for function in self.functions:
            if function.qualname == qualname:
                return function
        return None

    def class_named(self, name: str) -> ClassSummary | None:
        for summary in self.classes:
            if summary.name == name:
                return summary
        return None
