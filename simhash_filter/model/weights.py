"""Fixed, versioned inverse document frequencies: jieba's IDF table for Chinese words (unknown words: its median),
``ln(1 / p)`` of wordfreq's large English list for every other word (at least ``MIN_IDF``; unknown words:
:data:`simhash_filter.model.features.UNKNOWN_IDF`).  Each table is read from its source once per machine and kept
in :func:`cache_dir` (docs/speed.md, "Start-up"), and loaded on first use in a process."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import tempfile
import zipfile
from collections.abc import Callable
from functools import cache
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import xxhash
from platformdirs import user_cache_dir

IDF_SOURCE_ID = f"jieba-{version('jieba')}-idf/wordfreq-{version('wordfreq')}-en-large"
MIN_IDF = 1.0
#: Version of the cached table layout; bump when :class:`IdfTable`'s arrays change.
CACHE_FORMAT = 1
#: Seed of the xxhash64 that keys a table (unrelated to the fingerprint's feature hashing).
TABLE_SEED = 0

logger = logging.getLogger(__name__)


class IdfTable:
    """A frozen word -> IDF table: ``hashes`` the sorted xxhash64 of each word's UTF-8 bytes, ``values`` the IDFs in
    the same order, word ``i``'s bytes ``blob[offsets[i]:offsets[i + 1]]``; a lookup gives exactly what a dict
    would."""

    __slots__ = ("_blob", "hashes", "offsets", "values")

    def __init__(self, hashes: np.ndarray, values: np.ndarray, offsets: np.ndarray, blob: bytes) -> None:
        if not (len(hashes) == len(values) == len(offsets) - 1 and int(offsets[-1]) == len(blob)):
            raise ValueError("inconsistent IDF table arrays")
        self.hashes = hashes
        self.values = values
        self.offsets = offsets
        self._blob = blob

    @classmethod
    def from_dict(cls, table: dict[str, float]) -> IdfTable:
        """The same words and values as ``table`` (whose values must be floats)."""
        encoded = [_utf8(w) for w in table]
        hashes = _hashes(encoded)
        order = np.argsort(hashes, kind="stable")
        lengths = np.fromiter((len(encoded[i]) for i in order.tolist()), dtype=np.int64, count=len(encoded))
        offsets = np.concatenate((np.zeros(1, dtype=np.int64), np.cumsum(lengths)))
        values = np.fromiter(table.values(), dtype=np.float64, count=len(table))[order]
        return cls(hashes[order], values, offsets, b"".join(encoded[i] for i in order.tolist()))

    def __len__(self) -> int:
        return len(self.hashes)

    def median(self) -> float:
        """``sorted(values)[len // 2]``: the IDF jieba gives a word it does not know."""
        k = len(self.values) // 2
        return float(np.partition(self.values, k)[k])

    def lookup(self, words: list[str], default: float) -> list[float]:
        """The IDF of each word (``default`` for a word not in the table)."""
        encoded = [_utf8(w) for w in words]
        n = len(self.hashes)
        if not encoded or not n:
            return [default] * len(words)
        wanted = _hashes(encoded)
        pos = np.minimum(np.searchsorted(self.hashes, wanted), n - 1)
        starts, ends = self.offsets[pos].tolist(), self.offsets[pos + 1].tolist()
        blob = self._blob
        out = [
            v if blob[a:b] == e else None
            for v, a, b, e in zip(self.values[pos].tolist(), starts, ends, encoded, strict=True)
        ]
        for j in [j for j, v in enumerate(out) if v is None]:
            out[j] = self._probe(int(pos[j]), int(wanted[j]), encoded[j], default)
        return out  # type: ignore[return-value]  # every None was replaced

    def _probe(self, p: int, wanted: int, word: bytes, default: float) -> float:
        """The value of ``word`` among the entries from ``p`` on whose hash is ``wanted``, else ``default``."""
        hashes, offsets = self.hashes, self.offsets
        while p < len(hashes) and int(hashes[p]) == wanted:
            if self._blob[int(offsets[p]) : int(offsets[p + 1])] == word:
                return float(self.values[p])
            p += 1
        return default

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, bytes]:
        """The sorted hashes (XXH64 of the UTF-8, seed ``TABLE_SEED``), values, offsets and UTF-8 blob, contiguous
        (what the compiled core reads)."""
        return (
            np.ascontiguousarray(self.hashes, dtype=np.uint64),
            np.ascontiguousarray(self.values, dtype=np.float64),
            np.ascontiguousarray(self.offsets, dtype=np.int64),
            self._blob,
        )

    def get(self, word: str, default: float) -> float:
        return self.lookup([word], default)[0]

    def save(self, path: Path, key: str) -> None:
        """Write the table to ``path`` atomically (a temporary file in the same directory, renamed)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(
                    f,
                    key=np.array(key),
                    hashes=self.hashes,
                    values=self.values,
                    offsets=self.offsets,
                    blob=np.frombuffer(self._blob, dtype=np.uint8),
                )
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @classmethod
    def load(cls, path: Path, key: str) -> IdfTable:
        """Read a table written by :meth:`save` under the same ``key``; ValueError if it is another."""
        with open(path, "rb") as f:
            z = np.load(f, allow_pickle=False)
            if not isinstance(z, np.lib.npyio.NpzFile):  # a plain .npy array
                raise ValueError(f"{path} is not a table archive")
            with z:
                if str(z["key"]) != key:
                    raise ValueError(f"{path} holds another table")
                hashes, values, offsets, blob = z["hashes"], z["values"], z["offsets"], z["blob"]
        expected = tuple(map(np.dtype, (np.uint64, np.float64, np.int64, np.uint8)))
        if (hashes.dtype, values.dtype, offsets.dtype, blob.dtype) != expected:
            raise ValueError(f"{path}: unexpected array types")
        if len(hashes) > 1 and not bool(np.all(hashes[1:] >= hashes[:-1])):
            raise ValueError(f"{path}: hashes not sorted")
        return cls(hashes, values, offsets, blob.tobytes())


def _utf8(word: str) -> bytes:
    return word.encode("utf-8", "surrogatepass")


def _hashes(encoded: list[bytes]) -> np.ndarray:
    h = xxhash.xxh64_intdigest
    return np.fromiter((h(b, TABLE_SEED) for b in encoded), dtype=np.uint64, count=len(encoded))


def chinese_idf_dict() -> tuple[dict[str, float], float]:
    """jieba's IDF table and its median, read from the pinned jieba's ``analyse/idf.txt``."""
    path = Path(_package_dir("jieba")) / "analyse" / "idf.txt"
    table: dict[str, float] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, _, value = line.rstrip("\n").rpartition(" ")
            if word:
                table[word] = float(value)
    values = sorted(table.values())
    return table, values[len(values) // 2]


def english_idf_dict() -> dict[str, float]:
    """ln(1/p) for every word of wordfreq's large English list."""
    import wordfreq

    return {w: max(MIN_IDF, -math.log(p)) for w, p in wordfreq.get_frequency_dict("en", wordlist="large").items()}


def _package_dir(name: str) -> str:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed")
    return next(iter(spec.submodule_search_locations))


def cache_dir() -> Path:
    """The user's cache directory for simhash-filter, as ``platformdirs.user_cache_dir`` gives it
    (``$XDG_CACHE_HOME/simhash-filter`` when that is absolute); RuntimeError when there is no home directory."""
    path = Path(user_cache_dir("simhash-filter", appauthor=False))
    if not path.is_absolute():  # older platformdirs: "~" left as is when there is no home
        raise RuntimeError(f"no home directory for the cache: {path}")
    return path


def cache_path(name: str) -> Path:
    """The cache file of table ``name``: named by the IDF sources' versions and the cache format."""
    digest = hashlib.sha256(_cache_key(name).encode()).hexdigest()[:16]
    return cache_dir() / f"idf-{name}-{digest}.npz"


def _cache_key(name: str) -> str:
    return f"{name}|{IDF_SOURCE_ID}|format-{CACHE_FORMAT}"


def cached_table(name: str, build: Callable[[], dict[str, float]]) -> IdfTable:
    """Table ``name`` from the cache, else built with ``build()`` and cached where the cache is writable (an
    unreadable cache file is rebuilt)."""
    key = _cache_key(name)
    try:
        path = cache_path(name)
    except RuntimeError:
        return IdfTable.from_dict(build())
    try:
        return IdfTable.load(path, key)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile) as exc:
        logger.debug("ignoring unreadable IDF cache %s: %s", path, exc)
    table = IdfTable.from_dict(build())
    try:
        table.save(path, key)
    except OSError as exc:
        logger.debug("cannot write the IDF cache %s: %s", path, exc)
    return table


@cache
def english_table() -> IdfTable:
    """ln(1/p) for every word of wordfreq's large English list (loaded once per process)."""
    return cached_table("en", english_idf_dict)


@cache
def chinese_table() -> tuple[IdfTable, float]:
    """jieba's IDF table and its median, for unknown words (loaded once per process)."""
    table = cached_table("zh", lambda: chinese_idf_dict()[0])
    return table, table.median()
