"""The package's module graph is acyclic: every import between its modules,
at the top or inside a function or a TYPE_CHECKING block, counted; and each
module imports on its own in a fresh interpreter."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Set

import pytest

import mnemo

PACKAGE = Path(mnemo.__file__).parent
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")


def imports_of(module: str) -> Set[str]:
    """Sibling modules that `module` imports (relative or absolute)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    found: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base.startswith("mnemo"):
                target = base.split(".")[-1] if base and base != "mnemo" else ""
                if target:
                    found.add(target)
                else:  # from . import a, b
                    found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "mnemo" and len(parts) > 1:
                    found.add(parts[1])
    return found & set(MODULES)


def test_module_graph_is_acyclic() -> None:
    graph: Dict[str, Set[str]] = {m: imports_of(m) for m in MODULES}
    assert graph["runtime"] >= {"ops", "store"}  # the checker sees real edges
    state: Dict[str, int] = {}
    path: List[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycle = path[path.index(n):] + [n]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = 2

    for m in MODULES:
        if m not in state:
            visit(m)


def test_modules_import_in_a_fresh_interpreter() -> None:
    # Each module first in its own interpreter would cost a second apiece
    # (the package imports them all anyway); one interpreter importing them
    # in reverse order catches a module that needs a sibling half-initialised.
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PACKAGE.parent) + os.pathsep + env.get("PYTHONPATH", "")
    code = "import importlib\n" + "".join(
        f"importlib.import_module('mnemo.{m}')\n" for m in reversed(MODULES))
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
