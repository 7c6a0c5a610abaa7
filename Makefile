# Pagoda: the two commands are `make run` and `make test` (see README.md).
BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan
JOBS ?= $(shell nproc)
DEMO_MODEL ?= $(BUILD_DIR)/demo/pagoda-demo-tiny.gguf
PAGODA := $(BUILD_DIR)/bin/pagoda

.PHONY: all deps configure build test run demo-model test-asan format clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j$(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

$(DEMO_MODEL): | build
	@mkdir -p $(dir $(DEMO_MODEL))
	@$(PAGODA) make-model --preset tiny --dtype f32 --output $(DEMO_MODEL)

demo-model: build $(DEMO_MODEL)

# Until the gRPC server exists, `make run` runs `pagoda generate` on the demo model.
run: demo-model
	@echo "[make run] the gRPC server is not built yet: running 'pagoda generate' on the demo model"
	@$(PAGODA) generate --model $(DEMO_MODEL) --prompt "Once upon a time" --max-tokens 48 \
	  --temperature 0.8 --seed 1

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASAN=ON >/dev/null
	@cmake --build $(ASAN_BUILD_DIR) -j$(JOBS)
	@cd $(ASAN_BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

format:
	@git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR)
