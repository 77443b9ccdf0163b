# simhash-filter: common tasks.  Needs only python3 (with venv and pip) and network access to PyPI.
PYTHON ?= python3
VENV ?= .venv
TEST_VENV ?= .venv-test
BIN := $(VENV)/bin
OUT ?= out

.PHONY: help install demo demo-dedup system test test-venv test-pythons sanitize fuzz lint docs bench clean

help:
	@echo "make demo     serve a generated site with near-duplicates on 127.0.0.1, crawl it, report"
	@echo "make demo-dedup  the same kind of sample through simhash-filter dedup"
	@echo "make test     fresh virtualenv in $(TEST_VENV), lint and types, full test suite, documentation site (what CI runs)"
	@echo "make test-pythons  the suite again on Python $(OTHER_PYTHONS) without the slow tests (on $(QUICK_PYTHONS) the model's and index's), where this machine has them (CI too)"
	@echo "make sanitize  the compiled core's tests and a short fuzz under ASan and UBSan, built in $(OUT)/sanitize (CI too)"
	@echo "make fuzz     the compiled core against the pure-Python one on mutated pages, FUZZ_SECONDS=$(FUZZ_SECONDS)"
	@echo "make install  virtualenv in $(VENV) with the package (editable) and its test tools"
	@echo "make lint     ruff check, and mypy (pyproject.toml: strict on model/, index/ and crawl/)"
	@echo "make docs     build the documentation site (docs/, mkdocs.yml) into $(OUT)/site, strictly"
	@echo "make bench    every benchmark script at a tiny size, end to end (BENCH_TIER=all: the slower ones too)"

# The stamp is refreshed when the dependencies change.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip; }
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m crawler.demo

demo-dedup: $(VENV)/.installed
	$(BIN)/python -m devsites.sample $(OUT)/sample.jsonl
	$(BIN)/simhash-filter dedup $(OUT)/sample.jsonl --output $(OUT)/sample.dedup.jsonl
	$(BIN)/python -m benchmarks.data.demo_report $(OUT)/sample.jsonl $(OUT)/sample.dedup.jsonl

# The Redis tests start redis-server processes, the compiled core needs a C compiler, the Spark tests a Java
# runtime, the report's tests a browser and the service's Crawlee client Node.js and npm (tests/test_serve_clients.py
# installs its npm packages into pytest's cache): Debian's packages (as root, or with sudo) when they are missing.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
SYSTEM_PACKAGES := $(if $(shell command -v redis-server),,redis-server) $(if $(shell command -v cc),,gcc libc6-dev) \
	$(if $(shell command -v java),,default-jre-headless) $(if $(shell command -v chromium),,chromium fonts-wqy-zenhei) \
	$(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm) $(if $(shell command -v curl),,curl)

test: system
	$(MAKE) --no-print-directory test-venv
	$(TEST_VENV)/bin/ruff check .
	$(TEST_VENV)/bin/mypy
	$(TEST_VENV)/bin/python -m pytest -q
	$(MAKE) --no-print-directory docs DOCS_VENV=$(TEST_VENV)

# The system packages the tests need (above), installed where missing.
system:
	$(if $(strip $(SYSTEM_PACKAGES)),$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null,@true)

# A fresh virtualenv $(TEST_VENV) made by $(PYTHON), with the package and its test tools.
test-venv:
	rm -rf $(TEST_VENV)
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TEST_VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(TEST_VENV)/.built

# The suite on the oldest and newest Python the project supports, each in a fresh virtualenv: found on
# PATH as pythonX.Y, else among pyenv's versions; a version this machine lacks is skipped with a message. The
# virtualenvs are built one after the other (each builds the compiled core in the tree); each one's tests start as
# soon as it is ready, beside the next build, and their output is shown when all have ended.
# The report's browser tests (its JavaScript in Chromium) run once, in `make test`: SIMHASH_NO_BROWSER=1 here;
# the `slow` tests (real crawls, Spark, Redis fleets, duplicate floods, pywb: about 9 of the suite's 13 minutes) run
# once too, in `make test`, to keep CI under 30 minutes (SLOW_PYTHONS=3.13 runs them there again, but the `flood`
# tests).
# On the newest Python (QUICK_PYTHONS) only the model's and the index's tests run: what a Python version could move
# is a fingerprint, a sketch or an index's bytes; the oldest runs the whole suite but the slow tests.
OTHER_PYTHONS ?= 3.10 3.13
SLOW_PYTHONS ?=
QUICK_PYTHONS ?= 3.13
QUICK_TESTS ?= tests/test_core.py tests/test_core_hostile.py tests/test_fingerprint.py tests/test_extract.py \
	tests/test_features.py tests/test_html.py tests/test_segment.py tests/test_spelling.py tests/test_weights.py \
	tests/test_invariance.py tests/test_golden.py tests/test_index.py tests/test_bound.py tests/test_backends.py \
	tests/test_backend_file.py tests/test_dedup.py

test-pythons:
	@set -e; mkdir -p $(OUT); pids=; for v in $(OTHER_PYTHONS); do \
		py=$$(command -v python$$v 2>/dev/null || true); \
		if [ -n "$$py" ] && ! "$$py" -c '' >/dev/null 2>&1; then py=; fi; \
		if [ -z "$$py" ] && command -v pyenv >/dev/null 2>&1; then \
			py=$$(ls -d "$$(pyenv root)"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -n 1); fi; \
		if [ -z "$$py" ]; then echo "== Python $$v: not on this machine, skipped"; continue; fi; \
		echo "== Python $$v: $$py"; \
		$(MAKE) --no-print-directory test-venv PYTHON="$$py" TEST_VENV=$(TEST_VENV)-$$v; \
		case " $(SLOW_PYTHONS) " in *" $$v "*) only="not flood";; *) only="not slow";; esac; \
		case " $(QUICK_PYTHONS) " in *" $$v "*) tests="$(QUICK_TESTS)";; *) tests=;; esac; \
		SIMHASH_NO_BROWSER=1 $(TEST_VENV)-$$v/bin/python -m pytest -q -p no:cacheprovider -m "$$only" $$tests \
			> $(OUT)/pytest-$$v.log 2>&1 & pids="$$pids $$v:$$!"; \
	done; status=0; for job in $$pids; do \
		v=$${job%%:*}; if wait $${job#*:}; then r=passed; else r=FAILED; status=1; fi; \
		echo "== Python $$v: $$r"; tail -n 40 $(OUT)/pytest-$$v.log; done; exit $$status

# The compiled core under AddressSanitizer and UndefinedBehaviorSanitizer, away from the in-tree build and $(VENV):
# a copy of the working tree (the files git tracks or would track) in $(SANITIZE)/src, built there with the
# sanitizers into a fresh virtualenv, then tests/test_core.py, tests/test_core_hostile.py and
# $(SANITIZE_FUZZ_SECONDS) s of tests/fuzz/fuzz_core.py with gcc's libasan preloaded and Python allocating with
# malloc, so that ASan sees Python's objects too.  Leak checks are off: CPython leaves memory behind at exit.  A
# report stops the process (ASan's are also kept in $(SANITIZE)/logs, UBSan's go to stderr, which pytest leaves
# alone) and fails the target; a fuzz input that fails is saved in $(OUT)/fuzz.  The fuzzer runs its random engine:
# atheris' coverage counters do not work beside gcc's libasan.  The dependencies are installed (and the package
# built once without the sanitizers) before the sanitizer flags are set, so no dependency is built with them.
SANITIZE := $(abspath $(OUT))/sanitize
SANITIZE_FUZZ_SECONDS ?= 45
SANITIZE_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -g -O1
SANITIZE_ENV = LD_PRELOAD="$$(gcc -print-file-name=libasan.so)" PYTHONMALLOC=malloc \
	ASAN_OPTIONS=detect_leaks=0:log_path=$(SANITIZE)/logs/asan UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# make fuzz: atheris where it has a wheel for the Python (else tests/fuzz/fuzz_core.py runs its random engine).
FUZZ_TOOLS ?= atheris>=2.3
FUZZ_SECONDS ?= 60

sanitize:
	$(if $(shell command -v gcc),@true,$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc libc6-dev >/dev/null)
	rm -rf $(SANITIZE) $(abspath $(OUT))/fuzz/inflight.html
	mkdir -p $(SANITIZE)/src $(SANITIZE)/logs
	git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null \
		| tar -xf - -C $(SANITIZE)/src
	$(PYTHON) -m venv $(SANITIZE)/venv
	$(SANITIZE)/venv/bin/python -m pip install --quiet --upgrade pip
	$(SANITIZE)/venv/bin/python -m pip install --quiet '$(SANITIZE)/src[test]'
	rm -rf $(SANITIZE)/src/build
	CFLAGS="$(SANITIZE_FLAGS)" LDFLAGS="$(SANITIZE_FLAGS)" \
		$(SANITIZE)/venv/bin/python -m pip install --quiet --no-deps --force-reinstall -e $(SANITIZE)/src
	ldd $(SANITIZE)/src/simhash_filter/model/_core.*.so | grep -q libasan || \
		{ echo "the compiled core was not built with the sanitizers"; exit 1; }
	@cd $(SANITIZE)/src && status=0; \
	echo "== under ASan and UBSan: pytest tests/test_core.py tests/test_core_hostile.py, then the fuzzer"; \
	$(SANITIZE_ENV) $(SANITIZE)/venv/bin/python -m pytest -q -p no:cacheprovider --capture=sys \
		tests/test_core.py tests/test_core_hostile.py || status=1; \
	if [ $$status -eq 0 ]; then \
		$(SANITIZE_ENV) $(SANITIZE)/venv/bin/python tests/fuzz/fuzz_core.py --engine random \
			--seconds $(SANITIZE_FUZZ_SECONDS) --out $(abspath $(OUT))/fuzz || status=1; fi; \
	for log in $(SANITIZE)/logs/*; do [ -e "$$log" ] || continue; echo "== $$log"; cat "$$log"; status=1; done; \
	if [ -e $(abspath $(OUT))/fuzz/inflight.html ]; then status=1; \
		echo "the fuzzer stopped while checking $(abspath $(OUT))/fuzz/inflight.html"; fi; \
	[ $$status -eq 0 ] && echo "sanitize: no sanitizer report" || echo "sanitize: FAILED (reports above)"; \
	exit $$status

# The fuzzer for FUZZ_SECONDS in $(TEST_VENV) (made as make test makes it, if missing), atheris added to it.
fuzz:
	test -x $(TEST_VENV)/bin/python || $(MAKE) --no-print-directory test-venv
	$(TEST_VENV)/bin/python -m pip install --quiet --only-binary=:all: '$(FUZZ_TOOLS)' || \
		echo "no atheris wheel for this Python: the random-mutation engine runs"
	$(TEST_VENV)/bin/python tests/fuzz/fuzz_core.py --seconds $(FUZZ_SECONDS) --out $(OUT)/fuzz

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

# The documentation site, with mkdocs from $(DOCS_VENV) (make test uses its fresh $(TEST_VENV)); strict: a broken
# link or anchor, or a page left out of the nav, fails the build.
DOCS_VENV ?= $(VENV)

docs:
	test -x $(DOCS_VENV)/bin/mkdocs || $(MAKE) --no-print-directory install
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir $(OUT)/site

# Every benchmark script at a tiny size, end to end (benchmarks/quick.py; BENCH_TIER=all adds the slower ones). The
# full-size commands are beside their figures in docs/ and listed in benchmarks/README.md.
BENCH_TIER ?= quick

bench: $(VENV)/.installed
	command -v redis-server >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python -m benchmarks.quick --tier $(BENCH_TIER)

clean:
	rm -rf $(TEST_VENV) $(TEST_VENV)-* $(OUT) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
