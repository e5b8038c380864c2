"""`import mnemo` (and mnemo.integrations) imports no framework, even
where all of them are installed; each adapter imports only its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FRAMEWORKS = ("langchain_core", "langchain", "langchain_community", "langgraph",
              "llama_index", "mem0")


def loaded_after(code: str) -> set:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                         text=True).stdout
    return set(json.loads(out.splitlines()[-1])) & set(FRAMEWORKS)


def test_import_mnemo_imports_no_framework() -> None:
    assert loaded_after("import mnemo") == set()
    assert loaded_after("import mnemo.integrations, mnemo.integrations._common") == set()


@pytest.mark.parametrize("module, frameworks", [
    ("langchain", {"langchain_core"}),
    ("langgraph", {"langgraph", "langchain_core"}),   # langgraph's store imports langchain-core
    ("llama_index", {"llama_index"}),
    ("mem0", {"mem0"}),
])
def test_each_adapter_imports_its_framework_only(module: str, frameworks: set) -> None:
    assert loaded_after(f"import mnemo.integrations.{module}") == frameworks


def test_extras_pin_what_the_suites_run() -> None:
    """pip install "mnemo[langchain]" (and the others) installs the
    versions these suites test: each extra's pin is in requirements.txt."""
    import tomllib
    from pathlib import Path
    here = Path(__file__).resolve().parent
    project = tomllib.loads((here.parents[2] / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pinned = {line.strip().lower() for line in (here / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    for name in ("langchain", "langgraph", "llama-index", "mem0"):
        assert extras[name], name
        for req in extras[name]:
            assert "==" in req and req.lower() in pinned, (name, req)
