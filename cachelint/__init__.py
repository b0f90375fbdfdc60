"""cachelint: finds and fixes vLLM cache-reset bugs in RL post-training code."""

__version__ = "0.2.0"
