# The two quick-start commands (README): `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,gui]'
	@touch $(STAMP)

## run: the main job on the embedded default (no hardware needed)
run: $(STAMP)
	$(BIN)/aiko run experiments/sidewinding_hil.toml --out runs/sidewinding.mcap --replay sim

## test: the whole suite (what CI runs)
test: $(STAMP)
	QT_QPA_PLATFORM=offscreen MPLBACKEND=Agg OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 $(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) runs .pytest_cache
