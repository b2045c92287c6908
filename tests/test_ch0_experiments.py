"""Chapter 0: the loop and the vectorized call agree, and a size the learner cannot mean is one sentence."""
import numpy as np
import pytest

from gpucourse.experiments import ch0


def test_both_versions_are_timed_down_to_one_value():
    timings = ch0.loop_vs_vectorized(n=np.int64(1), min_time_s=0.01)
    assert [t.label for t in timings] == list(ch0.VERSIONS) and all(t.size == 1 for t in timings)


@pytest.mark.parametrize("n", [0, -5, 2.5])
def test_a_size_below_one_says_what_to_use(n):
    with pytest.raises(ValueError, match="whole number of at least 1"):
        ch0.loop_vs_vectorized(n=n)
