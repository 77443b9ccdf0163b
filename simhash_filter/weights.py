"""Fixed, versioned inverse document frequencies: nothing drifts as pages are seen.

- Chinese words: jieba's own IDF table (``jieba/analyse/idf.txt`` of the pinned jieba release);
  unknown words get the table's median, as jieba's keyword extractor does.
- Every other word: ``wordfreq`` 3.1.1 ("large" English list; the wordfreq data is frozen).  Its word
  frequency p gives ``idf = ln(1 / p)``, the same scale as jieba's table; unknown words get the value
  of a word seen once in 10^8 (``ln 1e8``), i.e. rarer than anything listed.
"""

from __future__ import annotations

import math
import os
from functools import cache
from importlib.metadata import version

IDF_SOURCE_ID = f"jieba-{version('jieba')}-idf/wordfreq-{version('wordfreq')}-en-large"
UNKNOWN_EN_IDF = math.log(1e8)
MIN_IDF = 1.0


@cache
def chinese_idf() -> tuple[dict[str, float], float]:
    """jieba's IDF table and its median (loaded once per process)."""
    import jieba

    path = os.path.join(os.path.dirname(jieba.__file__), "analyse", "idf.txt")
    table: dict[str, float] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, _, value = line.rstrip("\n").rpartition(" ")
            if word:
                table[word] = float(value)
    values = sorted(table.values())
    return table, values[len(values) // 2]


@cache
def english_idf() -> dict[str, float]:
    """ln(1/p) for every word of wordfreq's large English list (loaded once per process)."""
    import wordfreq

    return {w: max(MIN_IDF, -math.log(p)) for w, p in wordfreq.get_frequency_dict("en", wordlist="large").items()}
