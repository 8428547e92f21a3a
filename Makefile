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
	$(BIN)/ruff check ember tests samples
	$(BIN)/python -m pytest -q

# The optional groups too: tests that need torch (the scripted-TorchScript route, torch references),
# transformers (the Hugging Face models built at test time) and matplotlib (plots). torch==2.13.0 from
# PyPI is the CUDA build on Linux (several GB); for the CPU build run first:
# $(BIN)/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
test-all: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,torch,plot,corpus]'
	$(BIN)/ruff check ember tests samples
	$(BIN)/python -m pytest -q

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

# Mutation testing (docs/testing.md): mutmut over each package in turn, or one with `make mutate PKG=passes`,
# or some of its mutants with MUTANTS='ember.passes.vectorize*'; MUTATE_JOBS workers, niced (cores are shared).
# Each package runs in mutants/<package>/ with a config made from pyproject.toml's [tool.mutmut]: that
# package's mutants, the test files listed for it.  A second run only tries mutants with no result yet.
MUTATE_PKGS := ir passes backend sim frontends
PKG         ?= $(MUTATE_PKGS)
MUTATE_JOBS ?= 1
MUTANTS     ?=
define MUTATE_CONFIG
import json, sys, tomllib
cfg = tomllib.load(open("pyproject.toml", "rb"))["tool"]["mutmut"]
pkg = sys.argv[1]
if pkg not in cfg["packages"]:
    sys.exit(f"make mutate: unknown PKG '{pkg}' (one of: {' '.join(cfg['packages'])})")
cfg |= {"only_mutate": [f"ember/{pkg}/*"], "pytest_add_cli_args_test_selection": cfg["packages"][pkg]}
print("[tool.mutmut]")
print("\n".join(f"{k} = {json.dumps(v)}" for k, v in cfg.items() if k != "packages"))
endef
export MUTATE_CONFIG

mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	@for p in $(PKG); do \
	  d=mutants/$$p; mkdir -p $$d || exit 1; \
	  $(BIN)/python -c "$$MUTATE_CONFIG" $$p > $$d/pyproject.toml || exit 1; \
	  for x in ember tests samples; do ln -sfn ../../$$x $$d/$$x; done; \
	  echo "== mutate $$p"; \
	  start=$$(date +%s); \
	  (cd $$d && nice -n 19 ../../$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $(MUTANTS) | tr '\r' '\n' | tail -4 && \
	   ../../$(BIN)/mutmut results --all true > results.txt; \
	   echo "$$p: $$(grep -c ': killed' results.txt) killed, $$(grep -c ': survived' results.txt) survived," \
	        "$$(grep -c ': no tests' results.txt) not reached by its tests, $$(grep -c ': timeout' results.txt)" \
	        "timed out in $$(( $$(date +%s) - start )) s; survivors: $$d/results.txt") || exit 1; \
	done

clean:
	rm -rf $(OUT) .pytest_cache
