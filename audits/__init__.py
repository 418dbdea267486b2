"""Statistical and property-based audits of the toolkit, with planted-bug mutants."""

from __future__ import annotations

__all__: list[str] = []
