"""``analyze check``: the regression gate. Rules say when a run fails against a baseline.

Grammar of a rule (``--fail-if``)::

    rule       = metric comparator threshold
    metric     = [agg "("] name [")"]                  see run_metrics (step_time, free, peak_memory, op:NAME, ...)
    comparator = ">" | ">=" | "<" | "<="
    threshold  = sign number "%"                       relative change:  (new - base) / base
               | sign number unit                      absolute change:  new - base
               | number unit                           the new run's own value
    sign       = "+" | "-"                             (a relative threshold may leave out "+")
    unit       = ns | us | µs | ms | s                 for times
               | B | kB | KB | MB | GB | KiB | MiB | GiB   for memory (kB/KB/MB/GB decimal, KiB/MiB/GiB binary)

``step_time > +5%`` fails when the new run's mean step time is more than 5 % above the baseline's;
``comm_not_overlapped > +3ms`` when it grew by more than 3 ms per step; ``peak_memory > +100MB`` when
a rank's peak allocated memory grew by more than 100 MB; ``max(step_time) > 250ms`` when the slowest
rank's mean step took more than 250 ms.

A change must also be beyond the step-to-step noise of the two runs (``noise.yuen``, 99 %) to fail
(as benchmark comparers report only significant changes); one that exceeds its threshold inside the
noise is reported as such and passes, unless the noise test is turned off. A run profiled for a
single step, and memory peaks, have no per-step spread: their changes count as measured.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import AnalyzerError
from ..format import fmt_bytes, fmt_ns
from ..store import Store
from .noise import Noise, yuen
from .run_metrics import Metric, Sample, metric_sample, parse_metric
from .run_pairing import Pairing, pair_runs

TIME_UNITS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9}
BYTE_UNITS = {"b": 1.0, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024.0, "mib": 1024.0**2, "gib": 1024.0**3}
COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    ">": operator.gt,
    "<": operator.lt,
}
_RULE = re.compile(
    r"^\s*(?P<metric>.+?)\s*(?P<op>>=|<=|>|<)\s*(?P<sign>[+-]?)\s*(?P<num>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>%|[A-Za-zµμ]+)?\s*$"
)
EXAMPLES = '"step_time > +5%", "comm_not_overlapped > +3ms", "peak_memory > +100MB"'


class RuleError(AnalyzerError):
    """A ``--fail-if`` rule that does not follow the grammar (the message says what is wrong)."""


@dataclass(frozen=True)
class Threshold:
    kind: str  # relative (percent of the base) | change (new - base) | value (the new run's own value)
    amount: float  # percent, or ns / bytes
    text: str


@dataclass(frozen=True)
class Rule:
    text: str
    metric: Metric
    op: str
    threshold: Threshold


def parse_rule(text: str) -> Rule:
    """One ``--fail-if`` rule (module doc); RuleError says what is wrong."""
    m = _RULE.match(text or "")
    if not m:
        if not re.search(r"[<>]", text or ""):
            raise RuleError(f"{text!r}: no comparator (> >= < <=); rules look like {EXAMPLES}")
        raise RuleError(f"{text!r}: expected METRIC COMPARATOR THRESHOLD, e.g. {EXAMPLES}")
    try:
        metric = parse_metric(m.group("metric"))
    except AnalyzerError as exc:
        raise RuleError(f"{text!r}: {exc}") from None
    sign, unit = m.group("sign"), m.group("unit")
    number = float(m.group("num")) * (-1.0 if sign == "-" else 1.0)
    units = "ms, us, ns or s" if metric.unit == "ns" else "B, kB, MB, GB, KiB, MiB or GiB"
    if unit is None:
        raise RuleError(f"{text!r}: the threshold needs a unit: % for a relative change, or {units}")
    if unit == "%":
        return Rule(text.strip(), metric, m.group("op"), Threshold("relative", number, f"{number:+g}%"))
    scale = TIME_UNITS.get(unit) if metric.unit == "ns" else BYTE_UNITS.get(unit.lower())
    if scale is None:
        what = "a time" if metric.unit == "ns" else "memory"
        raise RuleError(f"{text!r}: {metric.text} is {what}: give the threshold in {units} (or %)")
    kind = "change" if sign else "value"
    shown = f"{sign}{m.group('num')}{unit}"
    return Rule(text.strip(), metric, m.group("op"), Threshold(kind, number * scale, shown))


@dataclass(frozen=True)
class RuleResult:
    rule: Rule
    base: float | None
    new: float | None
    delta: float | None
    delta_pct: float | None
    exceeded: bool  # the rule's condition holds on the values
    noise: Noise
    failed: bool  # exceeded, and beyond the noise (or not testable, or the test is off)
    explanation: str

    def record(self) -> dict[str, object]:
        return {
            "rule": self.rule.text,
            "metric": self.rule.metric.text,
            "unit": self.rule.metric.unit,
            "threshold": self.rule.threshold.text,
            "threshold_kind": self.rule.threshold.kind,
            "base": self.base,
            "new": self.new,
            "delta": self.delta,
            "delta_pct": None if self.delta_pct is None or math.isinf(self.delta_pct) else self.delta_pct,
            "exceeded": self.exceeded,
            "significant": self.noise.significant,
            "t": None if self.noise.t is None or math.isinf(self.noise.t) else self.noise.t,
            "failed": self.failed,
            "explanation": self.explanation,
        }


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return fmt_bytes(v) if unit == "bytes" else fmt_ns(v)


def _signed(v: float, unit: str) -> str:
    return ("+" if v >= 0 else "−") + _fmt(abs(v), unit)


def _sample(store: Store, p: Pairing, side: str, metric: Metric) -> Sample:
    run, ranks, steps = p.side(side)
    s = metric_sample(store, run, metric, ranks, steps)
    if s.value is None:
        what = "memory samples" if metric.kind == "memory" else f"values for {metric.text}"
        raise RuleError(f"run {run!r} has no {what} on the compared ranks and steps: {metric.text} cannot be checked")
    return s


def evaluate(store: Store, p: Pairing, rule: Rule, noise_test: bool = True) -> RuleResult:
    """One rule on the paired runs."""
    b, n = _sample(store, p, "base", rule.metric), _sample(store, p, "new", rule.metric)
    base, new = float(b.value), float(n.value)  # type: ignore[arg-type]
    delta = new - base
    pct = None if base == 0 and new == 0 else (math.copysign(math.inf, delta) if base == 0 else delta / abs(base) * 100)
    th = rule.threshold
    compared = {"relative": pct if pct is not None else 0.0, "change": delta, "value": new}[th.kind]
    exceeded = COMPARATORS[rule.op](compared, th.amount)
    noise = yuen(b.per_step, n.per_step) if th.kind != "value" else yuen((), ())
    counts = exceeded and (not noise_test or noise.significant is not False)
    unit = rule.metric.unit
    change = f"{_fmt(base, unit)} → {_fmt(new, unit)}"
    if pct is not None and not math.isinf(pct):
        change += f" ({_signed(delta, unit)}, {pct:+.1f} %)"
    elif pct is not None:
        change += f" ({_signed(delta, unit)}, from nothing)"
    if counts:
        why = f", {noise.sentence()}" if noise.significant is not None else ""
        text = f"FAIL {rule.text}: {rule.metric.label} {change}{why}"
    elif exceeded:
        text = (
            f"pass {rule.text}: {rule.metric.label} {change} exceeds {th.text} but is {noise.sentence()}: not counted"
        )
    else:
        text = f"pass {rule.text}: {rule.metric.label} {change}"
    return RuleResult(rule, base, new, delta, pct, exceeded, noise, counts, text)


def evaluate_all(store: Store, p: Pairing, rules: Sequence[Rule], noise_test: bool = True) -> list[RuleResult]:
    return [evaluate(store, p, r, noise_test) for r in rules]


@dataclass(frozen=True)
class Check:
    """What ``analyze check`` decides: the runs compared, each rule's result, and the diff's verdict
    when a rule is broken (None when every rule holds)."""

    pairing: Pairing
    results: list[RuleResult]
    verdict: str | None

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.results)


def check(
    store: Store,
    run: str,
    against: str,
    rules: Sequence[Rule],
    base_step: int | None = None,
    new_step: int | None = None,
    ranks: Sequence[int] | None = None,
    noise_test: bool = True,
) -> Check:
    """``run`` against ``against`` (a run name, or ``baseline:NAME``) under ``rules``: the CI gate of
    ``analyze check`` (the CLI, the MCP server's ``check`` tool). AnalyzerError when it cannot be
    made (an unknown run or baseline, a step the run does not have, a metric the runs lack)."""
    from ..store import resolve_ref
    from .diff import run_diff

    store.require()
    base, new = resolve_ref(store, against), resolve_ref(store, run)
    rk = tuple(ranks) if ranks else None
    pairing = pair_runs(store, base, new, base_step, new_step, rk)
    results = evaluate_all(store, pairing, rules, noise_test=noise_test)
    failed = any(r.failed for r in results)
    verdict = run_diff(store, base, new, base_step, new_step, rk).verdict if failed else None
    return Check(pairing, results, verdict)
