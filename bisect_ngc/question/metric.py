"""`bisect --metric`: what the metric options ask for, and their checks (the options
themselves are declared in options.py)."""
from __future__ import annotations

import re
import shlex

from ..metric.comparator import Rule
from ..errors import UserError
from ..metric.measured import Metric
from .options import OPTIONS
from .rules import Asked

# The options that only mean something with --metric.
_WITH_METRIC = tuple(o.name for o in OPTIONS if o.group == "metric" and o.name != "metric")


def _fraction(text: str) -> float:
    """'2%', '2' (percent) or '0.5%' -> 0.02, 0.02, 0.005."""
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise UserError(f"--min-change {text!r} is not a percentage",
                        hint="e.g. --min-change 2%") from None
    if value < 0:
        raise UserError(f"--min-change {text} is negative",
                        hint="a size of change, in either direction: e.g. --min-change 2%")
    return value / 100


def metric_from(asked: Asked) -> Metric | None:
    """The Metric the options ask for, or None for pass/fail verdicts; bad combinations are
    one sentence each."""
    raw, m, run = asked.params, asked.measure, asked.run    # before the question's checks
    name = raw.get("metric")
    if name is None:
        changed = [k for k in _WITH_METRIC if k in asked.given]
        if changed:
            flag = "--" + changed[0].replace("_", "-")
            raise UserError(f"{flag} only applies with --metric",
                            hint="add --metric NAME (a number the test prints in its JSON line)")
        return None
    if not name.strip() or any(not part for part in name.split(".")):
        raise UserError(f"--metric {name!r} is not a key name", hint="e.g. --metric step_ms")
    if run.repeat != 1 or run.repeat_policy != "any":
        raise UserError("--metric takes its runs from --runs-per-round and --max-runs; "
                        "--repeat and --repeat-policy are for pass/fail verdicts",
                        hint="drop --repeat/--repeat-policy")
    if asked.bisect.jobs != 1:
        raise UserError("--metric measures one commit at a time (interleaved runs on one "
                        "machine); --jobs must be 1", hint="drop --jobs")
    if m.max_runs < m.runs_per_round:
        raise UserError("--max-runs must be at least --runs-per-round",
                        hint=f"e.g. --max-runs {m.runs_per_round * 6}")
    if raw.get("metric_cmd") is not None:
        if not raw.get("test"):
            raise UserError("--metric-cmd needs --test: it runs after each test run",
                            hint="e.g. --test './bench' --metric-cmd 'cat result.txt'")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name.strip()):
            raise UserError(f"--metric {name!r}: with --metric-cmd a name is letters, digits, "
                            "'_', '.' and '-'", hint="e.g. --metric step_ms")
    rule = Rule(p=m.p_threshold, min_change=_fraction(m.min_change), block=m.runs_per_round,
                max_runs=m.max_runs, lower_is_better=m.lower_is_better)
    return Metric(name.strip(), rule)


def with_metric_cmd(test: str, cmd: str, name: str) -> str:
    """The test, then CMD; CMD's last line is printed as the run's JSON line (a number as
    {NAME: number}, a JSON object as it is). Both commands are quoted into the script."""
    return (f"sh -c {shlex.quote(test)} || exit $?\n"
            f"v=$(sh -c {shlex.quote(cmd)} | tail -n 1) || exit 125\n"
            f"case $v in '{{'*) printf '%s\\n' \"$v\" ;; "
            f"*) printf '{{\"%s\": %s}}\\n' {shlex.quote(name)} \"$v\" ;; esac")
