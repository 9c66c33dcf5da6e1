"""sgemm over an empty inner dimension (k = 0) writes beta * c, on every path of the shim."""
import numpy as np
import pytest

from backends.blas import sgemm


@pytest.mark.parametrize("m, n", [(1, 1), (1, 300), (3, 4), (200, 200)])
def test_an_empty_sum_gives_zero_whatever_c_held(m, n):
    c = np.full((m, n), 7.0, "float32")
    sgemm(np.zeros((m, 0), "float32"), np.zeros((0, n), "float32"), c)
    np.testing.assert_array_equal(c, np.zeros((m, n), "float32"))
    c = np.full((m, n), 7.0, "float32")
    sgemm(np.zeros((m, 0), "float32"), np.zeros((0, n), "float32"), c, beta=0.5)
    np.testing.assert_array_equal(c, np.full((m, n), 3.5, "float32"))
