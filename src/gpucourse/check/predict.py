"""The prediction step of a predict -> measure -> explain exercise: the learner's guess is
checked only for being there and of the right type (a prediction may be wrong), and shown
beside what was measured."""
from __future__ import annotations

from .lab import choice_answer, number_answer


def prediction(guess, what: str, choices=None, unit: str = ""):
    """``guess`` when it is one of ``choices`` (strings) or, without choices, one number."""
    if choices is not None:
        return choice_answer(guess, what, tuple(choices))
    return number_answer(guess, what, unit)


def beside(guess, measured: str) -> str:
    """One line: the learner's guess, then what was measured (or decided from measurements)."""
    shown = f"{guess:.4g}" if isinstance(guess, float) else str(guess)
    return f"your prediction: {shown}; measured: {measured}"
