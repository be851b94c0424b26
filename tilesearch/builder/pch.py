"""Where NVRTC writes its automatic precompiled headers, and how those of ended processes go.

Why this exists: NVRTC's ``-pch`` writes each header it makes to a file, 250 MB for TileLang's,
in a folder of its own under ``/tmp`` (``__nvrtc_auto_pch_<pid>_<n>``), and deletes it only when
the process exits normally. A compile-pool worker ends with ``os._exit`` and a worker past its
time limit is killed, so every one that made a header left its 250-750 MB behind: one day's
tests left 90 folders, 22 GB, on the CPU machine, and a CI run of them did not finish in its
90 minutes. So each process that makes a header names the folder (``-pch-dir``):
``tilesearch-pch-<uid>/<pid>`` under the temporary folder (``TMPDIR``), emptied as it is taken
(a pid can come again) and removed as the process exits normally; a process that takes one first
removes those of processes no longer running. What a killed process left goes the next time any
process makes a header, so a machine holds those of its running processes and of the ones killed
since.

Forks share it: a worker forked from the process that made the header finds it there, as NVRTC
needs the same folder to find it, and makes none of its own (0.27 s for a kernel against 3.9 s
with a new header, on the CPU machine).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading

_lock = threading.Lock()
_UNTAKEN = object()
_folder: object = _UNTAKEN  # the folder taken, None where none could be made; a fork inherits it


def root() -> str:
    """The folder every process's header folder is in (one per user: another's cannot be cleaned)."""
    return os.path.join(tempfile.gettempdir(), f"tilesearch-pch-{os.getuid()}")


def folder() -> str | None:
    """This process's header folder (its parent's, in a fork that inherits the header), taken on
    first use; None where none can be made here (NVRTC then writes its own, as before)."""
    global _folder
    with _lock:
        if _folder is _UNTAKEN:
            _folder = _take()
        return _folder  # type: ignore[return-value]


def options(given: list[str]) -> list[str]:
    """``given`` with the header folder after ``-pch``, where it asks for automatic headers."""
    if "-pch" not in given or any(o.startswith("-pch-dir") for o in given):
        return given
    at = folder()
    if at is None:
        return given
    i = given.index("-pch") + 1
    return [*given[:i], f"-pch-dir={at}", *given[i:]]


def sweep() -> list[str]:
    """Removes the header folders of processes no longer running; the ones removed."""
    top = root()
    try:
        names = os.listdir(top)
    except OSError:
        return []
    removed = []
    for name in names:
        if name.isdigit() and not _running(int(name)):
            path = os.path.join(top, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _take() -> str | None:
    path = os.path.join(root(), str(os.getpid()))
    try:
        os.makedirs(root(), mode=0o700, exist_ok=True)
        sweep()
        shutil.rmtree(path, ignore_errors=True)  # a process of this pid that ended before
        os.mkdir(path)
    except OSError:
        return None
    atexit.register(_remove, os.getpid(), path)
    return path


def _remove(owner: int, path: str) -> None:
    if os.getpid() == owner:  # not a fork that exits normally: the header is its parent's
        shutil.rmtree(path, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's: running
    return True
