# simhash-filter: common tasks.  Needs only python3 (with venv and pip) and network access to PyPI.
PYTHON ?= python3
VENV ?= .venv
TEST_VENV ?= .venv-test
BIN := $(VENV)/bin
OUT ?= out

.PHONY: help install demo demo-dedup test test-venv test-pythons lint docs bench clean

help:
	@echo "make demo     serve a generated site with near-duplicates on 127.0.0.1, crawl it, report"
	@echo "make demo-dedup  the same kind of sample through simhash-filter dedup"
	@echo "make test     fresh virtualenv in $(TEST_VENV), lint, full test suite, documentation site (what CI runs)"
	@echo "make test-pythons  the suite again on Python $(OTHER_PYTHONS), where this machine has them (CI too)"
	@echo "make install  virtualenv in $(VENV) with the package (editable) and its test tools"
	@echo "make lint     ruff check"
	@echo "make docs     build the documentation site (docs/, mkdocs.yml) into $(OUT)/site, strictly"
	@echo "make bench    run the benchmark scripts (benchmarks/bench_*.py)"

# The stamp is refreshed when the dependencies change.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install --quiet --upgrade pip; }
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/python -m crawler.demo

demo-dedup: $(VENV)/.installed
	$(BIN)/python benchmarks/make_sample.py $(OUT)/sample.jsonl
	$(BIN)/simhash-filter dedup $(OUT)/sample.jsonl --output $(OUT)/sample.dedup.jsonl
	$(BIN)/python benchmarks/demo_report.py $(OUT)/sample.jsonl $(OUT)/sample.dedup.jsonl

# The Redis tests start redis-server processes, and the compiled core needs a C compiler: Debian's packages
# (as root, or with sudo) when they are missing.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
SYSTEM_PACKAGES := $(if $(shell command -v redis-server),,redis-server) $(if $(shell command -v cc),,gcc libc6-dev)

test:
	$(if $(strip $(SYSTEM_PACKAGES)),$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null,@true)
	$(MAKE) --no-print-directory test-venv
	$(TEST_VENV)/bin/ruff check .
	$(TEST_VENV)/bin/python -m pytest -q
	$(MAKE) --no-print-directory docs DOCS_VENV=$(TEST_VENV)

# A fresh virtualenv $(TEST_VENV) made by $(PYTHON), with the package and its test tools.
test-venv:
	rm -rf $(TEST_VENV)
	$(PYTHON) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(TEST_VENV)/bin/python -m pip install --quiet -e '.[test]'

# The suite on the oldest and newest Python the project supports, each in a fresh virtualenv: found on
# PATH as pythonX.Y, else among pyenv's versions; a version this machine lacks is skipped with a message.
OTHER_PYTHONS ?= 3.10 3.13

test-pythons:
	@set -e; for v in $(OTHER_PYTHONS); do \
		py=$$(command -v python$$v 2>/dev/null || true); \
		if [ -n "$$py" ] && ! "$$py" -c '' >/dev/null 2>&1; then py=; fi; \
		if [ -z "$$py" ] && command -v pyenv >/dev/null 2>&1; then \
			py=$$(ls -d "$$(pyenv root)"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -n 1); fi; \
		if [ -z "$$py" ]; then echo "== Python $$v: not on this machine, skipped"; continue; fi; \
		echo "== Python $$v: $$py"; \
		$(MAKE) --no-print-directory test-venv PYTHON="$$py" TEST_VENV=$(TEST_VENV)-$$v; \
		$(TEST_VENV)-$$v/bin/python -m pytest -q; \
	done

lint: $(VENV)/.installed
	$(BIN)/ruff check .

# The documentation site, with mkdocs from $(DOCS_VENV) (make test uses its fresh $(TEST_VENV)); strict: a broken
# link or anchor, or a page left out of the nav, fails the build.
DOCS_VENV ?= $(VENV)

docs:
	test -x $(DOCS_VENV)/bin/mkdocs || $(MAKE) --no-print-directory install
	NO_MKDOCS_2_WARNING=1 $(DOCS_VENV)/bin/mkdocs build --strict --site-dir $(OUT)/site

bench: $(VENV)/.installed
	command -v redis-server >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; }
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	@set -e; found=; for script in benchmarks/bench_*.py; do \
		[ -f "$$script" ] || continue; found=1; \
		echo "== $$script"; $(BIN)/python "$$script"; \
	done; [ -n "$$found" ] || echo "no benchmarks/bench_*.py yet"

clean:
	rm -rf $(TEST_VENV) $(TEST_VENV)-* $(OUT) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
