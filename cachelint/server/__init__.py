"""`cachelint server`: a language server (LSP over stdio) for editors.

Only `app` imports pygls, the optional `server` extra; `missing_dependency` tells the command line
whether it is installed without importing anything else of the server.
"""

from __future__ import annotations

import importlib

from cachelint import DISTRIBUTION

INSTALL_HINT = f"pip install '{DISTRIBUTION}[server]'"


def missing_dependency() -> str | None:
    """The first of the server's own dependencies that cannot be imported, if any."""
    for name in ("pygls", "lsprotocol"):
        try:
            importlib.import_module(name)
        except ImportError:
            return name
    return None
