"""How many gRPC calls may hold a message in one process, and who makes room when they are too many.

A call holds room from the moment its message is asked for until its answer is sent: once the message
is in, it is bytes in memory, and then a request on the pool's threads. These rules keep calls whose
message never comes from keeping anyone else out:
- one call per connection at a time waits for its message: a connection's other calls queue behind it,
  so a client with many stalled calls on a connection contends for room as one;
- at the cap, a newcomer takes the room of a call still waiting for its message (that call ends
  UNAVAILABLE): of a connection that stalled before (a call of it was made to leave, or its message
  did not come in time) once it has waited `GRACE`, of any other connection once it has waited
  `FIRST_GRACE` (a message already sent arrives well within either, even on a busy machine);
- newcomers from connections that never stalled go first: one from a stalled connection takes room
  only when none of them waits. Only when every call in the room has its message does a newcomer wait
  for calls that run, and end in their own time.
An authorised client therefore waits at most one `FIRST_GRACE` turn per connection not yet known to
stall (each connection learns once), then a turn or two (`GRACE`), however many stalled calls other
connections hold; and the messages held at once stay within the cap.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass, field

GRACE = 0.05  # seconds a call of a connection that stalled before may wait for its message
FIRST_GRACE = 0.5  # seconds for a call of any other connection
REMEMBERED = 4096  # connections remembered as having stalled (the oldest are forgotten)


@dataclass
class Turn:
    """A connection's turn to have a call wait for its message, and how many of its calls want it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    wanted: int = 0


@dataclass
class Waiting:
    since: float
    peer: str


class Admission:
    """Calls in the room (waiting for their message, or running), at most `capacity`. Used from one
    event loop only: nothing is awaited between a look at the room and a change to it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self.waiting: dict[asyncio.Task, Waiting] = {}  # still receiving their message, oldest first
        self.running: dict[asyncio.Task, str] = {}  # by the peer (connection) of each
        self.evicted: set[asyncio.Task] = set()
        self.sleepers: dict[asyncio.Future, bool] = {}  # newcomers waiting for room: from a stalled peer?
        self.turns: dict[str, Turn] = {}  # by connection (the peer's address and port)
        self.holding: dict[asyncio.Task, str] = {}  # calls holding their connection's turn
        self.stalled: OrderedDict[str, None] = OrderedDict()
        self.keyed_calls: OrderedDict[str, None] = OrderedDict()  # connections that carried a keyed call
        self.started: OrderedDict[str, int] = OrderedDict()  # calls begun, by connection

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

    def begun(self, peer: str) -> None:
        """Count a call that reached this server's methods on connection `peer` (with a key if keys are
        set), or a call's message that came in: the connection guard sees that the bytes the connection
        sends carry calls."""
        self.started[peer] = self.started.get(peer, 0) + 1
        self.started.move_to_end(peer)
        while len(self.started) > REMEMBERED:
            self.started.popitem(last=False)

    def activity(self) -> tuple[dict[str, int], set[str]]:
        """The calls begun and messages received by connection, and the connections with a call in the
        room waiting for its message (whose bytes may still come: at most `capacity` of them); safe from
        another thread (copies made in C, under the GIL)."""
        return dict(self.started), {waiting.peer for waiting in list(self.waiting.values())}

    def keyed(self, peer: str) -> None:
        """Remember that `peer` carried a call that needs a key (with keys set): the connection guard
        closes it after those that never did (serve/rpc/guard.py)."""
        self.keyed_calls[peer] = None
        self.keyed_calls.move_to_end(peer)
        while len(self.keyed_calls) > REMEMBERED:
            self.keyed_calls.popitem(last=False)

    def keyed_peers(self) -> list[str]:
        """The connections remembered by `keyed`; safe from another thread (one copy, under the GIL)."""
        return list(self.keyed_calls)

    def stall(self, peer: str) -> None:
        """Remember that a call of `peer` did not send its message in time."""
        self.stalled[peer] = None
        self.stalled.move_to_end(peer)
        while len(self.stalled) > REMEMBERED:
            self.stalled.popitem(last=False)

    async def enter(self, task: asyncio.Task, peer: str) -> None:
        """Take room for `task`, making room at the cap (see the module's docstring)."""
        suspect = peer in self.stalled
        while len(self.waiting) + len(self.running) >= self.capacity:
            victim, ready_in = self.victim()
            if victim is not None and not (suspect and not all(self.sleepers.values())):
                self.evict(victim)
                break
            await self.sleep(ready_in, suspect)
        self.waiting[task] = Waiting(time.monotonic(), peer)

    def victim(self) -> tuple[asyncio.Task | None, float | None]:
        """The call whose room a newcomer may take now (stalled connections first, then the oldest), or
        None and the seconds until one may be taken (None: until a call ends)."""
        now, soonest = time.monotonic(), None
        for first in (True, False):
            for task, waiting in self.waiting.items():
                if (waiting.peer in self.stalled) != first:
                    continue
                left = waiting.since + (GRACE if first else FIRST_GRACE) - now
                if left <= 0:
                    return task, None
                soonest = left if soonest is None else min(soonest, left)
        return None, soonest

    async def sleep(self, seconds: float | None, suspect: bool) -> None:
        """Until a call ends, or `seconds` pass."""
        woken = asyncio.get_running_loop().create_future()
        self.sleepers[woken] = suspect
        try:
            await asyncio.wait({woken}, timeout=seconds)
        finally:
            del self.sleepers[woken]

    def evict(self, task: asyncio.Task) -> None:
        self.stall(self.waiting.pop(task).peer)
        self.evicted.add(task)
        task.cancel()

    def received(self, task: asyncio.Task) -> None:
        """Its message is in: it can no longer be made to leave; its connection's next call may wait."""
        waiting = self.waiting.pop(task, None)
        self.running[task] = waiting.peer if waiting is not None else ""
        if waiting is not None:
            self.begun(waiting.peer)  # the bytes that came carried a message
        self.give_turn(task)

    def busy_peers(self) -> list[str]:
        """The connections with a call running; safe from another thread (one copy, under the GIL)."""
        return list(self.running.values())

    def was_evicted(self, task: asyncio.Task) -> bool:
        if task in self.evicted:
            self.evicted.discard(task)
            return True
        return False

    def leave(self, task: asyncio.Task) -> None:
        """The call ended (answered, refused, cancelled or evicted): its room is free."""
        self.waiting.pop(task, None)
        self.running.pop(task, None)
        self.evicted.discard(task)
        self.give_turn(task)
        for woken in self.sleepers:
            if not woken.done():
                woken.set_result(None)
