"""The prediction step of a predict -> measure -> explain exercise: the learner's guess is
checked only for being there and of the right type (a prediction may be wrong), and shown
beside what was measured."""
from __future__ import annotations

from ..errors import InputError
from .lab import answer_error, number_answer, whole_answer


def prediction(guess, name: str, choices=None, unit: str = "", *, whole: bool = False,
               example=None):
    """``guess`` (the lab's variable ``name``) when it is one of ``choices`` (strings) or,
    without choices, a finite number (a whole number if ``whole``); otherwise one sentence
    saying what to set the variable to."""
    if choices is not None:
        if isinstance(guess, str) and guess in choices:
            return guess
        wanted = "one of " + ", ".join(repr(c) for c in choices)
    else:
        try:  # a number in any form a lab may hold it (a NumPy scalar, a 0-d array, 4.0)
            return whole_answer(guess, name) if whole else number_answer(guess, name)
        except InputError:
            pass
        wanted = ("a whole number" if whole else "a number") + (f" ({unit})" if unit else "")
        if example is not None:
            wanted += f" such as {example}"
    raise answer_error(f"{name} is", guess,
                       f"set it to your guess, {wanted}, before you run the measurement")


def beside(guess, measured: str) -> str:
    """One line: the learner's guess, then what was measured (or decided from measurements)."""
    shown = f"{guess:.4g}" if isinstance(guess, float) else str(guess)
    return f"your prediction: {shown}; measured: {measured}"


def same_for_all(call: str, answers, wants, measured: str) -> None:
    """Fails when a learner's function gave one answer for every data set although the right
    answers differ: a rule of thumb, not a decision from the data. ``call``: how to name the
    function ("choose_chunks(chunks, seconds)"); ``measured``: what the data are ("times")."""
    shown = [repr(a) if isinstance(a, str) else str(a) for a in answers]
    if len(set(shown)) == 1 and len({repr(w) for w in wants}) > 1:
        raise AssertionError(
            f"{call} returned {shown[0]} for every data set, though their answers differ "
            f"({', '.join(map(str, wants))}): a fixed rule of thumb? Decide from the measured "
            f"{measured}.")
