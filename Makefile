# Each target bootstraps .venv by itself, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test bench notebooks notebooks-full wheels colab clean

# uv installs the pinned set in about a minute where pip takes two (parallel downloads); it is
# itself pinned and lives in the venv. --compile-bytecode, because pip compiles on install and
# uv does not: without it every fresh Python recompiles TensorFlow's sources at import.
UV_VERSION := 0.9.30
INSTALL := $(BIN)/python -m uv pip install -q --compile-bytecode --python $(BIN)/python -c constraints.txt

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(INSTALL) -e ".[test]"
	touch $(STAMP)

# The benchmarks' peers that zoo does not depend on (the `bench` extra).
$(BENCH_STAMP): $(STAMP)
	$(INSTALL) -e ".[test,bench]"
	touch $(BENCH_STAMP)

# On both cores (pytest-xdist; see addopts in pyproject.toml).
test: $(STAMP)
	$(BIN)/python -m pytest

# The main job: train the demo translator for 6 minutes, evaluate it, export it, and translate
# through the exported SavedModel next to the shipped one. About 7 minutes once .venv exists.
DEMO := workdirs/demo
# compare.py imports TensorFlow alone (no zoo, as beside a server); run here with the zoo
# command's quiet start, so that TensorFlow's C++ start-up lines stay off the terminal.
export QUIET_COMPARE := import runpy, sys, zoo_cli; zoo_cli.quiet_native_logs(); \
	sys.argv[0] = "zoo/export/compare.py"; runpy.run_path(sys.argv[0], run_name="__main__")
demo: $(STAMP)
	rm -rf $(DEMO) saved_models/demo-translator
	$(BIN)/zoo train translator --preset demo --xla --workdir $(DEMO) --time-limit 6 --bleu-sample 0
	@echo "The demo translator after 6 minutes of training (its target: at least 15 BLEU on test2016):"
	$(BIN)/zoo evaluate translator --workdir $(DEMO) --splits test2016 --method beam --beam-size 5
	$(BIN)/zoo export translator --workdir $(DEMO) --output saved_models/demo-translator
	$(BIN)/python -c "$$QUIET_COMPARE" saved_models/demo-translator saved_models/translator-en-de

bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/train_step.py
	$(BIN)/python benchmarks/decode.py --sentences 64
	$(BIN)/python benchmarks/ctranslate2.py

# The notebooks at tiny size, nothing written (as the suite runs them); notebooks-full runs each
# at full size and writes its outputs and run time back (an hour or more on 2 cores).
notebooks: $(STAMP)
	$(BIN)/python tools/run_notebooks.py

notebooks-full: $(STAMP)
	$(BIN)/python tools/run_notebooks.py --full --write

# Does every Python that requires-python admits get the whole pinned set (constraints.txt, all
# extras) from binary wheels? pip resolves it for each, installing nothing; needs the registry.
wheels: $(STAMP)
	$(BIN)/python tools/check_wheels.py

# Colab's runtime on this machine: a venv of the versions Colab has preinstalled
# (constraints-colab.txt), the notebooks with zoo installed by their own first cell (pip, from
# this folder, as a Colab user would), what that cell added, then the whole suite. Colab's
# Python is 3.13: COLAB_PYTHON=python3.13 to use it (the default is the one `make test` uses).
COLAB_PYTHON ?= $(PYTHON)
COLAB_VENV := .venv-colab
COLAB_TEST_TOOLS := pytest-xdist execnet hypothesis sortedcontainers
colab:
	rm -rf $(COLAB_VENV)
	$(COLAB_PYTHON) -m venv $(COLAB_VENV)
	$(COLAB_VENV)/bin/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(COLAB_VENV)/bin/python -m uv pip install -q --python $(COLAB_VENV)/bin/python -r constraints-colab.txt
	@# The test tools that Colab lacks, at the versions `make test` uses.
	grep -iE '^($(subst $() ,|,$(COLAB_TEST_TOOLS)))==' constraints.txt > $(COLAB_VENV)/test-tools.txt
	$(COLAB_VENV)/bin/python -m uv pip install -q --python $(COLAB_VENV)/bin/python -r $(COLAB_VENV)/test-tools.txt
	$(COLAB_VENV)/bin/python -m pip freeze | sort > $(COLAB_VENV)/before.txt
	ZOO_SOURCE=$(CURDIR) $(COLAB_VENV)/bin/python -m pytest -n 0 tests/test_notebooks.py
	$(COLAB_VENV)/bin/python -m pip freeze | sort > $(COLAB_VENV)/after.txt
	@echo "What the notebooks' install cell added to Colab's packages, or changed:"
	@comm -13 $(COLAB_VENV)/before.txt $(COLAB_VENV)/after.txt
	$(COLAB_VENV)/bin/python -m pytest

clean:
	rm -rf $(VENV) $(COLAB_VENV) .pytest_cache
