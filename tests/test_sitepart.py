"""Pages of one site (model v7, ``simhash_filter.model.sitepart`` and ``nearduplicate.apart``): two menu pages of a
manual, or two command pages of one template, are different documents and are both kept; a true copy on the same site
(a page under a second path, its printable view, a word-for-word alias) and a mirror on another host are still
near-duplicates.  Every page here is written for the test."""

from __future__ import annotations

import pytest

from simhash_filter.config import FilterConfig
from simhash_filter.index.nearduplicate import open_index
from simhash_filter.model.config import FingerprintConfig
from simhash_filter.model.core import compiled_sequence_bits
from simhash_filter.model.fingerprint import Fingerprinter
from simhash_filter.model.sitepart import MAX_CHARS, page_title, sequence_bits, sequence_hashes
from simhash_filter.model.sketch import PART_BYTES, SITE_BYTES, site_part_of

NOTE = (
    "Every command of this menu acts on the active drawing. When no drawing is open, the commands are greyed out "
    "and nothing happens when you click them. Most commands can be undone with the history panel, and each one "
    "remembers the values you gave it last time, so that running it again repeats your last choice. Shortcuts can "
    "be changed in the preferences under the keyboard section, where a search field finds any command by its name. "
    "A command that needs a selection works on the whole drawing when there is none. You can tear this menu off "
    "the menu bar by clicking the dashed line at its top, and keep it open beside the canvas while you work."
)
MENUS = {
    "Shape": ["Rotate", "Flip horizontally", "Flip vertically", "Scale", "Shear", "Align", "Distribute",
              "Group", "Ungroup", "Combine outlines", "Break apart", "Simplify"],
    "Colour": ["Brightness", "Contrast", "Hue shift", "Saturation", "Invert", "Posterize", "Threshold",
               "Grey scale", "Sepia", "Colour balance", "Curves", "Levels"],
}


def chrome(title: str, body: str, nav: bool = True) -> str:
    head = ('<div class="navheader"><a href="prev.html">Previous</a> <a href="up.html">Up</a> '
            '<a href="next.html">Next</a></div>') if nav else ""
    foot = ('<div class="navfooter"><a href="index.html">Contents</a> <a href="help.html">Help</a> '
            "<p>Sketchpad manual, written for the tests.</p></div>") if nav else ""
    return f"<html><head><title>{title}</title></head><body>{head}{body}{foot}</body></html>"


def menu_page(name: str) -> str:
    items = "".join(
        f'<li><a href="{name.lower()}-{i}-{j}.html">{cmd} {way}</a></li>'
        for i, cmd in enumerate(MENUS[name])
        for j, way in enumerate(("by hand", "to the grid", "with a preview"))
    )
    return chrome(f"The {name} menu", f"<h1>The {name} menu</h1><ul>{items}</ul><div class='note'><p>{NOTE}</p></div>")


STACK = (
    "The commands of the Stack submenu change the order of the layers in the layers panel. The order decides what "
    "covers what: a layer hides the layers below it wherever it is opaque."
)


def command_page(name: str, does: str, related: list[str]) -> str:
    links = "".join(f"<li><a href='{r.lower().replace(' ', '-')}.html'>{r}</a></li>" for r in related)
    body = (
        f"<h1>{name}</h1><p>{does}</p><p>{STACK}</p><h2>Activating the command</h2>"
        f"<p>You can reach it from the Layer menu, under Stack, then {name}.</p><h2>See also</h2><ul>{links}</ul>"
    )
    return chrome(name, body)


@pytest.fixture()
def check():
    """Check pages in order through a fresh memory index; returns each page's near-duplicate (or None)."""
    config = FilterConfig()
    fingerprinter = Fingerprinter(config.fingerprint)
    index = open_index(config)

    def run(*pages: tuple[str, str]) -> list[str | None]:
        out = []
        for url, html in pages:
            fp = fingerprinter.fingerprint(html.encode())
            assert fp.value is not None, url
            match = index.check_and_add(fp.value, url, fp.sketch)
            out.append(None if match is None else match.key)
        return out

    return run


def test_menu_pages_of_one_manual_are_kept_apart(check):
    # model v6 joined these two (word sketches 0.80 alike: the list weighs next to nothing beside the shared note)
    shape, colour = menu_page("Shape"), menu_page("Colour")
    assert check(("https://manual.test/shape-menu.html", shape),
                 ("https://manual.test/colour-menu.html", colour)) == [None, None]  # fmt: skip


def test_command_pages_of_one_template_are_kept_apart(check):
    # model v6 joined these two (word sketches 0.83 alike: their own text is a title, a sentence and a link list)
    lower = command_page("Lower layer", "Moves the active layer one step down.",
                         ["Raise layer", "Layer to top", "Layers panel", "Anchor layer", "Merge down",
                          "Duplicate layer", "New layer group", "Layer mask panel", "Lock alpha channel",
                          "Layer blend modes"])  # fmt: skip
    bottom = command_page("Layer to bottom", "Moves the active layer to the bottom.",
                          ["Lower layer", "Reverse layer order", "Layer boundary size", "Crop to content",
                           "Layer attributes", "Alpha to selection", "Flatten image", "Scale layer dialog",
                           "Text along path", "Colour to alpha"])  # fmt: skip
    assert check(("https://manual.test/lower.html", lower), ("https://manual.test/bottom.html", bottom)) == [None, None]


def test_true_copies_on_the_same_site_are_still_caught(check):
    page = menu_page("Shape")
    printable = chrome("The Shape menu", page.split("<body>")[1].split('<div class="navfooter">')[0]
                       .replace('<div class="navheader"><a href="prev.html">Previous</a> <a href="up.html">Up</a> '
                                '<a href="next.html">Next</a></div>', "<p>Printed from the manual.</p>"), nav=False)
    alias = page.replace("<title>The Shape menu</title>", "<title>Shapes (alias)</title>")
    found = check(("https://manual.test/shape-menu.html", page),
                  ("https://manual.test/current/shape-menu.html", page),
                  ("https://manual.test/shape-menu.html?print=1", printable),
                  ("https://manual.test/alias/shapes.html", alias))  # fmt: skip
    assert found[1:] == ["https://manual.test/shape-menu.html"] * 3


def test_a_mirror_on_another_host_finds_its_twin_not_a_sibling(check):
    shape, colour = menu_page("Shape"), menu_page("Colour")
    mirror = colour.replace("<body>", '<body><div class="banner">A mirror of the manual.</div>')
    found = check(("https://manual.test/shape-menu.html", shape),
                  ("https://manual.test/colour-menu.html", colour),
                  ("https://mirror.test/colour-menu.html", mirror))  # fmt: skip
    assert found == [None, None, "https://manual.test/colour-menu.html"]


def test_the_site_part_sits_between_the_word_sketch_and_the_prose_part():
    config = FingerprintConfig()
    fp = Fingerprinter(config).fingerprint(menu_page("Shape").encode())
    assert fp.sketch is not None and len(fp.sketch) == config.sketch_bytes
    assert config.sketch_bytes == config.word_sketch_bytes + SITE_BYTES + PART_BYTES
    assert site_part_of(fp.sketch, config.word_sketch_bytes) is not None
    assert site_part_of(fp.sketch[: config.word_sketch_bytes] + fp.sketch[-PART_BYTES:], 64) is None  # model v6's


def test_title_and_word_sequences_are_functions_of_the_page():
    assert page_title(b"<html><head><TITLE>\n  Caf&eacute;   Menu </TITLE></head>") == "caf\u00e9 menu"
    assert page_title(b"<html><body>no title</body></html>") == ""
    a = sequence_hashes("Lower the layer one step")
    assert len(a) == 3 and (a == sequence_hashes("lower  THE layer\none step")).all()
    assert len(sequence_hashes("\u56fe\u5c42\u4e0b\u79fb")) == 2  # each CJK character a token


@pytest.mark.skipif(compiled_sequence_bits is None, reason="the compiled core is not built")
def test_the_compiled_word_sequences_are_the_reference_bit_for_bit():
    """The compiled core reads the page's segments as site_part does: MAX_CHARS characters, joined by line breaks,
    lower-cased as str.lower (capital sigma's final form, a dotted capital I's two characters, lone surrogates), the
    first 4 * MAX_CHARS bytes of the UTF-8 (cut inside a character where it falls there)."""
    texts = ["", "!!", "one", "one two", "one two three", NOTE, menu_page("Shape"),
             "caf\u00e9 na\u00efve d\u00e9j\u00e0 vu CAF\u00c9", "\u56fe\u5c42\u4e0b\u79fb abc\u56fe\u5c42 x\u3001y",
             "a_b-c d.e " * 300, "\u039f\u0394\u039f\u03a3 \u03a3\u0391\u03a3 \u03a3", "\u0130stanbul \u1e9e",
             "x\ud800y \U0001f600 Hello \U0001d538"]  # fmt: skip
    pages = [(text,) for text in texts] + [
        ("First", "", "Second line"),  # an empty segment still joins
        ("a" * 12_000, "B " * 6_000, "never read"),  # the characters end inside the second segment
        ("a", "\U0001f600" * MAX_CHARS),  # the bytes end inside a character
        ("\u03a3 " * 15_000, "\u0130" * 9_000),
    ]
    for segments in pages:
        room, kept = MAX_CHARS, []
        for segment in segments:
            if room <= 0:
                break
            kept.append(segment[:room])
            room -= len(segment)
        hashes = sequence_hashes("\n".join(kept))
        expected = sequence_bits(hashes) if len(hashes) else None
        texts_of_page = tuple((1.0, segment) for segment in segments)
        assert compiled_sequence_bits(texts_of_page, MAX_CHARS, 4 * MAX_CHARS, 256) == expected, segments[0][:40]
