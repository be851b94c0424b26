"""Buckets over a size range, decided from measurements: which tuned sizes one configuration
can serve, where to tune next, and which sizes to hold out for certifying the result.

The data is a table ``latency[size][config] -> ms`` of configurations measured at tuned sizes
(every size's own winner, and the other sizes' winners measured there too). A configuration
*covers* a size when it is within ``tolerance`` of that size's best. Buckets are the fewest
runs of consecutive tuned sizes that one configuration covers (greedy from the smallest size,
which is optimal for covering a line with intervals). The edge between two buckets lies where
the two configurations' latencies cross (:func:`crossing`): each is measured at both tuned sizes
on either side, and between them follows the shape of a cost model (the op's own roofline, so a
tile that M starts to overflow shows); without those figures, at the geometric mean of the two
sizes, since GEMM costs change with log size.

Nothing here measures; :mod:`tilesearch.range_tuner` gathers the table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_GAP_RATIO = 8.0  # tuned neighbours further apart than this are refined even inside one bucket
MIN_GAP_RATIO = 1.25  # closer than this, the boundary's position is not worth another size
MAX_TIME_RATIO = 2.0  # tuned neighbours whose best latencies differ by more are refined too
RESOLVED = 0.03
"""The smallest loss worth a probe or a contender: a size's figures are single search timings,
which move by 1-2% between processes, so a probe placed for a finer loss, or a contender within
less of the best, is placed by that noise. Buckets may still be finer (their tolerance)."""


def config_key(config: Mapping[str, Any]) -> str:
    """One configuration's identity across the studies of different sizes."""
    return json.dumps(dict(config), sort_keys=True, default=str)


@dataclass(frozen=True)
class Bucket:
    """Sizes ``lo..hi`` served by one configuration.

    Attributes:
        lo, hi: the bucket's sizes, both included.
        config: the configuration compiled for it.
        tuned: the tuned sizes inside it, which the configuration was measured at.
        worst_loss: its largest ``latency / best - 1`` over those sizes.
    """

    lo: int
    hi: int
    config: dict[str, Any]
    tuned: tuple[int, ...] = ()
    worst_loss: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "config": self.config, "tuned": list(self.tuned),
                "worst_loss": self.worst_loss}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bucket:
        return cls(int(data["lo"]), int(data["hi"]), dict(data["config"]), tuple(int(s) for s in data["tuned"]),
                   float(data["worst_loss"]))


@dataclass(frozen=True)
class Table:
    """Measured latencies: ``latency[size][config_key]`` (ms), and the configurations by key."""

    latency: dict[int, dict[str, float]] = field(default_factory=dict)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def best(self, size: int) -> tuple[str, float]:
        row = self.latency[size]
        key = min(row, key=row.__getitem__)
        return key, row[key]

    def loss(self, size: int, key: str) -> float | None:
        """``latency / best - 1`` of ``key`` at ``size``; ``None`` where it was not measured."""
        ms = self.latency[size].get(key)
        return None if ms is None else ms / self.best(size)[1] - 1


Shape = Callable[[str, int], float]
"""``shape(config_key, size)``: a configuration's modelled time at a size, in any unit: how it
changes between two sizes is used, and its ratio between them where only one was measured."""

MAX_CROSSING_POINTS = 2048  # sizes tried between two tuned sizes (all of them when fewer)


def cover(table: Table, lo: int, hi: int, tolerance: float, shape: Shape | None = None) -> list[Bucket]:
    """The fewest buckets over ``lo..hi`` whose configuration covers every tuned size in it;
    ``shape`` places the edges between them (:func:`crossing`), else the geometric mean."""
    sizes = sorted(table.latency)
    if not sizes:
        raise ValueError("no tuned sizes to make buckets from")
    runs: list[tuple[int, int, str]] = []
    i = 0
    while i < len(sizes):
        best_run = (i + 1, 0.0, table.best(sizes[i])[0])  # a size's own winner always covers it
        for key in table.configs:
            j, total = i, 0.0
            while j < len(sizes):
                loss = table.loss(sizes[j], key)
                if loss is None or loss > tolerance:
                    break
                total += loss
                j += 1
            if (j, -total) > (best_run[0], -best_run[1]):
                best_run = (j, total, key)
        runs.append((i, best_run[0], best_run[2]))
        i = best_run[0]
    edges = [crossing(table, sizes[stop - 1], sizes[stop], key, runs[n + 1][2], shape)
             for n, (_, stop, key) in enumerate(runs[:-1])]
    buckets = []
    for n, (start, stop, key) in enumerate(runs):
        tuned = tuple(sizes[start:stop])
        first = lo if n == 0 else edges[n - 1] + 1
        last = hi if n == len(runs) - 1 else edges[n]
        worst = max(table.loss(s, key) or 0.0 for s in tuned)
        buckets.append(Bucket(first, last, table.configs[key], tuned, worst))
    return buckets


def crossing(table: Table, a: int, b: int, left: str, right: str, shape: Shape | None) -> int:
    """The last size served by ``left`` (the bucket of tuned size ``a``) before ``right`` (that
    of ``b``): the first size where ``right``'s latency falls below ``left``'s, each latency
    drawn between its measured figures at ``a`` and ``b`` along ``shape``. A configuration
    measured at only one of the two sizes (the op's space prunes it at the other: a 16-row
    raster panel where M has 2 row tiles) is drawn from that one figure, scaled by ``shape``.
    Falls back on :func:`edge` without ``shape``, where a configuration has neither figure, or
    where the lines do not cross inside ``a..b``. Before the one-figure case was drawn, it fell
    back too: on the H100 the edge between 430's and 1448's configurations of a 4096x4096 range
    fell at 789, the geometric mean, and m=784 lost 35% on the 128-row tile that the model
    itself put 1.33x behind there."""
    figures = {k: [table.latency[s].get(k) for s in (a, b)] for k in (left, right)}
    if shape is None or b - a < 2 or any(f == [None, None] for f in figures.values()):
        return edge(a, b)

    left_at, right_at = drawn(table, a, b, left, shape), drawn(table, a, b, right, shape)
    assert left_at is not None and right_at is not None
    step = max(1, (b - a) // MAX_CROSSING_POINTS)
    for size in range(a + 1, b, step):
        if right_at(size) < left_at(size):
            return max(a, size - 1)
    return edge(a, b)


def drawn(table: Table, a: int, b: int, key: str, shape: Shape) -> Callable[[int], float] | None:
    """``key``'s latency between tuned sizes ``a`` and ``b``: its figures there joined along
    ``shape``; from one figure, the model's time scaled to it; ``None`` without a figure."""
    at_a, at_b = (table.latency[s].get(key) for s in (a, b))
    if at_a is None and at_b is None:
        return None
    wa, wb = shape(key, a), shape(key, b)  # once per configuration, not once per size tried
    if at_a is None or at_b is None:  # one figure: the model's time, scaled to it
        known, at = (at_b, wb) if at_a is None else (at_a, wa)
        return lambda size: known * shape(key, size) / at

    def at(size: int) -> float:
        t = (shape(key, size) - wa) / (wb - wa) if wb != wa else (size - a) / (b - a)
        return at_a + (at_b - at_a) * t

    return at


def edge(a: int, b: int) -> int:
    """The last size of the bucket of ``a`` when the next bucket starts with tuned size ``b``."""
    return min(max(math.isqrt(a * b), a), b - 1)


def bucket_of(buckets: Sequence[Bucket], size: int) -> int:
    """Index of the bucket holding ``size``; raises :class:`ValueError` outside them."""
    for i, bucket in enumerate(buckets):
        if bucket.lo <= size <= bucket.hi:
            return i
    raise ValueError(f"size {size} is outside the buckets {buckets[0].lo}..{buckets[-1].hi}")


def next_sizes(buckets: Sequence[Bucket], sizes: Sequence[int], n: int, table: Table | None = None,
               shape: Shape | None = None) -> list[int]:
    """Up to ``n`` sizes to tune next: the geometric midpoints of neighbouring tuned sizes that
    fall in different buckets (where the edge lies is a guess), lie more than
    :data:`MAX_GAP_RATIO` apart, or whose best latencies in ``table`` lie more than
    :data:`MAX_TIME_RATIO` apart. A gap ranks by how far its best latency grows across it, then
    by width; without a table, by width. First of all comes a gap where serving one end with the
    other end's configuration has no figure (:func:`_crossed_loss`): a configuration the op's
    space prunes at the other end (a swapped tile once M is large) counts by its figure drawn
    along ``shape`` there, and as unknown only without one. A finite crossed loss does not rank:
    where the edge between two buckets lies, the probes measure (:func:`probe_sizes`), while
    what a tuned size adds is the search near it.

    Sizes go where the time changes because a search finds what wins only near its own size, and
    what wins changes with the work, not the size: on the H100 a range of M from 1 spent its sizes
    on the flat low end (1, 11, 37 and 128 tuned), where every configuration of a GEMM ran within
    2%, and left 128 to 1448 untuned, where the held-out sizes lost 17-38% to per-size tuning
    (2026-11-26). Gaps inside one bucket by width still placed 11 and 37 in a 14336x4096 range
    (best 0.054-0.056 ms from 1 to 128 rows, 0.27 ms at 1448, 2.83 ms at 16384) and nothing
    inside 430..1448 or 1448..16384, where held-out searches at 784 and 2657 rows found a tile
    14.8% and 16.1% ahead that no tuned size's search had measured (2026-11-27). Ranking by how
    far the configurations close to the best move across a gap was tried too (``1dd17fd``, on an
    H200): their standings swing by up to 91% between 11 and 37 rows while the best stays flat,
    and it placed four of seven sizes in 11..37. Growth times one plus the crossed loss
    (``ef69807``, H100) placed 234 before 789 and 2655: across 128..430 the best grew 1.6x, but
    the 128-row winner, which the space prunes at 430 rows, was drawn 5.2x behind there; 784 rows
    then lost 14.9% to a held-out search's tile, and 2657 rows 7.1%."""
    sizes = sorted(sizes)
    candidates = []
    for a, b in zip(sizes, sizes[1:]):
        ratio = b / a
        if b - a < 2 or ratio < MIN_GAP_RATIO:
            continue
        left, right = buckets[bucket_of(buckets, a)], buckets[bucket_of(buckets, b)]
        grows = _time_ratio(table, a, b) if table is not None else ratio  # without a table: width ranks
        if left is not right or ratio > MAX_GAP_RATIO or (table is not None and grows > MAX_TIME_RATIO):
            unknown = math.isinf(_crossed_loss(table, a, b, left, right, shape))
            candidates.append((unknown, grows, ratio, math.isqrt(a * b)))
    candidates.sort(reverse=True)
    return [mid for *_, mid in candidates[:n] if mid not in sizes]


def _time_ratio(table: Table, a: int, b: int) -> float:
    """The best latency at ``b`` over the one at ``a`` (1 where either size has none)."""
    if not table.latency.get(a) or not table.latency.get(b):
        return 1.0
    fast, slow = sorted((table.best(a)[1], table.best(b)[1]))
    return slow / fast if fast > 0 else 1.0


PROBE_POINTS = 48  # sizes a gap's modelled losses are looked at, evenly in log size
PROBE_SPACING = 1.15  # two probes of one gap at least this ratio apart
UNMEASURED_RATIO = 4.0  # no stretch between measured sizes of a gap is left wider than this


def probe_sizes(buckets: Sequence[Bucket], sizes: Sequence[int], per_gap: int, table: Table, tolerance: float,
                shape: Shape | None = None) -> list[int]:
    """Up to ``per_gap`` sizes to measure between each two neighbouring tuned sizes: where the
    model puts the configuration that serves a size more than ``tolerance`` behind another
    configuration measured at either end (each drawn along ``shape`` from its figures,
    :func:`drawn`), the worst such sizes; else, where serving one end with the other end's
    configuration loses more than ``tolerance`` (:func:`_crossed_loss`), sizes evenly in log
    size. A configuration good at both ends may still be poor between them: on the H100 the
    128x128 tile of a 4096x4096 range was within 3% at 430 and 1448 rows (0.97 and 2.9 waves of
    the 132 SMs) and 32.5% behind at 784 (1.7 waves), a size no probe looked at since the two
    ends agreed. Where neither holds (the flat low end of a GEMM's M), a probe tells nothing.

    Whatever the model says, a gap keeps no stretch between its measured sizes (its ends and the
    probes chosen so far) wider than :data:`UNMEASURED_RATIO`: the widest such stretch gets its
    geometric middle, one size beyond ``per_gap``. On the H100 (2026-11-26, at ``c409cf2``) a
    4096x4096 range probed 1680 and 2048 between its tuned 1448 and 16384, where the model
    pointed, and served 2049..16384 from the 16384-row winner alone; at 8928 rows that lost 13%
    to a 256x128 tile the 1448-row search had measured within 3% of its best."""
    sizes = sorted(sizes)
    out: set[int] = set()
    for a, b in zip(sizes, sizes[1:]):
        if b - a < 2:
            continue
        points = _modelled_losses(buckets, table, a, b, tolerance, shape) if shape is not None else []
        chosen: list[int] = []
        for _, size in sorted(points, reverse=True):
            if len(chosen) < per_gap and all(max(size, c) / min(size, c) >= PROBE_SPACING for c in chosen):
                chosen.append(size)
        left, right = buckets[bucket_of(buckets, a)], buckets[bucket_of(buckets, b)]
        if not chosen and _crossed_loss(table, a, b, left, right, shape) > tolerance:
            chosen = _between(a, b, per_gap)
        if per_gap > 0:
            points = sorted({a, b, *chosen})
            lo, hi = max(zip(points, points[1:]), key=lambda pair: pair[1] / pair[0])
            if hi / lo > UNMEASURED_RATIO:
                chosen.append(math.isqrt(lo * hi))
        out.update(chosen)
    return sorted(out)


SPLIT_RATIO = 2.0  # a stretch whose ends disagree is split while wider than this
SPLIT_ROUNDS = 2  # rounds of :func:`split_sizes`, :func:`edge_sizes` and :func:`modelled_sizes` after the probes


def split_sizes(table: Table, tolerance: float) -> list[int]:
    """The geometric middle of each stretch between neighbouring measured sizes that is wider
    than :data:`SPLIT_RATIO` and whose ends disagree: the fastest configuration at one end is
    more than ``tolerance`` behind at the other (every winner is measured at every size of the
    table). Where the winner changes, a third configuration may be best between the two: on the
    H100 (2026-11-27, ``5f33fd4``) a 4096x4096 range served 2657 rows 8.9% behind a 256x128 tile
    that was neither the winner at 1448 rows nor at 5246, where the 128x256 tile that served
    2657 had won; no measured size lay between the two. Where the same configuration wins at
    both ends (the flat low end of a GEMM's M), nothing is split."""
    sizes = sorted(table.latency)
    out = []
    for a, b in zip(sizes, sizes[1:]):
        if b / a <= SPLIT_RATIO:  # wider than 2x: a whole size lies strictly between
            continue
        first, last = table.best(a)[0], table.best(b)[0]
        crossed = [table.loss(b, first), table.loss(a, last)]
        if any(loss is None or loss > tolerance for loss in crossed):
            out.append(math.isqrt(a * b))
    return out


EDGE_RATIO = 1.5  # a bucket's edge further than this from the bucket's nearest measured size is measured


def edge_sizes(buckets: Sequence[Bucket]) -> list[int]:
    """The inner edges of ``buckets`` (a bucket's first or last size) that lie more than
    :data:`EDGE_RATIO` from the nearest size measured in that bucket (its ``tuned``). A bucket's
    configuration is known at its measured sizes and drawn between them; past the last of them,
    up to an edge that :func:`crossing` placed from a model, nothing checks it. On four H100s
    (2026-11-28, ``925336d``) a 4096x14336 range served 65..128 rows with the 128-row winner,
    measured at 128 alone: at 65 rows (one row past 64, a tile edge) it was 13.3% behind a 64x64
    tile that fills one wave there, a refit that a measurement at 65 would have timed."""
    out: set[int] = set()
    for left, right in zip(buckets, buckets[1:]):
        if not left.tuned or left.hi / left.tuned[-1] > EDGE_RATIO:
            out.add(left.hi)
        if not right.tuned or right.tuned[0] / right.lo > EDGE_RATIO:
            out.add(right.lo)
    return sorted(out)


def modelled_sizes(buckets: Sequence[Bucket], table: Table, tolerance: float, shape: Shape) -> list[int]:
    """Between each two neighbouring measured sizes, the size where the model puts the serving
    configuration furthest behind another configuration measured at either end (each drawn
    along ``shape`` between its figures at the two, :func:`_modelled_losses`), where that is
    more than ``tolerance``. :func:`probe_sizes` draws its lines across a whole gap between
    tuned sizes; once probes measured inside the gap, lines drawn between neighbouring measured
    sizes follow each tile's waves, which the wide ones smooth away. Where the same
    configuration wins at both ends, :func:`split_sizes` sees nothing. On four H200s
    (2026-11-28, ``14cc9b0``) a 4096x4096 range measured 2099 and 3119 rows, where a 64x256 tile
    won (4.0 and 5.9 waves of 132 SMs) and a 256x128 tile was 14.5% and 4.2% behind (2.2 and 3.2
    waves); at 2657 rows (5.1 and 2.7 waves) the 256x128 tile was 15.6% ahead, and nothing had
    measured there."""
    sizes = sorted(table.latency)
    out = []
    for a, b in zip(sizes, sizes[1:]):
        if b - a < 2 or b / a < PROBE_SPACING:
            continue
        points = _modelled_losses(buckets, table, a, b, tolerance, shape)
        if points:
            out.append(max(points)[1])
    return out


def _between(a: int, b: int, n: int) -> list[int]:
    """Up to ``n`` sizes strictly between ``a`` and ``b``, evenly in log size."""
    return sorted({round(a * (b / a) ** (i / (n + 1))) for i in range(1, n + 1)} - {a, b})


def _modelled_losses(buckets: Sequence[Bucket], table: Table, a: int, b: int, tolerance: float,
                     shape: Shape) -> list[tuple[float, int]]:
    """``(loss, size)`` at the sizes between ``a`` and ``b`` where the model puts the serving
    configuration more than ``tolerance`` behind the best configuration measured at ``a`` or ``b``."""
    lines = {key: line for key in {*table.latency[a], *table.latency[b]}
             if (line := drawn(table, a, b, key, shape)) is not None}
    out = []
    for size in _between(a, b, PROBE_POINTS):
        served = lines.get(config_key(buckets[bucket_of(buckets, size)].config))
        if served is None:
            continue
        best = min(line(size) for line in lines.values())
        loss = served(size) / best - 1
        if loss > tolerance:
            out.append((loss, size))
    return out


def _crossed_loss(table: Table | None, a: int, b: int, left: Bucket, right: Bucket,
                  shape: Shape | None = None) -> float:
    """The larger loss of ``left``'s configuration at ``b`` and ``right``'s at ``a``: measured,
    else drawn along ``shape`` from its figure at its own end, else ``inf``; 0 without a table."""
    if table is None:
        return 0.0
    losses = []
    for size, bucket in ((b, left), (a, right)):
        key = config_key(bucket.config)
        loss = table.loss(size, key) if size in table.latency else None
        line = drawn(table, a, b, key, shape) if loss is None and shape is not None and {a, b} <= set(table.latency) else None
        if line is not None:  # not measured at ``size``: drawn from its figure at the other end
            loss = line(size) / table.best(size)[1] - 1
        losses.append(math.inf if loss is None else loss)
    return max(losses)


def held_out(lo: int, hi: int, tuned: Sequence[int], n: int = 8) -> list[int]:
    """``n`` sizes in ``lo..hi`` that were not tuned, spread evenly in log size, every other one
    odd (an odd M leaves a partial tile in every configuration)."""
    taken = set(tuned)
    chosen: list[int] = []
    for i in range(n):
        x = lo * (hi / lo) ** ((i + 0.5) / n) if lo > 0 else lo + (hi - lo) * (i + 0.5) / n
        size = round(x)
        size = size | 1 if i % 2 == 0 else max(size - size % 8, lo)
        while (size in taken or size in chosen) and size < hi:
            size += 1
        if lo <= size <= hi and size not in taken and size not in chosen:
            chosen.append(size)
    return sorted(chosen)
