"""The examples run, offline, and say what they should."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import mnemo

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

CASES = {
    "langchain/notes_search.py": ["tea, from 2022 on, kitchen notes only:\n  n2 ", "reopened: ['n3']"],
    "langgraph/agent_memory.py": ["namespaces: [('users', 'ada', 'facts')]",
                                  "filtered on kind: ['f0', 'f1']"],
    "llama_index/filtered_retrieval.py": ["topics include speed or gpu, but not from 2024:\n  "],
    "mem0/scoped_memories.py": ["bo, same question:\n  0.408 I drink black coffee, no sugar\nthe",
                                "all of bo's memories: ['I drink black coffee, no sugar']"],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_runs(name: str, tmp_path: Path) -> None:
    # The package under test, wherever the run found it; the working folder
    # a temporary one, so nothing is written to the tree.
    env = dict(os.environ, MEM0_DIR=str(tmp_path),
               PYTHONPATH=str(Path(mnemo.__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, str(EXAMPLES / name)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    for expected in CASES[name]:
        assert expected in out.stdout, out.stdout
