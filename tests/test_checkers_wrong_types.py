"""Lab checkers answer a wrong-typed answer with one sentence of the course, never a Python error.

Every checker of chapters 1-5 (and the timing checker of chapter 0) is called with answers of
the wrong type (None, text, a list, a tuple, a dict, a function, an array of the wrong shape,
NaN, infinity, a bool), passed directly or returned by the learner's function. Each must fail
as ``Exercise N.M (...) not yet right:`` and one line, before any kernel is built.
"""
import math

import numpy as np
import pytest

from gpucourse.check import ch1 as c1, ch2 as c2, ch3 as c3, ch4 as c4, ch5 as c5, timing


def _f(*args, **kwargs):
    return 1.0


# Answers that are not one number, as a function returns them.
NOT_A_NUMBER = {"None": None, "text": "0.25", "list": [1.0, 2.0], "tuple": (1.0,),
                "dict": {"value": 1.0}, "function": _f, "array": np.array([1.0, 2.0]),
                "nan": float("nan"), "inf": float("inf"), "bool": True}
# What is passed where the checker wants a function to call.
NOT_A_FUNCTION = {"None": None, "text": "f", "number": 3.0, "list": [_f], "dict": {"f": _f},
                  "array": np.array([1.0]), "bool": True}
# What is given where the checker wants one of a few words ("memory", "compute", ...).
NOT_A_CHOICE = {"None": None, "number": 1.0, "list": ["memory"], "tuple": ("memory",),
                "dict": {"memory": 1}, "function": _f, "array": np.array(["memory", "compute"]),
                "bool": True, "other word": "bandwidth", "capitalised": "Memory"}
# What is passed where the checker wants a measurement an experiment returned.
NOT_A_MEASUREMENT = {"text": "measured", "number": 3.0, "list": [1.0, 2.0], "function": _f,
                     "array": np.zeros(3), "bool": True}
# What is passed where the checker wants CUDA C source text.
NOT_SOURCE = {"None": None, "number": 42, "list": ["__global__ void k() {}"], "function": _f,
              "bytes": b"__global__ void k() {}", "bool": False}


def _returns(value):
    return lambda *args, **kwargs: value


def _cases(number, make, values):
    return [pytest.param(number, make, v, id=f"{number}-{name}") for name, v in values.items()]


def _choose_ref(density, crossover):
    return "sparse" if density < crossover else "dense"


def _gradients_result(**changes):
    g = [np.ones(3), np.ones(2)]
    result = {"world_size": 2, "reference": g, "names": ["w", "b"], "manual": [g, g],
              "local": [g, g], "reads_world_size": True}
    return {**result, **changes}


CASES = (
    # chapter 0: a timing function
    _cases("0.2", lambda v: timing.check_timer(_returns(v)), NOT_A_NUMBER)
    + _cases("0.2", lambda v: timing.check_timer(v), NOT_A_FUNCTION)
    # chapter 1
    + _cases("1.1", lambda v: c1.check_coalesced_scale(v), NOT_SOURCE)
    + _cases("1.2", lambda v: c1.check_limited_by(_returns(v), guess="memory"), NOT_A_CHOICE)
    + _cases("1.2", lambda v: c1.check_limited_by(v, guess="memory"), NOT_A_FUNCTION)
    + _cases("1.2", lambda v: c1.check_limited_by(c1.limited_by_reference, guess=v),
             NOT_A_CHOICE)
    + _cases("1.2", lambda v: c1.check_limited_by(c1.limited_by_reference, v, guess="memory"),
             {**NOT_A_MEASUREMENT, "dict without the points": {"ceilings": {}}})
    + _cases("1.3", lambda v: c1.check_optimize_first(_returns(v), guess="matmul"),
             {"None": None, "text": "matmul", "one": ("matmul",), "dict": {"matmul": "compute"},
              "three": ("matmul", "compute", 1), "array": np.array(["matmul", "compute"]),
              "name None": (None, "compute"), "name a number": (0, "memory"),
              "name not measured": ("softmax", "memory"), "name list": (["matmul"], "compute")})
    + _cases("1.3", lambda v: c1.check_optimize_first(
        lambda points, ceilings: (points[0]["name"], v), guess="matmul"), NOT_A_CHOICE)
    + _cases("1.3", lambda v: c1.check_optimize_first(v, guess="matmul"), NOT_A_FUNCTION)
    + _cases("1.3", lambda v: c1.check_optimize_first(c1.optimize_first_reference, guess=v),
             NOT_A_CHOICE)
    + _cases("1.4", lambda v: c1.check_bandwidth_timer(_returns(v)), NOT_A_NUMBER)
    + _cases("1.4", lambda v: c1.check_bandwidth_timer(v), NOT_A_FUNCTION)
    + _cases("1.5", lambda v: c1.check_transfer(_returns(v), c1._ref_worth_moving), NOT_A_NUMBER)
    + _cases("1.5", lambda v: c1.check_transfer(c1._ref_transfer, _returns(v)),
             {"None": None, "text": "True", "number": 1, "list": [True],
              "array": np.array([True, False]), "function": _f})
    + _cases("1.5", lambda v: c1.check_transfer(v, c1._ref_worth_moving), NOT_A_FUNCTION)
    # chapter 2
    + _cases("2.1", lambda v: c2.check_bank_ways(_returns(v)), {**NOT_A_NUMBER, "float": 1.0})
    + _cases("2.1", lambda v: c2.check_bank_ways(v), NOT_A_FUNCTION)
    + _cases("2.2", lambda v: c2.check_padded_transpose(v),
             {k: v for k, v in NOT_SOURCE.items() if k != "function"}
             | {"function returning None": _returns(None)})
    + _cases("2.3", lambda v: c2.check_pinned_loop(v, _f), NOT_A_FUNCTION)
    + _cases("2.3", lambda v: c2.check_pinned_loop(_f, v), NOT_A_FUNCTION)
    + _cases("2.4", lambda v: c2.check_buffer_reuse(v), NOT_A_FUNCTION)
    + _cases("2.5", lambda v: c2.check_mixed_bytes(_returns(v)), NOT_A_NUMBER)
    + _cases("2.5", lambda v: c2.check_mixed_bytes(_returns(
        {k: v for k in ("weights", "gradients", "master_copy", "optimizer_state")})),
        {**NOT_A_NUMBER, "half a byte": 12.5})
    + _cases("2.5", lambda v: c2.check_mixed_bytes(v), NOT_A_FUNCTION)
    # chapter 3
    + _cases("3.1", lambda v: c3.check_bucket_bytes(_returns(v), guess=2**20),
             {**NOT_A_NUMBER, "half a byte": 4096.5})
    + _cases("3.1", lambda v: c3.check_bucket_bytes(v, guess=2**20), NOT_A_FUNCTION)
    + _cases("3.1", lambda v: c3.check_bucket_bytes(c3.bucket_bytes_reference, guess=v),
             NOT_A_NUMBER)
    + _cases("3.1", lambda v: c3.check_bucket_bytes(c3.bucket_bytes_reference, v, guess=2**20),
             {**NOT_A_MEASUREMENT, "dict": {"sizes": [1024], "allreduce": [1e-5]}})
    + _cases("3.2", lambda v: c3.check_average_gradients(v),
             {"None": None, "text": "result", "list": [1.0], "function": _f,
              "array": np.zeros(3), "dict without the gradients": {"world_size": 2},
              "world size as text": _gradients_result(world_size="two"),
              "world size None": _gradients_result(world_size=None),
              "a gradient as text": _gradients_result(manual=[["x", np.ones(2)]] * 2)})
    + _cases("3.3", lambda v: c3.check_choose_microbatches(_returns(v), guess=4),
             {**NOT_A_NUMBER, "float": 4.0})
    + _cases("3.3", lambda v: c3.check_choose_microbatches(v, guess=4), NOT_A_FUNCTION)
    + _cases("3.3", lambda v: c3.check_choose_microbatches(c3.choose_microbatches_reference,
                                                           guess=v), NOT_A_NUMBER)
    + _cases("3.3", lambda v: c3.check_choose_microbatches(c3.choose_microbatches_reference, v,
                                                           guess=4),
             {**NOT_A_MEASUREMENT, "dict": {"runs": []}})
    + _cases("3.4", lambda v: c3.check_strategy(_returns(v)),
             {"None": None, "text": "data", "list": ["data", 1], "one": ("data",),
              "dict": {"data": 1}, "stages as text": ("data", "1"), "stages None": ("data", None),
              "stages half": ("pipeline", 1.5), "stages bool": ("data", True),
              "name a number": (1, 1), "name array": (np.array(["data", "x"]), 1),
              "name None": (None, 1), "stages array": ("data", np.array([1, 2]))})
    + _cases("3.4", lambda v: c3.check_strategy(v), NOT_A_FUNCTION)
    # chapter 4
    + _cases("4.1", lambda v: c4.check_launch_config(_returns(v)),
             {"None": None, "text": "256", "list": [40, 256], "dict": {"grid": 40},
              "grid None": (None, 256), "grid text": ("40", 256), "grid half": (40.5, 256),
              "grid list": ([1, 2], 256), "grid array": (np.array([1, 2]), 256),
              "grid bool": (True, 256), "block nan": (40, float("nan")),
              "block function": (40, _f)})
    + _cases("4.1", lambda v: c4.check_launch_config(v), NOT_A_FUNCTION)
    + _cases("4.2", lambda v: c4.check_no_divergence(v), NOT_SOURCE)
    + _cases("4.3", lambda v: c4.check_warp_reduce(v), NOT_SOURCE)
    + _cases("4.4", lambda v: c4.check_private_histogram(v), NOT_SOURCE)
    + _cases("4.5", lambda v: c4.check_chunks(16, _returns(v)), NOT_A_NUMBER)
    + _cases("4.5", lambda v: c4.check_chunks(16, v), NOT_A_FUNCTION)
    # chapter 5
    + _cases("5.1", lambda v: c5.check_tiled_matmul(v), NOT_SOURCE)
    + _cases("5.2", lambda v: c5.check_fused_chain(v, _returns(c5.chain_bytes(1))), NOT_SOURCE)
    + _cases("5.2", lambda v: c5.check_fused_chain("see traffic", _returns(v)),
             {"None": None, "text": "80, 8", "one": (80,), "dict": {"fused": 8},
              "unfused None": (None, 8), "unfused text": ("80", "8"), "unfused half": (80.5, 8),
              "unfused array": (np.array([80, 8]), 8), "unfused bool": (True, 8),
              "fused nan": (80, float("nan")), "fused function": (80, _f)})
    + _cases("5.2", lambda v: c5.check_fused_chain("see traffic", v), NOT_A_FUNCTION)
    + _cases("5.3", lambda v: c5.check_crossover(_returns(v), _choose_ref), NOT_A_NUMBER)
    + _cases("5.3", lambda v: c5.check_crossover(c5._linear_crossover, _returns(v)),
             {"None": None, "number": 1, "list": ["sparse"], "array": np.array(["sparse", "x"]),
              "bool": True, "function": _f, "other word": "dense matrix"})
    + _cases("5.3", lambda v: c5.check_crossover(v, _choose_ref), NOT_A_FUNCTION)
    + _cases("5.4", lambda v: c5.check_efficient_size(64, _returns(v)), NOT_A_NUMBER)
    + _cases("5.4", lambda v: c5.check_efficient_size(64, v), NOT_A_FUNCTION)
)


@pytest.mark.parametrize("number, check, value", CASES)
def test_a_wrong_type_is_one_sentence(number, check, value):
    with pytest.raises(AssertionError) as info:
        check(value)
    text = str(info.value)
    head, _, body = text.partition("\n")
    assert head.startswith(f"Exercise {number} (") and head.endswith("not yet right:"), text
    assert body.strip() and "\n" not in body.strip(), text  # one line under the heading
    for python in ("Traceback", "TypeError", "ValueError", "AttributeError", "KeyError",
                   "object is not", "argument must be"):
        assert python not in body, text
    assert info.value.__cause__ is None or not isinstance(
        info.value.__cause__, (TypeError, ValueError, AttributeError, KeyError)), text


def test_the_sentences_say_what_came_back_and_what_to_return():
    def message(check):
        with pytest.raises(AssertionError) as info:
            check()
        return str(info.value).split("\n", 1)[1]

    assert message(lambda: c1.check_limited_by(_returns([1, 2]), guess="memory")).endswith(
        "point, ceilings) returned a list [1, 2]: return 'memory' or 'compute' or 'overhead'.")
    assert message(lambda: c4.check_chunks(16, _returns("3.5"))) == (
        "choose_chunks(chunks, seconds) returned the text '3.5': return the number (a chunk "
        "count) itself, not text.")
    assert message(lambda: c3.check_average_gradients({"world_size": 2})).startswith(
        "result is a dict {'world_size': 2}: pass what experiments.ch3.try_average_gradients(")
    assert message(lambda: c1.check_limited_by(0.083, guess="memory")) == (
        "limited_by is 0.083: pass the function itself, `def limited_by(point, ceilings): ...`, "
        "without calling it.")
    assert message(lambda: c3.check_choose_microbatches(_returns(4.0), guess=4)).endswith(
        "returned 4.0: return an int, a whole number (micro-batches).")
    assert "returned an array of shape (2,)" in message(
        lambda: c5.check_efficient_size(64, _returns(np.array([1.0, 2.0]))))
    assert "returned nan: return a finite number" in message(
        lambda: c1.check_transfer(_returns(math.nan), c1._ref_worth_moving))


def test_classes_lambdas_and_long_containers_are_named_as_a_learner_knows_them():
    from gpucourse.check.lab import _describe

    class LossScaler:
        pass

    assert _describe(LossScaler) == "the class LossScaler"
    assert _describe(lambda g: g) == "a lambda function"
    assert _describe(len) == "the function len"
    assert _describe(list(range(30))) == "a list of 30 items"
    assert _describe(LossScaler()) == "a LossScaler"


def test_a_number_of_the_right_kind_in_another_form_is_accepted():
    """A NumPy scalar or a 0-d array is one number; 2.0 stages is two stages; a NumPy string
    is a word."""
    from gpucourse import check

    assert check.number_answer(np.float32(0.5), "x is") == 0.5
    assert check.number_answer(np.array(0.25), "x is") == 0.25
    assert check.whole_answer(2.0, "x is") == 2 and check.whole_answer(np.int64(3), "x is") == 3
    c3.check_bucket_bytes(lambda s, t: np.float64(c3.bucket_bytes_reference(s, t)),
                          guess=np.array(2.0**20))
    c3.check_choose_microbatches(lambda s: np.int64(c3.choose_microbatches_reference(s)),
                                 guess=np.float32(4))
    c1.check_limited_by(lambda p, c: np.str_(c1.limited_by_reference(p, c)), guess="memory")


def test_a_course_error_inside_a_check_is_its_block_a_missing_gpu_is_not():
    from gpucourse.check import Exercise
    from gpucourse.errors import DeviceError, SpecError

    with pytest.raises(AssertionError, match=r"^Exercise 9\.1 \(t\) not yet right:\nno such GPU\.$"):
        with Exercise("9.1", "t"):
            raise SpecError("no such GPU.")
    with pytest.raises(DeviceError):
        with Exercise("9.1", "t"):
            raise DeviceError("needs a CUDA GPU.")
