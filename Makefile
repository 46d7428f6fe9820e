# Each target bootstraps .venv by itself, so a fresh clone needs nothing else.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench notebooks clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[test]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

demo: $(STAMP)
	@echo "make demo arrives with the translator (issue 3): it will train, evaluate and export a model."
	@echo "Until then, try: make test, make bench, or open notebooks/01_attention_from_scratch.ipynb."

bench: $(STAMP)
	$(BIN)/python benchmarks/train_step.py

notebooks: $(STAMP)
	$(BIN)/python -m pytest tests/test_notebooks.py

clean:
	rm -rf $(VENV) .pytest_cache
