"""Whether a project sends multimodal input to vLLM, as far as the bytes of its files tell.

The multimodal processor cache and the encoder cache are filled only by requests that carry images,
videos or audio: for a text-only project CL003 and CL004 report consequences that cannot happen. With
`multimodal = "auto"` (the default) those rules run only when some file of the project (not only the
files being checked) holds one of these, written as real frameworks hand media to vLLM:

- `multi_modal_data`: the prompt key of `LLM.generate` / `AsyncLLM.generate` (verl, TRL 0.23 and
  1.x, OpenRLHF 0.11, Trinity-RFT, siirl, RLinf), and `MultiModalDataDict`, its type (Trinity-RFT 0.6);
- `limit_mm_per_prompt` and `mm_processor_kwargs`: engine and request options that only multimodal
  inputs use (OpenRLHF 0.11, verl, ART, unsloth-zoo);
- a chat content part of a type vLLM's chat parser reads media from, as a dict literal
  (`{"type": "image_url", ...}`: SkyRL's renderer, TRL's server client).

Not evidence: `pixel_values` (trainers feed it to the policy model: TRL 0.19.1 has it and sends vLLM
only text), `process_vision_info` and `{"type": "image"}` parts (Hugging Face chat-template shapes:
unsloth uses them for training only, TRL's text-only RLOO names one in a comment).

The evidence is project-wide; cachelint.text_only narrows it to the code that holds a finding.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cachelint.word_search import WordSearch

WORDS = (b"multi_modal_data", b"MultiModalDataDict", b"limit_mm_per_prompt", b"mm_processor_kwargs")
# The content-part types vLLM's chat parser (`MM_PARSER_MAP`) takes media from.
PART_TYPES = (b"image_url", b"video_url", b"audio_url", b"input_audio", b"image_pil", b"image_embeds")
CONTENT_PART = re.compile(rb"""["']type["']\s*:\s*["'](""" + b"|".join(PART_TYPES) + rb""")["']""")


@dataclass(frozen=True)
class Evidence:
    """Where a project shows that it sends multimodal input to vLLM."""

    path: str
    line: int
    word: str
    defines: frozenset[str] = frozenset()  # the names the file defines (`def name`)

    @property
    def note(self) -> str:
        return f"multimodal input: {self.path}:{self.line} holds `{self.word}`"


_WORD_SEARCH = WordSearch(WORDS, (b"odal", b"mm_p"))


def find_evidence(raw: bytes) -> tuple[str, int] | None:
    """The first evidence in a file's bytes, and its line; None when there is none."""
    found = [(at, word.decode()) for at, word in _WORD_SEARCH.found_in(raw)]
    part = content_part(raw)
    if part is not None:
        found.append(part)
    if not found:
        return None
    at, word = min(found)
    return word, raw.count(b"\n", 0, at) + 1


def content_part(raw: bytes) -> tuple[int, str] | None:
    """Where the first chat content part of a media type is in a file's bytes, and how it is shown
    (`"type": "image_url"`); None when there is none."""
    if not (b'type"' in raw or b"type'" in raw) or not any(part in raw for part in PART_TYPES):
        return None
    match = CONTENT_PART.search(raw)
    return (match.start(), f'"type": "{match.group(1).decode()}"') if match is not None else None


def nearest(evidence: Sequence[Evidence], path: str) -> Evidence:
    """The evidence in the file that shares the most leading folders with `path` (a finding's file),
    the first of them in `evidence`'s order on a tie: the one a reader of the finding cares about."""
    folders = path.split("/")[:-1]

    def shared(found: Evidence) -> int:
        pairs = zip(folders, found.path.split("/")[:-1], strict=False)
        return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))

    return max(evidence, key=shared)
