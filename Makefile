# Ember: `make demo` runs every stage on the bundled DLRM-like model; `make test` runs the tests.
# Both create a virtual environment in .venv (Python 3.11+) and install Ember into it first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
MODEL  ?= dlrm.dynamo
OUT    := out

.PHONY: demo test test-all lint bench levels fuzz mutate clean

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
	$(BIN)/ruff check ember tests samples tools
	$(BIN)/python -m pytest -q -n auto --dist loadfile

# The optional groups too: tests that need torch (the scripted-TorchScript route, torch references),
# transformers (the Hugging Face models built at test time), matplotlib (plots) and xdsl (a real MLIR
# parser). torch==2.13.0 from PyPI is the CUDA build on Linux (several GB); for the CPU build run first:
# $(BIN)/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
test-all: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,torch,plot,corpus,mlir]'
	$(BIN)/ruff check ember tests samples tools
	$(BIN)/python -m pytest -q -n auto --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m pytest -q -m slow
	$(BIN)/ember-bench --suite quick
	$(BIN)/ember-bench --suite huge --timing-only --speed

# The differential fuzzer's long run (docs/testing.md): 10,000 generated and mutated programs through the tools
# and both engines; failures are saved, minimized, under fuzz-failures/. `make test` runs a bounded share of it.
FUZZ_RUNS ?= 10000
fuzz: $(STAMP)
	$(BIN)/ember-fuzz --runs $(FUZZ_RUNS) --seed 0 --out fuzz-failures

# Regenerate samples/levels: each sample model at every level (tests check they stay in sync).
LEVEL_MODELS := embedding.ts bag_sum.ts bag_mean.dynamo dlrm.dynamo
levels: $(STAMP)
	@for m in $(LEVEL_MODELS); do \
	  d=samples/levels; \
	  $(BIN)/ember-import samples/models/$$m.onnx -o $$d/$$m.emb.eir && \
	  $(BIN)/ember-opt --pass=lower-emb $$d/$$m.emb.eir -o $$d/$$m.loop.eir && \
	  $(BIN)/ember-opt --pass=decouple $$d/$$m.loop.eir -o $$d/$$m.slc.eir && \
	  $(BIN)/ember-opt --pass=to-dlc $$d/$$m.slc.eir -o $$d/$$m.dlc.eir && \
	  $(BIN)/ember-opt --pass=codegen $$d/$$m.dlc.eir -o $$d/$$m.dae && \
	  for o in 1 2 3; do $(BIN)/ember-opt -O$$o $$d/$$m.emb.eir -o $$d/$$m.O$$o.dae || exit 1; done || exit 1; \
	done

# Mutation testing (docs/testing.md): mutmut over each package with the tests listed for it in pyproject.toml.
# By default a seeded sample of SAMPLE mutants per package (an estimate of the full score, with its 95%
# interval, in bounded time); SAMPLE=all tries every mutant (hours).  PKG=passes: one package;
# MUTANTS='ember.passes.vectorize*': only mutants matching a pattern; MUTATE_JOBS workers, niced.
MUTATE_PKGS := ir passes backend sim frontends
PKG         ?= $(MUTATE_PKGS)
SAMPLE      ?= 200
MUTATE_JOBS ?= 1
MUTANTS     ?=

mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	$(BIN)/python tools/mutate.py $(PKG) --sample $(SAMPLE) --jobs $(MUTATE_JOBS) --mutants '$(MUTANTS)'

clean:
	rm -rf $(OUT) .pytest_cache
