# Entry points: `make demo` (the main job) and `make test` (everything CI runs).
# Each configuration is built once in its own folder and reused.
JOBS  ?= $(shell nproc)
BUILD ?= build
ASAN  ?= build-asan
TSAN  ?= build-tsan
BENCH ?= build-bench
BENCH_THREADS ?= 2

.PHONY: all deps build demo test bench-ivf test-cpp test-asan test-tsan test-rust test-install test-wheel test-cuda-build test-integrations test-integrations-install bench bench-integrations clean format fuzz fuzz-build

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMNEMO_BUILD_TESTS=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# The mnemo tool on generated data: gen, build, search, eval (examples/demo/run.sh).
demo: build
	sh examples/demo/run.sh $(BUILD)

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# One sanitized configuration (clang, ASan + UBSan) for the sanitized test
# run and the fuzzers: the library, the test programs, and each fuzz harness
# (linked into its replay and its libFuzzer program) are compiled once.
$(ASAN)/CMakeCache.txt:
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMNEMO_BUILD_TESTS=ON \
	  -DMNEMO_BUILD_FUZZ=ON -DMNEMO_CUDA=OFF -DMNEMO_SANITIZE=address,undefined

# Sanitized run of the C++ suites; tests loading the library into another
# runtime (Python) are labelled nosan and run only in the normal build. Only
# the programs the tests run are built (mnemo_test_programs).
test-asan: deps $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j$(JOBS) --target mnemo_test_programs
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN) --output-on-failure -j$(JOBS) -LE "nosan|large"

$(TSAN)/CMakeCache.txt:
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMNEMO_BUILD_TESTS=ON \
	  -DMNEMO_CUDA=OFF -DMNEMO_SANITIZE=thread

# ThreadSanitizer run of the concurrency stress suite (label tsan), CPU only.
# libgomp is not instrumented: under TSan the suite gives its runtime one CPU
# thread and OMP_NUM_THREADS=1 keeps OpenMP regions on the calling thread, so
# every report concerns mnemo's own synchronisation.
test-tsan: deps $(TSAN)/CMakeCache.txt
	cmake --build $(TSAN) -j$(JOBS) --target mnemo_stress_tests
	OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(TSAN) --output-on-failure -L tsan

test-rust: build
	@if [ -x scripts/rust-check.sh ]; then MNEMO_LIB_DIR=$(CURDIR)/$(BUILD)/lib bash scripts/rust-check.sh $(CURDIR)/$(BUILD); fi
	bash scripts/rust-package-check.sh $(CURDIR)/$(BUILD)/cargo-package

# An install prefix used by out-of-tree C consumers (CMake package, pkg-config).
test-install: build
	JOBS=$(JOBS) bash scripts/install-consumer-test.sh $(BUILD)

# Fresh venv, `pip install .`, import with no variable set, a search, uninstall.
# The wheel's CUDA module is left out here (MNEMO_WHEEL_CUDA=AUTO builds it):
# the CUDA code is built and tested by the main build already, and a second
# nvcc build would add minutes on a 2-core CI machine.
MNEMO_WHEEL_CUDA ?= OFF
test-wheel:
	MNEMO_WHEEL_CUDA=$(MNEMO_WHEEL_CUDA) bash scripts/wheel-test.sh

# The CUDA module for one architecture (sm_90), where nvcc is installed, so
# that a compile error in the kernels fails here even on a machine without a
# GPU (whose own build leaves the module out). Its tests run on a GPU machine
# (scripts/device-test.sh). Nothing here runs the module, so ptxas works at
# -O0: every kernel still goes through it (its errors and warnings fail the
# build), and the optimised code is the GPU machine's bundle. Cold, on the
# 2-core machine, no compiler cache, one after the other: 425 s against 525 s
# with ptxas at its default -O3.
CUDA_CHECK ?= build-cuda
CUDA_CHECK_ARCHS ?= 90-real
CUDA_CHECK_FLAGS ?= -Xptxas=-O0
test-cuda-build:
	@if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then \
	  [ -f $(CUDA_CHECK)/CMakeCache.txt ] || cmake -S . -B $(CUDA_CHECK) -DCMAKE_BUILD_TYPE=Release \
	    -DMNEMO_BUILD_TESTS=OFF -DMNEMO_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$(CUDA_CHECK_ARCHS)" \
	    "-DCMAKE_CUDA_FLAGS=$(CUDA_CHECK_FLAGS)"; \
	  cmake --build $(CUDA_CHECK) -j$(JOBS) --target mnemo_cuda; \
	else echo "test-cuda-build: no nvcc, the CUDA module is not compiled"; fi

# The LangChain, LangGraph, LlamaIndex and mem0 adapters, each against its
# framework's own suite or reference store, in a pinned venv of the build
# folder (python/tests/integrations/run.sh; pip on its first run only).
test-integrations: build
	bash python/tests/integrations/run.sh $(BUILD)

# pip install ".[langchain,langgraph,llama-index,mem0]" in a fresh venv, then
# the examples (a wheel build and PyPI: minutes, so outside make test).
test-integrations-install:
	bash python/tests/integrations/fresh_install.sh

test: test-cpp test-asan test-tsan test-rust test-install test-wheel test-cuda-build test-integrations
	@echo "make test: all suites passed"

# The CPU benchmark against FAISS and numpy (one run, one table): results in
# bench/results/cpu-latest.jsonl, the table in docs/benchmarks.md.
bench:
	@bash scripts/install-deps.sh bench
	cmake -S . -B $(BENCH) -DCMAKE_BUILD_TYPE=Release -DMNEMO_CUDA=OFF -DMNEMO_BUILD_BENCH=ON -DMNEMO_PYTHON_EXT=ON
	cmake --build $(BENCH) -j$(JOBS) --target mnemo_cpu_bench mnemo_store_open_bench mnemo_activation_bench _mnemo_ext
	$(BENCH)/bin/mnemo_activation_bench bench/results/activation-cpu.jsonl cpu 100000 101 $(BENCH_THREADS)
	$(BENCH)/bin/mnemo_store_open_bench $(BENCH)
	$(BENCH)/bin/mnemo_cpu_bench $(BENCH)/cpu-run.jsonl $(BENCH_THREADS) 9
	/usr/bin/python3 bench/cpu/report.py $(BENCH)/cpu-run.jsonl bench/results/cpu-latest.jsonl \
	  docs/benchmarks.md docs/cpu-speedup.png "make bench  # BENCH_THREADS=$(BENCH_THREADS)"
	$(MAKE) bench-ivf
	PYTHONPATH=python MNEMO_LIB_DIR=$(BENCH)/lib $(BENCH)/ivf-venv/bin/python bench/cpu/shape_grid.py \
	  --threads $(BENCH_THREADS) --out bench/results/shape-grid-cpu.jsonl
	PYTHONPATH=python MNEMO_LIB_DIR=$(BENCH)/lib $(BENCH)/ivf-venv/bin/python bench/ivf/cpu_ivf_bench.py \
	  --threads $(BENCH_THREADS) --dims 64,128,256 --targets 0.9,0.95 --nprobe 1,2,4,8,16,32,64,128,256 \
	  --out bench/results/ivf-cpu-short.jsonl

# The index benchmark alone: mnemo's inverted-file index against its exact
# scan and faiss-cpu's IndexIVFFlat (pip, pinned, in a venv of the bench
# folder) on 1M x 768 clustered rows; the report also takes the last GPU run.
IVF_BENCH_ARGS ?=
IVF_GPU_RESULTS ?= bench/results/ivf-h100.jsonl
bench-ivf:
	[ -x $(BENCH)/ivf-venv/bin/python ] || { /usr/bin/python3 -m venv $(BENCH)/ivf-venv && \
	  $(BENCH)/ivf-venv/bin/pip install -q faiss-cpu==1.15.1 numpy==2.4.6 matplotlib==3.11.2 scikit-learn==1.7.2; }
	PYTHONPATH=python MNEMO_LIB_DIR=$(BENCH)/lib $(BENCH)/ivf-venv/bin/python bench/ivf/cpu_ivf_bench.py \
	  --threads $(BENCH_THREADS) --out bench/results/ivf-cpu.jsonl $(IVF_BENCH_ARGS)
	PYTHONPATH=python MNEMO_LIB_DIR=$(BENCH)/lib $(BENCH)/ivf-venv/bin/python bench/ivf/cpu_ivf_bench.py \
	  --threads $(BENCH_THREADS) --data patches --nlist 360 --out bench/results/ivf-cpu-patches.jsonl
	$(BENCH)/ivf-venv/bin/python bench/ivf/report.py docs/benchmarks.md docs/ivf-recall.png \
	  cpu bench/results/ivf-cpu.jsonl "make bench-ivf" faiss \
	  cpu-patches bench/results/ivf-cpu-patches.jsonl "make bench-ivf (--data patches)" faiss \
	  $$( [ -f $(IVF_GPU_RESULTS) ] && echo gpu $(IVF_GPU_RESULTS) device-test.sh cuvs )

# The framework adapters' targets (search overhead over Store.search, against
# LangChain's InMemoryVectorStore and FAISS store, adds/s; 100k x 384 f32) in
# the integrations' venv: bench/results/integrations-cpu.jsonl.
bench-integrations: build
	PYTHONPATH=python MNEMO_LIBRARY=$(CURDIR)/$(BUILD)/lib/libmnemo.so \
	  $$(bash python/tests/integrations/venv.sh $(BUILD)) bench/integrations/bench.py \
	  --threads $(BENCH_THREADS) --paths 60 --out bench/results/integrations-cpu.jsonl

# libFuzzer targets (clang, ASan+UBSan) in the sanitized folder; `make fuzz`
# runs each for FUZZ_SECONDS, FUZZ_JOBS at a time (one process a core), and
# prints executions, coverage and findings.
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= $(JOBS)
FUZZ_TARGETS ?= abi_calls precision resample pairs store_file

fuzz-build: deps $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j$(JOBS) --target fuzz_all

fuzz: fuzz-build
	FUZZ_JOBS=$(FUZZ_JOBS) bash fuzz/run.sh $(ASAN)/bin $(ASAN)/fuzz-run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format:
	find core cabi kernels tests fuzz bench examples python/ext -name '*.[ch]' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | xargs -r clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) $(BENCH) $(CUDA_CHECK)
