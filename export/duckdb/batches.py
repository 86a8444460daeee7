"""How many rows a macro computes at once, so that a model with large values per row scores in bounded
memory whatever the rows a query feeds it.

DuckDB evaluates an expression over a chunk of up to 2,048 rows (its vector size), so every list a macro
binds per row lives for all the rows of the chunk at once: a 28×28 CNN binds a few MB a row, GBs a
chunk. A lambda, though, runs over at most 2,048 list elements at a time. Wrapping the body in a lambda
over `k` elements per row, of which only the first computes the body (a CASE runs its branch only on the
rows it selects), makes DuckDB compute 2,048 / k rows at a time, and their values are all that lives.
"""

from __future__ import annotations

from ..ir import graph as ir

VECTOR_SIZE = 2048  # DuckDB's rows per chunk, and list elements a lambda evaluates at once
# A chunk whose rows bind at most this many values (256 MB of DOUBLE) is computed at once: the wrapping
# lambda is one more level of nesting, and DuckDB binds nested lambdas in time exponential in their depth.
CHUNK_VALUES = 1 << 25
BATCH_VALUES = 1 << 20  # values the rows computed at once may bind (8 MB of DOUBLE, a few times that live)


def rows_at_once(graph: ir.Graph, unbound: set[str]) -> int:
    """The rows a batch may hold, from the values a row binds (every node's but the `unbound` ones and
    reshapes, which are aliases): a whole chunk if it binds at most CHUNK_VALUES, else as many rows as
    BATCH_VALUES allows."""
    values = sum(
        graph.size_of(node.name)
        for node in graph.nodes
        if node.name not in unbound and not isinstance(node, ir.Reshape)
    )
    if values * VECTOR_SIZE <= CHUNK_VALUES:
        return VECTOR_SIZE
    return max(1, BATCH_VALUES // values)


def in_batches(body: str, rows: int) -> str:
    """`body` computed for `rows` rows at a time (see the module); unchanged when a chunk fits."""
    if rows >= VECTOR_SIZE:
        return body
    elements = -(-VECTOR_SIZE // rows)  # ceiling: never more than `rows` rows in a batch
    return f"list_transform(range({elements}), lambda _nn_k: CASE WHEN _nn_k = 0 THEN {body} END)[1]"
