"""Read the released vLLM (or SGLang) wheels and keep cachelint's shipped facts table true to them.

    python scripts/vllm_facts.py             # scan the releases not scanned yet, then compare
    python scripts/vllm_facts.py --update    # the same, then rewrite the generated fields of the table
    python scripts/vllm_facts.py --check     # compare the committed scans with the table (no network)
    python scripts/vllm_facts.py --dist sglang ...   # the same for SGLang

A scan downloads one wheel at a time (`pip download --no-deps --only-binary :all:`) into a temporary
folder, reads the needed modules from the zip with `ast` (nothing is installed or imported) and deletes
the wheel. Each release's scan is kept as JSON in scripts/facts_scans/<dist>/, so a re-run downloads
only new releases. A scan records, for the tracked classes wherever they are defined, every method
whose name speaks of caches, pauses, sleep or weights (async or not, its parameters; inherited ones
resolved); the HTTP routes with such names; and the fields of the engine-argument classes (EngineArgs
and AsyncEngineArgs; SGLang's ServerArgs).

`--update` rewrites the generated fields (first and last release, is_async, signature history, a
route's module; since / removed_in of each argument; the release list) and keeps the hand-written ones
(`clears`, `scope`, `notes`, `evidence`, ...). A cache-related method or route that first appears
in a release newer than the table gets a new record without `scope`: it needs review (`--check` fails
until its hand-written fields are filled in). So does, for vLLM, one that resets or releases a cache,
pauses, resumes, sleeps, wakes or moves weights (ACTIONS) in any scanned release the table lacks it
for, on a class told apart from a same-named one by its module.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "cachelint" / "data"
SCANS = Path(__file__).resolve().parent / "facts_scans"
SCRIPT = Path(__file__).name

# A route or method whose name matches this may reset or bypass a cache; new ones need review.
CACHE_WORDS = re.compile(
    r"reset|clear|flush|cache|pause|resume|continue_generation|sleep|wake|weight|memory_occupation"
)
# Of those, the ones that act: reset or release a cache, pause or resume, sleep or wake, load or move
# weights. The table must have these for every release it covers, not only the newest.
ACTIONS = re.compile(
    r"^(reset|clear|flush)_|^(pause|resume)_(generation|scheduler)|^(continue_generation|sleep|wake_up)(_async)?$"
    r"|^(release|reload|update|init|start|start_draft|finish|shutdown)_(\w+_)?"
    r"(weights?|weight_update|weight_transfer_engine|kv_cache_memory|memory_occupation)(_async)?$"
)


@dataclass(frozen=True)
class Dist:
    """What to read from one engine's wheels, and where its table is."""

    name: str
    oldest: Version
    scanned: str  # the part of the package whose modules are scanned
    classes: frozenset[str]  # class names whose methods are recorded, wherever in the package they are defined
    argument_classes: tuple[str, ...]  # dataclasses whose fields are the engine's arguments
    argument_namespaces: str  # a module-level list of more classes whose fields join them ("" if none)
    route_class: str  # the `class` of the table's HTTP-route records
    environment: tuple[str, ...]  # environment variables whose reading modules are recorded
    moved: dict[str, str]  # module path in older releases -> the path it was moved to
    # methods and routes the table must record from every release, not only from the newest (None: the
    # newest releases' cache-related ones only)
    actions: re.Pattern[str] | None
    api_file: str
    arguments_file: str
    releases_file: str


VLLM = Dist(
    name="vllm",
    oldest=Version("0.6.0"),
    scanned="vllm/",
    classes=frozenset(
        {
            *("LLM", "LLMEngine", "AsyncLLMEngine", "MQLLMEngineClient", "AsyncLLM", "EngineClient"),
            *("EngineCore", "EngineCoreProc", "EngineCoreClient", "InprocClient", "SyncMPClient", "AsyncMPClient"),
            *("Scheduler", "KVCacheManager", "BlockPool", "EncoderCacheManager", "Executor"),
            *("WorkerWrapperBase", "WorkerBase", "Worker", "GPUModelRunner", "EncoderCache"),
            *("OpenAIServing", "BaseRenderer", "MultiModalProcessorSenderCache", "MultiModalReceiverCache"),
            *("LruKeyReplicatedSenderCache", "LruKeyReplicatedReceiverCache"),
        }
    ),
    argument_classes=("EngineArgs", "AsyncEngineArgs"),
    argument_namespaces="",
    route_class="OpenAI API server route",
    environment=(),
    moved={
        "vllm/v1/core/scheduler.py": "vllm/v1/core/sched/scheduler.py",
        "vllm/entrypoints/openai/serving_engine.py": "vllm/entrypoints/openai/engine/serving.py",
        "vllm/multimodal/cache.py": "vllm/multimodal/cache/lru.py",
    },
    actions=ACTIONS,
    api_file="vllm_cache_api.json",
    arguments_file="vllm_engine_args.json",
    releases_file="vllm_releases.json",
)

SGLANG = Dist(
    name="sglang",
    oldest=Version("0.4.6"),
    scanned="sglang/srt/",
    classes=frozenset(
        {"Engine", "TokenizerManager", "Scheduler", "MultiModalCache", "MultimodalCache", "MultiModalStaticCache"}
    ),
    argument_classes=("ServerArgs",),
    argument_namespaces="_INPUT_NAMESPACES",  # 0.5.23 assembles ServerArgs from the classes listed there
    route_class="HTTP server route",
    environment=("SGLANG_VLM_CACHE_SIZE_MB",),
    moved={},
    actions=None,
    api_file="sglang_cache_api.json",
    arguments_file="sglang_server_args.json",
    releases_file="sglang_releases.json",
)

DISTS = {dist.name: dist for dist in (VLLM, SGLANG)}


# ---------------------------------------------------------------------------------------------------
# Reading one wheel


def signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """`async (self, device)`: the parameter names as the table writes them."""
    arguments = function.args
    names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
    if arguments.vararg is not None:
        names.append(f"*{arguments.vararg.arg}")
    names.extend(a.arg for a in arguments.kwonlyargs)
    if arguments.kwarg is not None:
        names.append(f"**{arguments.kwarg.arg}")
    prefix = "async " if isinstance(function, ast.AsyncFunctionDef) else ""
    return f"{prefix}({', '.join(names)})"


def class_body(node: ast.ClassDef) -> Iterator[ast.stmt]:
    """The statements of a class body, including those under `if` / `try` (TYPE_CHECKING, fallbacks)."""
    pending = list(node.body)
    while pending:
        statement = pending.pop(0)
        if isinstance(statement, ast.If):
            pending[:0] = [*statement.body, *statement.orelse]
        elif isinstance(statement, ast.Try):
            pending[:0] = [*statement.body, *statement.orelse, *statement.finalbody]
        else:
            yield statement


class Wheel:
    """The Python modules of one wheel, parsed on demand."""

    def __init__(self, path: Path, package: str) -> None:
        self.zip = zipfile.ZipFile(path)
        self.package = package
        self.modules = {n for n in self.zip.namelist() if n.startswith(f"{package}/") and n.endswith(".py")}
        self._trees: dict[str, ast.Module | None] = {}

    def tree(self, module: str) -> ast.Module | None:
        if module not in self._trees:
            try:
                self._trees[module] = ast.parse(self.zip.read(module))
            except (SyntaxError, ValueError):
                self._trees[module] = None
        return self._trees[module]

    def text(self, module: str) -> bytes:
        return self.zip.read(module)

    def module_file(self, dotted: str) -> str | None:
        base = dotted.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.modules:
                return candidate
        return None

    def imported_names(self, module: str) -> dict[str, tuple[str, str]]:
        """name -> (dotted module, name there) for the `from x import y` statements of `module`."""
        tree = self.tree(module)
        names: dict[str, tuple[str, str]] = {}
        if tree is None:
            return names
        package = module.rsplit("/", 1)[0].replace("/", ".")
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                source = ".".join([*parts, source] if source else parts)
            for alias in node.names:
                names[alias.asname or alias.name] = (source, alias.name)
        return names

    def find_class(self, module: str, name: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """The definition of `name` as seen from `module`: defined there or imported (through re-exports)."""
        tree = self.tree(module)
        if tree is None or depth > 4:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        imported = self.imported_names(module).get(name)
        target = self.module_file(imported[0]) if imported else None
        if imported is None or target is None:
            return None
        return self.find_class(target, imported[1], depth + 1)

    def mro(self, module: str, node: ast.ClassDef) -> list[tuple[str, ast.ClassDef]]:
        """The class and its bases defined in this package, depth first (close enough to Python's MRO here)."""
        seen: list[tuple[str, ast.ClassDef]] = []

        def visit(where: str, cls: ast.ClassDef) -> None:
            if any(w == where and c.name == cls.name for w, c in seen):
                return
            seen.append((where, cls))
            for base in cls.bases:
                if isinstance(base, ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    found = self.find_class(where, base.id)
                elif isinstance(base, ast.Attribute):
                    found = self._attribute_class(where, base)
                else:
                    found = None
                if found is not None:
                    visit(*found)

        visit(module, node)
        return seen

    def _attribute_class(self, module: str, base: ast.Attribute) -> tuple[str, ast.ClassDef] | None:
        """`mod.Class` where `mod` is an imported module."""
        if not isinstance(base.value, ast.Name):
            return None
        imported = self.imported_names(module).get(base.value.id)
        if imported is None:
            return None
        target = self.module_file(f"{imported[0]}.{imported[1]}")
        return self.find_class(target, base.attr) if target else None


def methods_of(wheel: Wheel, module: str, node: ast.ClassDef) -> tuple[dict[str, str], list[str]]:
    """The cache-related methods of the class, inherited ones included (the nearest definition wins), and
    its bases."""
    methods: dict[str, str] = {}
    chain = wheel.mro(module, node)
    for _, cls in chain:
        for statement in class_body(cls):
            if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) or statement.name in methods:
                continue
            if CACHE_WORDS.search(statement.name):
                methods[statement.name] = signature(statement)
    return dict(sorted(methods.items())), [f"{where}:{cls.name}" for where, cls in chain[1:]]


def fields_of(wheel: Wheel, module: str, node: ast.ClassDef, namespaces: str) -> Iterator[str]:
    """The annotated fields of a dataclass and of its bases, and of the classes listed in the module-level
    list `namespaces`."""
    classes = wheel.mro(module, node)
    tree = wheel.tree(module)
    for statement in tree.body if tree is not None and namespaces else []:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == namespaces for t in statement.targets
        ):
            for element in statement.value.elts if isinstance(statement.value, (ast.List, ast.Tuple)) else []:
                found = wheel.find_class(module, element.id) if isinstance(element, ast.Name) else None
                if found is not None:
                    classes.extend(wheel.mro(*found))
    for _, cls in classes:
        for statement in class_body(cls):
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                yield statement.target.id


_ROUTE_VERBS = {"get", "post", "put", "delete", "patch"}


def routes_of(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[str]:
    """`POST /reset_prefix_cache` for each route decorator of a FastAPI handler."""
    for decorator in function.decorator_list:
        if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)):
            continue
        if not decorator.args or not isinstance(decorator.args[0], ast.Constant):
            continue
        path = decorator.args[0].value
        if not isinstance(path, str) or not path.startswith("/"):
            continue
        verb = decorator.func.attr
        if verb in _ROUTE_VERBS:
            yield f"{verb.upper()} {path}"
        elif verb == "api_route":
            verbs = ["GET"]
            for keyword in decorator.keywords:
                if keyword.arg == "methods" and isinstance(keyword.value, (ast.List, ast.Tuple)):
                    verbs = [str(e.value) for e in keyword.value.elts if isinstance(e, ast.Constant)]
            yield from (f"{v.upper()} {path}" for v in verbs)


def scan_wheel(path: Path, dist: Dist, release: str) -> dict[str, Any]:
    wheel = Wheel(path, dist.name)
    wanted = "|".join(sorted(dist.classes | set(dist.argument_classes)))
    class_line = re.compile(rf"^class ({wanted})\b".encode(), re.MULTILINE)
    route_line = re.compile(rb"@\w+\.(get|post|put|delete|patch|api_route)\(")
    classes: dict[str, Any] = {}
    arguments: set[str] = set()
    routes: dict[str, str] = {}
    environment: dict[str, list[str]] = {name: [] for name in dist.environment}
    for module in sorted(m for m in wheel.modules if m.startswith(dist.scanned)):
        text = wheel.text(module)
        for name in dist.environment:
            if re.search(rf"\b{name}\b".encode(), text):
                environment[name].append(module)
        has_class = class_line.search(text) is not None
        if not has_class and route_line.search(text) is None:
            continue
        tree = wheel.tree(module)
        if tree is None:
            continue
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            if node.name in dist.classes:
                methods, bases = methods_of(wheel, module, node)
                classes[f"{module}:{node.name}"] = {"bases": bases, "methods": methods}
            elif node.name in dist.argument_classes:
                arguments.update(fields_of(wheel, module, node, dist.argument_namespaces))
        for function in ast.walk(tree):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for route in routes_of(function):
                    if CACHE_WORDS.search(route):
                        routes[route] = f"{module}:{function.name} {signature(function)}"
    return {
        "dist": dist.name,
        "release": release,
        "wheel": path.name,
        "classes": dict(sorted(classes.items())),
        "routes": dict(sorted(routes.items())),
        "arguments": sorted(arguments),
        "environment": environment,
    }


# ---------------------------------------------------------------------------------------------------
# Releases, downloads and the scan files


def index_releases(dist: Dist) -> list[Version]:
    """The releases on the package index from `dist.oldest` on, without pre-releases and dev builds."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", dist.name], capture_output=True, text=True, check=False
    )
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("Available versions:")), None)
    if line is None:
        reason = (result.stderr.strip().splitlines() or ["no answer"])[-1]
        raise SystemExit(f"vllm_facts: cannot list the releases of {dist.name}: {reason}")
    versions = []
    for text in line.split(":", 1)[1].split(","):
        try:
            version = Version(text.strip())
        except InvalidVersion:
            continue
        if version >= dist.oldest and not version.is_prerelease:
            versions.append(version)
    return sorted(versions)


def scan_path(dist: Dist, release: Version) -> Path:
    return SCANS / dist.name / f"{release}.json"


def download_and_scan(dist: Dist, release: Version, download_dir: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=download_dir, prefix=f"{dist.name}-{release}-") as folder:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:"]
        result = subprocess.run(
            [*command, "--dest", folder, f"{dist.name}=={release}"], capture_output=True, text=True, check=False
        )
        wheels = sorted(Path(folder).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            reason = (result.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise SystemExit(f"vllm_facts: cannot download {dist.name}=={release}: {reason}")
        return scan_wheel(wheels[0], dist, str(release))


def write_json(path: Path, data: Any) -> None:
    """Write through a temporary file, so an interrupted run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)


def load_scans(dist: Dist, folder: Path | None = None) -> dict[Version, dict[str, Any]]:
    folder = folder or SCANS / dist.name
    scans = {Version(p.stem): json.loads(p.read_text(encoding="utf-8")) for p in folder.glob("*.json")}
    return dict(sorted(scans.items()))


# ---------------------------------------------------------------------------------------------------
# What the scans say about one table record


@dataclass(frozen=True)
class History:
    """Where a method (or route) is defined, release by release: signature or None when absent."""

    where: str
    by_release: dict[Version, str | None]

    @property
    def present(self) -> list[Version]:
        return [release for release, found in self.by_release.items() if found is not None]

    @property
    def first(self) -> Version | None:
        present = self.present
        return present[0] if present else None

    @property
    def last(self) -> Version | None:
        """The last release that has it; None while the newest scanned release has it."""
        present = self.present
        if not present or present[-1] == max(self.by_release):
            return None
        return present[-1]

    def gaps(self) -> list[Version]:
        """Releases without it between two releases with it."""
        present = self.present
        if not present:
            return []
        return [r for r, found in self.by_release.items() if present[0] < r < present[-1] and found is None]

    def signatures(self) -> list[str]:
        """`0.8.2: (self, device)` for the first release and for each change."""
        history: list[str] = []
        previous: str | None = None
        for release, found in self.by_release.items():
            if found is not None and found != previous:
                history.append(f"{release}: {found}")
            previous = found if found is not None else previous
        return history


def class_names(label: str) -> list[str]:
    """`EngineCoreClient / InprocClient / SyncMPClient` -> the three names; `LLMEngine (v1)` -> LLMEngine."""
    return [re.sub(r"\s*\(.*?\)", "", part).strip() for part in label.split(" / ")]


def module_of(record: dict[str, Any]) -> str:
    return str(record.get("module_path") or "").split(" ")[0]


def old_paths(dist: Dist, path: str) -> set[str]:
    paths = {path}
    changed = True
    while changed:
        before = len(paths)
        paths |= {old for old, new in dist.moved.items() if new in paths}
        changed = len(paths) != before
    return paths


def record_kind(dist: Dist, record: dict[str, Any]) -> str:
    if record["class"] == dist.route_class:
        return "route"
    if str(record["method"]).startswith("collective_rpc("):
        return "rpc"
    return "method"


def method_history(
    dist: Dist, scans: dict[Version, dict[str, Any]], names: list[str], module: str, method: str
) -> tuple[History, list[str]]:
    """The method on the classes `names` in `module` (or where it lived before); also any disagreement
    between the named classes of one release."""
    paths = old_paths(dist, module)
    by_release: dict[Version, str | None] = {}
    split: list[str] = []
    for release, scan in scans.items():
        found = []
        for key, cls in scan["classes"].items():
            where, name = key.rsplit(":", 1)
            if name in names and where in paths:
                found.append((name, cls["methods"].get(method)))
        having = [sig for _, sig in found if sig is not None]
        by_release[release] = having[0] if having else None
        if having and len(having) != len(found):
            lacking = [name for name, sig in found if sig is None]
            split.append(f"{release}: {', '.join(lacking)} lack{'s' if len(lacking) == 1 else ''} it")
    return History(module, by_release), split


def route_history(scans: dict[Version, dict[str, Any]], route: str) -> History:
    by_release: dict[Version, str | None] = {}
    where = ""
    for release, scan in scans.items():
        found = scan["routes"].get(route)
        by_release[release] = found.split(" ", 1)[1] if found else None
        where = found.split(":", 1)[0] if found else where
    return History(where, by_release)


def rpc_target(record: dict[str, Any]) -> str:
    """`LLM.collective_rpc / AsyncLLM.collective_rpc -> Worker.reload_weights` -> Worker."""
    return str(record["class"]).split("->", 1)[1].strip().split(".")[0].split(" ")[0]


def rpc_method(record: dict[str, Any]) -> str:
    return str(record["method"]).split("'")[1]


def history_of(dist: Dist, scans: dict[Version, dict[str, Any]], record: dict[str, Any]) -> tuple[History, list[str]]:
    kind = record_kind(dist, record)
    if kind == "route":
        return route_history(scans, str(record["method"])), []
    if kind == "rpc":
        return method_history(dist, scans, [rpc_target(record)], module_of(record), rpc_method(record))
    return method_history(dist, scans, class_names(str(record["class"])), module_of(record), str(record["method"]))


def describe(dist: Dist, record: dict[str, Any]) -> str:
    return f"{record['class']}.{record['method']}" if record_kind(dist, record) == "method" else str(record["method"])


def _text(version: Version | None) -> str | None:
    return str(version) if version is not None else None


# ---------------------------------------------------------------------------------------------------
# Comparing the scans with the table, and rewriting the table's generated fields


def load_table(dist: Dist, data: Path = DATA) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    def read(name: str) -> Any:
        return json.loads((data / name).read_text(encoding="utf-8"))

    return read(dist.api_file), read(dist.arguments_file), read(dist.releases_file)


def expected_record(dist: Dist, scans: dict[Version, dict[str, Any]], record: dict[str, Any]) -> dict[str, Any]:
    """The record's generated fields as the scans give them."""
    history, _ = history_of(dist, scans, record)
    expected: dict[str, Any] = {"first_release": _text(history.first), "last_release": _text(history.last)}
    if record_kind(dist, record) != "rpc":
        signatures = history.signatures()
        if signatures or "signature_history" in record:
            expected["signature_history"] = signatures
        if signatures:
            expected["is_async"] = signatures[-1].split(": ", 1)[1].startswith("async ")
        if record_kind(dist, record) == "route" and history.where:
            expected["module_path"] = history.where
    return expected


def moves(scans: dict[Version, dict[str, Any]], record: dict[str, Any], history: History) -> Iterator[str]:
    """A release after the method's last one that defines it on a same-named class in a module that did
    not have it before: most likely the class moved (add the old path to `Dist.moved`)."""
    if history.last is None:
        return
    names = class_names(str(record["class"]))
    method = str(record["method"])

    def where(release: Version) -> set[str]:
        return {
            key.rsplit(":", 1)[0]
            for key, cls in scans[release]["classes"].items()
            if key.rsplit(":", 1)[1] in names and method in cls["methods"]
        }

    before = where(history.last)
    for release in scans:
        if release > history.last and where(release) - before:
            found = ", ".join(sorted(where(release) - before))
            yield f"{release} defines it in {found}: moved there? (add the old path to `moved` in {SCRIPT})"
            return


def misplaced_resets(scans: dict[Version, dict[str, Any]], record: dict[str, Any], history: History) -> Iterator[str]:
    """A hand-written implicit reset whose releases are not releases of the method, or that names no
    scanned release as its bounds."""
    scanned = {str(release) for release in scans}
    for reset in record.get("implicit_resets", []):
        bounds = [reset["since"], *([reset["before"]] if reset.get("before") else [])]
        unknown = [bound for bound in bounds if bound not in scanned]
        if unknown:
            yield f"implicit reset of {reset['cache']}: {', '.join(unknown)} is no scanned release"
        elif history.first is None or Version(reset["since"]) < history.first:
            yield f"implicit reset of {reset['cache']} since {reset['since']}: the method exists from {history.first}"


def argument_span(scans: dict[Version, dict[str, Any]], name: str, kind: str) -> tuple[str | None, str | None]:
    """(since, removed_in) of an engine argument (`kind` "arguments") or of an environment variable
    ("environment"): since is None when the oldest scanned release has it."""
    releases = list(scans)
    # "arguments" is a list of names; "environment" maps each name to the modules that read it
    present = [
        r for r, scan in scans.items() if (scan[kind].get(name) if kind == "environment" else name in scan[kind])
    ]
    if not present:
        return None, None
    since = None if present[0] == releases[0] else str(present[0])
    after = releases.index(present[-1]) + 1
    removed = str(releases[after]) if after < len(releases) else None
    return since, removed


def disagreements(
    dist: Dist,
    scans: dict[Version, dict[str, Any]],
    records: list[dict[str, Any]],
    arguments: dict[str, Any],
    releases: dict[str, Any],
) -> list[str]:
    """Every way the table differs from the scans, one line each."""
    problems: list[str] = []
    scanned = [str(r) for r in scans]
    if releases["releases"] != scanned:
        missing = sorted(set(scanned) - set(releases["releases"]), key=Version)
        extra = sorted(set(releases["releases"]) - set(scanned), key=Version)
        problems.append(f"release list: not in the table {missing or 'none'}; never scanned {extra or 'none'}")
    for record in records:
        name = describe(dist, record)
        history, split = history_of(dist, scans, record)
        problems.extend(f"{name}: {line}" for line in split)
        problems.extend(
            f"{name}: {release} lacks it, though earlier and later releases have it" for release in history.gaps()
        )
        for field, value in expected_record(dist, scans, record).items():
            if record.get(field) != value:
                problems.append(f"{name}: {field}: the table says {record.get(field)!r}, the released code {value!r}")
        if record_kind(dist, record) == "method":
            problems.extend(f"{name}: {line}" for line in moves(scans, record, history))
        if record.get("scope") is None:
            problems.append(f"{name}: needs its hand-written fields (scope, clears, notes)")
        problems.extend(f"{name}: {line}" for line in misplaced_resets(scans, record, history))
    for kind, label in (("arguments", "argument"), ("environment", "environment variable")):
        for argument in arguments.get(kind, []):
            since, removed = argument_span(scans, str(argument["name"]), kind)
            for field, value in (("since", since), ("removed_in", removed)):
                if argument.get(field) != value:
                    problems.append(
                        f"{label} {argument['name']}: {field}: the table says {argument.get(field)!r}, "
                        f"the released code {value!r}"
                    )
    return problems


def new_candidates(
    dist: Dist, scans: dict[Version, dict[str, Any]], records: list[dict[str, Any]], known: Version
) -> list[dict[str, Any]]:
    """Routes and methods of tracked classes the table lacks: any cache-related one that first appears
    after the release `known`, and, in every release, those that act on a cache, a pause, a sleep or the
    weights (`dist.actions`). A class is told apart from a same-named one by its module (or a path it had
    before); a method a class inherits unchanged from a scanned base is its base's."""
    recorded_routes = {str(r["method"]) for r in records if record_kind(dist, r) == "route"}
    recorded = {
        (path, name, str(r["method"]))
        for r in records
        if record_kind(dist, r) == "method"
        for name in class_names(str(r["class"]))
        for path in old_paths(dist, module_of(r))
    }
    old = [scan for release, scan in scans.items() if release <= known]

    def wanted(name: str, release: Version, seen_before: bool) -> bool:
        if dist.actions is not None and dist.actions.search(name):
            return True
        return release > known and not seen_before and CACHE_WORDS.search(name) is not None

    candidates: dict[tuple[str, str], dict[str, Any]] = {}
    for release, scan in scans.items():
        for route, found in scan["routes"].items():
            seen = any(route in s["routes"] for s in old)
            if route not in recorded_routes and wanted(route.split(" ", 1)[1].lstrip("/"), release, seen):
                candidates.setdefault((dist.route_class, route), _new_record(dist.route_class, route, found, release))
        for key, cls in scan["classes"].items():
            where, name = key.rsplit(":", 1)
            for method, sig in cls["methods"].items():
                if any((path, name, method) in recorded for path in old_paths(dist, where)):
                    continue
                seen = any(method in s["classes"].get(key, {}).get("methods", {}) for s in old)
                if not wanted(method, release, seen):
                    continue
                if any(scan["classes"].get(base, {}).get("methods", {}).get(method) == sig for base in cls["bases"]):
                    continue
                found = f"{where}:{method} {sig}"
                candidates.setdefault((key, method), _new_record(name, method, found, release))
    return list(candidates.values())


def _new_record(cls: str, method: str, found: str, release: Version) -> dict[str, Any]:
    where, sig = found.split(" ", 1)
    return {
        "method": method,
        "class": cls,
        "module_path": where.split(":", 1)[0],
        "is_async": sig.startswith("async "),
        "first_release": str(release),
        "last_release": None,
        "clears": [],
        "scope": None,
        "signature_history": [f"{release}: {sig}"],
        "evidence": f"v{release} {where.split(':', 1)[0]}",
        "notes": "",
    }


def updated_table(
    dist: Dist,
    scans: dict[Version, dict[str, Any]],
    records: list[dict[str, Any]],
    arguments: dict[str, Any],
    releases: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The table with its generated fields from the scans, and the new records that need review."""
    known = max((Version(r) for r in releases["releases"]), default=max(scans))
    new_records = [
        {**record, **expected_record(dist, scans, record)} for record in new_candidates(dist, scans, records, known)
    ]
    rewritten = [{**record, **expected_record(dist, scans, record)} for record in records]
    new_arguments = dict(arguments)
    for kind in ("arguments", "environment"):
        if kind in arguments:
            new_arguments[kind] = [
                {
                    **item,
                    **dict(zip(("since", "removed_in"), argument_span(scans, str(item["name"]), kind), strict=True)),
                }
                for item in arguments[kind]
            ]
    scanned = [str(r) for r in scans]
    description = re.sub(r"\([^()]* to [^()]*\)", f"({scanned[0]} to {scanned[-1]})", str(releases["description"]))
    return (
        rewritten + new_records,
        new_arguments,
        {**releases, "description": description, "releases": scanned},
        new_records,
    )


def removed_arguments(scans: dict[Version, dict[str, Any]], known: Version) -> list[str]:
    """Engine arguments that a release after `known` no longer has: candidates for the arguments table."""
    lines: list[str] = []
    ordered = list(scans.items())
    for (_, before), (release, after) in itertools.pairwise(ordered):
        if release <= known:
            continue
        gone = set(before["arguments"]) - set(after["arguments"])
        lines.extend(f"argument {name}: removed in {release}" for name in sorted(gone))
    return lines


# ---------------------------------------------------------------------------------------------------
# The command


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0] if __doc__ else None)
    parser.add_argument("--dist", choices=sorted(DISTS), default="vllm", help="which engine (default: vllm)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare the committed scans with the table; no network")
    mode.add_argument("--update", action="store_true", help="scan new releases, then rewrite the generated fields")
    parser.add_argument("--releases", help="comma-separated releases to scan (default: every one on the index)")
    parser.add_argument("--rescan", action="store_true", help="scan again releases that have a scan")
    parser.add_argument("--download-dir", type=Path, help="where the temporary download folders go")
    return parser.parse_args(argv)


def scan_new(dist: Dist, args: argparse.Namespace) -> None:
    if args.releases:
        try:
            wanted = [Version(text.strip()) for text in args.releases.split(",") if text.strip()]
        except InvalidVersion as error:
            raise SystemExit(f"vllm_facts: {error}") from None
    else:
        wanted = index_releases(dist)
    todo = [r for r in wanted if args.rescan or not scan_path(dist, r).exists()]
    started = time.perf_counter()
    for number, release in enumerate(todo, 1):
        began = time.perf_counter()
        write_json(scan_path(dist, release), download_and_scan(dist, release, args.download_dir))
        print(
            f"scanned {dist.name} {release} ({number}/{len(todo)}) in {time.perf_counter() - began:.1f} s", flush=True
        )
    if todo:
        print(f"{len(todo)} release(s) scanned in {time.perf_counter() - started:.0f} s")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    dist = DISTS[args.dist]
    if not args.check:
        scan_new(dist, args)
    scans = load_scans(dist)
    if not scans:
        print(f"vllm_facts: no scans of {dist.name} in {SCANS / dist.name}", file=sys.stderr)
        return 2
    missing = [name for name in (dist.api_file, dist.arguments_file, dist.releases_file) if not (DATA / name).is_file()]
    if missing:
        print(f"vllm_facts: the table lacks {', '.join(missing)} in {DATA}", file=sys.stderr)
        return 2
    records, arguments, releases = load_table(dist)
    if args.update:
        known = max((Version(r) for r in releases["releases"]), default=max(scans))
        records, arguments, releases, new_records = updated_table(dist, scans, records, arguments, releases)
        write_json(DATA / dist.api_file, records)
        write_json(DATA / dist.arguments_file, arguments)
        write_json(DATA / dist.releases_file, releases)
        for record in new_records:
            print(
                f"new record, needs clears / scope / notes: {describe(dist, record)} (since {record['first_release']})"
            )
        for line in removed_arguments(scans, known):
            print(f"{line}: add it to {dist.arguments_file} if a project may still pass it")
    problems = disagreements(dist, scans, records, arguments, releases)
    for line in problems:
        print(line)
    print(
        f"{dist.name}: {len(scans)} scanned releases ({min(scans)} to {max(scans)}), {len(records)} records, "
        f"{len(arguments['arguments'])} arguments: "
        + (f"{len(problems)} disagreement(s)" if problems else "the table agrees with the released code")
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
