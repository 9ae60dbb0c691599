"""The dependencies layers' locks: every package each holds, pinned, with the SHA-256 of the wheel for the
Lambda platform, so `pip install --require-hashes` builds exactly what was locked (a file changed on
the index fails the build instead of shipping).

infra/layer-requirements.txt, the dependencies layer every function has, is made from pyproject.toml's
runtime dependencies (`[project].dependencies`, exact pins) by resolving them for the Lambda platform as
the layer installs them (manylinux aarch64, CPython 3.13, wheels only) and hashing each wheel pip chose.

infra/mem0-layer-requirements.txt is the dependencies layer of the functions that reach mem0's records on
a stage that connects mem0 (infra/catalog.py `mem0="connect"`), in place of the first: the runtime pins and
pyproject's `mem0` extra (mem0ai) resolved together, every package the first layer also holds kept at the
version locked there (pip constraints), except where mem0 requires another (MEM0_OVERRIDES). Its header
names the first lock's digest, and the size the layer unzips to beside the core package (Lambda allows a
function and its layers 250 MB unzipped; making the lock fails above it).

Each header names the pins it was made from: tests/infra/test_packaging.py fails when they and
pyproject.toml disagree. After changing a runtime pin:

    .venv/bin/python -m infra.layer_lock        # rewrites both locks (PyPI, ~1 min)

After changing only the mem0 extra (the first lock, and every stage's first layer, stay as they are):

    .venv/bin/python -m infra.layer_lock mem0   # rewrites infra/mem0-layer-requirements.txt
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
BESIDE = "# beside the dependencies layer: sha256 "
UNZIPPED = "# unzipped with the core package: "
# Lambda's limit on a function's code and layers, unzipped.
LAMBDA_UNZIPPED_LIMIT_MB = 250
# Where mem0's own requirements exclude the version the dependencies layer locked: the mem0 layer resolves
# these freely. mem0ai 2.2.1 needs protobuf<7; the first layer has 7.x through opensearch-py's
# opensearch-protobufs, which accepts either (protobuf>=3.25.8).
MEM0_OVERRIDES = ("protobuf",)
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
    beside: str = ""  # the mem0 lock: the digest of the dependencies layer's lock it was made beside
    unzipped_mb: float | None = None  # the mem0 lock: the layer and the core package, unzipped

    @classmethod
    def read(cls, path: Path) -> Lock:
        made_from: tuple[str, ...] = ()
        pins: dict[str, str] = {}
        hashes: dict[str, tuple[str, ...]] = {}
        beside, unzipped_mb = "", None
        current = None
        for line in path.read_text().splitlines():
            if line.startswith(MADE_FROM):
                made_from = tuple(part.strip() for part in line.removeprefix(MADE_FROM).split(",") if part.strip())
            if line.startswith(BESIDE):
                beside = line.removeprefix(BESIDE).strip()
            if line.startswith(UNZIPPED):
                unzipped_mb = float(line.removeprefix(UNZIPPED).split()[0])
            found = _LINE.match(line)
            if found:
                current = normalized(found["name"])
                pins[current] = found["version"]
                hashes[current] = ()
            for digest in _HASH.finditer(line):
                if current is None:
                    raise ValueError(f"{path}: a hash before any requirement")
                hashes[current] += (digest["digest"],)
        return cls(made_from, pins, hashes, beside, unzipped_mb)


def digest_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pin_disagreements(lock: Lock, pins: tuple[str, ...], what: str) -> list[str]:
    found = []
    if lock.made_from != pins:
        found.append(f"{what} was made from {list(lock.made_from)}, pyproject.toml pins {list(pins)}")
    for requirement in pins:
        name, _, version = requirement.partition("==")
        locked = lock.pins.get(normalized(name.split("[")[0]))
        if locked != version:
            found.append(f"{what}: {requirement}: the lock has {locked or 'nothing'}")
    found += [f"{what}: {name}=={version} has no hash" for name, version in lock.pins.items() if not lock.hashes[name]]
    return found


def disagreements(layout: Layout = REPO) -> list[str]:
    """How the locks and pyproject.toml's pins disagree (none: both locks are current)."""
    lock = Lock.read(layout.layer_lock)
    found = _pin_disagreements(lock, layout.runtime_requirements(), "the lock")
    if not layout.mem0_layer_lock.is_file():
        return [*found, f"no {layout.mem0_layer_lock.name}"]
    mem0 = Lock.read(layout.mem0_layer_lock)
    found += _pin_disagreements(mem0, mem0_pins(layout), "the mem0 lock")
    if mem0.beside != digest_of(layout.layer_lock):
        found.append("the mem0 lock was made beside another dependencies lock (infra/layer-requirements.txt changed)")
    found += [
        f"the mem0 lock has {name}=={version}, the dependencies lock {lock.pins[name]} (not in MEM0_OVERRIDES)"
        for name, version in mem0.pins.items()
        if name in lock.pins and lock.pins[name] != version and name not in MEM0_OVERRIDES
    ]
    if mem0.unzipped_mb is None or mem0.unzipped_mb >= LAMBDA_UNZIPPED_LIMIT_MB:
        found.append(f"the mem0 layer unzips to {mem0.unzipped_mb} MB with the core package "
                     f"(Lambda's limit: {LAMBDA_UNZIPPED_LIMIT_MB} MB)")
    return found


def mem0_pins(layout: Layout = REPO) -> tuple[str, ...]:
    """What the mem0 lock is made from: the runtime pins, then the mem0 extra."""
    return (*layout.runtime_requirements(), *layout.mem0_requirements())


def render(made_from: tuple[str, ...], wheels: list[Path], *, header: tuple[str, ...] = ()) -> str:
    lines = list(header) or [
        "# The dependencies layer, locked for the Lambda platform (manylinux aarch64, CPython 3.13):",
        "# infra/constructs/packaging.py installs it with pip --require-hashes. Do not edit; after changing",
        "# a runtime dependency in pyproject.toml run: .venv/bin/python -m infra.layer_lock",
    ]
    lines.append(MADE_FROM + ", ".join(made_from))
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


def make_mem0(layout: Layout = REPO) -> str:
    """Resolve the runtime pins and the mem0 extra together for the Lambda platform (PyPI), beside the
    dependencies lock as it is, install what pip chose to measure the layer, and render the mem0 lock."""
    made_from = mem0_pins(layout)
    core = Lock.read(layout.layer_lock)
    with tempfile.TemporaryDirectory() as folder:
        constraints = Path(folder) / "constraints.txt"
        constraints.write_text("".join(
            f"{name}=={version}\n" for name, version in sorted(core.pins.items()) if name not in MEM0_OVERRIDES
        ))
        wheels = Path(folder) / "wheels"
        subprocess.run(  # noqa: S603 - fixed executable, pinned requirement strings
            [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--dest",
             str(wheels), *PLATFORM_ARGUMENTS, "--constraint", str(constraints), *made_from],
            check=True,
        )
        found = sorted(wheels.glob("*.whl"))
        megabytes = _unzipped_mb(found, Path(folder) / "layer") + _tree_mb(layout.core_package_dir)
        if megabytes >= LAMBDA_UNZIPPED_LIMIT_MB:
            raise SystemExit(f"the mem0 layer unzips to {megabytes:.1f} MB with the core package: over Lambda's "
                             f"{LAMBDA_UNZIPPED_LIMIT_MB} MB")
        header = (
            "# The mem0 dependencies layer, locked for the Lambda platform (manylinux aarch64, CPython 3.13): the",
            "# runtime dependencies and pyproject's mem0 extra, for the functions that reach mem0's records on a",
            "# stage that connects mem0 (infra/constructs/packaging.py installs it with pip --require-hashes). Do",
            "# not edit; after changing the mem0 extra run: .venv/bin/python -m infra.layer_lock mem0",
            f"{BESIDE}{digest_of(layout.layer_lock)}",
            f"{UNZIPPED}{megabytes:.1f} MB (Lambda's limit for a function and its layers: "
            f"{LAMBDA_UNZIPPED_LIMIT_MB} MB)",
        )
        return render(made_from, found, header=header)


def _unzipped_mb(wheels: list[Path], target: Path) -> float:
    """What the wheels take once installed as the layer installs them (no bytecode)."""
    subprocess.run(  # noqa: S603 - fixed executable, wheels just downloaded
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
         "--no-deps", *PLATFORM_ARGUMENTS, "--target", str(target), *map(str, wheels)],
        check=True,
    )
    return _tree_mb(target)


def _tree_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts) / 1e6


def main(argv: list[str] | None = None) -> None:
    which = (argv if argv is not None else sys.argv[1:]) or ["all"]
    if which not in (["all"], ["mem0"]):
        raise SystemExit("usage: python -m infra.layer_lock [mem0]")
    if which == ["all"]:
        REPO.layer_lock.write_text(make())
        print(f"wrote {REPO.layer_lock.relative_to(REPO.root)}")
    REPO.mem0_layer_lock.write_text(make_mem0())
    print(f"wrote {REPO.mem0_layer_lock.relative_to(REPO.root)}")


if __name__ == "__main__":
    main()
