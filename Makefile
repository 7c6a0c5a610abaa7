# Pagoda: the two commands are `make run` and `make test` (see README.md).
BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_RUNS ?= 0
JOBS ?= $(shell nproc)
PAGODA := $(BUILD_DIR)/bin/pagoda

.PHONY: all deps configure build test run test-asan fuzz soak image image-test format clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -UPAGODA_TEST_SUBDIRS >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# Serves the default config: the demo model (written by `pagoda make-model` on first run) on
# 127.0.0.1:50051 (gRPC), the OpenAI-compatible HTTP API on 127.0.0.1:8000 and metrics on
# 127.0.0.1:9090 (also on :8000/metrics; README.md says why both). Try:
# build/bin/pagoda generate --server 127.0.0.1:50051 --prompt hi
run: build
	@$(PAGODA) serve --config configs/default.yaml

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASAN=ON \
	  -UPAGODA_TEST_SUBDIRS >/dev/null
	@cmake --build $(ASAN_BUILD_DIR) -j$(JOBS)
	@cd $(ASAN_BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

# libFuzzer targets of every parser of outside input (tests/fuzz/), built with clang + ASan +
# UBSan, each run for FUZZ_SECONDS (or until FUZZ_RUNS executions when set); crash inputs go to
# build-fuzz/fuzz-artifacts/.
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DPAGODA_FUZZ=ON -DPAGODA_TEST_SUBDIRS=fuzz >/dev/null
	@cmake --build $(FUZZ_BUILD_DIR) -j$(JOBS) --target fuzz_targets fuzz_corpus
	@scripts/run_fuzz.py --build-dir $(FUZZ_BUILD_DIR) --seconds $(FUZZ_SECONDS) \
	  --runs $(FUZZ_RUNS)

# 50,000 mixed requests over gRPC and HTTP against a small server (tests/e2e/soak_test.py;
# `make test` runs 10,000 of them).
soak: build
	@/usr/bin/python3 tests/e2e/soak_test.py --pagoda $(PAGODA) --repo . --shared ../shared \
	  --requests 50000 --concurrency 32

# The container image (docker/Dockerfile) built with podman, and a run of it: health, one
# generation, /metrics, non-root, SIGTERM -> exit 0 (scripts/image_test.py).
image: deps
	@scripts/image.sh

image-test: image build
	@scripts/image_test.py --pagoda $(PAGODA) \
	  --model ../shared/models/aidreams260K/aidreams260K-f32.gguf

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR)
