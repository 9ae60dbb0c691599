"""Lambda code without Docker: two layers (third-party dependencies; the core package) and one small
asset per function package. On a stage that connects mem0, the functions that reach mem0's records get
another dependencies layer in place of the first: the same dependencies and mem0's library, from its own
lock (infra/mem0-layer-requirements.txt); no other function, and no other stage, has it.

Dependencies are installed by pip for the Lambda platform (manylinux2014 aarch64, CPython 3.13,
wheels only), so a laptop or CI without Docker builds the same layer Lambda runs, from the hash-locked
infra/layer-requirements.txt (infra/layer_lock.py makes it from pyproject.toml's runtime pins):
`pip install --require-hashes` installs exactly the wheels that were locked, or fails. The core layer
leaves out what no deployed function runs: uhp_memories.local (moto), uhp_memories.admin (the
operator CLI) and uhp_memories.harness (the a13n-harness client side).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra import layer_lock
from infra.layout import Layout

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64
# Wheels for either tag: pydantic-core ships only manylinux2014 for aarch64, google-re2 only
# manylinux_2_28; the python3.13 runtime (Amazon Linux 2023, glibc 2.34) runs both.
PIP_PLATFORMS = layer_lock.PIP_PLATFORMS
PIP_PYTHON_VERSION = layer_lock.PIP_PYTHON_VERSION

# Never shipped to Lambda: caches, build metadata, and the core package's local- and client-only subpackages.
IGNORED_NAMES = ("__pycache__", "*.pyc", "*.pyo", "*.egg-info", ".DS_Store")
CORE_EXCLUDED_SUBPACKAGES = ("local", "admin", "harness")

# Where Lambda puts what an asset holds: a layer's files under /opt, a function's under /var/task.
LAYER_ROOT = "/opt"
FUNCTION_ROOT = "/var/task"
# Bytecode is shipped with the code (issue 35). Both roots are read-only, so a module without its .pyc was
# compiled again on every cold start (imports 1.5-3.4x slower: recall's 2.0 s against 1.4 s). The .pyc files
# are `unchecked-hash`: used as they are, never compared with their source (CDK zips every file under one
# fixed date, which a timestamp .pyc would never match), named by the path Lambda runs them from (so a
# traceback shows /opt/python/...), and the same bytes for the same source (a rebuilt asset is unchanged).
# Compiled by the interpreter running the synth, which must be the runtime's minor version (bytecode differs
# between versions); the Makefile runs the CDK app with the project's Python 3.13.
RUNTIME_PYTHON = (3, 13)


def compile_command(output_dir: str, runtime_root: str) -> list[str]:
    """compileall over an asset's output, for Lambda's python3.13 at `runtime_root`."""
    return ["-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
            "-s", output_dir, "-p", runtime_root, output_dir]


def compile_bytecode(output_dir: str, runtime_root: str) -> None:
    if sys.version_info[:2] != RUNTIME_PYTHON:
        raise RuntimeError(
            f"Lambda runs Python {'.'.join(map(str, RUNTIME_PYTHON))}, and this synth runs "
            f"{sys.version_info.major}.{sys.version_info.minor}: its bytecode would not load there "
            "(run the CDK app with the project's .venv: make synth)")
    # A failure must stop the synth: an asset without its bytecode compiles on every cold start.
    subprocess.run([sys.executable, *compile_command(output_dir, runtime_root)], check=True)  # noqa: S603


def docker_compile(runtime_root: str) -> str:
    """The same compilation in the bundling image (used only where local bundling is not)."""
    return " && python " + " ".join(compile_command("/asset-output", runtime_root))


@jsii.implements(ILocalBundling)
class CopyBundling:
    """Copies files and folders into the asset, each to a path inside it."""

    def __init__(self, copies: Sequence[tuple[Path, str]], excluded_dirs: Sequence[str] = (),
                 runtime_root: str | None = None) -> None:
        self._copies = tuple(copies)
        self._ignore = shutil.ignore_patterns(*IGNORED_NAMES, *excluded_dirs)
        self._runtime_root = runtime_root  # set: the copy is compiled for Lambda there (compile_bytecode)

    def try_bundle(self, output_dir: str, *, image: DockerImage, **options: Any) -> bool:
        for source, destination in self._copies:
            target = Path(output_dir) / destination
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, ignore=self._ignore, dirs_exist_ok=True)
            else:
                shutil.copy2(source, target)
        if self._runtime_root is not None:
            compile_bytecode(output_dir, self._runtime_root)
        return True


@jsii.implements(ILocalBundling)
class PipBundling:
    """pip installs the locked requirements into python/ for the Lambda platform, wheels only, each
    checked against its locked hash."""

    def __init__(self, lock: Path) -> None:
        self._lock = lock

    def try_bundle(self, output_dir: str, *, image: DockerImage, **options: Any) -> bool:
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--require-hashes",
            *layer_lock.PLATFORM_ARGUMENTS,
            "--target",
            str(Path(output_dir) / "python"),
            "--requirement",
            str(self._lock),
        ]
        # A failure must stop the synth: falling back to Docker would only fail later, less clearly.
        subprocess.run(command, check=True)  # noqa: S603 - fixed executable, a locked requirements file
        compile_bytecode(output_dir, LAYER_ROOT)
        return True


class Packaging(Construct):
    """The layers every function shares and the code asset of each function package."""

    def __init__(self, scope: Construct, construct_id: str, *, layout: Layout, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self._layout = layout
        self._removal_policy = removal_policy
        self.dependencies_layer = self._build_dependencies_layer(
            "Dependencies", layout.layer_lock,
            "uhp-memories third-party runtime dependencies (infra/layer-requirements.txt)",
        )
        self.core_layer = self._build_core_layer(removal_policy)
        self.layers = [self.dependencies_layer, self.core_layer]
        self.mem0_dependencies_layer: lambda_.LayerVersion | None = None

    def layers_for(self, *, mem0: bool) -> list[lambda_.ILayerVersion]:
        """A function's layers: the mem0 dependencies layer in place of the first for a function that reaches
        mem0's records (made on first use, so a stage without such a function has no such layer)."""
        if not mem0:
            return list(self.layers)
        if self.mem0_dependencies_layer is None:
            self.mem0_dependencies_layer = self._build_dependencies_layer(
                "Mem0Dependencies", self._layout.mem0_layer_lock,
                "uhp-memories runtime dependencies and mem0's library (infra/mem0-layer-requirements.txt)",
            )
        return [self.mem0_dependencies_layer, self.core_layer]

    def _build_dependencies_layer(self, construct_id: str, lock: Path, description: str) -> lambda_.LayerVersion:
        # "bytecode": layers built before their bytecode was shipped are built and deployed once more.
        fingerprint = json.dumps([lock.read_text(), *PIP_PLATFORMS, PIP_PYTHON_VERSION, "bytecode"])
        code = lambda_.Code.from_asset(
            str(lock.parent),
            # The layer is a function of the lock alone: the same lock never redeploys it.
            asset_hash=hashlib.sha256(fingerprint.encode()).hexdigest(),
            bundling=BundlingOptions(
                image=RUNTIME.bundling_image,
                command=[
                    "bash",
                    "-c",
                    "pip install --no-compile --require-hashes -t /asset-output/python "
                    f"--requirement /asset-input/{lock.name}" + docker_compile(LAYER_ROOT),
                ],
                local=PipBundling(lock),
            ),
        )
        return lambda_.LayerVersion(
            self,
            construct_id,
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description=description,
            removal_policy=self._removal_policy,
        )

    def _build_core_layer(self, removal_policy: RemovalPolicy) -> lambda_.LayerVersion:
        source = self._layout.core_package_dir
        code = lambda_.Code.from_asset(
            str(source),
            exclude=[*IGNORED_NAMES, *(f"{name}" for name in CORE_EXCLUDED_SUBPACKAGES)],
            bundling=BundlingOptions(
                image=RUNTIME.bundling_image,
                command=[
                    "bash",
                    "-c",
                    "mkdir -p /asset-output/python/uhp_memories && "
                    "cp -r /asset-input/. /asset-output/python/uhp_memories/" + docker_compile(LAYER_ROOT),
                ],
                local=CopyBundling([(source, "python/uhp_memories")], excluded_dirs=CORE_EXCLUDED_SUBPACKAGES,
                                   runtime_root=LAYER_ROOT),
            ),
        )
        return lambda_.LayerVersion(
            self,
            "Core",
            code=code,
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="uhp-memories core package (domain, ports, AWS adapters, API helpers)",
            removal_policy=removal_policy,
        )

    def function_code(self, name: str) -> lambda_.Code:
        """functions/__init__.py and functions/NAME/, so the handler is functions.NAME.handler."""
        package = self._layout.functions_dir / name
        return lambda_.Code.from_asset(
            str(package),
            exclude=list(IGNORED_NAMES),
            bundling=BundlingOptions(
                image=RUNTIME.bundling_image,
                command=[
                    "bash",
                    "-c",
                    f"mkdir -p /asset-output/functions/{name} && "
                    f"touch /asset-output/functions/__init__.py && "
                    f"cp -r /asset-input/. /asset-output/functions/{name}/" + docker_compile(FUNCTION_ROOT),
                ],
                local=CopyBundling(
                    [
                        (self._layout.functions_dir / "__init__.py", "functions/__init__.py"),
                        (package, f"functions/{name}"),
                    ],
                    runtime_root=FUNCTION_ROOT,
                ),
            ),
        )
