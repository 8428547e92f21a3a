# Ember: `make demo` runs every stage on the bundled DLRM-like model; `make test` runs the tests.
# Both create a virtual environment in .venv (Python 3.11+) and install Ember into it first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MODEL  ?= dlrm.dynamo
OUT    := out

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	@mkdir -p $(OUT)
	$(BIN)/ember-import samples/models/$(MODEL).onnx -o $(OUT)/$(MODEL).eir
	$(BIN)/ember-opt -O0 $(OUT)/$(MODEL).eir -o $(OUT)/$(MODEL).dae
	$(BIN)/ember-asm $(OUT)/$(MODEL).dae -o $(OUT)/$(MODEL).bin
	$(BIN)/ember-sim $(OUT)/$(MODEL).bin --inputs samples/models/$(basename $(MODEL)).in.npz \
	    --outputs $(OUT)/$(MODEL).out.npz --stats $(OUT)/$(MODEL).stats.txt \
	    --check samples/models/$(MODEL).out.npz

test: $(STAMP)
	$(BIN)/ruff check ember tests samples
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

clean:
	rm -rf $(OUT) .pytest_cache
