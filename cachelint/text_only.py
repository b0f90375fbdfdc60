"""Whether the code that holds a reset, pause or sleep sends the engine it acts on only text.

The multimodal evidence (cachelint.multimodal) is project-wide, but a project may send images from one
trainer and only text from another (TRL's GRPO and RLOO). A multimodal rule's finding is dropped when
the code holding it shows that its own engine gets no images:

- The code is the class of the function (with its bases and subclasses in the project), or the function
  alone outside a class. When it built the engine (`self.llm = LLM(...)`), its requests to it
  (cachelint.summary.requests) are those on the same receiver (`self.llm.generate(...)` for
  `self.llm.reset_prefix_cache()`) and those through a vLLM OpenAI front end the classes build
  (`OpenAIServingChat(...)`, built over an engine); for a post to a server's route, its posts to
  generation routes. An engine handed in or reached through another object may serve other code too:
  the code's own requests do not decide for it. When there are some, they decide: text only
  when none forwards a prompt its caller built (a passthrough may carry images the code never shows)
  or builds it with a function defined in a file that shows multimodal input, and no file of the
  classes shows multimodal input.
- When there are none (a sharding manager, a weight-sync helper, a client whose server another module
  feeds), the files of the same folder decide the same way, from their requests to vLLM (posts to
  generation routes, calls on receivers known to be vLLM engines or front ends), when they send some
  and none of them shows multimodal input.
- Otherwise the project-wide evidence decides, as before.

Before a finding is dropped, the bases and subclasses of the class are also looked for in the files the
run did not parse (by their `class` statements), so a subclass sending images elsewhere keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cachelint.multimodal import Evidence
    from cachelint.project import ProjectIndex
    from cachelint.summary import ClassSummary, FileSummary, FunctionSummary, Request, ResetEvent

# A test of a project file, by its shown path and its bytes.
FileTest = Callable[[str, bytes], bool]
# The summaries of the project's files a test accepts, parsed on demand; `OnceFinder` answers each
# question (a key) once per run.
Finder = Callable[[FileTest], "list[FileSummary]"]
OnceFinder = Callable[[str, FileTest], "list[FileSummary]"]
# vLLM's OpenAI front ends (OpenAIServingChat, OpenAIServingCompletion, ...): a request made through one
# runs on the engine it was built over.
FRONT_END_PREFIX = "OpenAIServing"
# Bytes a file sending generation requests holds: a request method called, or a generation route.
REQUEST_WORDS = (
    b".generate(",
    b".chat(",
    b"create_chat_completion",
    b"create_completion",
    b"/generate",
    b"/completions",
)
# Rounds of looking for the bases and subclasses of a class in files not parsed yet.
HIERARCHY_ROUNDS = 3


def sends_only_text(
    project: ProjectIndex,
    file: FileSummary,
    function: FunctionSummary,
    event: ResetEvent,
    evidence: Sequence[Evidence],
    find: Finder,
) -> bool:
    """Whether the code holding `event` (a reset, pause or sleep in `function` of `file`) shows that
    the engine or server it acts on gets only text, in a project that shows multimodal input
    (`evidence`) elsewhere."""
    if any(found.path == file.path for found in evidence):
        return False

    def find_once(key: str, holds: FileTest) -> list[FileSummary]:
        """`find`, once per run for each question (several findings ask the same)."""
        return project.memoized(f"text_only:{key}", lambda: find(holds))

    scope = Scope.around(project, file, function)
    if not _text_only(scope, event, evidence, file.path, find_once):
        return False
    wider = scope.with_unparsed_relatives(find_once)
    return wider is scope or _text_only(wider, event, evidence, file.path, find_once)


def _text_only(scope: Scope, event: ResetEvent, evidence: Sequence[Evidence], path: str, find: OnceFinder) -> bool:
    shown = {found.path for found in evidence}
    if any(summary.path in shown for summary, _ in scope.classes):
        return False
    media_helpers = frozenset().union(*(found.defines for found in evidence))

    def builds_text(request: Request) -> bool:
        return not request.forwarded and media_helpers.isdisjoint(request.helpers)

    own = scope.requests_to(event)
    if own:
        return all(builds_text(request) for request in own)
    folder = path.rpartition("/")[0]
    if any(other.rpartition("/")[0] == folder for other in shown):
        return False

    def in_folder(other: str, raw: bytes) -> bool:
        return other.rpartition("/")[0] == folder and any(word in raw for word in REQUEST_WORDS)

    nearby = [
        request
        for summary in find(f"folder:{folder}", in_folder)
        for member in summary.functions
        for request in member.requests
        if not request.chain or request.receiver_class or request.target.startswith("create_")
    ]
    return bool(nearby) and all(builds_text(request) for request in nearby)


@dataclass(frozen=True)
class Scope:
    """The code holding a finding: classes (with their files), or one function outside a class. Of
    the classes, `ancestors` and `descendants` name those above and below the finding's own class (each
    holds it too); a sibling shares no instance with it and is not part of the scope."""

    classes: tuple[tuple[FileSummary, ClassSummary], ...]
    function: tuple[FileSummary, FunctionSummary] | None = None
    ancestors: frozenset[str] = frozenset()
    descendants: frozenset[str] = frozenset()

    @classmethod
    def around(cls, project: ProjectIndex, file: FileSummary, function: FunctionSummary) -> Scope:
        own = file.class_named(function.cls) if function.cls else None
        if own is None:
            return cls((), (file, function))
        ancestors = frozenset({own.name, *project.base_classes(own.name)})
        descendants = frozenset({own.name, *(sub.name for _, sub in project.subclasses(own.name))})
        related = sorted((ancestors | descendants) - {own.name})
        found = [pair for name in related for pair in project.classes_by_name.get(name, [])]
        return cls(unique_classes([(file, own), *found]), None, ancestors, descendants)

    def members(self) -> Iterable[tuple[FileSummary, FunctionSummary]]:
        if self.function is not None:
            yield self.function
        for summary, cls in self.classes:
            for member in summary.functions:
                if member.qualname.startswith(f"{cls.name}."):
                    yield summary, member

    def requests_to(self, event: ResetEvent) -> list[Request]:
        """The requests of the scope sent to the engine or server `event` acts on; none when the scope
        did not build that engine (handed in, or reached through another object, it may serve other
        code too)."""
        requests = [request for _, member in self.members() for request in member.requests]
        if event.via == "http":
            return [request for request in requests if not request.chain]
        if not event.chain or not self.builds(event.chain):
            return []
        engine = _engine(event.chain)
        front_ends = {
            name for _, cls in self.classes for name, origin in cls.attributes.items() if _is_front_end(origin)
        }

        def same_engine(chain: list[str]) -> bool:
            return _engine(chain) == engine or (len(chain) > 1 and chain[0] == "self" and chain[1] in front_ends)

        return [request for request in requests if request.chain and same_engine(request.chain)]

    def builds(self, chain: list[str]) -> bool:
        """Whether the engine a receiver names is built by the scope: `self.<attribute>` assigned a
        constructor's result (`LLM(...)`, `AsyncLLM.from_vllm_config(...)`, a client class) in one of
        its classes, or, outside a class, a name the function assigns one."""
        if len(chain) > 1 and chain[0] == "self":
            return any(cls.attributes.get(chain[1], "").startswith("call:") for _, cls in self.classes)
        if self.function is not None and len(chain) == 1:
            return self.function[1].bindings.get(chain[0], "").startswith("call:")
        return False

    def with_unparsed_relatives(self, find: OnceFinder) -> Scope:
        """The scope with the bases and subclasses of its own class declared in any project file."""
        classes, ancestors, descendants = list(self.classes), set(self.ancestors), set(self.descendants)
        for _ in range(HIERARCHY_ROUNDS):
            bases = {_last(base) for _, cls in classes if cls.name in ancestors for base in cls.bases} - ancestors
            if not bases and not descendants:
                break
            found = [
                (summary, cls)
                for summary in find(f"classes:{sorted(bases)}:{sorted(descendants)}", declaring(bases, descendants))
                for cls in summary.classes
                if cls.name in bases or descendants.intersection(_last(base) for base in cls.bases)
            ]
            ancestors.update(cls.name for _, cls in found if cls.name in bases)
            descendants.update(cls.name for _, cls in found if cls.name not in bases)
            added = unique_classes([*classes, *found])
            if len(added) == len(classes):
                break
            classes = list(added)
        if len(classes) == len(self.classes):
            return self
        return Scope(tuple(classes), self.function, frozenset(ancestors), frozenset(descendants))


def _last(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def declaring(bases: set[str], names: set[str]) -> FileTest:
    """A test of a file's bytes: whether it holds a `class` statement declaring one of `bases`, or a
    subclass of one of `names`."""
    alternatives = []
    if bases:
        alternatives.append(rb"(?:" + b"|".join(re.escape(n.encode()) for n in sorted(bases)) + rb")\b")
    if names:
        alternatives.append(rb"\w+\s*\([^)]*\b(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names)) + rb")\b")
    declaration = re.compile(rb"\bclass\s+(?:" + b"|".join(alternatives) + rb")")
    words = [name.encode() for name in bases | names]

    def declares(_: str, raw: bytes) -> bool:
        return any(word in raw for word in words) and declaration.search(raw) is not None

    return declares


def unique_classes(
    classes: Iterable[tuple[FileSummary, ClassSummary]],
) -> tuple[tuple[FileSummary, ClassSummary], ...]:
    return tuple({(summary.path, cls.name, cls.span.line): (summary, cls) for summary, cls in classes}.values())


def _engine(chain: list[str]) -> list[str]:
    """What a receiver names an engine by: `self.<attribute>`, or its first name."""
    return chain[:2] if chain[0] in ("self", "cls") else chain[:1]


def _is_front_end(origin: str) -> bool:
    from cachelint import provenance

    module, name = provenance.origin_class_name(origin)
    return provenance.module_engine(module) == "vllm" and name.startswith(FRONT_END_PREFIX)
