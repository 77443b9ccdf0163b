"""The Lexbor walk's pure-Python reference: the same tuple as ``lexbor_walk.walk``, read through selectolax's public
node API (``child``, ``next``, ``tag``, ``attributes``, ``text_content``) instead of Lexbor's records.

It gives each walked element an lxml-like ``text`` (the text nodes before its first walked child) and ``tail`` (the
text nodes after it, up to its next walked sibling), where comments and invisible elements (with their content) are
passed over, then emits them in the order of an event walk, as ``simhash_filter.model.extract._extract_walk`` does
over lxml's tree.  Slow; for checking the compiled walk (``bench_parser.py --check``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simhash_filter.model.html import INVISIBLE_TAGS

_INVISIBLE = frozenset(INVISIBLE_TAGS)


def _walked(node: Any) -> bool:
    return node is not None and node.is_element_node and node.tag not in _INVISIBLE


def _run(node: Any) -> tuple[str, Any]:
    """The text from ``node`` on, up to the next walked element, and that element (None at the end)."""
    parts = []
    while node is not None and not _walked(node):
        if node.is_text_node:
            parts.append(node.text_content or "")
        node = node.next
    return "".join(parts), node


def _has_text(text: str) -> bool:
    return bool(text) and not text.isspace()


def walk(
    parser: Any, max_elements: int, boilerplate_tags: frozenset[str], boilerplate_words: Callable[[str], bool]
) -> tuple[list[str], list[int], list[int], list[int], list[int], list[int], list[int], list[str], bool] | None:
    """What ``lexbor_walk.walk(parser, ...)`` gives."""
    root = parser.root
    if root is None:
        return None
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
    # (event, node, index): "start" events push the children's events in reverse
    events: list[tuple[str, Any, int]] = [("start", root, -1)]
    stack: list[int] = []
    while events:
        event, node, i = events.pop()
        if event == "start":
            i = len(tags)
            if i >= max_elements:
                truncated = True
                break
            tags.append(node.tag)
            parents.append(stack[-1] if stack else -1)
            depths.append(len(stack))
            ends.append(i)
            attrs = node.attributes
            if node.tag in boilerplate_tags or any(
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
                _, child = _run(child.next)
            events.append(("end", node, i))
            events.extend(("start", c, -1) for c in reversed(children))
        else:
            stack.pop()
            ends[i] = len(tags) - 1
            if stack:
                tail, _ = _run(node.next)
                if _has_text(tail):
                    seg_owner.append(stack[-1])
                    seg_text.append(tail)
    if truncated:
        for i in stack:
            ends[i] = len(tags) - 1
    names: dict[str, int] = {}
    tid = [names.setdefault(t, len(names)) for t in tags]
    return list(names), tid, parents, depths, ends, candidates, seg_owner, seg_text, truncated
