"""No import circles in the package: data flows one way, so no module imports (at the top or inside a function)
a module that imports it back. Modules importing their own package's __init__ are not circles."""

import ast
import pathlib

from conftest import REPO


def _modules() -> dict:
    out = {}
    for package in ("bert_keras", "savedmodels"):
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
                if not any(b.startswith(a + ".") for a in cycle for b in cycle):      # a package and its own
                    found.add(frozenset(cycle))
            elif len(path) < 12:
                walk(path + [nxt])

    for module in graph:
        walk([module])
    return found


def test_no_import_circles():
    found = circles(_modules())
    assert not found, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_the_check_finds_a_circle(tmp_path, monkeypatch):
    for name, text in {"a.py": "from pkg import b\n", "b.py": "def f():\n    from pkg.a import x\n"}.items():
        (tmp_path / name).write_text(text)
    modules = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    assert circles(modules) == {frozenset({"pkg.a", "pkg.b"})}
