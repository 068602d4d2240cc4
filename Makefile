# Thin wrapper around CMake/CTest. `make run` and `make test` install what
# the build needs (as root, with apt-get), configure, build and go.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
WERROR     ?= 0
DEB_PKGS   := build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libcjson-dev libcmocka-dev curl ca-certificates gnuplot-nox python3-numpy
# what only the tests need (the Python package's, and MPI for the tool's
# data-parallel tests): large, so `make run` and `make install` do not pull
# them in (the tool builds without MPI, as one process)
TEST_PKGS  := python3-torch openmpi-bin libopenmpi-dev
PKGS        = $(DEB_PKGS)
DATA_URL   ?= https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt
DATA_SHA   := 86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed
BIN        := $(BUILD)/boltzattn
LAB        := $(BUILD)/boltzattn-lab
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=Release -DBA_WERROR=$(if $(filter 1,$(WERROR)),ON,OFF)

.PHONY: all deps build install test test-release test-asan run data bench bench-train bench-long bench-approx bench-attention bench-python bench-mpi reproduce plan results-doc samplers-doc approx-doc clean help
PRESET     ?= quick
PREFIX     ?= /usr/local

all: build

help:
	@echo "make run    install build deps (root), build, softmax vs boltzmann on brackets (~1-2 min), compare, draw runs/demo/learning_curves.png"
	@echo "make test   install build deps (root), build, run all tests (also under ASan+UBSan)"
	@echo "make data   download Tiny Shakespeare to data/ and verify its sha256"
	@echo "make reproduce PRESET=quick|full   the paper's comparisons (out/PRESET/report.md; OUT=DIR; MPI=N ranks; the plans: lab/presets.json)"
	@echo "make results-doc   regenerate docs/results.md from results/full (and results/long, results/converged, results/study; no training) and README.md's findings block"
	@echo "make reproduce PRESET=converged   the headline cells on long budgets (hours; resumable)"
	@echo "make reproduce PRESET=samplers   sampled training (DQA, Gibbs, SA) vs exact at T = 8"
	@echo "make reproduce PRESET=long   long contexts: charlm at T = 64, 256, 1024 and length extrapolation"
	@echo "make reproduce PRESET=approx   the approximate engines trained at charlm T = 12, 20 (mf, tap, bp, hybrid)"
	@echo "make reproduce PRESET=recipe   the field's baseline: nanoGPT's Shakespeare-char CPU recipe (softmax), 3 seeds (~15 min)"
	@echo "make reproduce PRESET=study OUT=results/study   the decisive study: RoPE/ALiBi arms at T = 256/1024, extrapolation, brackets (many sessions; resumable)"
	@echo "make samplers-doc  regenerate the training section of docs/samplers.md (no training)"
	@echo "make approx-doc  regenerate docs/approximate.md from results/approx/accuracy.json (no computing)"
	@echo "make plan PRESET=full   print a preset's plan (boltzattn-lab plan: the grids reproduce trains)"
	@echo "make bench  default threads vs --threads 1/2, idle and with a core busy (~10 min)"
	@echo "make bench-train  the training step: 1 and 2 threads against its dense products, and against PyTorch (~5 min)"
	@echo "make bench-long  long contexts: band engine vs softmax, core and training step, the band engine's float window term vs double (~12 min; LONG_ARGS=--quick)"
	@echo "make bench-approx  approximate engines (mf, tap, bp, hybrid) vs softmax and band, attention core (~10 min; APPROX_ARGS=--T 16,64)"
	@echo "make build  configure and build (Release) into $(BUILD)/"
	@echo "make install PREFIX=DIR   build, then install headers, libboltzattn.so/.a, boltzattn.pc, the CMake package (docs/c-api.md) and the Python package (docs/python.md)"
	@echo "make bench-attention  tiled softmax/sigmoid attention vs the dense core, GFLOP/s against sgemm, buffer bytes"
	@echo "make bench-python  the Python op: its overhead over the C op, and against a PyTorch-only exact attention"
	@echo "make bench-mpi     data-parallel training (1 rank x 2 threads vs 2 ranks x 1 thread, T = 16..24) and a grid on 1 and 2 ranks"
	@echo "make clean  remove build directories"

# Installs missing Debian packages when run as root; otherwise prints the
# exact command and stops.
deps:
	@missing=""; \
	if command -v dpkg-query >/dev/null 2>&1; then \
	  for p in $(PKGS); do \
	    dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	  done; \
	fi; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing:$$missing"; \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	  else \
	    echo "missing packages:$$missing"; \
	    echo "install them with:  sudo apt-get install -y$$missing"; \
	    exit 1; \
	  fi; \
	fi

build: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# Headers, libboltzattn.so and .a, boltzattn.pc and the CMake package
# (find_package(boltzattn)) under PREFIX (docs/c-api.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

test: test-release test-asan
test test-release test-asan: PKGS = $(DEB_PKGS) $(TEST_PKGS)

test-release: build
	cmake --build $(BUILD) -j $(JOBS) --target boltzattn_f64
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBA_SANITIZE=ON -DBA_WERROR=$(if $(filter 1,$(WERROR)),ON,OFF)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target boltzattn_f64
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The demo (examples/demo.sh, about a minute of training on 2 cores):
# softmax vs boltzmann on brackets at T = 16 over 8 seeds into runs/demo,
# the comparison with its caveat, and runs/demo/learning_curves.png (the
# target fails without it). SEEDS=N changes the seeds per arm.
# the demo needs the tool alone: building only it keeps a fresh clone's
# `make run` within a few minutes on 2 cores
run: deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target boltzattn-cli
	@sh examples/demo.sh $(BIN) runs/demo
	@test -s runs/demo/learning_curves.png

data: data/tinyshakespeare.txt

data/tinyshakespeare.txt:
	@mkdir -p data
	curl -fL --retry 3 -o $@.part '$(DATA_URL)' || { rm -f $@.part; echo "download failed: $(DATA_URL) (set DATA_URL=... to use a mirror or a file:// path)"; exit 1; }
	@echo "$(DATA_SHA)  $@.part" | sha256sum -c - || { echo "checksum mismatch: $@.part removed"; rm -f $@.part; exit 1; }
	mv $@.part $@

# The thread-settings benchmark of docs/performance.md ("Threads"): the
# default against --threads 1 and 2, idle and with one core kept busy by a
# bounded spinning child (killed after each run), in interleaved rounds.
bench: build
	$(BUILD)/bench_busy --reps 7 --work softmax8,softmax16,boltzmann8,boltzmann16

# The "Long contexts (band engine)" figures of docs/performance.md: the
# attention core (softmax, relative band W = 2, 4, 8, fast engine at small
# T) and the 2-layer charlm training step, one thread, ratios in one run.
# LONG_ARGS=--quick is a smoke test of seconds.
LONG_ARGS ?=
bench-long: build
	$(BUILD)/bench_long --threads 1 --csv $(BUILD)/bench_long.csv $(LONG_ARGS)
	OMP_NUM_THREADS=1 $(BUILD)/bench_band32 --T 1024 --W 8,12 --reps 3

# The tiled attention kernels against the dense core (docs/performance.md,
# "Tiled attention"): time, GFLOP/s against same-shape sgemm, buffer bytes.
bench-attention: build
	$(BUILD)/bench_attention --T 256,1024,4096 --reps 5

# The approximate engines' cost: one head's forward + backward for softmax,
# the band engine (W = 8), mf/tap/bp with full-range and banded (W = 8)
# relative couplings and hybrid (windows 4, 8) at T = 64, 256, 1024, one
# thread, with sweep counts and the issue's goals, in one run. Slow
# configurations are capped (--max-s, --max-est); APPROX_ARGS=--T 16,64 is
# a smoke test of seconds.
APPROX_ARGS ?=
bench-approx: build
	$(BUILD)/bench_approx --threads 1 --csv $(BUILD)/bench_approx.csv $(APPROX_ARGS)

# The training step (docs/performance.md, "Training steps"): bench_train on
# 1 and 2 threads (each step against its dense products alone), then the
# whole step against PyTorch (bench/train_torch.py, if python3-torch is
# installed), the contestants alternating; then the nanoGPT recipe's step
# (softmax, T = 64, 4 layers) against PyTorch eager on 1 and 2 threads
# (bench/recipe_torch.py, on the corpus RECIPE_DATA). CSVs in $(BUILD).
RECIPE_DATA ?= data/tinyshakespeare.txt
bench-train: build
	OMP_NUM_THREADS=1 $(BUILD)/bench_train --csv $(BUILD)/bench_train_1t.csv
	OMP_NUM_THREADS=2 $(BUILD)/bench_train --csv $(BUILD)/bench_train_2t.csv
	@if /usr/bin/python3 -c "import torch" 2>/dev/null; then \
	  /usr/bin/python3 bench/train_torch.py --bench $(BUILD)/bench_train --T 12,16,20 --threads 2 \
	    --csv $(BUILD)/bench_train_torch.csv; \
	  if [ -f "$(RECIPE_DATA)" ]; then \
	    /usr/bin/python3 bench/recipe_torch.py --bin $(BUILD)/boltzattn --data $(RECIPE_DATA) \
	      --threads 1 --csv $(BUILD)/bench_recipe_1t.csv; \
	    /usr/bin/python3 bench/recipe_torch.py --bin $(BUILD)/boltzattn --data $(RECIPE_DATA) \
	      --threads 2 --csv $(BUILD)/bench_recipe_2t.csv; \
	  else echo "bench-train: $(RECIPE_DATA) not found (make data, or RECIPE_DATA=FILE); the recipe step is skipped"; fi; \
	else echo "bench-train: python3-torch is not installed; the PyTorch comparison is skipped"; fi

# The Python binding (docs/performance.md, "Python"): needs python3-torch.
bench-python: build
	BOLTZATTN_LIBRARY=$(BUILD)/libboltzattn.so PYTHONPATH=python /usr/bin/python3 bench/python_op.py

# Data-parallel training and a distributed grid (docs/performance.md,
# "Data-parallel training"): needs MPI and the corpus; bench-mpi.json.
bench-mpi: build
	bash bench/mpi.sh $(BIN)

# The paper's comparisons: PRESET=quick (minutes), full (hours), converged
# (the headline cells to flat curves: many hours), samplers, long (long
# contexts) or approx, into out/PRESET (OUT=DIR to choose; results/PRESET
# holds the committed runs). MPI=N runs every grid on N MPI ranks. The
# plans are lab/presets.json's (boltzattn-lab plan PRESET prints one).
reproduce: build
	bash lab/reproduce.sh $(PRESET) $(BIN) $(LAB)

plan: build
	$(LAB) plan $(PRESET)

# The "Training with sampled statistics" section of docs/samplers.md from
# the committed samplers grid (results/samplers); nothing is trained.
samplers-doc: build
	SUMMARY_ONLY=1 OUT=results/samplers bash lab/reproduce.sh samplers $(BIN) $(LAB)
	$(LAB) report results/samplers --samplers-doc docs/samplers.md

# docs/results.md from the committed full grid (results/full): summaries,
# plots, couplings and the report are regenerated; nothing is trained. Once
# results/long exists, its long-context section follows the full report;
# once results/converged exists, its section follows, and the full report's
# verdicts of those cells come from it. The study's grids get their figures
# (learning curves, extrapolation) redrawn from their records; their
# summaries are the study's own (written as its runs finish).
results-doc: build
	SUMMARY_ONLY=1 OUT=results/full bash lab/reproduce.sh full $(BIN) $(LAB)
	if [ -d results/converged ]; then \
	  SUMMARY_ONLY=1 OUT=results/converged bash lab/reproduce.sh converged $(BIN) $(LAB); fi
	$(LAB) report results/full --preset full --link-prefix ../results/full/ --verdicts results \
	  $$([ -d results/converged ] && echo --converged results/converged) > docs/results.md.tmp
	if [ -d results/long ]; then \
	  SUMMARY_ONLY=1 OUT=results/long bash lab/reproduce.sh long $(BIN) $(LAB) && \
	  $(LAB) report results/long --preset long --section-only --link-prefix ../results/long/ >> docs/results.md.tmp; \
	fi
	if [ -d results/converged ]; then \
	  $(LAB) report results/converged --preset converged --section-only >> docs/results.md.tmp; fi
	if [ -d results/study ]; then \
	  for d in results/study/*/; do [ ! -f "$${d}grid.json" ] || $(BIN) plot "$${d%/}" >/dev/null || \
	    echo "plots skipped for $${d%/}"; done; \
	  $(LAB) report results/study --preset study --section-only --link-prefix ../results/study/ >> docs/results.md.tmp; fi
	mv docs/results.md.tmp docs/results.md
	if grep -q '^<!-- findings:begin -->$$' README.md; then \
	  $(LAB) report --verdicts results --readme README.md; fi

# docs/approximate.md from the committed accuracy study (results/approx,
# written by `boltzattn-lab approx --out results/approx`); nothing is computed.
approx-doc: build
	$(LAB) approx --doc docs/approximate.md --from results/approx

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
