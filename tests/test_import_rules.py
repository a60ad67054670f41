"""The layering rules, read from the source (AST) so a violation fails before anything runs.

What these tests pin: imports go one way, studio -> engine -> device_worker; `device_worker` never imports
`engine` or `studio` (the worker runs where neither is installed, e.g. the ttnn venv); `engine` never
imports `studio` or gradio; and neither `engine` nor `studio` imports torch at module level (the page and
the engine start without it; torch is imported inside the functions that need it). The one exception is
`engine.remote_dit`, the torch drop-ins for upstream-style scripts, which nothing in the engine imports.
`if TYPE_CHECKING:` blocks never run, so they are not module-level imports here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(path: Path, module: str | None = None, *, type_checking: bool = False) -> list[tuple[str, int, bool]]:
    """(imported module, line, module level?) for every import in the file. Module level means run at
    import time: the top of the file, a class body and any if/try/with block there, except
    `if TYPE_CHECKING:`; imports inside functions are not. `type_checking`: include the imports under
    `if TYPE_CHECKING:` too (as not module level)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.body if type_checking else ():
                    visit_stmt(sub, False)
                for sub in child.orelse:
                    visit_stmt(sub, top)
                continue
            visit_stmt(child, top)

    def visit_stmt(child: ast.AST, top: bool) -> None:
        if isinstance(child, ast.Import):
            found.extend((alias.name, child.lineno, top) for alias in child.names)
        elif isinstance(child, ast.ImportFrom):
            if child.level:  # relative: resolve against this file's package
                base = package.split(".")[: len(package.split(".")) - child.level + 1]
                name = ".".join(base + ([child.module] if child.module else []))
            else:
                name = child.module or ""
            found.append((name, child.lineno, top))  # and each name, which may be a module (`from . import x`)
            found.extend((f"{name}.{alias.name}", child.lineno, top) for alias in child.names)
        visit(child, top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), filename=str(path)), True)
    return found


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


TORCH_DROP_INS = ROOT / "engine" / "remote_dit.py"  # a torch module by nature; only scripts import it


def _violations(package: str, banned: tuple[str, ...], *, module_level_only: bool = False,
                allowed: tuple[Path, ...] = ()) -> list[str]:
    out = []
    for path in _files(package):
        if path in allowed:
            continue
        for name, line, top in imports(path):
            if name.split(".")[0] in banned and (top or not module_level_only):
                out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


def test_device_worker_imports_neither_engine_nor_studio() -> None:
    bad = _violations("device_worker", ("engine", "studio"))
    assert not bad, "device_worker runs without the engine and the studio installed:\n" + "\n".join(bad)


def test_engine_imports_neither_studio_nor_gradio() -> None:
    bad = _violations("engine", ("studio", "gradio"))
    assert not bad, "the engine is below the studio and has no UI:\n" + "\n".join(bad)


@pytest.mark.parametrize("package", ["engine", "studio"])
def test_no_module_level_torch_import(package: str) -> None:
    bad = _violations(package, ("torch", "torchaudio"), module_level_only=True, allowed=(TORCH_DROP_INS,))
    assert not bad, (f"{package} must import without torch; import it inside the function that needs it:\n"
                     + "\n".join(bad))


def test_the_rules_see_what_they_should(tmp_path: Path) -> None:
    """The reader itself: lazy, TYPE_CHECKING, class-body, try and relative imports."""
    src = tmp_path / "probe.py"
    src.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\n"
        "try:\n    import gradio\nexcept ImportError:\n    gradio = None\n"
        "from . import worker_requests\n"
        "class A:\n    import numpy\n"
        "def f():\n    import studio\n"
    )
    got = {(name, top) for name, _, top in imports(src, "engine.probe")}
    assert not {name for name, _ in got} & {"torch"}, got
    assert {("gradio", True), ("engine.worker_requests", True), ("numpy", True), ("studio", False)} <= got, got


def test_importing_the_engine_and_the_studio_loads_no_torch() -> None:
    """The same rules at run time, through every transitive import of the entry modules."""
    code = ("import sys\n"
            "import engine, engine.engine, engine.worker_client\n"
            "bad = [m for m in ('torch', 'gradio') if m in sys.modules]\n"
            "import studio\n"
            "bad += ['studio: torch'] if 'torch' in sys.modules else []\n"
            "print(bad)\n"
            "sys.exit(bool(bad))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"importing loaded {run.stdout.strip()} {run.stderr[-2000:]}"


def test_nothing_in_the_engine_or_the_studio_imports_the_torch_drop_ins() -> None:
    """`RemoteDiT` and `RemoteVae` use the worker's client; the engine and the studio never use them (they
    import torch), lazily or not."""
    bad = [f"{path.relative_to(ROOT)}:{line}" for package in ("engine", "studio") for path in _files(package)
           for name, line, _ in imports(path, type_checking=True) if name.startswith("engine.remote_dit")]
    assert not bad, bad


def test_every_file_the_readme_route_names_exists():
    """The README's 'One song' table is the map a reader follows: each path it names must be real."""
    import re

    root = Path(__file__).resolve().parents[1]
    text = (root / "README.md").read_text()
    table = text[text.index("## One song, from the button to the file"):text.index("More: [docs/studio.md]")]
    paths = re.findall(r"`((?:studio|engine|device_worker)/[\w/.]*)`", table)
    assert len(paths) > 30, paths
    missing = [p for p in paths if not (root / p).exists()]
    assert not missing, missing


def _import_graph() -> dict[str, set[str]]:
    """Product module -> the product modules it imports (at any level: lazy and type-checking imports
    included). An import of a package from inside it (`from . import x` reads the package first) is not
    an edge."""
    mods = {_module_name(p): p for package in ("studio", "engine", "device_worker") for p in _files(package)}
    graph: dict[str, set[str]] = {}
    for module, path in mods.items():
        deps = set()
        for name, _, _ in imports(path, module, type_checking=True):
            while name and name not in mods:
                name = name.rpartition(".")[0]
            if name and name != module and not module.startswith(name + "."):
                deps.add(name)
        graph[module] = deps
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_import_circles() -> None:
    """No two product modules import each other, directly or around a loop, even lazily (the store's
    parts once did: `store` <-> `leases`, `integrity`)."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the finder works
    circles = _circles(_import_graph())
    assert not circles, "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)
