"""Where things live in the repository, and which function packages it holds.

The app takes a Layout so tests can synthesize from a clean copy of the checkout (as CI does) or
from a folder of made-up function packages and state machines.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

AUTHORIZER = "authorizer"


@dataclass(frozen=True)
class Layout:
    root: Path

    @property
    def functions_dir(self) -> Path:
        return self.root / "functions"

    @property
    def workflows_dir(self) -> Path:
        return self.core_package_dir / "workflows"  # package data of uhp_memories (docs/decisions.md)

    @property
    def core_package_dir(self) -> Path:
        return self.root / "layers" / "core" / "uhp_memories"

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def layer_lock(self) -> Path:
        """The dependencies layer's packages, pinned and hashed (infra/layer_lock.py makes it)."""
        return self.root / "infra" / "layer-requirements.txt"

    @property
    def mem0_layer_lock(self) -> Path:
        """The dependencies layer of the functions that reach mem0's records, on a stage that connects mem0:
        the runtime dependencies and mem0's library, pinned and hashed (infra/layer_lock.py makes it)."""
        return self.root / "infra" / "mem0-layer-requirements.txt"

    def function_packages(self) -> tuple[str, ...]:
        """Every package under functions/ with a handler.py: API functions, the authorizer, workers."""
        return tuple(
            sorted(p.parent.name for p in self.functions_dir.glob("*/handler.py") if not p.parent.name.startswith("_"))
        )

    def runtime_requirements(self) -> tuple[str, ...]:
        """The project's runtime dependencies (pyproject [project].dependencies): exactly what a
        deployed function may import besides the standard library and the core package."""
        data = tomllib.loads(self.pyproject.read_text())
        return tuple(data["project"]["dependencies"])

    def mem0_requirements(self) -> tuple[str, ...]:
        """pyproject's `mem0` extra (mem0ai, pinned): what the mem0 layer adds to the runtime dependencies."""
        data = tomllib.loads(self.pyproject.read_text())
        return tuple(data["project"]["optional-dependencies"]["mem0"])


REPO = Layout(Path(__file__).resolve().parents[1])
