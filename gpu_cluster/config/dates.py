"""The one date every date-dependent check reads (GKE's end of standard support), so that a
render is a function of its inputs: a caller pins it (`--as-of`, the tests), or the edge asks
`live()` for today's, once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime


@dataclass(frozen=True)
class AsOf:
    """The date the checks use. `pinned`: the caller gave it, so a support window that has
    ended by then is refused as any bad value is; today's date only warns (a stack that was
    fine yesterday must not turn red overnight with no change; GKE itself refuses creating a
    cluster on a version it no longer offers)."""

    day: date
    pinned: bool


def today() -> date:
    """The only clock read of the checks: today in UTC, which the edges (`pulumi up`, a render
    without --as-of) pass on through live()."""
    return datetime.now(UTC).date()


def live() -> AsOf:
    return AsOf(today(), pinned=False)


def pinned(text: str) -> AsOf:
    """An --as-of value (YYYY-MM-DD); ValueError saying what it takes."""
    # Only the one spelling: fromisoformat alone also takes 20261123 and week dates.
    try:
        if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
            raise ValueError
        return AsOf(date.fromisoformat(text), pinned=True)
    except ValueError:
        raise ValueError(f"--as-of {text!r}: not a date; give one as YYYY-MM-DD") from None
