"""A progress bar for long work: trials done, failures, best so far."""

from __future__ import annotations

import sys
from typing import Any

from tilesearch.records import RunResult, Status


class Progress:
    """tqdm bar over ``total`` trials; silent when ``enabled`` is false."""

    def __init__(self, total: int, label: str, enabled: bool = True, replayed: bool = False) -> None:
        self.total = total
        self.label = ("[replayed] " if replayed else "") + label
        self.enabled = enabled
        self.failures = 0
        self.best: RunResult | None = None
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.enabled and self.total > 0:
            from tqdm import tqdm

            self._bar = tqdm(total=self.total, desc=self.label, unit="trial", file=sys.stderr, dynamic_ncols=True)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bar is not None:
            self._bar.close()

    def update(self, status: str, run: RunResult | None) -> None:
        if status != Status.OK.value:
            self.failures += 1
        elif run is not None and run.latency_ms is not None:
            if self.best is None or run.latency_ms < (self.best.latency_ms or float("inf")):
                self.best = run
        if self._bar is not None:
            post = {"fail": self.failures}
            if self.best is not None:
                post["best_tflops"] = f"{self.best.tflops:.1f}"
                if self.best.speedup is not None:
                    post["vs_baseline"] = f"{self.best.speedup:.2f}x"
            self._bar.set_postfix(post, refresh=False)
            self._bar.update(1)

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
