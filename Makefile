# Entry points: `make demo` (the main job) and `make test` (everything CI runs).
# Each configuration is built once in its own folder and reused.
JOBS  ?= $(shell nproc)
BUILD ?= build
ASAN  ?= build-asan

.PHONY: all deps build demo test test-cpp test-asan test-rust clean format fuzz fuzz-build

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DMNEMO_BUILD_TESTS=ON

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

demo: build
	cd $(BUILD) && ./bin/mnemo_demo

test-cpp: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

$(ASAN)/CMakeCache.txt:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMNEMO_BUILD_TESTS=ON \
	  -DMNEMO_CUDA=OFF -DMNEMO_SANITIZE=address,undefined

# Sanitized run of the C++ suites; tests loading the library into another
# runtime (Python) are labelled nosan and run only in the normal build.
test-asan: deps $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN) --output-on-failure -j$(JOBS) -LE nosan

test-rust: build
	@if [ -x scripts/rust-check.sh ]; then MNEMO_LIB_DIR=$(CURDIR)/$(BUILD)/lib bash scripts/rust-check.sh $(CURDIR)/$(BUILD); fi

test: test-cpp test-asan test-rust
	@echo "make test: all suites passed"

# libFuzzer targets (clang, ASan+UBSan) in their own folder; `make fuzz` runs
# each for FUZZ_SECONDS and prints executions, coverage and findings.
FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= abi_calls precision resample pairs store_file

$(FUZZ)/CMakeCache.txt:
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMNEMO_BUILD_TESTS=OFF \
	  -DMNEMO_BUILD_FUZZ=ON -DMNEMO_CUDA=OFF -DMNEMO_SANITIZE=address,undefined

fuzz-build: deps $(FUZZ)/CMakeCache.txt
	cmake --build $(FUZZ) -j$(JOBS) --target fuzz_all

fuzz: fuzz-build
	bash fuzz/run.sh $(FUZZ)/bin $(FUZZ)/run $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format:
	find core cabi kernels tests fuzz bench examples -name '*.[ch]' -o -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' | xargs -r clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN)
