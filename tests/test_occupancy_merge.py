"""The engine's incremental occupancy count (`channel.sync`) against the oracle's whole-stream one
(`oracle.channel_occupancy`): streams with regular stretches (which sync skips over) broken by
irregular ones, fed in random pieces, compacted as the engine does, with the queue growing."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.sim.fast.channel import BEST, CURSOR, Channel, Tables, sync
from fuseflow.sim.oracle import channel_occupancy


def _times(rng, n: int, regular: float) -> tuple[np.ndarray, np.ndarray]:
    """Send times and consume times of n tokens: mostly one apart with probability `regular`,
    consumes after their sends at a latency that changes now and then."""
    steps = np.where(rng.random(n) < regular, 1, rng.integers(0, 6, n))
    sent = np.cumsum(steps) + rng.integers(0, 3)
    cons = np.empty(n, dtype=np.int64)
    lat, last = int(rng.integers(0, 4)), -1
    for x in range(n):
        if rng.random() > regular:
            lat = int(rng.integers(0, 9))
        last = max(last + int(rng.integers(1, 3) if rng.random() > regular else 1), int(sent[x]) + lat)
        cons[x] = last
    return sent.astype(np.int64), cons


def _merged(sent, cons, rng, capacity: int) -> int:
    """Occupancy counted as the engine does: the producer appends what fits, the reader consumes
    some of what is there, sync merges after each call, the channel drops what is merged."""
    tables = Tables(1, 1)
    ch = Channel(tables, 0, np.int64, capacity)
    ch.add_reader(0)
    reader = ch.readers[0]
    n, made, used = len(sent), 0, 0
    while used < n:
        ch.compact()
        room = ch.capacity - ch.count
        if not room and made == used:  # sends wait for a later consume to settle: grow (engine._unstick)
            ch.grow(2 * ch.capacity)
            room = ch.capacity - ch.count
        if made < n and room:
            k = int(rng.integers(1, room + 1))
            k = min(k, n - made)
            ch.append(np.zeros(k), np.zeros(k), sent[made:made + k])
            made += k
        if made > used:
            take = int(rng.integers(0, made - used + 1))
            before = ch.cursor(0)
            reader.cons[before:before + take] = cons[used:used + take]
            used += take
            tables.RD[0, CURSOR] += take
            if made == n:
                tables.CH[0, 2] = 1
            b = before
            while True:
                stop = sync(tables.CH, tables.RD, 0, 0, b, ch.sent, reader.cons, used == n, reader.queue)
                if stop < 0:
                    break
                reader.grow_queue(tables.RD)
                b = int(stop)
    return int(tables.RD[0, BEST])


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 3000), regular=st.sampled_from([0.0, 0.5, 0.97, 1.0]),
       capacity=st.sampled_from([1, 2, 7, 64, 1024]))
def test_incremental_count_is_the_whole_stream_count(seed, n, regular, capacity):
    rng = np.random.default_rng(seed)
    sent, cons = _times(rng, n, regular)
    assert _merged(sent, cons, rng, capacity) == channel_occupancy(sent.tolist(), cons.tolist())


def test_a_long_regular_stretch_with_a_break_at_its_end():
    """Sends one apart, consumes three later until one consume comes 40 cycles late (and the rest
    after it): the skip over the regular stretch must stop at the break."""
    sent = np.arange(5000, dtype=np.int64)
    cons = sent + 3
    cons[2500:] += 40
    for seed in range(5):
        assert _merged(sent, cons, np.random.default_rng(seed), 4096) == 43
    assert channel_occupancy(sent.tolist(), cons.tolist()) == 43
