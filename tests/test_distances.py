"""The one implementation of sum min(p, q) and of total variation, pinned by hand."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.speculation import distances, distributions, objectives, verification


def test_overlap_and_tv_of_two_distributions_by_hand() -> None:
    p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    # min: 0.2 + 0.3 + 0.2 = 0.7; |p - q|: 0.3 + 0 + 0.3 = 0.6, half of it 0.3 = 1 - 0.7.
    assert float(distances.overlap(p, q)) == pytest.approx(0.7, abs=1e-15)
    assert float(distances.total_variation(p, q)) == pytest.approx(0.3, abs=1e-15)


def test_unnormalized_vectors_keep_the_definitions() -> None:
    # Block verification weighs p and q (m p, r q); TV is then half the L1 distance,
    # not 1 - overlap.
    p, q = [0.2, 0.1], [0.05, 0.4]
    assert float(distances.overlap(p, q)) == pytest.approx(0.15, abs=1e-15)
    assert float(distances.total_variation(p, q)) == pytest.approx(0.225, abs=1e-15)


def test_degenerate_cases() -> None:
    one_hot, other = [1.0, 0.0], [0.0, 1.0]
    assert float(distances.overlap(one_hot, one_hot)) == 1.0
    assert float(distances.total_variation(one_hot, one_hot)) == 0.0
    assert float(distances.overlap(one_hot, other)) == 0.0
    assert float(distances.total_variation(one_hot, other)) == 1.0


def test_leading_axes_broadcast() -> None:
    p = np.array([[0.5, 0.5], [0.9, 0.1]])
    q = np.array([0.6, 0.4])
    np.testing.assert_allclose(distances.overlap(p, q), [0.9, 0.7], atol=1e-15)
    np.testing.assert_allclose(distances.total_variation(p, q), [0.1, 0.3], atol=1e-15)


def test_the_other_modules_use_these_and_no_copy() -> None:
    assert objectives.OBJECTIVES["tv"] is distances.total_variation
    assert distributions.overlap is distances.overlap
    p, q = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    assert float(verification.tokenwise_acceptance(p, q)) == float(distances.overlap(p, q))
    assert float(verification.total_variation(p, q)) == float(distances.total_variation(p, q))
    assert float(objectives.acceptance(np.array(p), np.array(q))) == float(distances.overlap(p, q))
