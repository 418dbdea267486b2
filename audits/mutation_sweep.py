"""Generated mutants against the audits: cosmic-ray's mutations of the privacy-critical code,
killed (or not) by the fast audit suite — never by the unit tests.

The planted mutants of :mod:`audits.mutants` were written by us, knowing the audits; generated
ones were not. This sweep asks cosmic-ray (an established mutation-testing tool, MIT licence,
the ``mutation`` extra) for every mutation of the modules in :data:`TARGETS`, draws a uniform
random sample, and for each mutant:

1. applies it to a private copy of the packages (the source tree is never touched);
2. if no audit executes the mutated line (one coverage run of each audit alone on the pristine
   copy decides it), records it as **not reached** — it cannot change what any audit sees;
3. otherwise runs the fast suite (``python -m audits --only …``) against the copy, restricted to
   the audits that execute the mutated line: every audit gets the same seed whichever others
   run, and runs deterministically, so an audit that never executes the line sees exactly what
   it sees on the pristine copy and passes as it does there (each audit's coverage is taken
   alone, so a value another audit would have cached for it counts as executed). Exit status 1
   with a FAIL verdict is **killed**, 0 is **survived**; FAILs that are all the implementation
   raising under an audit, or an audit running past the suite's time budget
   (:data:`audits.suite.FAST_TIME_LIMIT`, a hang), are **raised** — scored apart; anything
   else (an import error, an exception outside the audits, the sweep's own per-mutant timeout)
   is **crashed** — counted apart, never as a catch.

The kill rate is reported with a Clopper–Pearson 95 % interval over the sample, among the
mutants the audits reach and among all. Survivors are triaged in a committed table,
``audits/mutation_triage.toml`` (:func:`load_triage`): each entry names a mutant by module,
function, operator and mutated line (not by line number, so it outlives edits elsewhere) and
says whether it is **equivalent** (no input changes what the code returns or raises — with the
argument) or **unseen** (a real change no audit can see, and why). Argued-equivalent survivors
leave the denominator of the score, unseen ones stay in it as survivors; both scores are
printed. Run it with ``python -m audits.mutation_sweep --sample 200 --out DIR``; re-score an
earlier run against today's triage with ``--report DIR/mutation_sweep.json``.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy import stats

from audits.suite import AUDITS

__all__ = [
    "TARGETS",
    "TRIAGE",
    "MutantRun",
    "Mutation",
    "TriageEntry",
    "classify_suite_run",
    "clopper_pearson",
    "draw_sample",
    "generate_mutations",
    "load_triage",
    "main",
    "merge_reruns",
    "run_sweep",
    "score",
]

#: The privacy-critical modules (issue 16): samplers, accountant and events, quantile and
#: secure-average noise planning, masks, Shamir, client and server, the SecAgg+ picker.
TARGETS: tuple[str, ...] = (
    "dpquantile/samplers.py",
    "dpquantile/_fast_sampler.py",
    "dpquantile/accounting.py",
    "dpquantile/quantile.py",
    "protocols/aggregation/_quantization.py",
    "secagg/masks.py",
    "secagg/shamir.py",
    "secagg/client.py",
    "secagg/server.py",
    "secagg/graph_parameters.py",
)
_PACKAGES = ("secagg", "dpquantile", "protocols", "audits")
#: The committed triage of surviving mutants.
TRIAGE = Path(__file__).with_name("mutation_triage.toml")
_TRIAGE_VERDICTS = ("equivalent", "unseen")
_TIME_BUDGET = "time budget"  # MutantRun.raised_in of a hang stopped by the suite's budget
_STATUSES = ("killed", "raised", "survived", "crashed", "not reached", "equivalent", "no change")


@dataclass(frozen=True)
class Mutation:
    """One cosmic-ray mutation: where, which operator, which occurrence of it in the module."""

    module: str
    operator: str
    occurrence: int
    line: int
    definition: str


@dataclass(frozen=True)
class MutantRun:
    """A mutant's outcome: ``killed`` (an audit's verdict), ``raised`` (the implementation raised
    under an audit), ``survived``, ``crashed`` (outside the audits), ``not reached`` (no audit
    executes its line), ``equivalent`` (annotation or assert only: decided from the syntax tree)
    or ``no change`` (cosmic-ray could not apply it)."""

    mutation: Mutation
    status: str
    failed_audits: tuple[int, ...]
    changed_line: str
    seconds: float
    note: str = ""
    # raised: our module the exception came from (audits.suite.raised_in), or "time budget"
    raised_in: str = ""
    # the audits run against it: those executing its line (sweeps before 2026-12-07 ran all)
    audits_run: tuple[int, ...] = ()


@dataclass(frozen=True)
class TriageEntry:
    """One triaged survivor: ``verdict`` is ``"equivalent"`` (no input changes what the code
    returns, sends or which error it raises — a message's wording aside) or ``"unseen"`` (a
    real change no audit can see); ``why`` argues it."""

    module: str
    function: str
    operator: str
    line: str
    verdict: str
    why: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What names the mutant: module, function, operator, mutated line (stripped)."""
        return (self.module, self.function, self.operator, self.line.strip())


def _run_key(run: Mapping[str, Any]) -> tuple[str, str, str, str]:
    m = run["mutation"]
    return (m["module"], m["definition"], m["operator"], str(run["changed_line"]).strip())


_TriageTable = Mapping[tuple[str, str, str, str], TriageEntry]


def merge_reruns(base: Mapping[str, Any], reruns: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A sweep with its later re-runs (``--rerun`` outputs, in order) folded in: a re-run mutant
    — found by what names it across edits: module, operator, function and mutated line —
    takes its latest outcome; one a re-run found *gone* (its line was rewritten since) keeps
    its earlier outcome, noted: a survivor stays a survivor.

    Examples
    --------
    >>> m = {"module": "m.py", "operator": "op", "occurrence": 0, "line": 3, "definition": "f"}
    >>> run = {"mutation": m, "status": "survived", "failed_audits": [], "changed_line": "x",
    ...        "seconds": 1.0, "note": ""}
    >>> base = {"runs": [run], "generated": 1, "sample": 1, "planned": 1, "seed": 0}
    >>> moved = {**run, "mutation": {**m, "line": 4}, "status": "killed", "failed_audits": [8]}
    >>> merge_reruns(base, [{"runs": [moved], "gone": []}])["counts"]["killed"]
    1
    """
    runs = [dict(r) for r in base["runs"]]
    for rerun in reruns:
        for later in rerun["runs"]:
            match = next((i for i, r in enumerate(runs) if _run_key(r) == _run_key(later)), None)
            if match is not None:
                runs[match] = dict(later)
        for origin in rerun.get("gone", []):
            for r in runs:
                if r["mutation"] == origin:
                    r["note"] = "gone: its line was rewritten since; earlier outcome kept"
    return {
        **{k: base[k] for k in ("generated", "sample", "planned", "seed") if k in base},
        **_tally([r["status"] for r in runs]),
        "merged_reruns": len(reruns),
        "runs": runs,
    }


def load_triage(path: Path = TRIAGE) -> dict[tuple[str, str, str, str], TriageEntry]:
    """The triage table: ``[[mutant]]`` entries with ``module``, ``function``, ``operator``,
    ``line`` (the mutated line as the sweep prints it), ``verdict`` and ``why``.

    Raises ``ValueError`` on an entry with a missing field, an unknown verdict, an empty
    argument or a duplicate key.

    Examples
    --------
    >>> entries = load_triage()
    >>> all(e.verdict in ("equivalent", "unseen") and e.why for e in entries.values())
    True
    """
    raw = tomllib.loads(path.read_text(encoding="utf-8")).get("mutant", [])
    entries: dict[tuple[str, str, str, str], TriageEntry] = {}
    fields = ("module", "function", "operator", "line", "verdict", "why")
    for index, item in enumerate(raw):
        missing = [f for f in fields if not isinstance(item.get(f), str)]
        if missing or set(item) - set(fields):
            raise ValueError(
                f"{path.name} entry {index}: needs string fields {fields}; "
                f"missing {missing}, unknown {sorted(set(item) - set(fields))}"
            )
        entry = TriageEntry(**{f: item[f] for f in fields})
        if entry.verdict not in _TRIAGE_VERDICTS:
            raise ValueError(
                f"{path.name} entry {index}: verdict must be one of {_TRIAGE_VERDICTS}; "
                f"got {entry.verdict!r}"
            )
        if not entry.why.strip():
            raise ValueError(f"{path.name} entry {index}: 'why' must argue the verdict")
        if entry.key in entries:
            raise ValueError(f"{path.name} entry {index}: a second entry for {entry.key}")
        entries[entry.key] = entry
    return entries


def score(runs: Sequence[Mapping[str, Any]], triage: _TriageTable) -> dict[str, Any]:
    """The mutation score of a sweep's runs under a triage table.

    The denominator is every non-equivalent mutant the audits execute: killed, raised and
    survived ones, less the survivors triaged **equivalent**. Reported two ways, each with a
    Clopper–Pearson 95 % interval: by an audit's verdict, and counting the raised ones too
    (an audit that FAILs because the implementation raised under it — cosmic-ray's own rule
    counts any failing test run as a kill). Survivors with no triage entry are listed.

    Examples
    --------
    >>> run = {"mutation": {"module": "m.py", "definition": "f", "operator": "op"},
    ...        "changed_line": "x = a ^ b", "status": "survived"}
    >>> why = TriageEntry("m.py", "f", "op", "x = a ^ b", "equivalent", "a, b disjoint")
    >>> score([run, {**run, "status": "killed"}], {why.key: why})["by_verdict"][:2]
    [1, 1]
    >>> score([run], {})["untriaged"]
    1
    """
    statuses = [r["status"] for r in runs]
    survivors = [r for r in runs if r["status"] == "survived"]
    origins = [
        str(r.get("raised_in", "")).partition(".")[0] for r in runs if r["status"] == "raised"
    ]
    verdicts = [triage[_run_key(r)].verdict if _run_key(r) in triage else "" for r in survivors]
    argued = verdicts.count("equivalent")
    killed, raised = statuses.count("killed"), statuses.count("raised")
    denominator = killed + raised + len(survivors) - argued
    return {
        "survived": len(survivors),
        "argued_equivalent": argued,
        "unseen": verdicts.count("unseen"),
        "untriaged": verdicts.count(""),
        "by_verdict": [killed, denominator, *clopper_pearson(killed, denominator)],
        "with_raised": [
            killed + raised,
            denominator,
            *clopper_pearson(killed + raised, denominator),
        ],
        # Where the raised ones raised: in the library (on an audit's input), in an audit's
        # own code (tripping on the mutant's output), nowhere (the target hung past the
        # suite's time budget), or not recorded (sweeps before 2026-12-07).
        "raised_where": {
            "library": sum(o in {"secagg", "dpquantile", "protocols"} for o in origins),
            "audits": origins.count("audits"),
            "time budget": origins.count(_TIME_BUDGET),
            "unrecorded": sum(not o for o in origins),
        },
    }


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial confidence interval for a proportion.

    Examples
    --------
    >>> low, high = clopper_pearson(45, 50)
    >>> round(low, 3), round(high, 3)
    (0.782, 0.967)
    >>> clopper_pearson(0, 0)
    (0.0, 1.0)
    """
    if trials == 0:
        return 0.0, 1.0
    alpha = 1.0 - level
    low = 0.0 if successes == 0 else stats.beta.ppf(alpha / 2, successes, trials - successes + 1)
    high = (
        1.0
        if successes == trials
        else stats.beta.ppf(1 - alpha / 2, successes + 1, trials - successes)
    )
    return float(low), float(high)


def _copy_tree(source: Path, destination: Path) -> None:
    for package in _PACKAGES:
        shutil.copytree(
            source / package,
            destination / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        )


def generate_mutations(source: Path, modules: Sequence[str] = TARGETS) -> list[Mutation]:
    """Every mutation cosmic-ray generates for ``modules`` (its ``init`` and ``dump``)."""
    with tempfile.TemporaryDirectory(prefix="secagg-dp-mutations-") as scratch:
        work = Path(scratch)
        _copy_tree(source, work)
        config = work / "cosmic-ray.toml"
        listed = ", ".join(json.dumps(m) for m in modules)
        config.write_text(
            "[cosmic-ray]\n"
            f"module-path = [{listed}]\n"
            "timeout = 600.0\nexcluded-modules = []\n"
            "test-command = \"python -c 'pass'\"\n\n"
            '[cosmic-ray.distributor]\nname = "local"\n'
        )
        session = work / "session.sqlite"
        subprocess.run(
            ["cosmic-ray", "init", str(config), str(session)],
            cwd=work,
            check=True,
            capture_output=True,
        )
        dumped = subprocess.run(
            ["cosmic-ray", "dump", str(session)],
            cwd=work,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    mutations = []
    for line in dumped.splitlines():
        job, _result = json.loads(line)
        for m in job["mutations"]:
            mutations.append(
                Mutation(
                    m["module_path"],
                    m["operator_name"],
                    int(m["occurrence"]),
                    int(m["start_pos"][0]),
                    str(m.get("definition_name") or ""),
                )
            )
    return sorted(mutations, key=lambda m: (m.module, m.line, m.operator, m.occurrence))


def _audit_command(out: Path, only: Sequence[int] | None = None) -> list[str]:
    command = [sys.executable, "-m", "audits", "--no-plots", "--out", str(out), "--seed", "0"]
    return command if only is None else [*command, "--only", ",".join(map(str, only))]


def _environment(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}


def executed_lines(
    tree: Path, modules: Sequence[str], audit: int | None = None
) -> dict[str, set[int]]:
    """The lines of ``modules`` the fast audit suite (or audit number ``audit`` alone) executes
    on the pristine copy."""
    data = tree / ".coverage"
    out = tree / "coverage-run"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "coverage",
            "run",
            f"--data-file={data}",
            f"--include={','.join(str(tree / m) for m in modules)}",
            *_audit_command(out, None if audit is None else [audit])[1:],
        ],
        cwd=tree,
        env=_environment(tree),
        check=False,
        capture_output=True,
    )
    report = tree / "coverage.json"
    subprocess.run(
        [sys.executable, "-m", "coverage", "json", f"--data-file={data}", "-o", str(report)],
        cwd=tree,
        env=_environment(tree),
        check=True,
        capture_output=True,
    )
    files = json.loads(report.read_text())["files"]
    lines: dict[str, set[int]] = {m: set() for m in modules}
    for path, record in files.items():
        relative = os.path.relpath(path, tree) if os.path.isabs(path) else path
        if relative in lines:
            lines[relative] = set(record["executed_lines"])
    for leftover in (data, report):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    return lines


def executed_lines_by_audit(
    tree: Path, modules: Sequence[str], audits: Sequence[int] | None = None
) -> dict[str, dict[int, set[int]]]:
    """For each module, the lines each audit executes when it runs alone on the pristine copy.

    Alone, not in the suite: an audit that reads a value another audit computed and cached
    would execute the computing lines itself when run alone, so a mutant of those lines is run
    against it too.
    """
    numbers = [spec.number for spec in AUDITS] if audits is None else list(audits)
    by_audit = {number: executed_lines(tree, modules, number) for number in numbers}
    return {m: {n: by_audit[n][m] for n in numbers if by_audit[n][m]} for m in modules}


def _statement_line(source: str, line: int) -> int:
    """The first line of the innermost statement containing ``line`` (coverage reports a
    multi-line statement — a signature with defaults, a call over several lines — by its first).

    A line of a function's signature (a default, an annotation) belongs to the ``def``, which
    runs at import; what decides whether the mutation can matter is whether the function is
    ever called, so the first statement of its body (after a docstring) is returned instead.

    Examples
    --------
    >>> _statement_line("def f(\\n    a=1,\\n):\\n    'Doc.'\\n    return a\\n", 2)
    5
    """
    containing = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    if not containing:
        return line
    innermost = max(containing, key=lambda node: node.lineno)
    if isinstance(innermost, ast.FunctionDef | ast.AsyncFunctionDef):
        body = innermost.body
        if line < body[0].lineno:
            documented = (
                isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            )
            return (body[1] if documented and len(body) > 1 else body[0]).lineno
    return innermost.lineno


def runs_at_import(source: str, line: int) -> bool:
    """Whether ``line`` runs when its module is imported: outside every function body (module
    and class bodies, decorators, defaults and signatures run at import; a body runs only when
    called).

    Examples
    --------
    >>> code = "LIMIT = 2 ** 62\\ndef f(a=1):\\n    return a\\nclass C:\\n    X = f()\\n"
    >>> [runs_at_import(code, n) for n in range(1, 6)]
    [True, True, False, True, True]
    """
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            body = node.body if isinstance(node.body, list) else [node.body]
            first = body[0].lineno
            last = max((b.end_lineno or b.lineno) for b in body)
            if first <= line <= last:
                return False
    return True


# Every target module is imported when the audit suite starts (``audits.cli``), before any
# audit's time budget: a mutant that hangs there would hold the sweep for its whole per-mutant
# timeout. A statement that runs at import is first imported alone, for at most this long
# (the pristine import takes ≈ 2 s here); a hang is the same "crashed" the suite would give.
_IMPORT_TIMEOUT = 60.0


def _import_hangs(tree: Path, timeout: float) -> bool:
    """Whether importing the audit suite from ``tree`` outlasts ``timeout`` seconds."""
    try:
        subprocess.run(
            [sys.executable, "-c", "import audits.cli"],
            cwd=tree,
            env=_environment(tree),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return True
    return False


class _DropAnnotations(ast.NodeTransformer):
    """Remove every annotation (never evaluated under ``from __future__ import annotations``)."""

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AsyncFunctionDef:
        node.returns = None
        self.generic_visit(node)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AnnAssign:
        node.annotation = ast.Constant(None)
        self.generic_visit(node)
        return node


def _shape(source: str, *, annotations: bool = True, asserts: bool = True) -> str:
    tree = ast.parse(source)
    if not annotations:
        tree = _DropAnnotations().visit(tree)
    if not asserts:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert):
                node.test, node.msg = ast.Constant(True), None
    return ast.dump(tree)


def classify_change(pristine: str, mutated: str) -> str:
    """``"annotation"`` when the mutation changes annotations only (an equivalent mutant under
    postponed evaluation), ``"assert"`` when it changes an ``assert`` only (it alters what a
    failing invariant reports, never a correct run), else ``""``.

    Examples
    --------
    >>> head = "from __future__ import annotations\\n"
    >>> classify_change(head + "def f(x: int | None): pass", head + "def f(x: int - None): pass")
    'annotation'
    >>> classify_change("assert a and b", "assert a or b")
    'assert'
    >>> classify_change("y = a + b", "y = a - b")
    ''
    """
    postponed = "from __future__ import annotations" in pristine
    try:
        if postponed and _shape(pristine, annotations=False) == _shape(mutated, annotations=False):
            return "annotation"
        if _shape(pristine, asserts=False) == _shape(mutated, asserts=False):
            return "assert"
    except SyntaxError:
        return ""
    return ""


def _changed_line(pristine: bytes, mutated: bytes) -> str:
    before = pristine.decode().splitlines()
    after = mutated.decode().splitlines()
    return next((a.strip() for b, a in zip(before, after, strict=False) if a != b), "")[:160]


def _apply(tree: Path, mutation: Mutation) -> None:
    subprocess.run(
        ["cosmic-ray", "apply", mutation.module, mutation.operator, str(mutation.occurrence)],
        cwd=tree,
        check=True,
        capture_output=True,
    )


def _relocate(
    tree: Path, mutations: Sequence[Mutation], wanted: Mapping[Mutation, str]
) -> tuple[list[Mutation], list[Mutation]]:
    """Today's counterparts of an earlier sweep's mutations, matched by module, operator,
    function and the mutated line's text when the source moved (lines added elsewhere shift
    line numbers and occurrence counts) — and checked by that text even where nothing moved.
    Returns (found, gone): a mutation whose line no longer exists (the code was changed there)
    is gone."""
    found: list[Mutation] = []
    gone: list[Mutation] = []
    for old, text in wanted.items():
        match = None
        same_kind = [
            m
            for m in mutations
            if (m.module, m.operator, m.definition) == (old.module, old.operator, old.definition)
        ]
        # The same place first (the usual case: nothing moved), but always checked by its text.
        for candidate in sorted(same_kind, key=lambda m: m != old):
            path = tree / candidate.module
            pristine = path.read_bytes()
            try:
                _apply(tree, candidate)
                if _changed_line(pristine, path.read_bytes()) == text.strip():
                    match = candidate
            finally:
                path.write_bytes(pristine)
            if match is not None:
                break
        if match is None:
            gone.append(old)
        else:
            found.append(match)
    return found, gone


def classify_suite_run(
    returncode: int, results: Sequence[Mapping[str, Any]] | None, stderr: str = ""
) -> tuple[str, tuple[int, ...], str, str]:
    """A mutant's status from one run of the audit suite: its exit status and, when it wrote
    one, its report's ``results``.

    Returns ``(status, failed audits, note, raised_in)``: **killed** when at least one audit
    FAILed on its verdict; **raised** when every FAIL is the implementation raising under an
    audit (``raised_in`` names where) or an audit stopped by the suite's time budget
    (``raised_in`` is ``"time budget"``: a hang); **survived** on exit 0; else **crashed**.

    Examples
    --------
    >>> fail = {"audit": 4, "verdict": "fail", "details": {}}
    >>> classify_suite_run(1, [fail])[:2]
    ('killed', (4,))
    >>> hung = {"audit": 2, "verdict": "fail", "details": {"time_limit": 60.0}}
    >>> classify_suite_run(1, [hung])
    ('raised', (2,), 'audit(s) 2 over the time budget', 'time budget')
    >>> classify_suite_run(0, [])[0], classify_suite_run(2, None, "Traceback\\nKeyError: 'x'")
    ('survived', ('crashed', (), "exit 2: KeyError: 'x'", ''))
    """
    failed: tuple[int, ...] = ()
    raised: list[str] = []
    origins: list[str] = []
    budget: list[int] = []
    if returncode == 1 and results is not None:
        failing = [r for r in results if r["verdict"] == "fail"]
        failed = tuple(int(r["audit"]) for r in failing)
        crashed = [r["details"] for r in failing if "exception" in r.get("details", {})]
        raised = [str(d["exception"]) for d in crashed]
        origins = [str(d.get("raised_in", "")) for d in crashed]
        budget = [int(r["audit"]) for r in failing if "time_limit" in r.get("details", {})]
    if returncode == 0:
        return "survived", failed, "", ""
    if failed and len(raised) + len(budget) < len(failed):
        return "killed", failed, "", ""  # at least one audit failed on its verdict
    if failed and raised:
        # Every failing audit failed because the implementation raised under it (or hung past
        # the suite's time budget): loud, but not a verdict (counted apart) — and where it was
        # raised, in the library or in an audit tripping on what it got back.
        return "raised", failed, raised[0][:200], origins[0]
    if failed:  # every failing audit ran out of the suite's time budget: a hang, as loud
        return (
            "raised",
            failed,
            f"audit(s) {', '.join(map(str, budget))} over the time budget",
            (_TIME_BUDGET),
        )
    tail = (stderr.strip().splitlines() or [""])[-1]
    return "crashed", failed, f"exit {returncode}: {tail}"[:200], ""


def _run_one(
    tree: Path, mutation: Mutation, reached: Mapping[int, set[int]], timeout: float
) -> MutantRun:
    """Apply, classify and run one mutant; ``reached``: for each audit, the lines of the
    mutant's module it executes on the pristine copy (an audit missing executes none)."""
    path = tree / mutation.module
    pristine = path.read_bytes()
    start = time.perf_counter()
    try:
        _apply(tree, mutation)
        mutated = path.read_bytes()
        if mutated == pristine:
            return MutantRun(mutation, "no change", (), "", time.perf_counter() - start)
        changed = _changed_line(pristine, mutated)
        kind = classify_change(pristine.decode(), mutated.decode())
        if kind:
            why = {
                "annotation": "equivalent: an annotation, never evaluated (postponed)",
                "assert": "changes an assert only: a correct run never reaches its failure",
            }[kind]
            return MutantRun(mutation, "equivalent", (), changed, time.perf_counter() - start, why)
        statement = _statement_line(pristine.decode(), mutation.line)
        audits = sorted(number for number, lines in reached.items() if statement in lines)
        if not audits:
            return MutantRun(
                mutation,
                "not reached",
                (),
                changed,
                time.perf_counter() - start,
                "no audit executes this line",
            )
        limit = min(_IMPORT_TIMEOUT, timeout)
        if runs_at_import(pristine.decode(), mutation.line) and _import_hangs(tree, limit):
            return MutantRun(
                mutation,
                "crashed",
                (),
                changed,
                time.perf_counter() - start,
                f"timeout: importing the suite takes over {limit:g} s",
            )
        out = tree / "mutant-run"
        try:
            done = subprocess.run(
                _audit_command(out, audits),
                cwd=tree,
                env=_environment(tree),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return MutantRun(
                mutation,
                "crashed",
                (),
                changed,
                time.perf_counter() - start,
                f"timeout after {timeout:g} s",
            )
        report = out / "audit.json"
        results = (
            json.loads(report.read_text())["results"]
            if done.returncode == 1 and report.exists()
            else None
        )
        status, failed, note, where = classify_suite_run(done.returncode, results, done.stderr)
        seconds = time.perf_counter() - start
        return MutantRun(mutation, status, failed, changed, seconds, note, where, tuple(audits))
    finally:
        path.write_bytes(pristine)
        shutil.rmtree(tree / "mutant-run", ignore_errors=True)


def _summary(
    mutations: Sequence[Mutation],
    runs: Sequence[MutantRun],
    *,
    planned: int,
    seed: int,
    modules: Sequence[str],
) -> dict[str, Any]:
    return {
        "generated": len(mutations),
        "by_module": {m: sum(x.module == m for x in mutations) for m in modules},
        "sample": len(runs),
        "planned": planned,
        "seed": seed,
        **_tally([r.status for r in runs]),
        "runs": [
            {**dataclasses.asdict(r), "mutation": dataclasses.asdict(r.mutation)} for r in runs
        ],
    }


def _tally(statuses: Sequence[str]) -> dict[str, Any]:
    """Counts by status and the verdict kill rates among the reached and the applied mutants."""
    counts = {s: list(statuses).count(s) for s in _STATUSES}
    # Reached and decided: a verdict (killed), an exception under audit (raised), or a pass.
    reached = counts["killed"] + counts["raised"] + counts["survived"]
    applied = reached + counts["not reached"]  # equivalent and unchanged ones excluded
    killed = counts["killed"]
    return {
        "counts": counts,
        "kill_rate_reached": [killed, reached, *clopper_pearson(killed, reached)],
        "kill_rate_all": [killed, applied, *clopper_pearson(killed, applied)],
    }


def draw_sample(
    mutations: Sequence[Mutation], sample: int, *, seed: int, skip: int = 0
) -> list[Mutation]:
    """The seeded uniform sample of ``sample`` mutations, without its first ``skip``.

    Examples
    --------
    >>> pool = [Mutation("m.py", "op", k, k, "f") for k in range(10)]
    >>> [m.line for m in draw_sample(pool, 4, seed=0)]
    [6, 9, 0, 2]
    >>> [m.line for m in draw_sample(pool, 4, seed=0, skip=2)]   # the rest of that sample
    [0, 2]
    """
    if skip < 0:
        raise ValueError(f"skip must be >= 0; got {skip}")
    return random.Random(seed).sample(list(mutations), min(sample, len(mutations)))[skip:]


def run_sweep(
    source: Path,
    *,
    sample: int,
    seed: int = 0,
    timeout: float = 300.0,
    modules: Sequence[str] = TARGETS,
    progress: bool = True,
    on_run: Callable[[dict[str, Any]], None] | None = None,
    only: Sequence[Mutation] | None = None,
    skip: int = 0,
    relocate: Mapping[Mutation, str] | None = None,
) -> dict[str, Any]:
    """Generate, sample and run mutants; the summary and every run (JSON-friendly).

    The sample is a uniformly random ordering (``random.Random(seed).sample``), so every prefix
    is itself a uniform sample: ``on_run`` gets the summary so far after each mutant, and Ctrl-C
    ends the sweep with the mutants already run. ``only``: run exactly these mutations instead
    (a re-run of an earlier sweep's survivors; each must still be generated from ``source``).
    ``skip``: leave out the first ``skip`` of the seeded sample (run the rest of a sweep that
    was stopped; what is left is again a uniform sample). ``relocate``: earlier mutations with
    the line each changed — re-run their counterparts in today's source, found by that line's
    text when the source moved; those whose line is gone are listed in ``"gone"``.
    """
    mutations = generate_mutations(source, modules)
    gone: list[Mutation] = []
    if relocate is not None:
        with tempfile.TemporaryDirectory(prefix="secagg-dp-relocate-") as scratch:
            _copy_tree(source, Path(scratch))
            only, gone = _relocate(Path(scratch), mutations, relocate)
        for mutation in gone:
            print(f"gone (its line changed): {mutation.module}:{mutation.line}", file=sys.stderr)
    if only is not None:
        known = set(mutations)
        missing = [m for m in only if m not in known]
        if missing:
            raise ValueError(
                f"{len(missing)} mutation(s) to re-run are no longer generated from the source "
                f"(it changed): first {missing[0]}"
            )
        chosen = list(only)
    else:
        chosen = draw_sample(mutations, sample, seed=seed, skip=skip)
    runs: list[MutantRun] = []

    def summary() -> dict[str, Any]:
        done = _summary(mutations, runs, planned=len(chosen), seed=seed, modules=modules)
        return {**done, "gone": [dataclasses.asdict(m) for m in gone]}

    with tempfile.TemporaryDirectory(prefix="secagg-dp-mutants-") as scratch:
        tree = Path(scratch)
        _copy_tree(source, tree)
        touched = sorted({m.module for m in chosen})
        reached = executed_lines_by_audit(tree, touched) if touched else {}
        try:
            for index, mutation in enumerate(chosen, start=1):
                run = _run_one(tree, mutation, reached.get(mutation.module, {}), timeout)
                runs.append(run)
                if progress:
                    print(
                        f"[{index}/{len(chosen)}] {run.status:<11s} "
                        f"{mutation.module}:{mutation.line} {mutation.operator} — "
                        f"{run.changed_line[:70]}",
                        flush=True,
                    )
                if on_run is not None:
                    on_run(summary())
        except KeyboardInterrupt:
            print(f"interrupted after {len(runs)} mutants", file=sys.stderr)
    return summary()


def _markdown(summary: dict[str, Any], triage: _TriageTable) -> str:
    killed, reached, low, high = summary["kill_rate_reached"]
    k_all, applied, low_all, high_all = summary["kill_rate_all"]
    scored = score(summary["runs"], triage)
    v_kill, v_den, v_low, v_high = scored["by_verdict"]
    r_kill, _, r_low, r_high = scored["with_raised"]
    lines = [
        "# Generated mutants against the fast audit suite",
        "",
        f"cosmic-ray generated {summary['generated']} mutants of the privacy-critical modules; a "
        f"uniform sample of {summary['sample']} (seed {summary['seed']}; "
        + (
            # A sample assembled from several processes says which positions it holds.
            f"as run: {summary['note']}"
            if summary.get("note")
            else f"the first {summary['sample']} of {summary['planned']} drawn"
        )
        + ") ran against `python -m audits` (fast tier).",
        "",
        f"- killed among the mutants the audits execute: **{killed}/{reached}** "
        f"(95 % CI {100 * low:.1f}–{100 * high:.1f} %)",
        f"- killed among all applied mutants: {k_all}/{applied} "
        f"(95 % CI {100 * low_all:.1f}–{100 * high_all:.1f} %)",
        f"- counts: {summary['counts']}",
        f"- **score** over the {v_den} non-equivalent mutants the audits execute (survivors "
        f"triaged equivalent in `{TRIAGE.name}` removed: {scored['argued_equivalent']}; unseen: "
        f"{scored['unseen']}; not yet triaged: {scored['untriaged']}): by verdict "
        f"**{v_kill}/{v_den} = {100 * v_kill / max(v_den, 1):.1f} %** "
        f"(95 % CI {100 * v_low:.1f}–{100 * v_high:.1f} %); counting raised "
        f"**{r_kill}/{v_den} = {100 * r_kill / max(v_den, 1):.1f} %** "
        f"(95 % CI {100 * r_low:.1f}–{100 * r_high:.1f} %)",
        "- the raised ones raised in the library (on an audit's input): "
        f"{scored['raised_where']['library']}; in an audit's own code: "
        f"{scored['raised_where']['audits']}; hung past the suite's time budget: "
        f"{scored['raised_where']['time budget']}; not recorded: "
        f"{scored['raised_where']['unrecorded']}",
        "",
        "| status | module:line | function | operator | mutated line | audits failed / note |",
        "|---|---|---|---|---|---|",
    ]
    order = {
        "survived": 0,
        "crashed": 1,
        "raised": 2,
        "not reached": 3,
        "equivalent": 4,
        "killed": 5,
        "no change": 6,
    }
    for run in sorted(summary["runs"], key=lambda r: (order[r["status"]], r["mutation"]["module"])):
        m = run["mutation"]
        detail = ", ".join(map(str, run["failed_audits"])) or run["note"]
        entry = triage.get(_run_key(run)) if run["status"] == "survived" else None
        if entry is not None:
            detail = f"{entry.verdict}: {entry.why}"
        elif run["status"] == "survived":
            detail = "not triaged"
        code = run["changed_line"].replace("|", "\\|")
        lines.append(
            f"| {run['status']} | {m['module']}:{m['line']} | {m['definition']} | "
            f"{m['operator'].split('/')[-1]} | `{code}` | {detail.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m audits.mutation_sweep``: run a sample, print the summary, write JSON and MD."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=150, help="mutants to run (uniform)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per mutant")
    parser.add_argument("--out", type=Path, default=Path("mutation-sweep"))
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument(
        "--rerun",
        type=Path,
        default=None,
        help="an earlier mutation_sweep.json: re-run its mutants whose status is in --status",
    )
    parser.add_argument(
        "--status", default="survived", help="comma-separated statuses to re-run (--rerun)"
    )
    parser.add_argument(
        "--skip", type=int, default=0, help="leave out the first N of the seeded sample"
    )
    parser.add_argument(
        "--triage",
        type=Path,
        default=TRIAGE,
        help="the triage table of survivors (default: the committed one)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=None,
        help="an earlier mutation_sweep.json: re-score it under --triage and write --out (no run)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=[],
        help="with --report: re-runs of it (--rerun outputs), in order, folded in first",
    )
    args = parser.parse_args(argv)
    try:
        triage = load_triage(args.triage)
    except (OSError, ValueError, tomllib.TOMLDecodeError) as error:
        print(f"mutation_sweep: bad triage table {args.triage}: {error}", file=sys.stderr)
        return 2

    def write(summary: dict[str, Any]) -> None:
        args.out.mkdir(parents=True, exist_ok=True)
        summary = {**summary, "score": score(summary["runs"], triage)}
        (args.out / "mutation_sweep.json").write_text(json.dumps(summary, indent=1))
        (args.out / "mutation_sweep.md").write_text(_markdown(summary, triage))

    def report(summary: dict[str, Any]) -> int:
        write(summary)
        scored = score(summary["runs"], triage)
        v_kill, den, v_low, v_high = scored["by_verdict"]
        r_kill, _, r_low, r_high = scored["with_raised"]
        print(
            f"\nscore over {den} non-equivalent mutants the audits execute: by verdict "
            f"{v_kill}/{den} (95 % CI {100 * v_low:.1f}–{100 * v_high:.1f} %), counting raised "
            f"{r_kill}/{den} (95 % CI {100 * r_low:.1f}–{100 * r_high:.1f} %); "
            f"{summary['counts']}; wrote {args.out}/mutation_sweep.md"
        )
        return 0

    if args.report is not None:
        try:
            earlier = json.loads(args.report.read_text())
            if args.merge:
                earlier = merge_reruns(
                    earlier, [json.loads(path.read_text()) for path in args.merge]
                )
            _markdown(earlier, triage)  # every field the report reads
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"mutation_sweep: cannot read sweep {args.report}: {error!r}", file=sys.stderr)
            return 2
        return report(earlier)
    relocate = None
    if args.rerun is not None:
        wanted = {s.strip() for s in args.status.split(",")}
        earlier = json.loads(args.rerun.read_text())["runs"]
        relocate = {
            Mutation(**r["mutation"]): str(r["changed_line"])
            for r in earlier
            if r["status"] in wanted
        }
    if shutil.which("cosmic-ray") is None:
        print(
            "mutation_sweep: cosmic-ray is not installed: pip install -e '.[mutation]'",
            file=sys.stderr,
        )
        return 2
    summary = run_sweep(
        args.source,
        sample=args.sample,
        seed=args.seed,
        timeout=args.timeout,
        on_run=write,
        skip=args.skip,
        relocate=relocate,
    )
    return report(summary)


if __name__ == "__main__":
    raise SystemExit(main())
