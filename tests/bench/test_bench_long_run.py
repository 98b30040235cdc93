"""The long-run benchmark keeps running, and a step costs the same however many came
before it: the journal is billed per step, not per journal so far."""

from __future__ import annotations

import os

from bench.long_agent import ALL_BIG, REALISTIC
from bench.long_run import REALISTIC_COST_TARGET, approval, compared, serve, wru
from bench.peers import langgraph_long
from bench.peers.metering import metered
from local.emulator import Emulator


def test_each_30_kb_step_of_a_resumed_run_costs_what_the_one_before_did(
    emulator: Emulator,
) -> None:
    saved = dict(os.environ)
    try:
        with metered(emulator):
            server, token = serve(emulator)
            url = f"http://127.0.0.1:{server.port}"
            try:
                runs = {
                    n: approval(emulator, url, token, f"s{n}", 0, n, ALL_BIG[n]) for n in (1, 2, 5)
                }
                realistic = approval(emulator, url, token, "realistic", 10, 20, REALISTIC)
            finally:
                server.shutdown()
    finally:
        os.environ.clear()
        os.environ.update(saved)

    at_2 = wru(runs[2]) - wru(runs[1])
    later = (wru(runs[5]) - wru(runs[2])) / 3
    # A 30 KB result is an object: its step's item and the model's response cost a few
    # WRU (not the 60 its bytes would in a transaction), and no more later
    assert 6 <= at_2 <= 20
    assert later <= 1.2 * at_2 and at_2 <= 1.2 * later
    # Steps are items of their own and each big result one PUT (beside the answer's own):
    # the pointer's writes do not grow with them
    assert runs[5]["resume"]["total_calls"] == runs[2]["resume"]["total_calls"] + 3 * 3
    puts = [runs[n]["resume"]["calls"].get("s3.PutObject", 0) for n in (1, 2, 5)]
    assert puts == [2, 3, 6]

    # The realistic case costs at most the target's share of what the peer's recorded
    # run of the same content cost, priced the same way
    peer = langgraph_long.recorded()
    assert peer["reruns"]["rerun_on_resume"]["model_calls"] == 0
    priced = compared(realistic, peer, model_calls=2 + 20)
    assert priced["ratio_to_peer"] <= REALISTIC_COST_TARGET
    assert priced["all_in_ratio_to_peer"] < 1
