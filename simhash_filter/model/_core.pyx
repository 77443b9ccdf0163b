# cython: language_level=3, embedsignature=True
"""The compiled core, one extension whose parts by stage are Cython includes (``_core_*.pxi``): the nesting guard,
the model's parser (Lexbor, compiled in) and the walk over its tree, the split, the vote, the text features and the
sketch.

Each gives bit for bit what its pure-Python reference gives.  The walk gives exactly what
:func:`simhash_filter.model.lexbor.walk` (the reference, through selectolax's Lexbor) collects: the elements in
document order with their tags, parents, depths and subtree ends, their ``class``/``id``/``role`` marks, and the text
segments in the order of an event walk (an element's text at its start, its tail after the end of its subtree).
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport (
    PyUnicode_1BYTE_KIND,
    Py_UNICODE_ISALNUM,
    Py_UNICODE_ISDECIMAL,
    Py_UNICODE_ISSPACE,
    PyUnicode_AsUTF8AndSize,
    PyUnicode_DecodeASCII,
    PyUnicode_DATA,
    PyUnicode_DecodeUTF8,
    PyUnicode_KIND,
    PyUnicode_READ,
)
from libc.math cimport log, pow, rint, sqrt
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t, uintptr_t
from libc.stdlib cimport qsort
from libc.string cimport memchr, memcmp, memcpy, memmove, memset, strlen

import sys
from unicodedata import normalize as _normalize

if sys.byteorder != "little":  # the hashes read input words as little-endian integers
    raise ImportError("the compiled core is written for little-endian machines")

# One extension, its parts by stage (each a Cython include, compiled into this module):
include "_core_walked.pxi"        # what a walk collects, and the class-word judge in C
include "_core_nesting.pxi"       # the nesting guard (model.nesting, the reference)
include "_core_lexbor.pxi"        # the model's parser, Lexbor, and the walk over its tree (model.lexbor)
include "_core_chars.pxi"         # str's character tests and the text's fast normal form, as C tables
include "_core_sketch.pxi"        # the sketch (model.sketch, the reference)
include "_core_split.pxi"         # the split of the walk into segments (model.extract._split)
include "_core_vote.pxi"          # the vote (model.fingerprint, the reference)
include "_core_textfeatures.pxi"  # text features of single words (model.features)
include "_core_onepass.pxi"       # one pass from a page's text segments to its fingerprint and sketch
include "_core_prose.pxi"         # the prose part, from the same word table (model.prose, the reference)
include "_core_sitepart.pxi"      # the site part's word sequences (model.sitepart, the reference)
