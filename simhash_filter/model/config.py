"""The fingerprint model's settings: everything that changes a fingerprint lives in :class:`FingerprintConfig`, and
its :meth:`~FingerprintConfig.model_id` names the model so that an index can refuse fingerprints of another one."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Any

#: Bump when the feature extraction changes in a way that changes fingerprints.
MODEL_VERSION = 7


@dataclass(frozen=True)
class FingerprintConfig:
    """How a page becomes a 64-bit simhash.  Every field takes part in :meth:`model_id`."""

    #: Share of the total feature weight given to DOM structure (the rest goes to text), 0..1.
    structure_weight: float = 0.05
    #: Factor by which a DOM structure feature's weight decays per level of depth.
    dom_decay: float = 0.45
    #: Weight of text outside the main content (navigation, headers, footers, link lists, ads),
    #: relative to text inside it.
    boilerplate_weight: float = 0.01
    #: Word n-gram sizes used as text features (1 = single words).
    ngrams: tuple[int, ...] = (1,)
    #: Single words are split into character n-grams of this size (0 = whole words).
    char_ngram: int = 4
    #: The same for Chinese words (jieba words are one to four characters long).
    cjk_char_ngram: int = 2
    #: IDF values are raised to this power (1 = plain TF-IDF; lower flattens the weights).
    idf_power: float = 0.5
    #: Pages with fewer distinct features than this get status ``too_few_features`` and no fingerprint.
    min_features: int = 8
    #: Work cap: only the first ``max_bytes`` of a page are parsed.
    max_bytes: int = 4_000_000
    #: Work cap: at most this many elements are visited.
    max_elements: int = 100_000
    #: Work cap: at most this many text tokens are used.
    max_tokens: int = 200_000
    #: Work cap: at most this many distinct text features (the first met, heaviest text first).
    max_features: int = 30_000
    #: Seed of xxhash for feature hashing.
    seed: int = 0x5EED
    #: Bins of the verification sketch (one bit each, a multiple of 8): :mod:`simhash_filter.model.sketch`.
    sketch_bins: int = 512
    #: A word counts once in the sketch per this much of its weight (at least once).
    sketch_step: float = 0.25
    #: The site part (:mod:`simhash_filter.model.sitepart`) and the prose part (:mod:`simhash_filter.model.prose`)
    #: follow the word sketch in what the index stores.
    prose: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.structure_weight <= 1.0:
            raise ValueError(f"structure_weight must be in [0, 1], got {self.structure_weight!r}")
        if not 0.0 < self.dom_decay <= 1.0:
            raise ValueError(f"dom_decay must be in (0, 1], got {self.dom_decay!r}")
        if not 0.0 <= self.boilerplate_weight <= 1.0:
            raise ValueError(f"boilerplate_weight must be in [0, 1], got {self.boilerplate_weight!r}")
        if min(self.char_ngram, self.cjk_char_ngram) < 0 or self.idf_power < 0:
            raise ValueError("char_ngram, cjk_char_ngram and idf_power must be >= 0")
        if not self.ngrams or any(n < 1 for n in self.ngrams):
            raise ValueError(f"ngrams must be positive sizes, got {self.ngrams!r}")
        if self.sketch_bins < 8 or self.sketch_bins % 8 or not self.sketch_step > 0:
            raise ValueError(
                f"sketch_bins must be a positive multiple of 8 and sketch_step > 0, got "
                f"{self.sketch_bins!r} and {self.sketch_step!r}"
            )
        for name in ("min_features", "max_bytes", "max_elements", "max_tokens", "max_features"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")

    @property
    def word_sketch_bytes(self) -> int:
        """Bytes of the word sketch: the part of a stored sketch every engine verifies on its own."""
        return self.sketch_bins // 8

    @property
    def sketch_bytes(self) -> int:
        """Bytes stored beside each fingerprint: the word sketch, then the site part and the prose part (when
        :attr:`prose`)."""
        from simhash_filter.model.sketch import PART_BYTES, SITE_BYTES

        return self.word_sketch_bytes + (SITE_BYTES + PART_BYTES if self.prose else 0)

    def with_options(self, **changes: Any) -> FingerprintConfig:
        """A copy with some fields changed (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def model(self) -> dict[str, Any]:
        """Everything a stored fingerprint depends on, as plain JSON-able values."""
        from simhash_filter.model.segment import SEGMENTER_ID
        from simhash_filter.model.spotsig import PROSE_ID
        from simhash_filter.model.weights import IDF_SOURCE_ID

        d = asdict(self)
        d["ngrams"] = list(self.ngrams)
        d.update(version=MODEL_VERSION, f=64, segmenter=SEGMENTER_ID, idf=IDF_SOURCE_ID)
        if self.prose:
            from simhash_filter.model.sitepart import SITE_ID

            d["prose"], d["site"] = PROSE_ID, SITE_ID
        return d

    def model_id(self) -> str:
        """A short stable name of :meth:`model` (same value on every machine)."""
        blob = json.dumps(self.model(), sort_keys=True, separators=(",", ":")).encode()
        return f"v{MODEL_VERSION}-{hashlib.sha256(blob).hexdigest()[:12]}"
