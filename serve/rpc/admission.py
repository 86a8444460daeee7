"""How many gRPC calls may hold a message in one process, and who makes room when they are too many.

A call holds room from the moment its message is asked for until its answer is sent: once the message
is in, it is bytes in memory, and then a request on the pool's threads. Two rules keep calls whose
message never comes from keeping anyone else out:
- one call per connection at a time waits for its message: a connection's other calls queue behind it,
  so a client with many stalled calls on a connection contends for room as one;
- at the cap, a newcomer takes the room of the call that has waited longest for its message, once that
  call has waited `GRACE` (a message already sent arrives well within it); that call ends UNAVAILABLE.
  Only when every call in the room has its message does the newcomer wait, for calls that run and end
  in their own time.
An authorised client is therefore let in after at most one turn of each other connection that holds a
stalled call (each turn `GRACE / capacity`), however many calls those connections open, and the
messages held at once stay within the cap.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

GRACE = 0.05  # seconds a call in the room may wait for its message before a newcomer may take its room


@dataclass
class Turn:
    """A connection's turn to have a call wait for its message, and how many of its calls want it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wanted: int = 0


class Admission:
    """Calls in the room (waiting for their message, or running), at most `capacity`. Used from one
    event loop only: nothing is awaited between a look at the room and a change to it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.waiting: dict[asyncio.Task, float] = {}  # still receiving their message: since when
        self.running: set[asyncio.Task] = set()
        self.evicted: set[asyncio.Task] = set()
        self.sleepers: set[asyncio.Future] = set()  # newcomers waiting for room, woken when a call ends
        self.turns: dict[str, Turn] = {}  # by connection (the peer's address and port)
        self.holding: dict[asyncio.Task, str] = {}  # calls holding their connection's turn

    async def take_turn(self, task: asyncio.Task, peer: str) -> None:
        """Wait until no other call of the same connection waits for its message."""
        turn = self.turns.setdefault(peer, Turn())
        turn.wanted += 1
        try:
            await turn.lock.acquire()
        except BaseException:
            self.forget_turn(peer)
            raise
        self.holding[task] = peer

    def give_turn(self, task: asyncio.Task) -> None:
        peer = self.holding.pop(task, None)
        if peer is not None:
            self.turns[peer].lock.release()
            self.forget_turn(peer)

    def forget_turn(self, peer: str) -> None:
        turn = self.turns[peer]
        turn.wanted -= 1
        if turn.wanted == 0:
            del self.turns[peer]

    async def enter(self, task: asyncio.Task) -> None:
        """Take room for `task`, making room at the cap (see the module's docstring)."""
        while len(self.waiting) + len(self.running) >= self.capacity:
            left = None
            if self.waiting:
                oldest, since = next(iter(self.waiting.items()))
                left = since + GRACE - time.monotonic()
                if left <= 0:
                    self.evict(oldest)
                    break
            await self.sleep(left)
        self.waiting[task] = time.monotonic()

    async def sleep(self, seconds: float | None) -> None:
        """Until a call ends, or `seconds` pass."""
        woken = asyncio.get_running_loop().create_future()
        self.sleepers.add(woken)
        try:
            await asyncio.wait({woken}, timeout=seconds)
        finally:
            self.sleepers.discard(woken)

    def evict(self, task: asyncio.Task) -> None:
        del self.waiting[task]
        self.evicted.add(task)
        task.cancel()

    def received(self, task: asyncio.Task) -> None:
        """Its message is in: it can no longer be made to leave; its connection's next call may wait."""
        self.waiting.pop(task, None)
        self.running.add(task)
        self.give_turn(task)

    def was_evicted(self, task: asyncio.Task) -> bool:
        if task in self.evicted:
            self.evicted.discard(task)
            return True
        return False

    def leave(self, task: asyncio.Task) -> None:
        """The call ended (answered, refused, cancelled or evicted): its room is free."""
        self.waiting.pop(task, None)
        self.running.discard(task)
        self.evicted.discard(task)
        self.give_turn(task)
        for woken in self.sleepers:
            if not woken.done():
                woken.set_result(None)
