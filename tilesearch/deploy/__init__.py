"""Deploy: tuned kernels out of the database and into PyTorch.

database -> :func:`export` (compile the best correct trial, write an artifact directory) ->
:func:`load` (verify, open without compiling) -> :class:`Kernel` (a callable on torch tensors,
also registered as ``torch.ops.tilesearch.<op>`` for ``torch.compile`` and CUDA graphs).

The package is not called ``export`` because ``tilesearch.export`` is the function.
"""

from tilesearch.deploy.artifact import (
    ArchitectureError,
    ArtifactError,
    BadTensorError,
    CorruptArtifactError,
    Metadata,
    TensorSpec,
)
from tilesearch.deploy.exporter import NoTrialError, best_trial, export
from tilesearch.deploy.loader import load, open_artifact

__all__ = [
    "ArchitectureError",
    "ArtifactError",
    "BadTensorError",
    "CorruptArtifactError",
    "Metadata",
    "NoTrialError",
    "TensorSpec",
    "best_trial",
    "export",
    "load",
    "open_artifact",
]
