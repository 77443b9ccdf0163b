"""The labelled pairs of a calibration: read from JSON Lines, each pair once, the lines left out counted by
reason (repeated, conflicting, a URL with itself, malformed)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

from simhash_filter.report.source import open_lines

__all__ = ["MAX_EXAMPLES", "LabelledPair", "Labels", "read_labels"]

#: Malformed lines kept as examples (with their line number and reason); all of them are counted.
MAX_EXAMPLES = 1000


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """Two pages and the answer: near-duplicates (``duplicate``) or distinct.  ``line``: where it was first read."""

    url_a: str
    url_b: str
    duplicate: bool
    line: int = 0


@dataclass
class Labels:
    """The labelled pairs read from a file, and what was left out (counted)."""

    source: str = ""
    #: Lines read (blank lines not counted).
    lines: int = 0
    #: The distinct pairs with one answer, in the order first read.
    pairs: list[LabelledPair] = field(default_factory=list)
    #: Lines that repeat a pair with the same answer (the pair counts once).
    repeated: int = 0
    #: Pairs labelled both ways (left out), and the lines that labelled them.
    conflicting: int = 0
    conflicting_lines: int = 0
    #: Lines that pair a URL with itself (left out).
    same_url: int = 0
    #: Lines that are not a label object; the first :data:`MAX_EXAMPLES` as ``(line number, reason)``.
    malformed: int = 0
    malformed_lines: list[tuple[int, str]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "lines": self.lines,
            "pairs": len(self.pairs),
            "duplicates": sum(p.duplicate for p in self.pairs),
            "distinct": sum(not p.duplicate for p in self.pairs),
            "repeated": self.repeated,
            "conflicting": self.conflicting,
            "conflicting_lines": self.conflicting_lines,
            "same_url": self.same_url,
            "malformed": self.malformed,
            "malformed_lines": [{"line": n, "reason": why} for n, why in self.malformed_lines],
        }


def _label(raw: bytes) -> tuple[tuple[str, str, bool] | None, str]:
    """``((url_a, url_b, duplicate), "")`` of a line, or ``(None, why it is malformed)``."""
    try:
        obj = json.loads(raw)
    except RecursionError:
        return None, "not JSON (nested too deeply)"
    except ValueError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(obj, dict):
        return None, f"not a JSON object (got {type(obj).__name__})"
    for key in ("url_a", "url_b"):
        if key not in obj:
            return None, f'missing "{key}"'
        if not isinstance(obj[key], str):
            return None, f'"{key}" is not a string (got {type(obj[key]).__name__})'
        if not obj[key].strip():
            return None, f'"{key}" is empty'
    if "duplicate" not in obj:
        return None, 'missing "duplicate"'
    if not isinstance(obj["duplicate"], bool):
        return None, f'"duplicate" is not true or false (got {json.dumps(obj["duplicate"])[:40]})'
    return (obj["url_a"], obj["url_b"], obj["duplicate"]), ""


def read_labels(source: str | os.PathLike[str] | IO[bytes]) -> Labels:
    """The labelled pairs of a JSON Lines file (``.gz``: compressed) or of an open binary stream.  Raises
    ``OSError`` (and ``EOFError`` for a ``.gz`` cut short) when it cannot be read."""
    with ExitStack() as stack:
        if hasattr(source, "read"):
            stream: Iterable[bytes] = source  # type: ignore[assignment]
            name = str(getattr(source, "name", "<stream>"))
        else:
            name = os.fspath(source)
            stream = stack.enter_context(open_lines(name))
        return _read_labels(stream, name)


def _read_labels(stream: Iterable[bytes], name: str) -> Labels:
    labels = Labels(source=name)
    first: dict[tuple[str, str], LabelledPair] = {}
    answers: dict[tuple[str, str], set[bool]] = {}
    lines: Counter[tuple[str, str]] = Counter()
    for n, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        labels.lines += 1
        parsed, why = _label(raw)
        if parsed is None:
            labels.malformed += 1
            if len(labels.malformed_lines) < MAX_EXAMPLES:
                labels.malformed_lines.append((n, why))
            continue
        a, b, duplicate = parsed
        if a == b:
            labels.same_url += 1
            continue
        key = (a, b) if a < b else (b, a)
        lines[key] += 1
        answers.setdefault(key, set()).add(duplicate)
        first.setdefault(key, LabelledPair(a, b, duplicate, n))
    for key, pair in first.items():
        if len(answers[key]) > 1:
            labels.conflicting += 1
            labels.conflicting_lines += lines[key]
        else:
            labels.pairs.append(pair)
            labels.repeated += lines[key] - 1
    return labels
