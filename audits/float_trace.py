"""Catching floating point on a sampling path: a tracer over every frame, C call and bytecode line.

A float can reach an integer sampler in three ways, and :class:`FloatTrace` watches all three
while the sampling function runs:

1. **Values.** Every Python frame (the sampler's, numpy's Python-level helpers, anything called)
   has its locals scanned at every line and its return value at every return: a Python ``float``
   or ``complex``, a numpy floating scalar, or an array of float/complex dtype (or an object
   array holding one) is a finding.
2. **C calls.** ``sys.setprofile`` sees every call of a built-in: anything from ``math`` that
   returns a float, ``random``, and any method of ``numpy.random`` (which is also not a
   cryptographic stream) is a finding.
3. **Bytecode.** For the code of the sampler's own modules, every *executed* line's instructions
   are read: a float or complex constant, a true division ``/`` (which makes floats of ints), or
   a load of a float-producing name (``float64``, ``exp``, ``sqrt``, ``normal`` ...) is a finding.
   This sees floats that live only on numpy's C value stack (``np.rint(rng.normal(...))``).

Setup is not traced: the audit builds the sampler first (σ may be converted with floats there)
and traces only the draw. Interpreter overhead makes traced draws slow, so audits draw a few
hundred values per σ (each σ regime's code runs).
"""

from __future__ import annotations

import dis
import gc
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["FLOAT_NAMES", "FloatFinding", "FloatTrace", "trace_floats"]

#: Names whose load on an executed line of the sampler's own code is a finding.
FLOAT_NAMES = frozenset(
    {
        "float",
        "float16",
        "float32",
        "float64",
        "float128",
        "longdouble",
        "double",
        "half",
        "single",
        "complex",
        "complex64",
        "complex128",
        "exp",
        "exp2",
        "expm1",
        "log",
        "log2",
        "log10",
        "log1p",
        "sqrt",
        "cbrt",
        "sin",
        "cos",
        "tan",
        "pi",
        "inf",
        "nan",
        "normal",
        "standard_normal",
        "uniform",
        "random",
        "random_sample",
        "rand",
        "randn",
        "rint",
        "true_divide",
        "divide",
        "gauss",
        "lgamma",
        "gamma",
        "erf",
        "erfc",
        "hypot",
        "power",
        "float_power",
        "fromhex",
        # numpy's generators (Cython: invisible to the C-call hook), also not a crypto stream
        "default_rng",
        "RandomState",
        "Generator",
    }
)
# math functions that return ints (or bools) for int arguments.
_INTEGER_MATH = frozenset(
    {"isqrt", "gcd", "lcm", "comb", "perm", "factorial", "prod", "isfinite", "isinf", "isnan"}
)
_TRUE_DIVISION = {"/", "/="}


@dataclass(frozen=True)
class FloatFinding:
    """One place a float was seen: which check, where, and what.

    Examples
    --------
    >>> str(FloatFinding("bytecode", "m.py:3", "true division '/'"))
    "bytecode at m.py:3: true division '/'"
    """

    check: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.check} at {self.where}: {self.what}"


def _is_float_value(value: Any) -> str | None:
    """Describe ``value`` if it is (or holds) floating point."""
    if isinstance(value, bool | int | np.integer | np.bool_):
        return None
    if isinstance(value, float | complex | np.floating | np.complexfloating):
        return f"{type(value).__name__} {value!r}"
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            return f"ndarray of {value.dtype}"
        if value.dtype.kind == "O" and value.size:
            flat = value.ravel()
            for item in flat[: min(flat.size, 8)]:
                if isinstance(item, float | complex | np.floating):
                    return "object array holding floats"
    return None


@dataclass
class FloatTrace:
    """Context manager recording every float on the code path it wraps.

    Parameters
    ----------
    modules
        Module-name prefixes whose executed bytecode is read (the sampler's own code).
    ignore
        Module-name prefixes whose frames are not scanned at all (must be justified: the
        audits pass none).

    Examples
    --------
    >>> def integer_only() -> int:
    ...     return sum([1, 2, 3]) // 2
    >>> def with_a_float() -> int:
    ...     return int((np.arange(3) * 0.5).sum())
    >>> with FloatTrace(modules=("audits",)) as trace:
    ...     _ = integer_only()
    >>> trace.findings
    []
    >>> with FloatTrace(modules=("audits",)) as trace:
    ...     _ = with_a_float()
    >>> sorted({finding.check for finding in trace.findings})
    ['bytecode', 'value']
    """

    modules: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    findings: list[FloatFinding] = field(default_factory=list)
    lines_seen: int = 0
    _executed: dict[types.CodeType, set[int]] = field(default_factory=dict)
    _seen: set[tuple[str, str, str]] = field(default_factory=set)
    _old_trace: Any = None
    _old_profile: Any = None
    _gc_was_enabled: bool = True

    def _record(self, check: str, where: str, what: str) -> None:
        key = (check, where, what)
        if key not in self._seen and len(self.findings) < 200:
            self._seen.add(key)
            self.findings.append(FloatFinding(check, where, what))

    @staticmethod
    def _module(frame: types.FrameType) -> str:
        return str(frame.f_globals.get("__name__", ""))

    def _scan_locals(self, frame: types.FrameType) -> None:
        where = f"{self._module(frame)}.{frame.f_code.co_name}:{frame.f_lineno}"
        for name, value in frame.f_locals.items():
            described = _is_float_value(value)
            if described is not None:
                self._record("value", where, f"local {name!r} is {described}")

    def _local_trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.lines_seen += 1
            self._scan_locals(frame)
            if self._module(frame).startswith(self.modules):
                self._executed.setdefault(frame.f_code, set()).add(frame.f_lineno)
        elif event == "return":
            self._scan_locals(frame)
            described = _is_float_value(arg)
            if described is not None:
                where = f"{self._module(frame)}.{frame.f_code.co_name}"
                self._record("value", where, f"returned {described}")
        return self._local_trace

    def _global_trace(self, frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "call" or self._module(frame).startswith(self.ignore or ("\0",)):
            return None
        return self._local_trace

    def _profile(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        name = getattr(arg, "__name__", "")
        owner = getattr(arg, "__self__", None)
        module = getattr(arg, "__module__", None) or ""
        owner_module = type(owner).__module__ if owner is not None else ""
        where = f"{self._module(frame)}.{frame.f_code.co_name}:{frame.f_lineno}"
        if module == "math" and name not in _INTEGER_MATH:
            self._record("C call", where, f"math.{name}")
        elif module in ("random", "_random") or owner_module in ("random", "_random"):
            self._record("C call", where, f"random.{name}")
        elif owner_module.startswith("numpy.random"):
            self._record("C call", where, f"numpy.random {type(owner).__name__}.{name}")
        elif name in ("float", "fromhex"):
            self._record("C call", where, name)

    def _scan_bytecode(self) -> None:
        for code, lines in self._executed.items():
            module = code.co_filename
            for instruction in dis.get_instructions(code):
                line = instruction.positions.lineno if instruction.positions else None
                if line not in lines:
                    continue
                where = f"{module}:{line}"
                if instruction.opname == "LOAD_CONST" and isinstance(
                    instruction.argval, float | complex
                ):
                    self._record("bytecode", where, f"float constant {instruction.argval!r}")
                elif instruction.opname == "BINARY_OP" and instruction.argrepr in _TRUE_DIVISION:
                    self._record("bytecode", where, "true division '/'")
                elif (
                    instruction.opname in ("LOAD_ATTR", "LOAD_GLOBAL", "LOAD_METHOD", "LOAD_NAME")
                    and isinstance(instruction.argval, str)
                    and instruction.argval in FLOAT_NAMES
                ):
                    self._record("bytecode", where, f"loads {instruction.argval!r}")

    def __enter__(self) -> FloatTrace:
        # A garbage collection inside the trace would run unrelated finalisers (with floats of
        # their own) in the traced thread: collect first, and keep the collector off meanwhile.
        gc.collect()
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        self._old_trace = sys.gettrace()
        self._old_profile = sys.getprofile()
        sys.setprofile(self._profile)
        sys.settrace(self._global_trace)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._old_trace)
        sys.setprofile(self._old_profile)
        if self._gc_was_enabled:
            gc.enable()
        self._scan_bytecode()


def trace_floats(
    function: Callable[[], Any], *, modules: Iterable[str], ignore: Iterable[str] = ()
) -> FloatTrace:
    """Run ``function()`` under a :class:`FloatTrace`; return the trace (findings inside).

    Examples
    --------
    >>> trace_floats(lambda: 7 // 2, modules=("audits",)).findings
    []
    """
    with FloatTrace(modules=tuple(modules), ignore=tuple(ignore)) as trace:
        function()
    return trace
