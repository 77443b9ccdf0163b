"""Why two pages got different fingerprints: their features, made as
:class:`~simhash_filter.model.fingerprint.Fingerprinter` makes them, ranked by ``|w_a - w_b|`` (0 when absent), the
amount each pulls the two fingerprints apart, with the total difference split into text and structure."""

from __future__ import annotations

from dataclasses import dataclass

from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.features import Features
from simhash_filter.model.fingerprint import Fingerprint, Fingerprinter
from simhash_filter.model.sketch import similarity as sketch_similarity

#: A feature in both pages is listed when one weight is at least this many times the other.
DEFAULT_RATIO = 2.0
#: Features listed per kind (text, structure).
DEFAULT_TOP = 10


@dataclass(frozen=True, slots=True)
class FeatureDifference:
    """One feature's weight in page A and in page B (0.0 when absent)."""

    name: str
    weight_a: float
    weight_b: float

    @property
    def difference(self) -> float:
        """``|weight_a - weight_b|``: how much this feature pulls the two fingerprints apart."""
        return abs(self.weight_a - self.weight_b)

    @property
    def only_in(self) -> str | None:
        """``"a"`` or ``"b"`` when the feature is in one page only, else None."""
        if self.weight_b == 0.0:
            return "a"
        if self.weight_a == 0.0:
            return "b"
        return None


@dataclass(frozen=True, slots=True)
class Explanation:
    """The fingerprints of two pages and the features that differ most, by kind."""

    a: Fingerprint
    b: Fingerprint
    #: Features listed: in one page only, or with weights at least ``ratio`` apart; largest first.
    text: tuple[FeatureDifference, ...]
    structure: tuple[FeatureDifference, ...]
    #: Sum of ``|w_a - w_b|`` over all text features and over all structure features.
    text_difference: float
    structure_difference: float
    #: Sum of ``min(w_a, w_b)`` / sum of ``max(w_a, w_b)`` over all features (1.0 = same features).
    weighted_jaccard: float

    @property
    def distance(self) -> int | None:
        """Hamming distance of the two fingerprints, or None if either page has none."""
        if self.a.value is None or self.b.value is None:
            return None
        return (self.a.value ^ self.b.value).bit_count()

    @property
    def similarity(self) -> float | None:
        """Estimated similarity of the two pages' sketches (the score that verifies a candidate), or None if
        either page has none."""
        a, b = self.a.word_sketch, self.b.word_sketch
        if a is None or b is None:
            return None
        return sketch_similarity(a, b)

    @property
    def structure_share(self) -> float:
        """Share of the total weight difference due to structure features (0..1)."""
        total = self.text_difference + self.structure_difference
        return self.structure_difference / total if total > 0 else 0.0

    @property
    def text_share(self) -> float:
        """Share of the total weight difference due to text features (0..1)."""
        total = self.text_difference + self.structure_difference
        return self.text_difference / total if total > 0 else 0.0


def _compare(
    a: dict[str, float], b: dict[str, float], top: int, ratio: float
) -> tuple[tuple[FeatureDifference, ...], float, float, float]:
    """Listed differences, total difference, sum of minima and sum of maxima of two weight maps."""
    diffs: list[FeatureDifference] = []
    total = low = high = 0.0
    for name in a.keys() | b.keys():
        wa, wb = a.get(name, 0.0), b.get(name, 0.0)
        lo, hi = min(wa, wb), max(wa, wb)
        total += hi - lo
        low += lo
        high += hi
        if lo == 0.0 or hi >= ratio * lo:
            diffs.append(FeatureDifference(name, wa, wb))
    diffs.sort(key=lambda d: (-d.difference, d.name))
    return tuple(diffs[:top]), total, low, high


def explain(
    html_a: bytes | str,
    html_b: bytes | str,
    *,
    config: FingerprintConfig | None = None,
    top: int = DEFAULT_TOP,
    ratio: float = DEFAULT_RATIO,
) -> Explanation:
    """Fingerprint two pages and list ``top`` features per kind that pushed them apart: those in one page only, or
    with one weight at least ``ratio`` times the other.  A page that cannot be fingerprinted contributes the features
    it has (none if it did not parse); its :class:`Fingerprint` says why."""
    fingerprinter = Fingerprinter(config)
    (fp_a, feats_a), (fp_b, feats_b) = fingerprinter.analyze(html_a), fingerprinter.analyze(html_b)
    return explain_features(fp_a, feats_a, fp_b, feats_b, top=top, ratio=ratio)


def explain_features(
    fp_a: Fingerprint,
    feats_a: Features | None,
    fp_b: Fingerprint,
    feats_b: Features | None,
    *,
    top: int = DEFAULT_TOP,
    ratio: float = DEFAULT_RATIO,
) -> Explanation:
    """:func:`explain` of two pages already analysed (:meth:`Fingerprinter.analyze` or ``inspect``)."""
    if top < 0:
        raise ValueError(f"top must be >= 0, got {top!r}")
    if ratio < 1.0:
        raise ValueError(f"ratio must be >= 1, got {ratio!r}")
    text_a, struct_a = (feats_a.text, feats_a.structure) if feats_a else ({}, {})
    text_b, struct_b = (feats_b.text, feats_b.structure) if feats_b else ({}, {})
    text, text_total, text_low, text_high = _compare(text_a, text_b, top, ratio)
    structure, struct_total, struct_low, struct_high = _compare(struct_a, struct_b, top, ratio)
    high = text_high + struct_high
    return Explanation(
        a=fp_a,
        b=fp_b,
        text=text,
        structure=structure,
        text_difference=text_total,
        structure_difference=struct_total,
        weighted_jaccard=(text_low + struct_low) / high if high > 0 else 1.0,
    )
