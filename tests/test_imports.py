"""Data flows one way. No import circles: no module imports (at the top or inside a function) a module that
imports it back (modules importing their own package's __init__ are not circles). And the layers hold:
bert_keras (the library) < savedmodels (serving, built on it) < bert_keras_cli (the command line and the demo).
And importing the library, then using it, prints nothing to stderr."""

import ast
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO


def _modules() -> dict:
    out = {}
    for package in ("bert_keras", "savedmodels", "bert_keras_cli"):
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            out[name] = path
    return out


def _imports(path: pathlib.Path, modules: dict) -> set:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                      for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found & set(modules)


def circles(modules: dict) -> set:
    graph = {m: _imports(p, modules) for m, p in modules.items()}
    found = set()

    def walk(path):
        for nxt in graph[path[-1]]:
            if nxt in path:
                cycle = path[path.index(nxt):]
                if not any(all(b == a or b.startswith(a + ".") for b in cycle) for a in cycle):  # a package and its own
                    found.add(frozenset(cycle))
            elif len(path) < 12:
                walk(path + [nxt])

    for module in graph:
        walk([module])
    return found


def test_no_import_circles():
    found = circles(_modules())
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_a_circle_through_a_package_is_found(tmp_path):
    """loading -> tasks (the package) -> tasks.masked_lm -> loading is a circle, though two of its modules are a
    package and its own: only a circle wholly inside one package is not."""
    texts = {"loading.py": "def f():\n    import pkg.tasks\n", "tasks.py": "from pkg.tasks import masked_lm\n",
             "masked_lm.py": "def g():\n    from pkg.loading import f\n"}
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    modules = {"pkg.loading": tmp_path / "loading.py", "pkg.tasks": tmp_path / "tasks.py",
               "pkg.tasks.masked_lm": tmp_path / "masked_lm.py"}
    assert circles(modules) == {frozenset(modules)}


def test_loading_imports_no_task_module():
    """The arrow runs tasks -> loading (task models from a source build on backbones), never back."""
    modules = _modules()
    assert not {m for m in _imports(modules["bert_keras.loading"], modules) if m.startswith("bert_keras.tasks")}


def test_the_check_finds_a_circle(tmp_path, monkeypatch):
    for name, text in {"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg.a import x\n"}.items():
        (tmp_path / name).write_text(text)
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    assert circles(modules) == {frozenset({"pkg.a", "pkg.b"})}


LAYERS = ["bert_keras", "savedmodels", "bert_keras_cli"]          # each may import only those before it


def layer_violations(modules: dict) -> list:
    out = []
    for name, path in modules.items():
        own = LAYERS.index(name.split(".")[0])
        for target in sorted(_imports(path, modules)):
            if LAYERS.index(target.split(".")[0]) > own:
                out.append(f"{name} imports {target}")
    return out


def test_the_layers_import_downward_only():
    assert layer_violations(_modules()) == []


def test_the_layer_check_finds_an_upward_import(tmp_path):
    (tmp_path / "cli.py").write_text("def main():\n    from savedmodels.export import export_for_serving\n")
    (tmp_path / "export.py").write_text("def export_for_serving():\n    pass\n")
    modules = {"bert_keras.cli": tmp_path / "cli.py", "savedmodels.export": tmp_path / "export.py"}
    assert layer_violations(modules) == ["bert_keras.cli imports savedmodels.export"]


def test_importing_the_library_loads_no_serving_or_command_line_module():
    code = ("import sys, bert_keras, keras; "
            "print([m for m in sys.modules if m.split('.')[0] in ('savedmodels', 'bert_keras_cli')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# Optional imports that Keras, TensorFlow or our code try (`try: import jax`): a clean venv lacks them.
_OPTIONAL_IMPORTS = {"jax", "jaxlib", "torch", "flax", "orbax", "grain", "transformers", "tf_keras",
                     "tensorflow_hub", "openvino", "tensorflow_tpu", "libtpu", "ai_edge_litert"}


def test_no_test_folder_shadows_a_package():
    """tests/ has no __init__.py, so pytest puts tests/ on sys.path; a folder there named like a package becomes a
    namespace package that `import <name>` finds wherever the real one is not installed. A tests/jax folder made
    Keras' `try: import jax` succeed in the default venv (no jax) and broke `import keras` in every test."""
    import importlib.metadata

    ours = {"bert_keras", "savedmodels", "bert_keras_cli", "tools", "benchmarks"}
    taken = (set(importlib.metadata.packages_distributions()) | _OPTIONAL_IMPORTS) - ours
    folders = {p.name for p in (REPO / "tests").iterdir() if p.is_dir() and not (p / "__init__.py").exists()}
    assert not folders & taken, f"rename these test folders: {sorted(folders & taken)}"


# What a library user runs first: the import, then a first op and a model (TensorFlow looks for devices once).
FIRST_USE = """
import sys
import bert_keras
print("imported", file=sys.stderr, flush=True)
import numpy as np
from bert_keras import PRESETS, BertEncoder
ids = np.ones((1, 4), "int32")
BertEncoder(PRESETS["bert_tiny"])({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids})
"""


@pytest.mark.integration                 # fresh processes: TensorFlow reads its log level once a process
def test_the_library_prints_nothing_to_stderr_unless_the_user_asks_tensorflow_to():
    """`import bert_keras` and a first model call write nothing to stderr in a user's environment (no
    TF_CPP_MIN_LOG_LEVEL); on a machine without a GPU driver TensorFlow's first look for devices logged "failed
    call to cuInit" there (an ERROR line, which the library's default level 1 shows). A user's own level is
    theirs: at 0 the same process shows that line and TensorFlow's start-up notes (oneDNN, cpu_feature_guard)."""
    from tensorflow_log_lines import command_env, tensorflow_log_lines
    running = {level: subprocess.Popen([sys.executable, "-c", FIRST_USE], cwd=REPO, env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for level, env in {None: command_env(), "0": command_env(TF_CPP_MIN_LOG_LEVEL="0")}.items()}
    stderr = {}
    for level, process in running.items():         # (side by side)
        _, stderr[level] = process.communicate(timeout=600)
        assert process.returncode == 0, stderr[level][-3000:]
    assert stderr[None] == "imported\n", stderr[None]
    assert tensorflow_log_lines(stderr["0"]), "TensorFlow logs nothing at level 0: update FIRST_USE\n" + stderr["0"]
