# The two quick-start commands (README): `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-kernels lint typecheck typecheck-baseline format docs lock bench clean mutate vicon-client ur-rtde-examples firmware

# The exact versions CI tested (requirements/lock.txt, with hashes), then the project itself without resolving again.
# pyproject.toml keeps the compatible ranges for installing the package into another environment. `make lock`
# refreshes the lock (a reviewed change: run `make test` and `make test-kernels` on it before committing).
# A .venv that is a symbolic link is another checkout's environment (git worktrees sharing one): it is never
# re-installed from here, which would point its editable install at this checkout; run with PYTHONPATH=$PWD instead.
$(STAMP): pyproject.toml requirements/lock.txt
	@if [ -L $(VENV) ]; then \
	  echo "$(VENV) links to a shared environment: not re-installing it from here (use PYTHONPATH=$$PWD)"; \
	else \
	  set -e; \
	  test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	  echo "installing the locked dependencies into $(VENV) (first run only: about a minute)"; \
	  $(BIN)/python -m pip install --quiet --upgrade pip; \
	  $(BIN)/python -m pip install --require-hashes -r requirements/lock.txt; \
	  $(BIN)/python -m pip install --quiet --no-deps -e .; \
	  OPENBLAS_NUM_THREADS=1 $(BIN)/python -m aiko.warmup; \
	  touch $(STAMP); \
	fi

## run: the main job on the embedded default (no hardware needed)
run: $(STAMP)
	$(BIN)/aiko run experiments/sidewinding_hil.toml --out runs/sidewinding.mcap --replay sim

## vicon-client: the real Vicon SDK client (extra `vicon`) built against the system Boost, wheel cached (docs/vicon.md)
vicon-client: $(STAMP)
	scripts/install_vicon_client.sh $(BIN)/python

## firmware: the joint modules' firmware (firmware_protocol/firmware/, an ATmega128 ELF, MIT) and the AVR simulator
## harness that runs it (firmware_sim/, a separate GPL-3 program on Debian's simavr); the suite runs the protocol,
## safety and HIL tests against it when both are built, and skips them, saying why, where the tools are missing
FIRMWARE_PACKAGES := gcc-avr avr-libc simavr libsimavr-dev libelf-dev pkg-config gcc libc6-dev
firmware:
	@missing=""; \
	command -v avr-gcc >/dev/null 2>&1 || missing="$$missing gcc-avr avr-libc"; \
	command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	test -f /usr/include/simavr/sim_avr.h || missing="$$missing simavr libsimavr-dev"; \
	test -f /usr/include/gelf.h || missing="$$missing libelf-dev"; \
	if [ -n "$$missing" ]; then echo "make firmware needs Debian's packages:$$missing (apt-get install$$missing)"; exit 2; fi
	$(MAKE) --no-print-directory -C firmware_protocol/firmware
	$(MAKE) --no-print-directory -C firmware_sim

## ur-rtde-examples: ur_rtde's own example programs (its PyPI sdist, hash-checked) for the vendor-examples test
## (docs/ur3.md); kept in ~/.cache/aiko, never in the repository
ur-rtde-examples: $(STAMP)
	scripts/fetch_ur_rtde_examples.sh $(BIN)/python

## test: the whole suite (what CI runs)
TEST_ENV := QT_QPA_PLATFORM=offscreen MPLBACKEND=Agg OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
test: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest

## test-kernels: the physics tests (tests/sim) again under other OpenBLAS kernels, so a result that hangs on the
## last bit of a BLAS sum fails here and not on a user's machine (CI runs it; SkylakeX only where the CPU has AVX-512)
KERNELS ?= Haswell Sandybridge $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo SkylakeX)
test-kernels: $(STAMP)
	@for k in $(KERNELS); do \
	  echo "== tests/sim under OPENBLAS_CORETYPE=$$k"; \
	  OPENBLAS_CORETYPE=$$k $(TEST_ENV) $(BIN)/python -m pytest tests/sim || exit 1; \
	done

## lock: re-resolve requirements/lock.txt from pyproject.toml's ranges (newest versions, with hashes)
lock:
	@test -x $(VENV)/bin/uv || $(BIN)/python -m pip install --quiet uv
	rm -f requirements/lock.txt
	$(BIN)/uv pip compile pyproject.toml --extra dev --extra gui --extra sweep --extra ur --extra peers --generate-hashes --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_35 -o requirements/lock.txt

## bench: every speed and timing measurement, one JSON file each in runs/bench/ (takes a few minutes), then ONE table
## of ours vs the peers (MuJoCo, PyElastica, lemkelcp if installed) measured interleaved in the same run
BENCH_ENV := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 QT_QPA_PLATFORM=offscreen
bench: $(STAMP)
	@mkdir -p runs/bench
	$(BENCH_ENV) $(BIN)/python benchmarks/sim_speed.py --scenario sidewinding --duration 15 --json > runs/bench/sim_speed_sidewinding.json
	$(BENCH_ENV) $(BIN)/python benchmarks/sim_speed.py --scenario lateral_undulation --duration 15 --json > runs/bench/sim_speed_lateral_undulation.json
	$(BENCH_ENV) $(BIN)/python benchmarks/sim_speed.py --scenario obstacle_aided --duration 30 --json > runs/bench/sim_speed_obstacle_aided.json
	$(BENCH_ENV) $(BIN)/python benchmarks/can_stream.py --transport virtual --rate 10 --duration 60 --json > runs/bench/can_stream_virtual_10hz.json
	$(BENCH_ENV) $(BIN)/python benchmarks/can_stream.py --transport slcan --rate 100 --duration 60 --json > runs/bench/can_stream_slcan_100hz.json
	$(BENCH_ENV) $(BIN)/python benchmarks/hil_speed.py --plant snake3d --duration 5 --warmup --json > runs/bench/hil_speed_snake3d.json
	$(BENCH_ENV) $(BIN)/python benchmarks/chain_speed.py --bodies 20 --json > runs/bench/chain_speed.json
	$(BENCH_ENV) $(BIN)/python benchmarks/rhex_controller.py --json > runs/bench/rhex_controller.json
	$(BENCH_ENV) $(BIN)/python benchmarks/cosserat_speed.py --scenario rod_on_plane --sections 20 --dt 0.005 --json > runs/bench/cosserat_speed.json
	$(BENCH_ENV) $(BIN)/python benchmarks/log_write.py > runs/bench/log_write.json
	$(BENCH_ENV) $(BIN)/python benchmarks/peers/rod_accuracy.py --check-references --json > runs/bench/rod_accuracy.json
	@for f in runs/bench/*.json; do echo "$$f: $$(head -c 300 $$f)"; done
	$(BENCH_ENV) $(BIN)/python benchmarks/peers/compare.py --json runs/bench/peers.json

## mutate: mutation testing (mutmut) of the codec, the gait, the emulator's safety logic and the LCP solver, each
## module against its own tests only; on demand, never in CI (docs/testing.md). One module: make mutate MUTATE=gait
EMULATOR := firmware_protocol.emulator.modules.xǁEmulatedModulesǁ
MUTATE_codec    := tests/firmware_protocol/test_codec.py    firmware_protocol.codec.*
MUTATE_gait     := tests/aiko/robots/aiko/test_gait.py                  aiko.robots.aiko.gait.*
MUTATE_emulator := tests/firmware_protocol/test_emulator.py $(EMULATOR)_run_tick* $(EMULATOR)handle_frame* \
	$(EMULATOR)_decode* $(EMULATOR)_on_estop* $(EMULATOR)_on_command* $(EMULATOR)_apply_command* \
	$(EMULATOR)_on_reference* $(EMULATOR)_on_parameter* $(EMULATOR)_write_parameter* $(EMULATOR)status_flags*
MUTATE_lcp      := tests/sim/test_lcp.py                    sim.lcp.*
MUTATE ?= codec gait emulator lcp
mutate: $(STAMP)
	$(BIN)/python -m pip install --quiet 'mutmut>=3.8,<4'  # only the tool: the locked packages stay as they are
	@set -f; for m in $(MUTATE); do \
		case $$m in codec) set -- $(MUTATE_codec);; gait) set -- $(MUTATE_gait);; \
			emulator) set -- $(MUTATE_emulator);; lcp) set -- $(MUTATE_lcp);; *) echo "unknown module $$m"; exit 2;; esac; \
		tests=$$1; shift; echo "== mutate $$m against $$tests"; \
		rm -f mutants/mutmut-stats.json; \
		AIKO_MUTATION_TESTS=$$tests $(BENCH_ENV) MPLBACKEND=Agg $(BIN)/mutmut run --max-children 1 "$$@" || exit 1; \
	done
	$(BIN)/mutmut results

## lint: ruff (checks and the format), the import contracts, the import graph's circles, and the types (mypy against
## its baseline)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python scripts/import_cycles.py
	$(BIN)/python typecheck/check.py

## typecheck: mypy (strict on aiko/core, log, devices, robots) against typecheck/baseline.txt, which may only shrink
typecheck: $(STAMP)
	$(BIN)/python typecheck/check.py

## typecheck-baseline: rewrite typecheck/baseline.txt from the code as it is (after fixing errors, or after a merge)
typecheck-baseline: $(STAMP)
	$(BIN)/python typecheck/check.py --write

## format: ruff's formatter over the tree (the pre-commit hook applies it to the files of each commit)
format: $(STAMP)
	$(BIN)/ruff format .

## docs: the documentation site (docs/ + the API reference from the docstrings) into site/; --strict: a broken link,
## page or reference fails it
docs: $(STAMP)
	$(BIN)/python -m mkdocs build --strict

clean:
	rm -rf $(VENV) runs .pytest_cache
