# The README's commands. Each target creates .venv when missing and installs the project into it
# once (the stamp is refreshed only when pyproject.toml changes), then does its job.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= results/demo
# pytest exits 5 when it collects no test; that is not a failure of the suite.
PYTEST = $(BIN)/python -m pytest
# The suite runs on two pytest processes (CI machines have two cores); TEST_WORKERS=0 runs it in one.
# worksteal: an idle process takes tests queued on the other, so a long test last on one does not leave
# the other idle.
TEST_WORKERS ?= 2

.PHONY: demo test test-slow test-browser bench install clean

install: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/privaudit run --out $(OUT)

test: $(STAMP)
	$(PYTEST) -q -n $(TEST_WORKERS) --dist worksteal; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# The slow tests include the Ray executor's, so they install the ray extra.
$(VENV)/.installed-ray: pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,ray]'
	touch $@

test-slow: $(VENV)/.installed-ray
	$(PYTEST) -q -m slow; rc=$$?; if [ $$rc -eq 5 ]; then rc=0; fi; exit $$rc

# The browser check: open the demo report (run the demo when its results are missing, re-render it
# from them otherwise) in headless Chromium, installing Debian's chromium when missing.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

# A demo run made here is checked against the stored copy of its rows (tests/demo_rows.py).
$(OUT)/results.jsonl: | $(STAMP)
	$(BIN)/privaudit run --out $(OUT) --quiet
	$(BIN)/python -m tests.demo_rows --check $(OUT)

test-browser: $(STAMP) $(OUT)/results.jsonl
	command -v chromium >/dev/null || ($(SUDO) apt-get update && $(SUDO) apt-get install -y chromium)
	$(BIN)/privaudit report $(OUT)
	$(BIN)/python -m privaudit.reports.browser_check $(OUT)/report.html --screenshot $(OUT)/report.png

$(VENV)/.installed-bench: pyproject.toml | $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $@

bench: $(VENV)/.installed-bench
	@for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) results .pytest_cache
