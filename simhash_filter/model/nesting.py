"""The nesting guard: a page's UTF-8 bytes without the start tags met while :data:`MAX_DEPTH` elements are open, by a
model of the HTML tree builder's stack of open elements that errs towards counting an element as open; everything
else is kept (what is deeper is read as the text of the deepest element), and start tags of raw-text elements are
never removed.  The compiled pass (``_core_nesting.pxi``) gives the same bytes for every input.  Why and how:
docs/speed.md, "Model v6"."""

from __future__ import annotations

import re

#: The deepest the guard lets elements nest (its model's count of open elements, ``html`` and ``body`` not counted).
MAX_DEPTH = 512

# Flags of element names (an element name not listed has none).
VOID = 1 << 0  # opens no element
RAW = 1 << 1  # raw text or RCDATA: its content runs to its end tag
PLAINTEXT = 1 << 2  # raw text to the end of the page
NO_PUSH = 1 << 3  # start tag opens nothing once the document has it (html, head, body, frameset)
NO_POP = 1 << 4  # end tag closes nothing (html, head, body, br)
SPECIAL = 1 << 5  # the tree builder's "special" category: an end tag of another element does not close through it
SCOPE = 1 << 6  # a boundary of the default scope
BUTTON = 1 << 7  # a boundary of the button scope too (for p)
LIST = 1 << 8  # a boundary of the list-item scope too (for li)
TABLE_SCOPE = 1 << 9  # a boundary of the table scope
TABLE_PART = 1 << 10  # an end tag closing in table scope
CLOSES_P = 1 << 11  # a start tag that closes an open p (in button scope)
HEADING = 1 << 12
LI = 1 << 13
DD_DT = 1 << 14
OPTION = 1 << 15
OPTGROUP = 1 << 16
TR = 1 << 17
CELL = 1 << 18
SECTION = 1 << 19  # tbody, thead, tfoot
ANCHOR = 1 << 20
P = 1 << 21
LI_PASS = 1 << 22  # address, div, p: the li and dd/dt start tags look through them for an open li, dd or dt
FORMATTING = 1 << 23  # formatting elements: their end tags close in the default scope

_RAW = "script style textarea title xmp iframe noembed noframes noscript"  # noscript: the parser runs with scripting
_VOID = "area base basefont bgsound br col embed frame hr image img input keygen link meta param source track wbr"
_SPECIAL = (
    "address applet area article aside base basefont bgsound blockquote body br button caption center col colgroup "
    "dd details dir div dl dt embed fieldset figcaption figure footer form frame frameset h1 h2 h3 h4 h5 h6 head "
    "header hgroup hr html iframe img input keygen li link listing main marquee menu meta nav noembed noframes "
    "noscript object ol p param plaintext pre script search section select source style summary table tbody td "
    "template textarea tfoot th thead title tr track ul wbr xmp mi mo mn ms mtext annotation-xml foreignobject desc"
)
_SCOPE = (
    "applet caption html table td th marquee object template mi mo mn ms mtext annotation-xml foreignobject desc title"
)
_CLOSES_P = (
    "address article aside blockquote center details dialog dir div dl fieldset figcaption figure footer header "
    "hgroup main menu nav ol p search section summary ul h1 h2 h3 h4 h5 h6 pre listing form plaintext xmp li dd dt"
)


def _flags() -> dict[bytes, int]:
    table: dict[bytes, int] = {}

    def add(names: str, flag: int) -> None:
        for name in names.split():
            table[name.encode()] = table.get(name.encode(), 0) | flag

    add(_RAW, RAW)
    add("plaintext", RAW | PLAINTEXT)
    add(_VOID, VOID)
    add("html head body frameset", NO_PUSH)
    add("html head body br", NO_POP)
    add(_SPECIAL, SPECIAL)
    add(_SCOPE, SCOPE)
    add("button", BUTTON)
    add("ol ul", LIST)
    add("html table template", TABLE_SCOPE)
    add("table tbody thead tfoot tr td th caption colgroup", TABLE_PART)
    add(_CLOSES_P, CLOSES_P)
    add("h1 h2 h3 h4 h5 h6", HEADING)
    add("li", LI)
    add("dd dt", DD_DT)
    add("option", OPTION)
    add("optgroup", OPTGROUP)
    add("tr", TR)
    add("td th", CELL)
    add("tbody thead tfoot", SECTION)
    add("a", ANCHOR)
    add("p", P)
    add("address div p", LI_PASS)
    add("a b big code em font i nobr s small strike strong tt u", FORMATTING)
    return table


#: Element name (lower-case ASCII bytes) -> flags: the compiled pass reads the same table.
NAME_FLAGS: dict[bytes, int] = _flags()

_WS = b"\t\n\f\r "
_NAME = re.compile(rb"[^\t\n\f\r />]*")
_WS_SLASH = re.compile(rb"[\t\n\f\r /]*")
_ATTR_NAME = re.compile(rb"[^\t\n\f\r />][^\t\n\f\r />=]*")
_EQUALS = re.compile(rb"[\t\n\f\r ]*=[\t\n\f\r ]*")
_UNQUOTED = re.compile(rb"[^\t\n\f\r >]*")
_RAW_END: dict[bytes, re.Pattern[bytes]] = {}


def _past(pattern: re.Pattern[bytes], data: bytes, i: int) -> int:
    """Where *pattern*, which matches at *i* (the empty string at least, or a character checked before), ends."""
    found = pattern.match(data, i)
    assert found is not None
    return found.end()


def _tag_end(data: bytes, i: int) -> int:
    """Where the tag whose attributes start at *i* ends (after its ``>``), or -1 when the page ends inside it."""
    n = len(data)
    while True:
        i = _past(_WS_SLASH, data, i)
        if i >= n:
            return -1
        if data[i] == 0x3E:  # >
            return i + 1
        i = _past(_ATTR_NAME, data, i)
        m = _EQUALS.match(data, i)
        if m is None:
            continue
        i = m.end()
        if i >= n:
            return -1
        quote = data[i]
        if quote in (0x22, 0x27):  # " or '
            j = data.find(b'"' if quote == 0x22 else b"'", i + 1)
            if j < 0:
                return -1
            i = j + 1
        else:
            i = _past(_UNQUOTED, data, i)


def _raw_end(data: bytes, i: int, name: bytes) -> int:
    """Where the raw text of element *name* from *i* ends: at its end tag's ``<``, or -1 at the end of the page."""
    pattern = _RAW_END.get(name)
    if pattern is None:
        pattern = _RAW_END[name] = re.compile(b"</(?i:" + re.escape(name) + rb")[\t\n\f\r />]")
    m = pattern.search(data, i)
    return -1 if m is None else m.start()


def _is_letter(c: int) -> bool:
    return 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A


_COUNTED = (P, LI, DD_DT, TR, CELL, SECTION, ANCHOR)
_ANY_COUNTED = P | LI | DD_DT | TR | CELL | SECTION | ANCHOR


class _Stack:
    """The model of the open elements: names and flags, innermost last."""

    __slots__ = ("counts", "flags", "names")

    def __init__(self) -> None:
        self.names: list[bytes] = []
        self.flags: list[int] = []
        self.counts = dict.fromkeys(_COUNTED, 0)  # open elements with each of these flags (a shortcut only)

    def push(self, name: bytes, flags: int) -> None:
        self.names.append(name)
        self.flags.append(flags)
        if flags & _ANY_COUNTED:
            for flag in _COUNTED:
                if flags & flag:
                    self.counts[flag] += 1

    def truncate(self, top: int) -> None:
        for flags in self.flags[top:]:
            if flags & _ANY_COUNTED:
                for flag in _COUNTED:
                    if flags & flag:
                        self.counts[flag] -= 1
        del self.names[top:], self.flags[top:]

    def find(self, top: int, want: int, stop: int) -> int:
        """The innermost of the first *top* open elements with a flag in *want*, unless one with a flag in *stop* is
        nearer: -1."""
        if not self.counts[want]:
            return -1
        flags = self.flags
        for at in range(top - 1, -1, -1):
            if flags[at] & want:
                return at
            if flags[at] & stop:
                return -1
        return -1

    def implied(self, flags: int) -> int:
        """How many open elements stay open when a start tag with *flags* has closed those it closes implicitly."""
        f = self.flags
        top = len(f)
        kind = flags & (LI | DD_DT)
        if kind and self.counts[kind]:  # the nearest open li (dd/dt), looking through address, div, p, non-special
            for at in range(top - 1, -1, -1):
                if f[at] & kind:
                    top = at
                    break
                if f[at] & SPECIAL and not f[at] & LI_PASS:
                    break
        if flags & CLOSES_P:
            at = self.find(top, P, SCOPE | BUTTON)
            if at >= 0:
                top = at
        if flags & HEADING:
            if top and f[top - 1] & HEADING:
                top -= 1
        elif flags & (OPTION | OPTGROUP):
            if top and f[top - 1] & OPTION:
                top -= 1
            if flags & OPTGROUP and top and f[top - 1] & OPTGROUP:
                top -= 1
        else:
            want, stop = 0, 0
            if flags & TR:
                want, stop = TR, TABLE_SCOPE | SECTION
            elif flags & CELL:
                want, stop = CELL, TABLE_SCOPE | SECTION | TR
            elif flags & SECTION:
                want, stop = SECTION, TABLE_SCOPE
            elif flags & ANCHOR:
                want, stop = ANCHOR, SCOPE
            if want:
                at = self.find(top, want, stop)
                if at >= 0:
                    top = at
        return top

    def end_tag(self, name: bytes, flags: int) -> None:
        """Close what an end tag closes: the nearest open element of its name, unless a boundary is nearer."""
        if flags & NO_POP:
            return
        if flags & TABLE_PART:
            stop = TABLE_SCOPE
        elif flags & LI:
            stop = SCOPE | LIST
        elif flags & P:
            stop = SCOPE | BUTTON
        elif flags & (SPECIAL | FORMATTING):
            stop = SCOPE
        else:
            stop = SPECIAL
        names, f = self.names, self.flags
        for at in range(len(names) - 1, -1, -1):
            if names[at] == name:
                self.truncate(at)
                return
            if f[at] & stop:
                return


def guard(data: bytes, max_depth: int = MAX_DEPTH) -> bytes:
    """*data* without the start tags met while *max_depth* elements are open (*data* itself when there are none)."""
    if data.count(b"<") <= max_depth:
        return data
    stack = _Stack()
    cuts: list[tuple[int, int]] = []
    n = len(data)
    i = 0
    while True:
        i = data.find(b"<", i)
        if i < 0 or i + 1 >= n:
            break
        c = data[i + 1]
        if c == 0x21:  # <!
            if data.startswith(b"<!--", i):
                a = data.find(b"-->", i + 2)
                b = data.find(b"--!>", i + 2, n if a < 0 else a + 3)  # only before "-->": linear in comments
                if a < 0 and b < 0:
                    break
                i = a + 3 if b < 0 or 0 <= a < b else b + 4
                continue
            j = data.find(b">", i + 2)
            if j < 0:
                break
            i = j + 1
        elif c == 0x3F:  # <?
            j = data.find(b">", i + 2)
            if j < 0:
                break
            i = j + 1
        elif c == 0x2F:  # </
            if i + 2 >= n:
                break
            c = data[i + 2]
            if _is_letter(c):
                name_end = _past(_NAME, data, i + 2)
                end = _tag_end(data, name_end)
                if end < 0:
                    break
                name = data[i + 2 : name_end].lower()
                stack.end_tag(name, NAME_FLAGS.get(name, 0))
                i = end
            elif c == 0x3E:  # </>
                i += 3
            else:
                j = data.find(b">", i + 2)
                if j < 0:
                    break
                i = j + 1
        elif _is_letter(c):
            name_end = _past(_NAME, data, i + 1)
            end = _tag_end(data, name_end)
            if end < 0:
                break
            name = data[i + 1 : name_end].lower()
            flags = NAME_FLAGS.get(name, 0)
            if flags & RAW:
                if flags & PLAINTEXT:
                    break
                i = _raw_end(data, end, name)
                if i < 0:
                    break
                continue
            if not flags & (VOID | NO_PUSH):
                if len(stack.flags) >= max_depth:  # the tree builder never sees it, nor closes what it would close
                    cuts.append((i, end))
                else:
                    stack.truncate(stack.implied(flags))
                    stack.push(name, flags)
            i = end
        else:
            i += 1
    if not cuts:
        return data
    parts, at = [], 0
    for start, end in cuts:
        parts.append(data[at:start])
        at = end
    parts.append(data[at:])
    return b"".join(parts)
