# xdrl developer loop: `make train` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU-only torch pin; set CONSTRAINTS= to bring your own torch (e.g. CUDA).
CONSTRAINTS ?= constraints-cpu.txt
EXTRAS ?= dev
STAMP := $(VENV)/.xdrl-installed
ARGS ?=
PYTEST_ARGS ?=
# Test processes: most tests wait on a console-script subprocess (torch import ~3 s), so two
# workers on two cores halve the wall time; one file stays on one worker (module fixtures).
TEST_WORKERS ?= 2

.PHONY: install train test test-slow test-learning learning-gate-update test-extra test-all test-slurm lint format docs bench bench-venv check-presets slurm-start slurm-stop clean

install: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[$(EXTRAS)]"
	$(BIN)/python -m pip uninstall --quiet --yes hydra-optuna-sweeper  # replaced by hydra_plugins/xdrl_optuna; its configs shadow ours
	touch $(STAMP)

## Run the default job (PPO on CartPole); pass overrides with ARGS="experiment=cartpole_ppo seed=1".
train: install
	$(BIN)/xdrl-train $(ARGS)

## The test suite (slow training-quality and SLURM tests excluded).
# Bytecode first: where PYTHONDONTWRITEBYTECODE is set (as on these 2-core machines) every
# console-script process of the suite compiled xdrl's ~120 modules from source (0.05 s of CPU each).
test: install
	$(BIN)/python -m compileall -q xdrl hydra_plugins >/dev/null
	$(BIN)/python -m pytest -m "not slow and not slurm and not extra and not learning" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## Training-quality checks (marker slow: a recipe trained to its known optimum); CI runs them too.
test-slow: install
	$(BIN)/python -m pytest -m "slow and not slurm and not extra" $(PYTEST_ARGS)

## The learning gate (marker learning): each preset's short same-seed run against its reference
## curve in benchmarks/learning_gate/references/, two runs at a time; CI runs it after test-slow.
test-learning: install
	$(BIN)/python -m pytest -m learning $(PYTEST_ARGS)

## Rewrite learning-gate references (all, or PRESETS="lunarlander_ppo cartpole_ppo"); review the diff.
PRESETS ?=
learning-gate-update: install
	$(BIN)/python -m benchmarks.learning_gate update $(if $(PRESETS),--preset $(PRESETS))

## Tests of extras make test does not install (marker extra): installs them (ray), then runs them.
EXTRA_TESTS ?= ray
test-extra: install
	$(BIN)/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) -e ".[dev,$(EXTRA_TESTS)]"
	$(BIN)/python -m pytest -m extra $(PYTEST_ARGS)

## SLURM tests against a local single-node cluster (needs root for apt-get); a down cluster fails them.
test-slurm: install
	bash scripts/local-slurm.sh start
	XDRL_REQUIRE_SLURM=1 $(BIN)/python -m pytest -m slurm $(PYTEST_ARGS)

## Everything, including slow training-quality runs.
test-all: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check xdrl hydra_plugins tests scripts benchmarks
	$(BIN)/ruff format --check xdrl hydra_plugins tests scripts benchmarks
	$(BIN)/mypy

## The documentation site (docs/, mkdocs.yml) into site/; warnings (a broken link or reference) are errors.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

format: install
	$(BIN)/ruff format xdrl hydra_plugins tests scripts benchmarks
	$(BIN)/ruff check --fix xdrl hydra_plugins tests scripts benchmarks

## Benchmarks against SB3 (benchmarks/): ARGS="--mode ppo-throughput --seeds 3 --reps 3"; needs `make bench-venv`.
bench: install
	$(BIN)/python -m benchmarks $(ARGS)

## SB3's side of the benchmarks in its own venv, .venv-sb3 (CPU torch from $(CONSTRAINTS)); one command, once.
SB3_VENV ?= .venv-sb3
bench-venv:
	test -x $(SB3_VENV)/bin/python || $(PYTHON) -m venv $(SB3_VENV)
	$(SB3_VENV)/bin/python -m pip install --quiet $(if $(CONSTRAINTS),-c $(CONSTRAINTS)) \
		stable-baselines3 sb3-contrib ale-py opencv-python-headless mujoco imageio box2d pygame packaging

## Every experiment preset for a few seeds against its mark: ARGS="cartpole_dqn --seeds 0".
check-presets: install
	$(BIN)/python scripts/check_presets.py $(ARGS)

slurm-start:
	bash scripts/local-slurm.sh start

slurm-stop:
	bash scripts/local-slurm.sh stop

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .ruff_cache .mypy_cache
