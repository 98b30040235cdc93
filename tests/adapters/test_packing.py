"""Stored text made smaller (`adapters.packing`): journal steps and answers compressed
against a preset dictionary when that is smaller, read back exactly, and readable
whatever form an earlier version wrote them in."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from interlock.adapters import packing

STEP = json.dumps(
    {
        "k": "model",
        "events": [
            {"messageStart": {"role": "assistant"}},
            {
                "contentBlockStart": {
                    "start": {"toolUse": {"toolUseId": "tooluse_1a2b", "name": "f"}}
                }
            },
            {"contentBlockDelta": {"delta": {"toolUse": {"input": '{"url": "https://x.test/a"}'}}}},
            {"contentBlockStop": {}},
            {"messageStop": {"stopReason": "tool_use"}},
            {"metadata": {"usage": {"inputTokens": 252, "outputTokens": 30, "totalTokens": 282}}},
        ],
    },
    separators=(",", ":"),
)


def test_a_step_is_stored_compressed_smaller_as_base64_and_reads_back_exactly() -> None:
    stored = packing.compact(STEP)
    assert isinstance(stored, bytes)
    # What the wire carries: base64 of the bytes against the JSON-escaped text
    assert len(base64.b64encode(stored)) < len(json.dumps(STEP)) / 2
    assert packing.text(stored) == STEP


def test_the_dictionary_is_what_makes_a_small_step_small() -> None:
    without = zlib.compress(STEP.encode())
    stored = packing.compact(STEP)
    assert isinstance(stored, bytes) and len(stored) < len(without) * 0.7


@pytest.mark.parametrize("short", ["", "ok", '{"k":"tool","id":"t"}', "Approved."])
def test_a_text_that_would_not_shrink_as_base64_is_stored_as_itself(short: str) -> None:
    assert packing.compact(short) == short
    assert packing.text(short) == short


def test_incompressible_text_is_stored_as_itself() -> None:
    noise = base64.b64encode(bytes(range(256)) * 3).decode()
    assert packing.compact(noise) == noise


def test_text_compressed_without_a_dictionary_still_reads() -> None:
    # Steps and answers written before the dictionary, and every card, are plain zlib.
    assert packing.text(zlib.compress(STEP.encode())) == STEP
    assert packing.unpacked(zlib.compress(b'{"a":[1,2]}')) == {"a": [1, 2]}


def test_the_dictionaries_never_change() -> None:
    # Items written with one name it by this checksum; editing it would make them
    # unreadable. A better dictionary is added beside it instead.
    assert zlib.adler32(packing._V1) == 0xA9E0E4A3
    assert zlib.adler32(packing._CARD_V1) == CARD_V1_CHECKSUM
    assert set(packing._DICTIONARIES) == {0xA9E0E4A3, CARD_V1_CHECKSUM}


def test_a_stream_that_needs_an_unknown_dictionary_is_refused_by_name() -> None:
    deflate = zlib.compressobj(zdict=b"some other dictionary of words")
    stored = deflate.compress(STEP.encode()) + deflate.flush()
    with pytest.raises(ValueError, match="preset dictionary"):
        packing.text(stored)


def test_a_card_is_always_packed_and_json_text_still_reads() -> None:
    card = {"type": "confirm", "reason": "Sure?"}
    stored = packing.packed(card)
    assert isinstance(stored, bytes)
    assert packing.unpacked(stored) == card
    assert packing.unpacked(json.dumps(card)) == card


DOWNLOAD_CARD = {
    "batch_tools": ["request_approval"],
    "card_id": "0f83778626f44ea5bc1ea975cbc00422",
    "impact": "The agent may download from these sites and install these packages for the "
    "rest of this chat.",
    "interrupt_name": "interlock.approval",
    "packages": [],
    "reason": "Download the reference table the analysis needs.",
    "risk": "medium",
    "sites": ["data.example.org"],
    "summary": {
        "packages": [],
        "reason": "Download the reference table the analysis needs.",
        "urls": ["https://data.example.org/reference/table.csv"],
    },
    "tool": "request_approval",
    "tool_use_id": "tooluse_0d848a7ae8bb4dda",
    "type": "download",
    "urls": ["https://data.example.org/reference/table.csv"],
}
CARD_V1_CHECKSUM = 0x5CCA59A6


def test_a_card_is_packed_against_the_cards_dictionary_to_under_half_its_plain_zlib() -> None:
    # The card rides on the request's item, which a claim, every step's fence check and
    # the finish pay for by the kilobyte.
    stored = packing.packed(DOWNLOAD_CARD)
    plain = zlib.compress(json.dumps(DOWNLOAD_CARD, separators=(",", ":"), sort_keys=True).encode())
    assert int.from_bytes(stored[2:6], "big") == CARD_V1_CHECKSUM
    assert len(stored) < len(plain) / 2
    assert packing.unpacked(stored) == DOWNLOAD_CARD


def test_a_card_packed_before_the_cards_dictionary_still_reads() -> None:
    before = zlib.compress(json.dumps(DOWNLOAD_CARD, sort_keys=True).encode())
    assert packing.unpacked(before) == DOWNLOAD_CARD
