"""Ages of stored fingerprints (the ``max_age`` option, ``--max-age``): ``90s``, ``15m``, ``12h``, ``30d``, ``2w``."""

from __future__ import annotations

import re

_AGE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", re.I)
_AGE_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_age(value: str | float | int, *, require_unit: bool = False) -> float:
    """Seconds from ``3600``, ``"90s"``, ``"15m"``, ``"12h"``, ``"30d"`` or ``"2w"``; 0 means never.  A bare number is
    seconds, unless *require_unit* (the command line's ``--max-age``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not require_unit:
        seconds = float(value)
    else:
        found = _AGE.fullmatch(str(value))
        if not found or (require_unit and not found[2]):
            forms = "a number and a unit:" if require_unit else "seconds, or a number and a unit:"
            raise ValueError(f"an age must be {forms} s, m, h, d or w (e.g. 90s, 15m, 12h, 30d, 2w), got {value!r}")
        seconds = float(found[1]) * _AGE_UNITS[found[2].lower()]
    if seconds < 0:
        raise ValueError(f"an age must be >= 0, got {value!r}")
    return seconds
