"""Tests that the README and the documentation site (docs/) stay true to the code: settings, stats keys,
the Python example, the links between them, and the public facade."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import unicodedata
from dataclasses import fields
from pathlib import Path

import pytest

import simhash_filter
from simhash_filter.config import FilterConfig, FingerprintConfig
from simhash_filter.crawl import settings as simhash_settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
SETTINGS_PAGE = DOCS / "settings.md"
PACKAGE = ROOT / "simhash_filter"
ROW = re.compile(r"^\| `(\w+)` \| `([^`]*)` \|", re.MULTILINE)
#: A Markdown link's target: [text](target).
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _section(text: str, heading: str) -> str:
    """The text under ``heading`` (a whole heading line, e.g. ``## Stats``) up to the next heading of its level."""
    level = heading.split(" ", 1)[0]
    parts = re.split(rf"^{re.escape(heading)}[ \t]*$", text, maxsplit=1, flags=re.MULTILINE)
    assert len(parts) == 2, f"no {heading!r} heading"
    return re.split(rf"^{level} ", parts[1], maxsplit=1, flags=re.MULTILINE)[0]


def _settings_table() -> dict[str, object]:
    section = _section(SETTINGS_PAGE.read_text(encoding="utf-8"), "## FingerprintConfig and FilterConfig")
    return {name: ast.literal_eval(value) for name, value in ROW.findall(section)}


def test_settings_page_config_table_matches_config():
    """Every FingerprintConfig/FilterConfig field is in docs/settings.md's table with its current default."""
    documented = _settings_table()
    fp = FingerprintConfig()
    expected = {f.name: getattr(fp, f.name) for f in fields(FingerprintConfig)}
    expected.update({f.name: getattr(FilterConfig(), f.name) for f in fields(FilterConfig) if f.name != "fingerprint"})
    assert documented == expected, "docs/settings.md's config table is out of date with simhash_filter/config.py"


def _python_example(text: str) -> str:
    return text.split("```python\n", 1)[1].split("```", 1)[0]


def test_readme_three_line_usage_runs():
    """The README's three-line Python example works as written."""
    html = "<html><body><article>" + "<p>The harbour ferry timetable changes on Monday morning.</p>" * 5
    ns: dict[str, object] = {"html": html, "url": "https://a.example/1"}
    block = _python_example(README.read_text(encoding="utf-8"))
    exec(block, ns)
    assert ns["match"] is None
    assert len(ns["index"]) == 1


def test_docs_repeat_the_readme_example_exactly():
    """The quick start and the usage page show the README's example, the one tested above, word for word."""
    block = _python_example(README.read_text(encoding="utf-8"))
    for page in ("index.md", "usage.md"):
        assert f"```python\n{block}```" in (DOCS / page).read_text(encoding="utf-8"), page


# --- SIMHASH_* settings and stats keys: everything in the code is documented, everything documented exists ---


def test_every_setting_is_documented_and_every_documented_setting_exists():
    """docs/settings.md has a row for each SIMHASH_* setting of simhash_filter/settings.py, and no other."""
    section = _section(SETTINGS_PAGE.read_text(encoding="utf-8"), "## Scrapy settings")
    documented = [name for name, _ in ROW.findall(section)]
    assert len(documented) == len(set(documented)), "a setting is documented twice"
    assert set(documented) == set(simhash_settings.default_settings())


def _pattern(key: str) -> str:
    """A stats key with every placeholder (``<d>``, ``{reason}``) written as ``<*>``."""
    return re.sub(r"<[^<>]*>", "<*>", key)


def _code_stats_keys() -> set[str]:
    """Every ``simhash/...`` string literal of the package's code, an f-string's fields written as ``<*>``."""
    keys: set[str] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        inside_fstring = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstring:
                key = node.value
            elif isinstance(node, ast.JoinedStr):
                key = "".join(v.value if isinstance(v, ast.Constant) else "<*>" for v in node.values)
            else:
                continue
            if key.startswith("simhash/") and not re.search(r"\s", key):
                keys.add(key)
    # ``.scrapy/simhash/<spider name>``: the directory of a crawl's on-disk index, not a stats key.
    keys.discard("simhash/<*>")
    return keys


def _documented_stats_keys() -> set[str]:
    section = _section(SETTINGS_PAGE.read_text(encoding="utf-8"), "## Stats")
    keys: set[str] = set()
    for first_cell in re.findall(r"^\| ([^|]*) \|", section, re.MULTILINE):
        keys.update(re.findall(r"`(simhash/[^`]*)`", first_cell))
    return keys


def test_every_stats_key_is_documented_and_every_documented_key_exists():
    """docs/settings.md's stats table lists each ``simhash/...`` key the code uses (a breakdown such as
    ``simhash/distance/<d>`` once, as a pattern), and nothing else."""
    in_code = {_pattern(k) for k in _code_stats_keys()}
    documented = {_pattern(k) for k in _documented_stats_keys()}
    assert "simhash/checked" in in_code and "simhash/skipped/<*>" in in_code, "the scan of the code found too little"
    assert in_code - documented == set(), "stats keys used in simhash_filter/ but not documented in docs/settings.md"
    assert documented - in_code == set(), "stats keys documented in docs/settings.md but not used in simhash_filter/"


def _key_regex(documented: str) -> str:
    """A documented key (``simhash/skipped/<reason>``) as a regular expression of the keys it stands for."""
    return re.escape(_pattern(documented)).replace(re.escape("<*>"), "[^/]+")


def test_the_keys_there_from_the_start_are_the_documented_ones():
    """``stats_keys()`` (the keys set to 0 when the spider opens, which monitors read) and the stats table name the
    same keys: all of them but the distance histogram, whose keys are the distances met."""
    from simhash_filter.crawl.stats import stats_keys

    listed = stats_keys(avoid=True, warc=True)
    documented = {_key_regex(k) for k in _documented_stats_keys()}
    assert len(listed) == len(set(listed))
    assert [k for k in listed if not any(re.fullmatch(d, k) for d in documented)] == []
    missing = sorted(d for d in documented if not any(re.fullmatch(d, k) for k in listed))
    assert missing == [_key_regex("simhash/distance/<d>")]
    section = _section(SETTINGS_PAGE.read_text(encoding="utf-8"), "## Stats")
    assert "`simhash_filter.crawl.stats.stats_keys()`" in section and "`simhash/distance/<d>`" in section


def test_every_skip_reason_is_documented():
    """The ``simhash/skipped/<reason>`` row names every reason a page can be let through unchecked."""
    from simhash_filter.crawl.decision import SkipReason

    section = _section(SETTINGS_PAGE.read_text(encoding="utf-8"), "## Stats")
    row = next(line for line in section.splitlines() if line.startswith("| `simhash/skipped/"))
    reasons = {reason.value for reason in SkipReason}
    assert {r for r in reasons if f"`{r}`" not in row} == set()


# --- links: the README points at the pages, the site lists them all ---------------------------------------


def _slug(heading: str) -> str:
    """The anchor of a heading, as MkDocs (Python-Markdown's toc) and GitHub make it for plain headings."""
    text = re.sub(r"[`*_]", "", heading).strip()
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def _readme_docs_links() -> list[str]:
    return [t for t in LINK.findall(README.read_text(encoding="utf-8")) if t.startswith("docs/")]


def test_readme_links_to_docs_pages_resolve():
    """The README's links into docs/ are relative, to pages (and headings) that exist."""
    links = _readme_docs_links()
    assert links
    for target in links:
        path, _, anchor = target.partition("#")
        assert (ROOT / path).exists(), target
        if anchor:
            assert anchor in _anchors(ROOT / path), target


def test_readme_links_to_every_docs_page():
    """Each page of the site is linked from the README."""
    linked = {t.partition("#")[0] for t in _readme_docs_links()}
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    assert pages - linked == set()


def test_the_overview_lists_every_other_page():
    """docs/index.md's list of the site's pages links to each other page of docs/."""
    listing = _section((DOCS / "index.md").read_text(encoding="utf-8"), "## The pages of this site")
    linked = {t.partition("#")[0] for t in LINK.findall(listing)}
    assert {p.name for p in DOCS.glob("*.md")} - linked == {"index.md"}


def test_every_docs_page_is_in_the_nav():
    """mkdocs.yml's nav lists every page of docs/ (the strict build also refuses a page left out)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.search(r"^nav:\n((?:[ \t]+.*\n)+)", config, re.MULTILINE)
    assert nav is not None
    listed = set(re.findall(r":\s*([\w-]+\.md)\s*$", nav.group(1), re.MULTILINE))
    assert listed == {p.name for p in DOCS.glob("*.md")}
    assert re.search(r"^strict: true$", config, re.MULTILINE)


def test_facade_exports():
    """The package facade exports the documented names, and a version string."""
    for name in (
        "fingerprint",
        "Fingerprinter",
        "Fingerprint",
        "Status",
        "hamming",
        "FingerprintConfig",
        "FilterConfig",
        "DEFAULTS",
        "NearDuplicateIndex",
        "Match",
        "__version__",
    ):
        assert name in simhash_filter.__all__
        assert hasattr(simhash_filter, name)
    assert isinstance(simhash_filter.__version__, str) and simhash_filter.__version__


def test_the_defaults_quoted_beside_their_names_are_the_defaults():
    """A page that quotes ``min_similarity`` (x) or ``k = x`` beside the name gives the default of the config."""
    from simhash_filter.config import DEFAULTS

    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for value in re.findall(r"`min_similarity` \((\d\.\d+)\)", text):
            assert float(value) == DEFAULTS.min_similarity, (page.name, value)


#: A benchmark named in the docs: a path under benchmarks/ or a module run with ``python -m benchmarks...``.
BENCH_PATH = re.compile(r"\bbenchmarks/([\w/]+\.py)\b")
BENCH_MODULE = re.compile(r"python3? -m (benchmarks(?:\.\w+)+)")
#: Finished experiments removed once their results were in the docs (which name the commit that has them).
REMOVED_BENCHMARKS = {"bench_storage_choice.py", "bench_crawl_threads.py", "host_boilerplate.py", "bench_parser.py"}


def test_every_benchmark_the_docs_name_exists():
    """Each ``benchmarks/...py`` path and ``python -m benchmarks....`` module in the README, docs/, the Makefile and
    the package's docstrings names a file of this checkout (or a removed experiment, whose commit the docs name)."""
    texts = [README, ROOT / "Makefile", *DOCS.glob("*.md"), *PACKAGE.rglob("*.py")]
    missing = []
    for path in texts:
        for line in path.read_text(encoding="utf-8").splitlines():
            names = [m.group(1) for m in BENCH_PATH.finditer(line)]
            names += [
                m.group(1).replace(".", "/").removeprefix("benchmarks/") + ".py" for m in BENCH_MODULE.finditer(line)
            ]
            missing += [
                f"{path.name}: {name}"
                for name in names
                if name not in REMOVED_BENCHMARKS and not (ROOT / "benchmarks" / name).exists()
            ]
    assert not missing, missing


#: A ``SIMHASH_...`` name: a Scrapy setting, or an environment variable the build or the core reads.
SIMHASH_NAME = re.compile(r"\bSIMHASH_[A-Z0-9_]*[A-Z0-9]\b")


def test_every_simhash_name_the_docs_give_is_a_setting_or_an_environment_variable():
    """Each ``SIMHASH_*`` name in the README and docs/ is a setting of simhash_filter/crawl/settings.py, or a
    variable named in the package's or setup.py's code (no setting that was renamed or never existed)."""
    settings = {name for name in vars(simhash_settings) if name.startswith("SIMHASH_")}
    code = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "setup.py", *PACKAGE.rglob("*.py")])
    unknown = {
        f"{path.name}: {name}"
        for path in [README, *DOCS.glob("*.md")]
        for name in SIMHASH_NAME.findall(path.read_text(encoding="utf-8"))
        if name not in settings and f'"{name}"' not in code
    }
    assert not unknown, sorted(unknown)


#: A ``simhash-filter`` command line in a shell block or in inline code, up to a comment or the code's end.
CLI_LINE = re.compile(r"(?:^|`)simhash-filter ([a-z][^`#\n]*)", re.MULTILINE)
#: A command in a ``--help`` listing (four spaces, its name) and an option string anywhere in a help text.
HELP_COMMAND = re.compile(r"^ {4}([a-z]+)\b", re.MULTILINE)
HELP_OPTION = re.compile(r"(?<![\w-])(--?[a-z][\w-]*)")


def _help(*command: str) -> str:
    """What ``simhash-filter COMMAND --help`` prints."""
    from simhash_filter.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main([*command, "--help"])
    return out.getvalue()


def test_every_command_line_option_the_docs_give_exists():
    """Each ``simhash-filter COMMAND ... --option`` in the README and docs/ names options that the command's
    ``--help`` lists (a renamed or removed option shows here, not in a newcomer's terminal)."""
    commands = set(HELP_COMMAND.findall(_help()))
    commands |= {f"index {name}" for name in HELP_COMMAND.findall(_help("index"))}
    options = {command: set(HELP_OPTION.findall(_help(*command.split()))) for command in commands}
    wrong = []
    for path in [README, *DOCS.glob("*.md")]:
        for match in CLI_LINE.finditer(path.read_text(encoding="utf-8")):
            words = match.group(1).split()
            command = " ".join(words[:2]) if " ".join(words[:2]) in options else words[0]
            given = {w.split("=")[0] for w in words if re.fullmatch(r"--?[a-z][\w-]*(=.*)?", w)}
            if command in options:
                wrong += [f"{path.name}: {command} {o}" for o in sorted(given - options[command])]
            elif given:
                wrong.append(f"{path.name}: no command {command!r}")
    assert not wrong, wrong
