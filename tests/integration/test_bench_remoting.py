"""A tiny run of mqstore.scripts.bench.remoting: both clients' figures are there and add up."""

from __future__ import annotations

import pytest

from mqstore.scripts.bench import remoting as bench_remoting

pytest.importorskip("rocketmq.client", reason="the stock RocketMQ wheel exists for x86-64 Linux only")


@pytest.mark.slow
def test_bench_remoting_smoke() -> None:
    result = bench_remoting.run(60, 128)
    send, consume = result["send_one_at_a_time"], result["consume_new_group"]
    for figure in (send["rocketmq_client"], send["mqstore_client"], consume["rocketmq_push_consumer"],
                   consume["mqstore_consumer"], result["mqstore_send_batch_100"]):
        assert figure["messages"] == 60 and figure["msgs_per_s"] > 0
    assert send["ratio_rocketmq_to_mqstore"] == round(
        send["rocketmq_client"]["msgs_per_s"] / send["mqstore_client"]["msgs_per_s"], 3)
    assert result["stock_send_failures"] == 0
