"""nnsql bench serve_http: the order servers take their turns in, and the access log's cost from pairs
of runs."""

from __future__ import annotations

from pathlib import Path

from nnsql.bench import serve_http
from nnsql.bench.serve_http import Contender


def contender(name: str) -> Contender:
    return Contender(name, [], 0, True, cwd=Path("."))


def test_nnsql_runs_with_and_without_its_log_back_to_back_in_every_round_first_and_second_in_turn():
    servers = [contender(name) for name in ("nnsql", "nnsql-nolog", "triton", "mlserver")]
    orders = [[s.name for s in serve_http.turn_order(servers, index)] for index in range(6)]
    for index, order in enumerate(orders):
        assert sorted(order) == sorted(s.name for s in servers)
        ours, quiet = order.index("nnsql"), order.index("nnsql-nolog")
        assert abs(ours - quiet) == 1  # the pair ran under the same load of the machine
        assert (quiet > ours) == (index % 2 == 0)  # and each went first in half of the rounds
    assert len({order.index("triton") for order in orders}) > 1  # the others still rotate


def test_the_log_cost_is_the_median_of_the_pairs_ratios_with_their_range(capsys):
    ours, quiet = contender("nnsql"), contender("nnsql-nolog")
    load = serve_http.Load("1 row, JSON, 64 conn.", Path("row.json"), "application/json", 64, 1)
    cpu = [(1.10, 1.00), (0.90, 1.00), (1.03, 1.00)]  # ms per request with and without the log
    ours.figures[load.name] = [{"cpu_ms_per_request": a, "requests_per_second": 900.0} for a, _ in cpu]
    quiet.figures[load.name] = [{"cpu_ms_per_request": b, "requests_per_second": 1000.0} for _, b in cpu]
    serve_http.print_log_cost(ours, quiet, load)
    line = capsys.readouterr().out
    assert "+3.0% CPU per request (-10.0% to +10.0% over 3 pairs)" in line
    assert "10.0% of req/s" in line and line.rstrip().endswith("met")
