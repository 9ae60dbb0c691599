"""The dependencies layer's lock: every package it holds, pinned, with the SHA-256 of the wheel for the
Lambda platform, so `pip install --require-hashes` builds exactly what was locked (a file changed on
the index fails the build instead of shipping).

Made from pyproject.toml's runtime dependencies (`[project].dependencies`, exact pins) by resolving
them for the Lambda platform as the layer installs them (manylinux aarch64, CPython 3.13, wheels only)
and hashing each wheel pip chose. The header names the pins it was made from: tests/infra/
test_packaging.py fails when they and pyproject.toml disagree. After changing a runtime pin:

    .venv/bin/python -m infra.layer_lock        # rewrites infra/layer-requirements.txt (PyPI, ~1 min)
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from infra.layout import REPO, Layout

# The Lambda platform the layer is for (infra/constructs/packaging.py installs with the same flags).
PIP_PLATFORMS = ("manylinux2014_aarch64", "manylinux_2_28_aarch64")
PIP_PYTHON_VERSION = "3.13"
PLATFORM_ARGUMENTS = (
    *(argument for platform in PIP_PLATFORMS for argument in ("--platform", platform)),
    "--implementation",
    "cp",
    "--python-version",
    PIP_PYTHON_VERSION,
    "--only-binary=:all:",
)
MADE_FROM = "# made from: "
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")
_LINE = re.compile(r"^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^\s\\]+)")
_HASH = re.compile(r"--hash=sha256:(?P<digest>[0-9a-f]{64})")


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Lock:
    made_from: tuple[str, ...]  # the runtime pins, as pyproject.toml wrote them
    pins: dict[str, str]  # normalized name -> version, every package of the layer
    hashes: dict[str, tuple[str, ...]]  # normalized name -> sha256 digests

    @classmethod
    def read(cls, path: Path) -> Lock:
        made_from: tuple[str, ...] = ()
        pins: dict[str, str] = {}
        hashes: dict[str, tuple[str, ...]] = {}
        current = None
        for line in path.read_text().splitlines():
            if line.startswith(MADE_FROM):
                made_from = tuple(part.strip() for part in line.removeprefix(MADE_FROM).split(",") if part.strip())
            found = _LINE.match(line)
            if found:
                current = normalized(found["name"])
                pins[current] = found["version"]
                hashes[current] = ()
            for digest in _HASH.finditer(line):
                if current is None:
                    raise ValueError(f"{path}: a hash before any requirement")
                hashes[current] += (digest["digest"],)
        return cls(made_from, pins, hashes)


def disagreements(layout: Layout = REPO) -> list[str]:
    """How the lock and pyproject.toml's runtime pins disagree (none: the lock is current)."""
    pins = layout.runtime_requirements()
    lock = Lock.read(layout.layer_lock)
    found = []
    if lock.made_from != pins:
        found.append(f"the lock was made from {list(lock.made_from)}, pyproject.toml pins {list(pins)}")
    for requirement in pins:
        name, _, version = requirement.partition("==")
        locked = lock.pins.get(normalized(name.split("[")[0]))
        if locked != version:
            found.append(f"{requirement}: the lock has {locked or 'nothing'}")
    found += [f"{name}=={version} has no hash" for name, version in lock.pins.items() if not lock.hashes[name]]
    return found


def render(made_from: tuple[str, ...], wheels: list[Path]) -> str:
    lines = [
        "# The dependencies layer, locked for the Lambda platform (manylinux aarch64, CPython 3.13):",
        "# infra/constructs/packaging.py installs it with pip --require-hashes. Do not edit; after changing",
        "# a runtime dependency in pyproject.toml run: .venv/bin/python -m infra.layer_lock",
        MADE_FROM + ", ".join(made_from),
    ]
    found = {}
    for wheel in wheels:
        match = _WHEEL.match(wheel.name)
        if match is None:
            raise ValueError(f"not a wheel: {wheel.name}")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        found[normalized(match["name"])] = (match["version"], digest)
    for name, (version, digest) in sorted(found.items()):
        lines.append(f"{name}=={version} \\")
        lines.append(f"    --hash=sha256:{digest}")
    return "\n".join(lines) + "\n"


def make(layout: Layout = REPO) -> str:
    """Resolve the runtime pins for the Lambda platform (PyPI) and render the lock."""
    made_from = layout.runtime_requirements()
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(  # noqa: S603 - fixed executable, pinned requirement strings
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest", folder,
             *PLATFORM_ARGUMENTS, *made_from],
            check=True,
        )
        return render(made_from, sorted(Path(folder).glob("*.whl")))


def main() -> None:
    REPO.layer_lock.write_text(make())
    print(f"wrote {REPO.layer_lock.relative_to(REPO.root)}")


if __name__ == "__main__":
    main()
