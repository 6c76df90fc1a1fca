"""LiveKit-shaped identifiers: a prefix and 12 base57 characters, as `guid.New(prefix)` makes them.

Prefixes follow livekit/protocol `utils/guid` (AW_ worker, AJ_ job, AD_ dispatch, RM_ room,
PA_ participant, EV_ webhook event, ND_ node).
"""

from __future__ import annotations

import secrets

_ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # shortuuid's base57

WORKER = "AW_"
JOB = "AJ_"
DISPATCH = "AD_"
ROOM = "RM_"
PARTICIPANT = "PA_"
EVENT = "EV_"
NODE = "ND_"


def new_id(prefix: str) -> str:
    """A fresh id such as ``AJ_x7KpQ2mZr9Ta`` (prefix + 12 random base57 characters)."""
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(12))
