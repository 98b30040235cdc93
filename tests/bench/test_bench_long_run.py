"""The long-run benchmark keeps running, and a step costs the same however many came
before it: the journal is billed per step, not per journal so far."""

from __future__ import annotations

import os

from bench.long_agent import ALL_BIG
from bench.long_run import approval, serve, wru
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
            finally:
                server.shutdown()
    finally:
        os.environ.clear()
        os.environ.update(saved)

    at_2 = wru(runs[2]) - wru(runs[1])
    later = (wru(runs[5]) - wru(runs[2])) / 3
    # A 30 KB result is about 60 WRU in its transaction; the step costs no more later
    assert 60 <= at_2 <= 100
    assert later <= 1.2 * at_2 and at_2 <= 1.2 * later
    # Steps are items of their own: the pointer's writes do not grow with them
    assert runs[5]["resume"]["total_calls"] == runs[2]["resume"]["total_calls"] + 2 * 3
