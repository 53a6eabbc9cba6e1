"""The developer programs' tests: benchmarks/ and tools/parity/ are folders of scripts, not packages, so their
modules are imported by name with these folders on sys.path (as when a script runs from its own folder)."""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

for folder in (REPO / "benchmarks", REPO / "tools" / "parity", REPO / "tools"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
