"""The framework suites. They run in their own environment (run.sh: the
frameworks pinned in requirements.txt, installed once into a cached venv),
so the package's main suite, whose interpreter has none of them, leaves
this folder to that run: collected only with MNEMO_INTEGRATIONS=1.

Here a skipped test is a failed one: the suites must run whole or fail.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

if os.environ.get("MNEMO_INTEGRATIONS") != "1":
    collect_ignore_glob = ["*.py"]
else:
    # mem0 reads these on import: no telemetry, its files under a temporary
    # folder (removed at exit) instead of ~/.mem0.
    os.environ["MEM0_TELEMETRY"] = "False"
    if "MEM0_DIR" not in os.environ:
        os.environ["MEM0_DIR"] = tempfile.mkdtemp(prefix="mnemo-mem0-")
        atexit.register(shutil.rmtree, os.environ["MEM0_DIR"], True)


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("MNEMO_INTEGRATIONS") == "1" and not os.environ.get("MNEMO_LIBRARY"):
        raise pytest.UsageError("set MNEMO_LIBRARY to the path of the libmnemo.so under test")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped, and the integration suites skip nothing: {report.longrepr}"
