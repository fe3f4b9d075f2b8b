# Survey reading-list benchmark from unarXive 2024. `make help` lists the targets.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OUT ?= work
INPUT ?=
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
SIZE_MB ?= 1000
SCALE ?= 100000,300000,1000000,2300000
# stages rerun at every bench-scale size with every batch size divided by 7 (empty: none)
BATCH_CHECK ?= negatives,split,release
DEMO_OUT ?= demo_out
# pytest-xdist workers of make test / test-fast: one per core, at most 4 (each builds the
# session's synthetic release once); TEST_WORKERS=0 runs the suite in one process
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses 4

.PHONY: help venv demo test test-fast bench bench-eval bench-scale bench-retrieval lint data eval docs mteb

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

# constraints.txt pins every package: a release is byte-identical only with the same
# library versions (Parquet footers name their writer); eval_metadata.json records them.
$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP) ## create .venv and install the package with its dev tools

demo: $(STAMP) ## run the whole pipeline on the bundled demo corpus (synthetic + real samples) into demo_out/
	$(BIN)/python -m pipeline demo --out $(DEMO_OUT)

test: $(STAMP) lint ## ruff (lint and format check), then the test suite (what CI runs)
	$(PYTEST)

test-fast: $(STAMP) lint ## ruff, then the fast suite for the inner loop (pytest -m "not slow": under 90 s; tests/conftest.py says which are slow)
	$(PYTEST) -m "not slow"

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check pipeline tests bench
	$(BIN)/ruff format --check pipeline tests bench

bench: $(STAMP) ## extract benchmark on SIZE_MB of synthetic corpus (default 1000): throughput ratios, peak RSS; the ratios again on as many MB of real records, and their decompression per library; the synthetic files packed as a split tar.gz: decompression per library, extract at 1 and 2 workers; writes bench/results/extract.json
	$(BIN)/python bench/bench_extract.py --size-mb $(SIZE_MB)

bench-scale: $(STAMP) ## reduce stages on SCALE=N[,N...] papers (default 100k..2.3M): time, peak RSS, rows, growth; writes bench/results/scale.json
	$(BIN)/python bench/bench_scale.py --sizes $(SCALE) --batch-check "$(BATCH_CHECK)"

bench-eval: $(STAMP) ## evaluation benchmark: 10,000 surveys x 400 candidates vs pytrec_eval; writes bench/results/eval.json
	$(BIN)/python bench/bench_eval.py

bench-retrieval: $(STAMP) ## retrieval mode's search at the full eval corpus's size (from bench-scale), random 384-d vectors: exact and faiss HNSW time, peak RSS, faiss recall@100 against exact; writes bench/results/retrieval.json
	$(BIN)/python bench/bench_retrieval.py

docs: $(STAMP) ## render the measured figures of bench/results/*.json (what the benchmarks wrote) into docs/
	$(BIN)/python bench/render_docs.py

data: $(STAMP) ## run every stage on INPUT=... (files, dirs, globs, hf://datasets/...) into OUT=work
	@test -n "$(INPUT)" || (echo "usage: make data INPUT=path-or-hf://datasets/... [OUT=work] [WORKERS=N]"; exit 2)
	$(BIN)/python -m pipeline run --input '$(INPUT)' --out $(OUT) --workers $(WORKERS)

# The baselines include lgbm, trained by evaluate itself: the example encoder is the submitted
# system (a --model-file of the same training would be lgbm compared with itself).
eval: $(STAMP) ## evaluate the baselines and an example encoder (--encoder) on the demo release (after make demo), print the report
	@test -d $(DEMO_OUT)/release || (echo "make eval: no demo release in $(DEMO_OUT)/release; run make demo first" >&2; exit 2)
	$(BIN)/python -m pipeline evaluate --release $(DEMO_OUT)/release --out $(DEMO_OUT)/eval --encoder pipeline.evaluate.examples:hashed_words --name hashed-words

MTEB_OUT ?= $(DEMO_OUT)/mteb
mteb: $(STAMP) ## the MTEB upstream bundle of the demo release (after make demo; needs the dense extra): task file, descriptive statistics, MTEB's checks, reference results (random, BM25, all-MiniLM-L6-v2), lite task, PR text, into demo_out/mteb/
	@test -d $(DEMO_OUT)/release || (echo "make mteb: no demo release in $(DEMO_OUT)/release; run make demo first" >&2; exit 2)
	HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 $(BIN)/python -m pipeline.integrations.mteb_bundle --release $(DEMO_OUT)/release --out $(MTEB_OUT)
