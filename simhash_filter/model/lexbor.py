"""The pure-Python reference of the compiled core's parse and walk (``_core_lexbor.pxi``): the same Lexbor through
selectolax's public node API, with the same document options, giving exactly what the compiled walk gives
(docs/speed.md, "Model v6").  :func:`walk` gives:

- the elements under the root in document order, each with its tag's number (tags numbered by first appearance,
  ``tag_of`` names them), its parent's index, its depth and the index of the last element of its subtree;
  invisible elements (:data:`~simhash_filter.model.html.INVISIBLE_TAGS`) are passed over with their content, and
  ``tbody`` is walked through (its content belongs to its table);
- ``candidates``: the elements whose tag is in *boilerplate_tags* or whose ``class``, ``id`` or ``role`` value
  satisfies *boilerplate_words*;
- text segments in the order of an event walk: an element's text before its first walked child, and its tail
  (owned by its parent) up to its next walked sibling; comments and invisible elements between text nodes join the
  text around them; empty or white-space texts are left out;
- after *max_elements* elements the walk stops, ``truncated`` is True and the open elements end at the last one."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser

from simhash_filter.model.html import INVISIBLE_TAGS

#: Lexbor's document options: without mutation events (``LXB_DOM_DOCUMENT_OPT_WO_EVENTS``), and with scripting
#: (``<noscript>`` holds raw text).  The compiled core checks at import that it uses the same.
DOCUMENT_OPTIONS = 1
SCRIPTING = True

#: The walk's tuple: tag_of, tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated.
Walked = tuple[list[str], list[int], list[int], list[int], list[int], list[int], list[int], list[str], bool]

_INVISIBLE = frozenset(INVISIBLE_TAGS)


def parse(data: bytes) -> LexborHTMLParser:
    """The tree of the page *data* (UTF-8 bytes, as the nesting guard left them)."""
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser(data, options=DOCUMENT_OPTIONS, scripting=SCRIPTING)


def _walked(node: Any) -> bool:
    return node is not None and node.is_element_node and node.tag not in _INVISIBLE


def _tbody(node: Any) -> bool:
    return bool(node.is_element_node and node.tag == "tbody")


def _flat(node: Any) -> Any:
    """*node*, or where it is a ``tbody``, the first node inside it or after it (tbody is walked through)."""
    while node is not None and _tbody(node):
        if node.child is not None:
            node = node.child
            continue
        while node.next is None:
            node = node.parent
            if node is None or not _tbody(node):
                return None
        node = node.next
    return node


def _after(node: Any) -> Any:
    """The node after *node* among its siblings, walking through tbody."""
    while node.next is None:
        node = node.parent
        if node is None or not _tbody(node):
            return None
    return _flat(node.next)


def _run(node: Any) -> tuple[str, Any]:
    """The text from *node* on, up to the next walked element, and that element (None at the end)."""
    parts = []
    node = _flat(node)
    while node is not None and not _walked(node):
        if node.is_text_node:
            parts.append(node.text_content or "")
        node = _after(node)
    return "".join(parts), node


def _has_text(text: str) -> bool:
    return bool(text) and not text.isspace()


def walk(
    data: bytes, max_elements: int, boilerplate_tags: frozenset[str], boilerplate_words: Callable[[str], bool]
) -> Walked:
    """The walk's tuple (the module's docstring says what it holds) of the page *data*."""
    root = parse(data).root
    tags: list[str] = []
    parents: list[int] = []
    depths: list[int] = []
    ends: list[int] = []
    candidates: list[int] = []
    seg_owner: list[int] = []
    seg_text: list[str] = []
    truncated = False
    if not _walked(root):
        return [], [], [], [], [], [], [], [], False
    # (event, node, index): a "start" pushes its element's end, then its walked children's starts in reverse
    events: list[tuple[str, Any, int]] = [("start", root, -1)]
    stack: list[int] = []
    while events:
        event, node, i = events.pop()
        if event == "start":
            i = len(tags)
            if i >= max_elements:
                truncated = True
                break
            tag = node.tag
            tags.append(tag)
            parents.append(stack[-1] if stack else -1)
            depths.append(len(stack))
            ends.append(i)
            attrs = node.attributes
            if tag in boilerplate_tags or any(
                (v := attrs.get(name)) and boilerplate_words(v) for name in ("class", "id", "role")
            ):
                candidates.append(i)
            stack.append(i)
            text, child = _run(node.child)
            if _has_text(text):
                seg_owner.append(i)
                seg_text.append(text)
            children = []
            while child is not None:
                children.append(child)
                _, child = _run(_after(child))
            events.append(("end", node, i))
            events.extend(("start", c, -1) for c in reversed(children))
        else:
            stack.pop()
            ends[i] = len(tags) - 1
            if stack:
                tail, _ = _run(_after(node))
                if _has_text(tail):
                    seg_owner.append(stack[-1])
                    seg_text.append(tail)
    if truncated:
        for i in stack:
            ends[i] = len(tags) - 1
    names: dict[str, int] = {}
    tid = [names.setdefault(t, len(names)) for t in tags]
    return list(names), tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated
