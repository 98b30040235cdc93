"""A small fictional roster: residents, volunteers, and what today's calls said.

Two kinds of facts, for two audiences:

- **standing facts** the team agreed to share (a roster note such as "hard of hearing"),
  which may go to a volunteer, and only with the resident's consent;
- **today's call** (what the resident said on the phone this afternoon, their age band,
  whether they live alone), which goes to the captain who decides, never further.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Resident:
    """One resident on the roster."""

    id: str
    name: str
    unit: str
    age_band: str
    lives_alone: bool
    risk: str  # "high" needs the captain's sign-off before anyone is sent
    standing_notes: tuple[str, ...]
    consents_to_share: bool
    number_allowlisted: bool


@dataclass(frozen=True)
class Volunteer:
    """A volunteer who can knock on a door."""

    id: str
    name: str
    distance_m: int


RESIDENTS: Final = {
    r.id: r
    for r in (
        Resident("r01", "Ada Lind", "2B", "80-89", True, "high", ("hard of hearing",), True, True),
        Resident("r02", "Bo Chen", "4A", "70-79", False, "low", ("uses a walker",), False, True),
        Resident("r03", "Cy Okafor", "1C", "90+", True, "high", ("speaks Yoruba",), True, False),
        Resident("r04", "Di Rossi", "3D", "60-69", True, "low", (), True, True),
        Resident("r05", "Ed Novak", "5F", "80-89", False, "high", ("diabetic",), False, True),
    )
}
VOLUNTEERS: Final = {
    v.id: v
    for v in (
        Volunteer("vol-tom", "Tom", 400),
        Volunteer("vol-ana", "Ana", 1800),
        Volunteer("vol-raj", "Raj", 3500),
    )
}
# What each resident said on today's call: for the captain only.
TODAY: Final = {
    "r01": "Said she feels dizzy and her fan broke this morning.",
    "r02": "Fine, has water, asked about the cooling centre.",
    "r03": "Did not pick up on the second try.",
    "r04": "Sounded tired; says the flat is very hot.",
    "r05": "Said his insulin is warm and he is worried about it.",
}


def captain_brief(resident: Resident) -> str:
    """The captain's card: today's call details, to decide with."""
    alone = "lives alone" if resident.lives_alone else "lives with others"
    return (
        f"{resident.name}, unit {resident.unit}, age {resident.age_band}, {alone}. "
        f"Today's call: {TODAY[resident.id]}"
    )


def volunteer_message(resident: Resident, volunteer: Volunteer) -> str:
    """The task a volunteer receives: where to go and what to do, plus standing notes
    only if the resident consented. Never today's call, age or household."""
    text = (
        f"Doorstep task for {volunteer.name}: please knock at unit {resident.unit}, "
        "check there is water and a cool room, and tell the captain if nobody answers."
    )
    if resident.consents_to_share and resident.standing_notes:
        text += f" Good to know: {'; '.join(resident.standing_notes)}."
    return text
