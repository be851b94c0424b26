"""The peers' check in the final re-time (CPU tensors; the makers are plain functions here): a
peer outside the op's tolerance is refused, except a yardstick that is not gated (the op's own
PyTorch expression), whose error is reported beside its time."""

import torch

from tilesearch.op import Tolerance
from tilesearch.records import Status
from tilesearch.runner.measure import checked_peers
from tilesearch.runner.peer import Peer

REFERENCE = torch.linspace(1.0, 2.0, 64, dtype=torch.float64)


def rounded(op, problem, inputs, target):
    """The reference rounded to bfloat16: about 2e-3 of error, as einsum-sum's expression."""
    return lambda: REFERENCE.to(torch.bfloat16)


def run(peer):
    [(result, fn)] = checked_peers([peer], None, None, None, None, (REFERENCE,), Tolerance(1e-5, 4e-5))
    return result, fn


def test_a_gated_peer_outside_the_tolerance_is_refused():
    result, fn = run(Peer("rounded", "tests.test_peers:rounded"))
    assert result.status == Status.WRONG_RESULT and fn is None and result.rel_err > 1e-4


def test_an_ungated_peer_is_timed_with_its_error_reported():
    result, fn = run(Peer("rounded", "tests.test_peers:rounded", gated=False))
    assert result.status == Status.OK and fn is not None
    assert result.rel_err > 1e-4 and "tolerance" in result.extra["outside_tolerance"]


def test_the_torch_peer_is_the_ungated_yardstick():
    from tilesearch.experiment.peers import PEERS

    assert not PEERS["torch"].gated and PEERS["triton"].gated
