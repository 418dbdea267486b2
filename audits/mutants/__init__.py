"""Planted-bug mutants of the real components, injected without editing the real code.

Each :class:`Mutant` is a context manager factory: inside ``with mutant.inject():`` one real
function, method or table entry is replaced (on the module or class the library looks it up
from at call time) by a subtly wrong version, and everything is restored on exit, caches
included. The self-check (:mod:`audits.selfcheck`) runs the audits against each mutant; every
mutant must be caught by at least one audit.
"""

from __future__ import annotations

from audits.mutants._catalogue import MUTANTS, Mutant, mutant_by_name

__all__ = ["MUTANTS", "Mutant", "mutant_by_name"]
