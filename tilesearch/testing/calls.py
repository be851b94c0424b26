"""Functions that misbehave on purpose, for tests of worker isolation (called by import path)."""

from __future__ import annotations

import os
import time


def echo(value: object) -> object:
    return value


def crash(code: int = 3) -> None:
    os._exit(code)


def hang(seconds: float = 3600.0) -> None:
    time.sleep(seconds)


def fail(message: str = "boom") -> None:
    raise RuntimeError(message)


def pid() -> int:
    return os.getpid()


def on_exit_write(path: str) -> None:
    """Registers an exit handler that writes ``path``: a worker asked to stop must still run it."""
    import atexit

    atexit.register(lambda: open(path, "w").close())


def where() -> tuple[dict[str, str], list[str], str]:
    """This process's environment, ``sys.path`` and working folder."""
    import sys

    return dict(os.environ), list(sys.path), os.getcwd()


def imported(module: str) -> bool:
    """Whether ``module`` is imported in this process already."""
    import sys

    return module in sys.modules
