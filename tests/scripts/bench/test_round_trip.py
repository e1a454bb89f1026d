"""``mqstore.scripts.bench.round_trip``: each path timed over exactly the calls asked for, after the warm-up."""

from mqstore.scripts.bench.round_trip import WARM_CALLS, per_call


def test_per_call_counts_the_timed_calls_after_the_warm_up() -> None:
    made: list[int] = []
    result = per_call(lambda: made.append(1), 100)
    assert len(made) == WARM_CALLS + 100
    assert set(result) == {"wall_us", "client_cpu_us"}
    assert result["wall_us"] >= 0 and result["client_cpu_us"] >= 0
