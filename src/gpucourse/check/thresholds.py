"""GPU acceptance thresholds: the records every chapter's ``gpu_check()`` reports (a value, its
limit, the rule and whether it holds), so that ``make gpu-check`` prints them side by side."""
from __future__ import annotations


def threshold(value, limit, ok: bool, what: str, rule: str | None = None) -> dict:
    """One acceptance figure of a chapter's GPU check: the value, its limit and whether it holds.

    Every chapter's ``gpu_check()`` reports its figures in this shape, so that
    ``make gpu-check`` can print them side by side. ``rule`` names the comparison (one of
    ``THRESHOLD_RULES``) when ``ok`` is just that comparison; ``at_least``, ``more_than`` and
    ``at_most`` build such records. Judge ``ok`` yourself only for a check with a condition
    of its own.
    """
    if rule is not None and rule not in THRESHOLD_RULES:
        raise ValueError(f"rule {rule!r} is not one of {', '.join(THRESHOLD_RULES)}.")
    return {"value": None if value is None else float(value),
            "threshold": None if limit is None else float(limit),
            "passed": bool(ok), "what": what, "rule": rule}


#: The comparisons a threshold record may name, in words for its printout.
THRESHOLD_RULES = ("at least", "more than", "at most")


def at_least(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value >= limit``."""
    return threshold(value, limit, value >= limit, what, rule="at least")


def more_than(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value > limit``."""
    return threshold(value, limit, value > limit, what, rule="more than")


def at_most(value, limit, what: str) -> dict:
    """A threshold record that passes when ``value <= limit``."""
    return threshold(value, limit, value <= limit, what, rule="at most")


def limit_text(record: dict) -> str:
    """A threshold record's limit in words ("at least 80"); "-" when it has none. Records
    saved before rules were recorded give the bare number."""
    limit = record.get("threshold")
    if limit is None:
        return "-"
    rule = record.get("rule")
    return f"{rule} {limit:.3g}" if rule else f"{limit:.3g}"
