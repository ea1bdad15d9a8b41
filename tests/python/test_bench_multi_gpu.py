"""benchmarks/multi_gpu.py: which rings paced the others in a producer round
(the rings take the stream's batches in turn, so one slow ring sets every
ring's pace). Stage shares as its rounds on 4 x H200 gave them."""
import os
import sys

import _bc_helpers as H

sys.path.insert(0, os.path.join(H.REPO, "benchmarks"))

from multi_gpu import paced_by  # noqa: E402


def rings(*hw_decode):
    return [{"read": 0.25, "hw_decode": v} for v in hw_decode]


def test_a_ring_far_longer_in_its_decode_calls_paced_the_others():
    assert paced_by(rings(0.97, 0.73, 0.58, 0.59)) == [0]
    assert paced_by(rings(0.52, 0.86, 0.87, 0.54)) == [1, 2]


def test_rings_close_together_paced_nobody():
    assert paced_by(rings(0.95, 0.94, 0.94, 0.95)) == []
    assert paced_by(rings(0.82, 0.82, 0.85, 0.85)) == []
    assert paced_by(rings(0.97, 0.80)) == []  # less than the gap apart


def test_one_ring_or_none_paced_nobody():
    assert paced_by(rings(0.97)) == []
    assert paced_by([]) == []
    assert paced_by([{"read": 0.3}, {"read": 0.2}]) == []  # no decode calls (CPU rings)
