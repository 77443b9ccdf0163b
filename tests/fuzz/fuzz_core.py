"""Fuzz the compiled core against the pure-Python reference: every input, taken as an HTML page, must give the
same fingerprint and the same features with ``simhash_filter.model._core`` as without it.

Each input is checked as bytes (also under settings with tiny caps, other n-gram sizes and sketch shapes that its
last byte picks), as text decoded with an encoding that its first byte picks, as bytes with that encoding
declared, and through the extraction alone (walk and split, before the features fold case and cap
counts) at the default element cap and at a small one that its last byte picks.
An exception that both cores raise on a page counts as a failure too.

    python tests/fuzz/fuzz_core.py --seconds 60       # fuzz for at most 60 s (exit 0: nothing found)
    python tests/fuzz/fuzz_core.py out/fuzz/diff-*.html  # check saved inputs again (a reproduction)

The engine is atheris (libFuzzer, guided by the coverage of the package's Python code; ``pip install atheris``)
where it is installed, else a seeded random-mutation loop over the same corpus (``--engine random``; the
``--seed`` makes a run repeatable).  Both start from ``tests/fuzz/corpus/`` and mutate with HTML tokens.  A
difference is saved as ``out/fuzz/diff-<sha1>.html`` with a ``.txt`` saying what differed; the input under test
is kept in ``out/fuzz/inflight.html`` while the run lasts, so after a crash (a segfault, a sanitizer's report)
that file holds the input that caused it.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import reprlib
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
DEFAULT_OUT = HERE.parent.parent / "out" / "fuzz"
MAX_LEN = 32_768

#: Encodings the first byte of an input picks for its decoded and declared variants.
ENCODINGS = (
    "utf-8", "cp1252", "latin-1", "gb18030", "gbk", "big5", "shift_jis", "euc-jp", "euc-kr", "koi8-r",
    "cp1251", "iso-8859-7", "utf-16-le", "utf-16-be", "utf-32", "utf-7",
)  # fmt: skip

#: Pieces of HTML the mutators insert (also atheris' dictionary).
# fmt: off
_TOKENS: tuple[str | bytes, ...] = (
    "<html>", "<head>", "<title>", "</title>", "<body>", "</body>", "<div>", "</div>", "<p>", "</p>",
    "<span>", "</span>", "<b>", "</b>", "<br>", "<hr>", "<h1>", "</h1>", "<pre>", "</pre>",
    "<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>", "<th>", "<tbody>", "<caption>",
    "<ul>", "</ul>", "<ol>", "<li>", "</li>", "<dl>", "<dt>", "<dd>",
    "<nav>", "</nav>", "<header>", "<footer>", "</footer>", "<aside>", "<menu>", "<section>", "<article>",
    '<a href="/x">', "</a>", '<a href="#">', "<img src=x>", "<input value=1>", "<ruby>", "<rt>", "</ruby>",
    "<script>", "</script>", "<style>", "</style>", "<noscript>", "<template>", "<svg>", "</svg>", "<math>",
    "<select>", "<textarea>", "<iframe>", "<object>", "<button>",
    ' class="nav"', ' id="footer"', ' role="banner"', ' class="main-content"', ' id="sidebar"',
    ' class="a&amp;b nav"', " class=menu", ' class="x &nav; y"', ' id=""', " role=", ' class="&#110;av"',
    "<!--", "-->", "<!-- c -->", "<?pi x?>", "<![CDATA[x]]>", "<!DOCTYPE html>", '<?xml version="1.0"?>',
    '<meta charset="utf-8">', '<meta charset="gb18030">', '<meta charset="utf-16">', '<meta charset="rot13">',
    '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">',
    "&amp;", "&lt;", "&gt;", "&nbsp;", "&#0;", "&#x1F600;", "&#xD800;", "&#1114112;", "&copy", "&nosuch;",
    b"\x00", b"\xff", b"\xfe", b"\xc3", b"\xe2\x80", b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x1b", b"\x0c",
    "\n", "\r\n", "\t", " ", "   ", "\u3000", "\u00a0", "\u200b", "\u2028",
    "中文", "段落\n换行", "漢字", "かな", "한국어", "Ωμέγα", "кириллица", "e\u0301", "😀", "ﬁ",
    "12", "2024-05-14 08:21:07", "views 18342", "9f3a7c21e4b8d605", "3.5%", "#42",
    "colour", "color", "garden", "volunteers", "council", "harvest", "the", "and", "of",
)
# fmt: on
TOKENS = tuple(t.encode("utf-8") if isinstance(t, str) else t for t in _TOKENS)

#: Settings the last byte of an input picks for one more run of it (the defaults' caps are out of a fuzz input's
#: reach): tiny token, feature, element and byte caps, other n-gram sizes, sketch shapes and weights.
CONFIGS: tuple[dict[str, Any], ...] = (
    {"max_tokens": 1, "max_features": 1, "min_features": 1},
    {"max_tokens": 7, "max_features": 5, "min_features": 1, "max_elements": 3, "char_ngram": 0, "cjk_char_ngram": 0},
    {"max_tokens": 50, "max_features": 20, "max_bytes": 512, "char_ngram": 1, "cjk_char_ngram": 1, "sketch_bins": 8,
     "sketch_step": 3.0},
    {"max_tokens": 300, "max_features": 40, "max_bytes": 4096, "max_elements": 20, "char_ngram": 3,
     "cjk_char_ngram": 3, "sketch_bins": 64, "sketch_step": 0.01},
    {"max_features": 64, "min_features": 2, "structure_weight": 1.0, "boilerplate_weight": 1.0, "dom_decay": 1.0,
     "idf_power": 0.0},
    {"structure_weight": 0.0, "boilerplate_weight": 0.0, "dom_decay": 0.01, "idf_power": 2.0, "char_ngram": 8},
    {"ngrams": (1, 2), "max_features": 100, "sketch_bins": 1024},
)  # fmt: skip

_short = reprlib.Repr()
_short.maxstring = 160
_short.maxother = 160
_short.maxlist = _short.maxtuple = _short.maxdict = 8


def _model() -> SimpleNamespace:
    """The package's modules, imported on first use (atheris instruments what is imported under it)."""
    from simhash_filter.model import config, core, extract, fingerprint, html

    return SimpleNamespace(config=config, core=core, extract=extract, fingerprint=fingerprint, html=html)


def compiled_attributes() -> list[tuple[Any, str, Any]]:
    """``(module, name, value)`` of every ``compiled_*`` attribute of the loaded ``simhash_filter.model`` modules."""
    return [
        (module, name, value)
        for modname, module in list(sys.modules.items())
        if modname.startswith("simhash_filter.model.") and module is not None
        for name, value in list(vars(module).items())
        if name.startswith("compiled_")
    ]


def compiled_core_loaded() -> bool:
    """Whether this process runs the compiled core (built, importable, not turned off by the environment)."""
    _model()
    return any(value is not None for _, _, value in compiled_attributes())


@contextlib.contextmanager
def reference_core() -> Iterator[None]:
    """Run the pure-Python reference in this process: every ``compiled_*`` attribute of the loaded
    ``simhash_filter.model`` modules is None inside the block, and what it was again after it."""
    saved = compiled_attributes()
    for module, name, _ in saved:
        setattr(module, name, None)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _items(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    """A features dict as ``(name, float.hex(weight))`` pairs in its order: exact, and NaN equals NaN."""
    return [(k, float(v).hex()) for k, v in mapping.items()]


def _analysis(fingerprinter: Any, html: bytes | str, encoding: str | None) -> dict[str, Any]:
    try:
        fp, feats = fingerprinter.analyze(html, encoding)
        one = fingerprinter.fingerprint(html, encoding)  # the one-pass path where the core is compiled
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"}
    return {
        "fingerprint()": (one.value, str(one.status), one.sketch, one.features, one.truncated, one.encoding),
        "value": fp.value,
        "status": str(fp.status),
        "sketch": fp.sketch,
        "features": fp.features,
        "truncated": fp.truncated,
        "encoding": fp.encoding,
        "features.text": None if feats is None else _items(feats.text),
        "features.structure": None if feats is None else _items(feats.structure),
        "features.truncated": None if feats is None else feats.truncated,
    }


def _walk(html: bytes | str, max_elements: int) -> dict[str, Any]:
    """What the model's extraction gives for the page at an element cap (``extract_page``: the nesting guard, the
    parser, the walk and the split, without the features)."""
    m = _model()
    cfg = m.config.FingerprintConfig()

    def page() -> Any:
        data = m.html.page_bytes(html, None, cfg.max_bytes)[0]
        kwargs = {"dom_decay": cfg.dom_decay, "boilerplate_weight": cfg.boilerplate_weight}
        return m.extract.extract_page(data, max_elements=max_elements, **kwargs) if data else None

    return _extraction(page)


def _extraction(page_of: Callable[[], Any]) -> dict[str, Any]:
    m = _model()
    try:
        page = page_of()
        if page is None:
            return {"root": None}
    except m.html.NotHtml:
        return {"not_html": True}
    except Exception as exc:
        return {"raised": f"{type(exc).__name__}: {exc}"}
    return {
        "texts": [(float(w).hex(), t) for w, t in page.texts],
        "structure": _items(page.structure),
        "elements": page.elements,
        "truncated": page.truncated,
    }


def _first_difference(compiled: dict[str, Any], reference: dict[str, Any]) -> str | None:
    for key in dict.fromkeys([*reference, *compiled]):
        a, b = compiled.get(key, "<missing>"), reference.get(key, "<missing>")
        if a == b:
            continue
        where = ""
        if isinstance(a, list) and isinstance(b, list):
            i = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            where = f" (lengths {len(a)} and {len(b)}, first difference at {i})"
            a, b = a[i : i + 3], b[i : i + 3]
        return f"{key}{where}: compiled {_short.repr(a)} != reference {_short.repr(b)}"
    return None


class Checker:
    """Runs one page through both cores: a Fingerprinter for each, kept across inputs as a crawler keeps one."""

    def __init__(self) -> None:
        m = _model()
        self.compiled, self.reference = self._fingerprinters(m.config.FingerprintConfig())
        self.max_elements = m.config.FingerprintConfig().max_elements
        self.last: dict[str, Any] = {}
        self._configured: dict[int, tuple[Any, Any]] = {}

    @staticmethod
    def _fingerprinters(config: Any) -> tuple[Any, Any]:
        """A Fingerprinter for each core (one may pick its memos by the core at hand when it is made)."""
        m = _model()
        compiled = m.fingerprint.Fingerprinter(config)
        with reference_core():
            reference = m.fingerprint.Fingerprinter(config)
        return compiled, reference

    def analyze(self, html: bytes | str, encoding: str | None = None, config: int | None = None) -> str | None:
        """None when both cores give the same fingerprint and features (and neither raises), else what differs;
        ``last`` keeps what the compiled core gave (the Fingerprint's and the Features' fields).  ``config``: the
        default settings, or those of ``CONFIGS[config]``."""
        if config is None:
            compiled_fp, reference_fp = self.compiled, self.reference
        else:
            if config not in self._configured:
                settings = _model().config.FingerprintConfig(**CONFIGS[config])
                self._configured[config] = self._fingerprinters(settings)
            compiled_fp, reference_fp = self._configured[config]
        compiled = self.last = _analysis(compiled_fp, html, encoding)
        with reference_core():
            reference = _analysis(reference_fp, html, encoding)
        return _failure(compiled, reference)

    @staticmethod
    def walk(html: bytes | str, max_elements: int) -> str | None:
        """The same for the extraction alone, at an element cap."""
        compiled = _walk(html, max_elements)
        with reference_core():
            reference = _walk(html, max_elements)
        return _failure(compiled, reference)

    def check(self, data: bytes) -> str | None:
        """All the variants of one fuzz input: None, or the first failure with the variant's name."""
        enc = ENCODINGS[data[0] % len(ENCODINGS)] if data else "utf-8"
        cap = 1 + (data[-1] % 48 if data else 0)
        config = data[-1] % len(CONFIGS) if data else 0
        variants = (
            ("bytes", lambda: self.analyze(data)),
            (f"bytes with settings {CONFIGS[config]}", lambda: self.analyze(data, config=config)),
            (f"text decoded as {enc}", lambda: self.analyze(data.decode(enc, "replace"))),
            (f"bytes declared {enc}", lambda: self.analyze(data, enc)),
            ("walk", lambda: self.walk(data, self.max_elements)),
            (f"walk at max_elements={cap}", lambda: self.walk(data, cap)),
        )
        for name, run in variants:
            failure = run()
            if failure is not None:
                return f"{name}: {failure}"
        return None


def _failure(compiled: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """What differs; also an exception both cores raise alike: not a difference between the cores, still a crash."""
    difference = _first_difference(compiled, reference)
    if difference is not None:
        return difference
    if "raised" in compiled:
        return f"both cores raise {compiled['raised']}"
    return None


# --- mutation ----------------------------------------------------------------------------------------------


def mutate(data: bytes, rng: random.Random, pool: list[bytes]) -> bytes:
    """One to eight random edits: HTML tokens inserted or overwritten, bytes flipped, ranges deleted, duplicated,
    spliced from another input, or wrapped in many levels of one element."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        n = len(buf)
        pos = rng.randint(0, n)
        op = rng.randrange(9)
        if op <= 1 or not n:
            buf[pos:pos] = rng.choice(TOKENS)
        elif op == 2:
            buf[pos : pos + rng.randint(1, 8)] = rng.choice(TOKENS)
        elif op == 3:
            buf[min(pos, n - 1)] = rng.randrange(256)
        elif op == 4:
            del buf[pos : pos + rng.randint(1, max(1, n // 4))]
        elif op == 5:
            start = rng.randrange(n)
            chunk = buf[start : start + rng.randint(1, 256)]
            buf[pos:pos] = chunk * rng.choice((1, 1, 2, 8, 64))
        elif op == 6:
            other = rng.choice(pool)
            start = rng.randint(0, len(other))
            buf[pos:pos] = other[start : start + rng.randint(1, 2048)]
        elif op == 7:
            tag = rng.choice((b"div", b"span", b"b", b"td", b"li", b"table", b"ul", b"nav", b"a", b"p", b"tr"))
            depth = rng.choice((2, 10, 100, 300, 1000))
            end = rng.randint(pos, n)
            start_tag, end_tag = b"<" + tag + b">", b"</" + tag + b">"
            buf[pos:end] = start_tag * depth + buf[pos:end] + end_tag * rng.choice((0, depth))
        else:
            buf[pos:pos] = " ".join(rng.choice(("word", "中文", "12", "colour", "the", "é")) for _ in range(8)).encode()
    return bytes(buf[:MAX_LEN])


def seed_corpus() -> list[bytes]:
    return [p.read_bytes() for p in sorted(CORPUS.iterdir()) if p.is_file()]


# --- running -----------------------------------------------------------------------------------------------


#: The environment a failure under ``make sanitize`` is reproduced in.
_SANITIZER_ENV = ("LD_PRELOAD", "PYTHONMALLOC", "ASAN_OPTIONS", "UBSAN_OPTIONS")


class Run:
    """One fuzzing run's bookkeeping: the deadline, the count, the in-flight input, the saved failures."""

    def __init__(self, out: Path, seconds: float) -> None:
        self.out = out
        self.out.mkdir(parents=True, exist_ok=True)
        self.deadline = time.monotonic() + seconds
        self.started = time.monotonic()
        self.inputs = 0
        self.checker = Checker()
        self.inflight = out / "inflight.html"
        self._fd = os.open(self.inflight, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def one(self, data: bytes) -> str | None:
        """Check one input (kept in the in-flight file while it runs); save it when it fails."""
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))
        self.inputs += 1
        failure = self.checker.check(data)
        if failure is not None:
            self.save(data, failure)
        return failure

    def save(self, data: bytes, failure: str) -> None:
        self.close()
        name = self.out / f"diff-{hashlib.sha1(data).hexdigest()[:16]}.html"
        name.write_bytes(data)
        env = " ".join(f"{k}={os.environ[k]}" for k in _SANITIZER_ENV if k in os.environ)
        command = f"{env + ' ' if env else ''}{sys.executable} {Path(__file__)} {name}"
        name.with_suffix(".txt").write_text(f"{failure}\n\nreproduce: {command}\n", encoding="utf-8")
        print(f"fuzz_core: FAILURE after {self.inputs} inputs: {failure}", flush=True)
        print(f"fuzz_core: input saved as {name} ({len(data)} bytes), report in {name.with_suffix('.txt')}", flush=True)

    def close(self) -> None:
        """The run is over: no input in flight."""
        os.close(self._fd)
        self.inflight.unlink(missing_ok=True)

    def finish(self, engine: str) -> None:
        self.close()
        elapsed = time.monotonic() - self.started
        print(f"fuzz_core: {self.inputs} inputs tried in {elapsed:.0f} s ({engine}): no difference, no crash")


def run_random(run: Run, seed: int) -> int:
    print(f"fuzz_core: random engine, --seed {seed}", flush=True)
    rng = random.Random(seed)
    seeds = seed_corpus()
    pool = list(seeds)
    for data in seeds:  # every seed once, as it is
        if run.one(data) is not None:
            return 1
    while time.monotonic() < run.deadline:
        data = mutate(rng.choice(pool), rng, pool)
        if run.one(data) is not None:
            return 1
        if rng.random() < 0.05:  # keep some mutants to mutate further (no coverage to choose them by)
            if len(pool) < 2000:
                pool.append(data)
            else:
                pool[rng.randrange(len(seeds), len(pool))] = data
    run.finish(f"random mutation, seed {seed}")
    return 0


def run_atheris(run: Run, seconds: float, seed: int | None, extra: list[str]) -> int:
    import atheris

    work = run.out / "corpus"  # what libFuzzer adds this run (the seeds are read from tests/fuzz/corpus)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    dictionary = run.out / "html.dict"
    dictionary.write_text("".join('"' + "".join(f"\\x{b:02x}" for b in t) + '"\n' for t in TOKENS), encoding="ascii")

    def one_input(data: bytes) -> None:
        if time.monotonic() >= run.deadline:
            run.finish("atheris")
            os._exit(0)  # libFuzzer's own exit would skip the count
        if run.one(data) is not None:
            os._exit(1)

    argv = [
        sys.argv[0],
        f"-max_total_time={int(seconds) + 30}",  # the deadline above ends the run; this only backs it up
        f"-max_len={MAX_LEN}",
        "-timeout=120",
        "-rss_limit_mb=6144",
        f"-dict={dictionary}",
        f"-artifact_prefix={run.out}/",
        *([f"-seed={seed}"] if seed is not None else []),
        *extra,
        str(work),
        str(CORPUS),
    ]
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0  # not reached: Fuzz() exits


def replay(paths: list[str]) -> int:
    checker = Checker()
    failed = 0
    for path in paths:
        failure = checker.check(Path(path).read_bytes())
        print(f"{path}: {failure or 'same with both cores'}")
        failed += failure is not None
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="*", help="check these saved inputs instead of fuzzing")
    parser.add_argument("--seconds", type=float, default=60, help="fuzz for at most this long (default 60)")
    parser.add_argument("--engine", choices=("auto", "atheris", "random"), default="auto")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"where failures go (default {DEFAULT_OUT})")
    args, extra = parser.parse_known_args(argv)
    if extra and args.engine == "random":
        parser.error(f"unknown arguments {extra} (only atheris takes libFuzzer flags)")

    engine = args.engine
    if engine == "auto":
        try:
            import atheris
        except ImportError:
            engine = "random"
        else:
            engine = "atheris"
    if engine == "atheris" and not args.inputs:
        import atheris

        with atheris.instrument_imports(include=["simhash_filter"]):
            _model()
    if not compiled_core_loaded():
        print(f"fuzz_core: no compiled core in this process ({_model().core.describe()}): nothing to compare")
        return 2
    if args.inputs:
        return replay(args.inputs)
    run = Run(args.out, args.seconds)
    print(f"fuzz_core: {engine} for at most {args.seconds:g} s; failures go to {args.out}", flush=True)
    if engine == "atheris":
        return run_atheris(run, args.seconds, args.seed, extra)
    return run_random(run, random.SystemRandom().randrange(2**32) if args.seed is None else args.seed)


if __name__ == "__main__":
    sys.exit(main())
