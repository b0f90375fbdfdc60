"""CL202 refit-with-mm-embedding-cache: SGLang weights updated in place, with images, while SGLang's
multimodal embedding cache is on."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from packaging.version import Version

from cachelint.changes import AddKeyword, Change, InsertBefore, NewStatement, ReplaceKeyword
from cachelint.finding import Applicability, Finding, Fix, Span
from cachelint.multimodal import Evidence, content_part, nearest
from cachelint.provenance import Kind
from cachelint.rules.base import Context, Rule, RuleInfo
from cachelint.rules.sglang import SglangCall, describe, sglang_calls
from cachelint.summary import SGLANG_UPDATES, FileSummary, Launch

VARIABLE = "SGLANG_VLM_CACHE_SIZE_MB"
ON_POLICY = "rl_on_policy_target"
ON_POLICY_WORDS = (b"rl_on_policy_target", b"rl-on-policy-target")
# The fields of SGLang's generate request that carry media (the regex is run only where one is).
MEDIA_WORDS = (b"image_data", b"video_data", b"audio_data")
MEDIA_FIELDS = re.compile(rb"\b(" + b"|".join(MEDIA_WORDS) + rb")\b")


class RefitWithMmEmbeddingCache(Rule):
    info = RuleInfo(
        code="CL202",
        name="refit-with-mm-embedding-cache",
        summary="SGLang's weights updated in place for multimodal rollouts while its embedding cache is on: "
        "repeated images get vision features computed with the old weights.",
        fixable="sometimes",
        fix_kinds=("unsafe",),
    )

    def check(self, file: FileSummary, context: Context) -> Iterator[Finding]:
        if context.settings.multimodal is False:
            return
        if not any(call.ref.file.path == file.path for call in sglang_calls(context, SGLANG_UPDATES)):
            return  # most files: nothing to rank
        stale = stale_releases(context)
        media = media_evidence(context)
        if not stale or (context.settings.multimodal == "auto" and not media):
            return
        ranked = ranked_updates(context, media)
        for rank, call in enumerate(ranked):
            if call.ref.file.path != file.path:
                continue
            notes = [call.note]
            if rank == 0 and len(ranked) > 1:
                notes.append(
                    f"{len(ranked)} functions update SGLang's weights in place; this one is nearest the multimodal "
                    "input, and the fix (one setting where SGLang is launched serves them all) is offered here"
                )
            elif rank > 0:
                first = ranked[0]
                notes.append(f"the fix is offered at {first.ref.file.path}:{first.event.span.line}")
            if media:
                notes.append(nearest(media, file.path).note)
            yield self.finding(
                file,
                call.event.span,
                _message(call, stale, context),
                _help(context),
                fix=_fix(context) if rank == 0 else Fix(_help(context), Applicability.DISPLAY),
                function=call.ref.function.qualname,
                notes=tuple(notes),
            )


def ranked_updates(context: Context, media: tuple[Evidence, ...]) -> list[SglangCall]:
    """The first in-place update of each function that updates SGLang's weights itself (a call of a
    project client's method is reported where the client calls SGLang), on a path that can carry images
    (with `multimodal = "auto"`: in the top-level package or folder of a file showing multimodal input; a
    text-only example elsewhere is left out), nearest the multimodal input first."""
    first: dict[tuple[str, str], SglangCall] = {}
    for call in sglang_calls(context, SGLANG_UPDATES):
        if call.receiver.kind is not Kind.PROJECT:
            first.setdefault(call.ref.key, call)
    calls = list(first.values())
    if context.settings.multimodal == "auto":
        calls = [call for call in calls if any(_same_top(call.ref.file, found.path) for found in media)]

    def rank(call: SglangCall) -> tuple[int, bool, str, int]:
        """Nearest the multimodal input, then a refit before an adapter that only passes SGLang's method on
        under its own name (`HttpServerAdapter.update_weights_from_tensor`)."""
        shared = max((_shared_folders(call.ref.file.path, found.path) for found in media), default=0)
        return (-shared, call.ref.function.name in SGLANG_UPDATES, call.ref.file.path, call.event.span.line)

    return sorted(calls, key=rank)


def _same_top(file: FileSummary, path: str) -> bool:
    """Whether `path` lies in the top-level package or folder of `file`'s module (below the folder of a
    module that is in no package)."""
    if "." not in file.module:
        folder = file.path.rpartition("/")[0]
        return not folder or path.startswith(folder + "/")
    top = file.module.split(".")[0]
    return path.startswith(top + "/") or f"/{top}/" in path


def _shared_folders(path: str, other: str) -> int:
    count = 0
    for left, right in zip(path.split("/")[:-1], other.split("/")[:-1], strict=False):
        if left != right:
            break
        count += 1
    return count


def stale_releases(context: Context) -> list[Version]:
    """The supported SGLang releases on which the embedding cache keeps entries across requests and the
    project does not turn it off: none when it names the variable, and from the release where
    `rl_on_policy_target` turns it off on, none when the project names that option."""

    def find() -> list[Version]:
        facts = context.sglang_facts
        variable = facts.environment.get(VARIABLE)
        if variable is None or variable.effect_since is None:
            return []
        mentions = _mentions(context)
        if VARIABLE.encode() in mentions:
            return []
        on_policy = facts.engine_argument(ON_POLICY)
        off_from = on_policy.effect_since if on_policy is not None and ON_POLICY.encode() in mentions else None
        return [
            release
            for release in context.sglang_range.releases
            if release >= variable.effect_since and (off_from is None or release < off_from)
        ]

    return context.project.memoized("CL202:stale", find)


def _mentions(context: Context) -> set[bytes]:
    found: set[bytes] = set()
    if any(VARIABLE.encode() in raw for _, raw in context.sglang_bytes()):  # the variable's name names SGLang
        found.add(VARIABLE.encode())
    if any(word in raw for _, raw in context.project_bytes() for word in ON_POLICY_WORDS):
        found.add(ON_POLICY.encode())
    return found


def media_evidence(context: Context) -> tuple[Evidence, ...]:
    """The files that show the project sends SGLang images, videos or audio: they name SGLang and hold a
    media field of its generate request (`image_data`, `video_data`, `audio_data`) or a chat content
    part of a media type (`{"type": "image_url"}`). A media field in code that never names SGLang
    (a vLLM-only multimodal path of a project that uses both engines) does not count."""

    def find() -> tuple[Evidence, ...]:
        found = []
        for path, raw in context.sglang_bytes():
            if b"sglang" not in raw and b"SGLang" not in raw:
                continue
            hits = []
            match = MEDIA_FIELDS.search(raw) if any(word in raw for word in MEDIA_WORDS) else None
            if match is not None:
                hits.append((match.start(), match.group(1).decode()))
            part = content_part(raw)
            if part is not None:
                hits.append(part)
            if hits:
                at, word = min(hits)
                found.append(Evidence(path, raw.count(b"\n", 0, at) + 1, word))
        return tuple(found)

    return context.project.memoized("CL202:media", find)


def _message(call: SglangCall, stale: list[Version], context: Context) -> str:
    event = call.event
    shown = f"POST /{event.method}" if event.via == "http" else f"{event.receiver}.{event.method}(...)"
    supported = list(context.sglang_range.releases)
    share = describe(stale) if stale == supported else f"{describe(stale)} of the supported {describe(supported)}"
    return (
        f"`{shown}` updates SGLang's weights in place, but SGLang's multimodal embedding cache (on unless "
        f"{VARIABLE}=0) keeps vision-encoder outputs computed with the old weights: no weight update and no "
        f"`flush_cache` clears it, so a repeated image gets the old policy's features (SGLang {share})"
    )


def _help(context: Context) -> str:
    on_policy = context.sglang_facts.engine_argument(ON_POLICY)
    since = f" (SGLang {on_policy.effect_since}+)" if on_policy is not None and on_policy.effect_since else ""
    return (
        f'Turn the cache off where SGLang is launched: `{VARIABLE}="0"` in the environment of the server or '
        f"engine process, or launch with `--rl-on-policy-target`{since}"
    )


# The calls that may launch SGLang (cachelint.summary.launches says which count); `run(` and `call(`
# only in a file that names `subprocess`.
LAUNCH_CALLS = (b"Engine", b"launch_server", b"_launch_subprocesses", b"Process", b"Popen")
IN_PROCESS_OR_POPEN = re.compile(rb"\b(?:" + b"|".join(LAUNCH_CALLS) + rb")\(")
_LAUNCH_CALL_WORDS = tuple(name + b"(" for name in LAUNCH_CALLS)  # the regex runs only where one is
SUBPROCESS_RUN = re.compile(rb"\b(?:run|call|check_call|check_output)\(")


def _may_launch(raw: bytes) -> bool:
    """Whether a file's bytes hold a call that may launch SGLang."""
    if any(word in raw for word in _LAUNCH_CALL_WORDS) and IN_PROCESS_OR_POPEN.search(raw) is not None:
        return True
    return b"subprocess" in raw and SUBPROCESS_RUN.search(raw) is not None


def _launches(context: Context) -> list[tuple[FileSummary, Launch]]:
    """Every launch site of the project: the files that may hold one (they name SGLang, in their path
    or their bytes, in any case, and hold a call that may launch it) are parsed when a finding asks."""

    def find() -> list[tuple[FileSummary, Launch]]:
        naming = {path for path, _ in context.sglang_bytes()}

        def may_launch(path: str, raw: bytes) -> bool:
            return (path in naming or "sglang" in path.lower()) and _may_launch(raw)

        files = {file.path: file for file in context.project.files.values()}
        files.update((file.path, file) for file in context.summaries_where(may_launch))
        return [(file, launch) for _, file in sorted(files.items()) for launch in file.launches]

    return context.project.memoized("CL202:launches", find)


def _fix(context: Context) -> Fix:
    """The variable set at every launch site of the project, when each can take it."""
    help_text = _help(context)
    launches = _launches(context)
    changes = [_change(file, launch) for file, launch in launches]
    if not launches or any(change is None for change in changes):
        return Fix(help_text, Applicability.DISPLAY)
    sites = ", ".join(f"{file.path}:{launch.span.line}" for file, launch in launches)
    return Fix(
        f"Set {VARIABLE}=0 where SGLang is launched ({sites})",
        Applicability.UNSAFE,
        changes=tuple(_once_per_chain(launches, changes)),
    )


def _once_per_chain(launches: list[tuple[FileSummary, Launch]], changes: list[Change | None]) -> list[Change]:
    """`changes`, but the variable set once before an if/elif/else chain rather than in each branch when
    every branch launches SGLang (verl's launch per SGLang release)."""
    chains: list[tuple[str, Span] | None] = [
        (file.path, launch.chain_span) if isinstance(change, InsertBefore) and launch.chain_span else None
        for (file, launch), change in zip(launches, changes, strict=True)
    ]
    held: dict[tuple[str, Span], set[int]] = {}
    for chain, (_, launch) in zip(chains, launches, strict=True):
        if chain is not None:
            held.setdefault(chain, set()).add(launch.branch)
    merged: list[Change] = []
    done: set[tuple[str, Span]] = set()
    for chain, (_, launch), change in zip(chains, launches, changes, strict=True):
        if chain is None or held[chain] != set(range(launch.branches)):
            merged += [change] if change is not None else []
        elif chain not in done and isinstance(change, InsertBefore):
            done.add(chain)
            merged.append(dataclasses.replace(change, statement=chain[1]))
    return merged


def _change(file: FileSummary, launch: Launch) -> Change | None:
    """`env={**env, "SGLANG_VLM_CACHE_SIZE_MB": "0"}` for a subprocess, `os.environ[...] = "0"` before an
    in-process launch (its processes inherit the environment); None when the file does not import `os`
    where it is needed, or there is no statement to go before."""
    entry = f'"{VARIABLE}": "0"'
    if launch.kind == "subprocess" and launch.env_span is not None:
        return ReplaceKeyword(file.path, launch.env_span, "env", f"{{**{launch.env_value}, {entry}}}")
    if file.imports.get("os") != "os":
        return None
    if launch.kind == "subprocess":
        return AddKeyword(file.path, launch.span, "env", f"{{**os.environ, {entry}}}")
    if not launch.at_statement_level:
        return None
    return InsertBefore(file.path, launch.statement_span, (NewStatement(f'os.environ["{VARIABLE}"] = "0"'),))
