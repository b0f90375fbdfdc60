"""What vLLM offers, release by release: the cache-reset API facts shipped as package data."""

from __future__ import annotations

import enum
import functools
import json
import pkgutil
import re
from dataclasses import dataclass
from typing import Any

from packaging.version import Version


class Scope(str, enum.Enum):
    ENGINE = "engine"
    PARTIAL = "partial"
    WORKER_ONLY = "worker-only"
    FRONTEND_ONLY = "frontend-only"


class EngineClass(str, enum.Enum):
    """The vLLM classes a receiver can be, named as the facts table names them."""

    ASYNC_LLM = "AsyncLLM"
    LLM = "LLM"
    LLM_ENGINE = "LLMEngine (v1)"
    ENGINE_CORE = "EngineCore"
    ENGINE_CORE_CLIENT = "EngineCoreClient / InprocClient / SyncMPClient"
    SCHEDULER = "Scheduler (v1)"
    ENCODER_CACHE_MANAGER = "EncoderCacheManager"
    EXECUTOR = "Executor (v1)"
    WORKER = "Worker (gpu_worker)"
    MODEL_RUNNER = "GPUModelRunner (v1)"

    @property
    def short(self) -> str:
        return self.value.split(" ")[0]

    @property
    def is_worker_side(self) -> bool:
        return self in (EngineClass.EXECUTOR, EngineClass.WORKER, EngineClass.MODEL_RUNNER)


class SglangClass(str, enum.Enum):
    """The SGLang objects a receiver can be, named as the SGLang facts table names them."""

    ENGINE = "Engine"
    TOKENIZER_MANAGER = "TokenizerManager"
    SCHEDULER = "Scheduler"
    HTTP = "HTTP server route"


@dataclass(frozen=True)
class Signature:
    since: Version
    is_async: bool
    params: tuple[str, ...]

    @property
    def takes_any_keyword(self) -> bool:
        return any(param.startswith("**") for param in self.params)


# The caches an implicit reset can drop: the prefix (KV) cache, the encoder outputs, the engine side of the
# multimodal processor cache (P1 and the workers') and its front-end side (P0).
CACHES = ("prefix", "encoder", "mm-engine", "mm-frontend")
# The steps of vLLM's weight-transfer API; those of an update load new weights (the others set up or tear
# down the channel).
UPDATE_STEPS = frozenset({"start", "start-draft", "load", "finish"})


@dataclass(frozen=True)
class ImplicitReset:
    """A cache a pause or sleep drops as a side effect, on releases `since` <= R < `before`, when the call's
    arguments meet `when`: "always", "level>=1" (a sleep level, default 1) or "clear_cache" (default true)."""

    cache: str
    since: Version
    before: Version | None
    when: str

    def applies(self, release: Version, level: int, clear_cache: bool) -> bool:
        if release < self.since or (self.before is not None and release >= self.before):
            return False
        if self.when == "level>=1":
            return level >= 1
        if self.when == "clear_cache":
            return clear_cache
        return True


@dataclass(frozen=True)
class ApiFact:
    method: str
    cls: str
    is_async: bool
    first_release: Version | None
    last_release: Version | None
    scope: Scope
    clears: tuple[str, ...]
    signatures: tuple[Signature, ...]
    notes: str
    weight_transfer: str = ""  # the step of vLLM's weight-transfer API ("init", "load", ...), or ""
    implicit_resets: tuple[ImplicitReset, ...] = ()
    query_params: tuple[str, ...] = ()  # a route's arguments read from the query string
    body_params: tuple[str, ...] = ()  # a route's arguments read from the JSON body

    @property
    def updates_weights(self) -> bool:
        """A step of a weight update through vLLM's weight-transfer API (none of which resets a cache)."""
        return self.weight_transfer in UPDATE_STEPS

    def resets_at(self, release: Version, level: int = 1, clear_cache: bool = True) -> frozenset[str]:
        """The caches (of CACHES) a call drops as a side effect on `release`, given its sleep `level` and
        `clear_cache` argument."""
        if not self.exists_in(release):
            return frozenset()
        return frozenset(r.cache for r in self.implicit_resets if r.applies(release, level, clear_cache))

    def param_source(self, param: str) -> str | None:
        """Where a route reads `param`: "query", "body", or None when it reads no such argument."""
        if param in self.query_params:
            return "query"
        if param in self.body_params:
            return "body"
        return None

    def exists_in(self, release: Version) -> bool:
        if self.first_release is None or release < self.first_release:
            return False
        return self.last_release is None or release <= self.last_release

    def param_since(self, param: str) -> Version | None:
        """The first release whose signature takes `param`, or None if none does."""
        for signature in self.signatures:
            if param in signature.params:
                return signature.since
        return None

    def takes_param(self, param: str, release: Version) -> bool:
        current: Signature | None = None
        for signature in self.signatures:
            if signature.since <= release:
                current = signature
        return current is not None and param in current.params

    def signature_at(self, release: Version) -> Signature | None:
        current: Signature | None = None
        for signature in self.signatures:
            if signature.since <= release:
                current = signature
        return current

    def drops_param(self, param: str, release: Version) -> bool:
        """Whether `release` defines the method but no longer takes `param`, which an earlier release took."""
        since = self.param_since(param)
        if since is None or release < since or not self.exists_in(release):
            return False
        current = self.signature_at(release)
        return current is not None and param not in current.params and not current.takes_any_keyword

    def param_removed_in(self, param: str) -> Version | None:
        """The first release whose signature drops `param` after an earlier one took it."""
        taken = False
        for signature in self.signatures:
            if param in signature.params:
                taken = True
            elif taken and not signature.takes_any_keyword:
                return signature.since
        return None


@dataclass(frozen=True)
class EngineArgumentFact:
    """An engine argument (EngineArgs field, also taken by `LLM(**kwargs)`) whose availability changed."""

    name: str
    since: Version | None  # None: not recorded (present in the oldest releases that matter)
    removed_in: Version | None  # the first release without it
    replaced_by: str
    replacement_values: tuple[tuple[str, str], ...]  # (old value source, new value source)
    notes: str
    effect_since: Version | None = None  # hand-written: the first release with the effect `notes` describe

    def exists_in(self, release: Version) -> bool:
        if self.since is not None and release < self.since:
            return False
        return self.removed_in is None or release < self.removed_in

    def replacement_value(self, value: str) -> str | None:
        return dict(self.replacement_values).get(value)


_SIGNATURE = re.compile(r"^(?P<since>[\w.]+):\s*(?P<async>async\s+)?\((?P<params>[^)]*)\)")


def _parse_signature(text: str) -> Signature:
    match = _SIGNATURE.match(text)
    if match is None:
        raise ValueError(f"bad signature record: {text!r}")
    params = tuple(p.strip() for p in match["params"].split(",") if p.strip() not in ("", "self"))
    return Signature(Version(match["since"]), bool(match["async"]), params)


def _version_or_none(text: str | None) -> Version | None:
    return Version(text) if text else None


class Facts:
    """Answers: does class C have method M in release R, what does it clear, is it async."""

    def __init__(
        self,
        records: list[ApiFact],
        releases: list[Version],
        engine_arguments: list[EngineArgumentFact] | None = None,
        environment: list[EngineArgumentFact] | None = None,
    ) -> None:
        self.records = records
        self.releases = tuple(sorted(releases))
        self._by_key = {(fact.method, fact.cls): fact for fact in records}
        self.engine_arguments = {fact.name: fact for fact in engine_arguments or []}
        self.environment = {fact.name: fact for fact in environment or []}

    def get(self, method: str, cls: EngineClass | str) -> ApiFact | None:
        name = cls.value if isinstance(cls, EngineClass) else cls
        return self._by_key.get((method, name))

    def exists(self, method: str, cls: EngineClass | str, release: Version) -> bool:
        fact = self.get(method, cls)
        return fact is not None and fact.exists_in(release)

    def first_release(self, method: str, cls: EngineClass | str) -> Version | None:
        fact = self.get(method, cls)
        return fact.first_release if fact else None

    def worker_rpc(self, name: str) -> ApiFact | None:
        """The record of `collective_rpc("<name>")`, if the table has one."""
        return self._by_key.get((f"collective_rpc('{name}')", _RPC_CLASS))

    def classes_with(self, method: str) -> list[ApiFact]:
        return [fact for fact in self.records if fact.method == method]

    def engine_argument(self, name: str) -> EngineArgumentFact | None:
        return self.engine_arguments.get(name)

    def route(self, path: str, verb: str = "POST") -> ApiFact | None:
        """The record of the API server route `path` (`/pause`)."""
        return self._by_key.get((f"{verb} {path}", ROUTE_CLASS))

    def implicit_resets(
        self, method: str, cls: EngineClass | str, release: Version, level: int = 1, clear_cache: bool = True
    ) -> frozenset[str]:
        """What a call of `method` on `cls` drops as a side effect on `release` (`sleep` on AsyncLLM at
        0.16.0: the prefix cache; at 0.17.0 with level 1: prefix, encoder and the engine's mm cache)."""
        fact = self.get(method, cls)
        return fact.resets_at(release, level, clear_cache) if fact is not None else frozenset()

    def is_weight_update(self, method: str, cls: EngineClass | str | None = None) -> bool:
        """Whether `method` (on `cls`, or on any class; a route as `POST /update_weights`) is a step of a
        weight update through vLLM's weight-transfer API."""
        if cls is not None:
            fact = self.get(method, cls)
            return fact is not None and fact.updates_weights
        return any(fact.updates_weights for fact in self.classes_with(method))

    def weight_update_routes(self) -> frozenset[str]:
        """The paths of the routes that update weights (`/update_weights`, `/finish_weight_update`, ...)."""
        return frozenset(
            fact.method.split(" ", 1)[1] for fact in self.records if fact.cls == ROUTE_CLASS and fact.updates_weights
        )


_RPC_CLASS = "LLM.collective_rpc / AsyncLLM.collective_rpc -> Worker"
ROUTE_CLASS = "OpenAI API server route"


def _load_engine_argument(raw: dict[str, object]) -> EngineArgumentFact:
    values = raw.get("replacement_values") or {}
    assert isinstance(values, dict)
    return EngineArgumentFact(
        name=str(raw["name"]),
        since=_version_or_none(raw.get("since")),  # type: ignore[arg-type]
        removed_in=_version_or_none(raw.get("removed_in")),  # type: ignore[arg-type]
        replaced_by=str(raw.get("replaced_by") or ""),
        replacement_values=tuple((str(old), str(new)) for old, new in values.items()),
        notes=str(raw.get("notes") or ""),
        effect_since=_version_or_none(raw.get("effect_since")),  # type: ignore[arg-type]
    )


def _load_fact(raw: dict[str, object]) -> ApiFact:
    signatures = raw.get("signature_history") or []
    assert isinstance(signatures, list)
    clears = raw.get("clears") or []
    assert isinstance(clears, list)
    cls = str(raw["class"])
    if cls.startswith("LLM.collective_rpc"):
        cls = _RPC_CLASS
    return ApiFact(
        method=str(raw["method"]),
        cls=cls,
        is_async=bool(raw["is_async"]),
        first_release=_version_or_none(raw.get("first_release")),  # type: ignore[arg-type]
        last_release=_version_or_none(raw.get("last_release")),  # type: ignore[arg-type]
        scope=Scope(raw["scope"]),
        clears=tuple(str(c) for c in clears),
        signatures=tuple(_parse_signature(str(s)) for s in signatures),
        notes=str(raw.get("notes") or ""),
        weight_transfer=str(raw.get("weight_transfer") or ""),
        implicit_resets=tuple(_load_implicit_reset(item) for item in _list(raw, "implicit_resets")),
        query_params=tuple(str(p) for p in _list(raw, "query_params")),
        body_params=tuple(str(p) for p in _list(raw, "body_params")),
    )


def _list(raw: dict[str, object], key: str) -> list[Any]:
    value = raw.get(key) or []
    assert isinstance(value, list)
    return value


def _load_implicit_reset(raw: dict[str, str]) -> ImplicitReset:
    if raw["cache"] not in CACHES or raw["when"] not in ("always", "level>=1", "clear_cache"):
        raise ValueError(f"bad implicit reset record: {raw!r}")
    return ImplicitReset(raw["cache"], Version(raw["since"]), _version_or_none(raw.get("before")), raw["when"])


def _data(name: str) -> Any:
    """The JSON file `name` of the package's data (read through its loader: from a wheel, a zip or a
    checkout; `pkgutil` is a tenth of the import time of `importlib.resources`)."""
    raw = pkgutil.get_data("cachelint", f"data/{name}")
    if raw is None:
        raise FileNotFoundError(f"cachelint/data/{name}")
    return json.loads(raw.decode("utf-8"))


def _load_table(prefix: str, arguments_file: str) -> Facts:
    raw_records = _data(f"{prefix}_cache_api.json")
    raw_releases = _data(f"{prefix}_releases.json")
    raw_arguments = _data(arguments_file)
    return Facts(
        # A record without a scope was added by scripts/vllm_facts.py and awaits review: no rule uses it.
        [_load_fact(raw) for raw in raw_records if raw.get("scope") is not None],
        [Version(v) for v in raw_releases["releases"]],
        [_load_engine_argument(raw) for raw in raw_arguments["arguments"]],
        [_load_engine_argument(raw) for raw in raw_arguments.get("environment", [])],
    )


@functools.cache
def load_facts() -> Facts:
    """The vLLM facts."""
    return _load_table("vllm", "vllm_engine_args.json")


@functools.cache
def load_sglang_facts() -> Facts:
    """The SGLang facts: Engine / TokenizerManager / Scheduler methods and HTTP routes around a weight
    update, ServerArgs fields (`engine_arguments`) and environment variables (CL201-CL204)."""
    return _load_table("sglang", "sglang_server_args.json")


def newest_known_release() -> Version:
    """The newest vLLM release the facts table covers (scripts/vllm_facts.py keeps it current)."""
    return load_facts().releases[-1]


@dataclass(frozen=True)
class StaleCache:
    """A cache a weight update makes stale, from the release on which it does (`since`)."""

    cache: str  # "prefix" or "encoder"
    since: Version
    default_on_since: Version | None  # the first release that turns the cache on by default; None: always on


@dataclass(frozen=True)
class ImplicitClear:
    """A call that clears caches as a side effect: each cache from the release named."""

    method: str
    cls: str
    clears: tuple[tuple[str, Version], ...]

    def clears_on(self, cache: str, release: Version) -> bool:
        return any(name == cache and release >= since for name, since in self.clears)


@dataclass(frozen=True)
class CacheEffects:
    """What a weight update makes stale, and what clears it on the way (data/vllm_cache_effects.json)."""

    stale: tuple[StaleCache, ...]
    implicit_clears: tuple[ImplicitClear, ...]

    def stale_cache(self, cache: str) -> StaleCache:
        return next(item for item in self.stale if item.cache == cache)

    def implicit_clear(self, method: str, cls: EngineClass | str) -> ImplicitClear | None:
        name = cls.value if isinstance(cls, EngineClass) else cls
        return next((item for item in self.implicit_clears if (item.method, item.cls) == (method, name)), None)


@functools.cache
def load_cache_effects() -> CacheEffects:
    raw = _data("vllm_cache_effects.json")
    return CacheEffects(
        tuple(
            StaleCache(str(item["cache"]), Version(item["since"]), _version_or_none(item.get("default_on_since")))
            for item in raw["stale_after_weight_update"]
        ),
        tuple(
            ImplicitClear(
                str(item["method"]),
                str(item["class"]),
                tuple((str(cache), Version(since)) for cache, since in item["clears"].items()),
            )
            for item in raw["implicit_clears"]
        ),
    )
