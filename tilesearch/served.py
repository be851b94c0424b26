"""A study with nothing left to do, served without starting the GPU worker.

Rerunning a finished ``tune`` must be instant: a script that tunes every layer's shapes on each
start, or a CI job, reruns it far more often than it measures anything. Which study a run belongs
to depends on the GPU and the software versions (:mod:`tilesearch.provenance`), and the runner
learns them by starting its worker process (imports, a CUDA context: 8.7 s on the H100 host,
most of a 13.7 s no-op rerun). :func:`~tilesearch.runner.driver.probe` reads the same facts without CUDA: the GPU's name,
compute capability and the driver through NVML, torch's CUDA version from its ``version.py``.
:func:`result` then opens the study they name, read-only, and returns its result when it holds
the trials asked for, none in flight, and (with ``retime``) a final re-time that covers them.

Anything it cannot tell for sure sends ``tune`` down the usual path, which decides as always: GPUs
of different kinds on one host (which is device N?), no NVML, an unreadable version, no such study.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tilesearch import provenance
from tilesearch.database import StorageError, TuningDatabase, study_name
from tilesearch.runner.driver import Probe, probe  # noqa: F401 - probe: tune calls served.probe()
from tilesearch.target import Target

if TYPE_CHECKING:
    from tilesearch.op import Operator, Problem
    from tilesearch.tuner import TuneResult, TuneSettings


def result(operator: Operator, problem: Problem, settings: TuneSettings, found: Probe | None) -> TuneResult | None:
    """The result of ``tune`` for a study that has nothing left to measure or re-time under the
    conditions ``found``, or ``None`` (then ``tune`` takes its usual path)."""
    from tilesearch.tuner import TuneResult, earlier_studies

    if found is None:
        return None
    start = time.perf_counter()
    identity = provenance.identity(operator, found.versions)
    arch = settings.arch or found.arch
    name = settings.study or study_name(problem, Target.from_arch(arch, gpu=found.gpu), identity,
                                        settings.runtime_params())
    try:
        db = TuningDatabase(settings.storage, name, read_only=True)
    except (StorageError, OSError):
        return None
    try:
        attrs = db.study.user_attrs
        stored = attrs.get("target") or {}
        finished = (db.evaluated() >= settings.trials and not db.in_flight()
                    and attrs.get(provenance.IDENTITY_ATTR) == identity and not attrs.get("replayed")
                    and stored.get("gpu") == found.gpu and stored.get("arch") == arch)
        final = db.final() if finished else None
        if not finished or (settings.retime and final is None):
            return None
        target = Target.from_dict(stored)
        result = TuneResult(study=db.name, storage=settings.storage, target=target, problem=problem, best=db.best(10),
                            measured_now=0, final=final, notes=earlier_studies(db, problem, target),
                            phases={"study served": time.perf_counter() - start},
                            wall_s=time.perf_counter() - start)
    finally:
        db.close()
    return result
