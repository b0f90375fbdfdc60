"""Searching bytes for several words at once, by the parts they share: a file without a shared part
(most files) is searched once for the part instead of once for each word holding it."""

from __future__ import annotations

from collections.abc import Iterable


class WordSearch:
    """`words` grouped under the first of `shared_parts` each holds; a word holding none stands alone."""

    def __init__(self, words: Iterable[bytes], shared_parts: Iterable[bytes]) -> None:
        parts = tuple(shared_parts)
        groups: dict[bytes, list[bytes]] = {}
        for word in words:
            part = next((part for part in parts if part in word), word)
            groups.setdefault(part, []).append(word)
        self.groups = tuple((part, tuple(held)) for part, held in groups.items())

    def any_in(self, raw: bytes) -> bool:
        return any(part in raw and any(word in raw for word in words) for part, words in self.groups)

    def found_in(self, raw: bytes) -> list[tuple[int, bytes]]:
        """Where each word first is in `raw`, for the words it holds."""
        return [
            (at, word) for part, words in self.groups if part in raw for word in words if (at := raw.find(word)) >= 0
        ]
