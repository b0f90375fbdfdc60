"""Text from the analysed code made safe to show: no character in it may drive a terminal or a log."""

from __future__ import annotations

# Characters that would drive the terminal (escape sequences can retitle or clear it, hide or fake
# lines): shown as their Unicode control pictures (ESC as \u241b), one column each, as ruff does.
_UNPRINTABLE = {
    **{code: 0x2400 + code for code in range(0x20) if code != 0x09},
    0x7F: 0x2421,
    **dict.fromkeys((*range(0x80, 0xA0), 0x2028, 0x2029), 0xFFFD),
}


def printable(text: str) -> str:
    """`text` from the analysed code (a source line, a name in a message, a file name) safe to print."""
    return text.translate(_UNPRINTABLE)
