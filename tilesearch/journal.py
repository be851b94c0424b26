"""The journal storage (``storage=journal:FILE``): Optuna's append-only log file, opened so that a
crash neither stalls the next run nor damages the file.

Three changes to how Optuna's :class:`~optuna.storages.journal.JournalFileBackend` is used, made
by plugging in our own lock and subclassing the backend, never by patching Optuna:

- **Locking.** Optuna's default lock is a ``FILE.lock`` symlink. A process killed while holding it
  (SIGKILL, a power cut) leaves it behind, and every later writer waits out a 30 s grace period
  before breaking it. :class:`FlockLock` takes an ``flock`` on the journal itself instead: the
  kernel releases it when the holder dies, however it dies, and no file is left behind.
- **Torn tails.** Each append writes whole lines and fsyncs under the lock, so a last line
  without its newline is a write cut short by a crash, never a write in progress. Optuna skips
  such a line when reading, but appends after it, which glues the next record onto the torn bytes
  and leaves a line that no reader can parse: the journal is damaged for good. Before appending,
  :class:`Journal` moves the torn bytes to ``FILE.torn-<offset>`` (kept for inspection; nothing
  that was committed is in them) and cuts the file back to its last whole line.
- **Reading.** A line that is not JSON, or a file that is not UTF-8, is reported as a
  :class:`JournalError` naming the file and line, not a decoder traceback.
  Opened ``read_only`` (``show``, ``export``), a journal is never created and never written: a
  write raises, and a missing file is an error.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Generator
from typing import Any

from optuna.storages.journal import JournalFileBackend
from optuna.storages.journal._file import BaseJournalFileLock

from tilesearch.database import MissingStorageError, StorageError
from tilesearch.errors import root_cause


class JournalError(StorageError):
    """A journal file that cannot be opened, read or written."""


class FlockLock(BaseJournalFileLock):
    """An exclusive ``flock`` on the journal file, released by the kernel when its holder dies.

    Args:
        path: the journal file (it must exist; the lock leaves no other file).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the last descriptor drops the lock


class Journal(JournalFileBackend):
    """Optuna's journal file backend with :class:`FlockLock`, torn-tail repair and one-line errors.

    Args:
        path: the journal file.
        read_only: refuse to create or write the file (for commands that only read).
    """

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        if not path:
            raise JournalError("storage=journal: needs a file name, e.g. storage=journal:tilesearch.journal")
        if os.path.isdir(path):
            raise JournalError(f"journal {path} is a directory; name a file, e.g. storage=journal:{path}/tune.journal")
        exists = os.path.exists(path)
        if read_only and not exists:
            raise MissingStorageError(f"no journal at {path}; run tilesearch tune with storage=journal:{path} first")
        if exists and not os.access(path, os.R_OK):
            raise JournalError(f"journal {path} is not readable; check its permissions")
        if not read_only and exists and not os.access(path, os.W_OK):
            raise JournalError(f"journal {path} is not writable; check its permissions (reading it needs none: show)")
        if not read_only and not exists:
            directory = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
                raise JournalError(f"cannot create journal {path}: {directory} is missing or not writable")
        self.read_only = read_only
        if read_only:
            self._file_path = path
            self._lock = FlockLock(path)
            self._log_number_offset = {0: 0}
        else:
            open(path, "ab").close()  # the lock is taken on the file itself
            super().__init__(path, lock_obj=FlockLock(path))

    def read_logs(self, log_number_from: int) -> Generator[dict[str, Any], None, None]:
        logs = super().read_logs(log_number_from)
        number = log_number_from
        while True:
            try:
                log = next(logs)
            except StopIteration:
                return
            except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
                raise JournalError(
                    f"journal {self._file_path} is damaged after record {number}: {root_cause(exc)}; "
                    "restore it from a copy or start a new one"
                ) from None
            except OSError as exc:
                raise JournalError(f"cannot read journal {self._file_path}: {exc.strerror or exc}") from None
            if not isinstance(log, dict) or not isinstance(log.get("op_code"), int):
                raise JournalError(
                    f"journal {self._file_path} record {number + 1} is not an Optuna journal record; "
                    "is this file a journal?"
                )
            number += 1
            yield log

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        if self.read_only:
            raise JournalError(f"journal {self._file_path} is open read-only; this command does not write")
        text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs).encode()
        self._lock.acquire()
        try:
            with open(self._file_path, "r+b") as f:
                end = f.seek(0, os.SEEK_END)
                keep = _whole_lines(f, end)
                if keep != end:
                    self._set_aside(f, keep, end)
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise JournalError(f"cannot write journal {self._file_path}: {exc.strerror or exc}") from None
        finally:
            self._lock.release()

    def _set_aside(self, f: Any, keep: int, end: int) -> None:
        """Moves the torn bytes ``keep..end`` to a side file, then cuts them off the journal."""
        f.seek(keep)
        torn = f.read(end - keep)
        with open(f"{self._file_path}.torn-{keep}", "wb") as side:
            side.write(torn)
            side.flush()
            os.fsync(side.fileno())
        f.truncate(keep)
        f.seek(keep)


def torn_tail(path: str) -> int:
    """Bytes after the journal's last whole line (0 for a sound journal)."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        return end - _whole_lines(f, end)


def _whole_lines(f: Any, end: int) -> int:
    """The offset just after the last newline of the file (0 if it has none)."""
    pos = end
    while pos > 0:
        step = min(4096, pos)
        f.seek(pos - step)
        chunk = f.read(step)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return pos - step + cut + 1
        pos -= step
    return 0
