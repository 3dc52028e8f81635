"""Subcommands of `python -m helpers` beyond `run`; each registers its own parser."""

from __future__ import annotations

REGISTRY: list = []
