"""Lambda packaging without Docker, and what deployed code may import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from infra.catalog import lambda_entries
from infra.layout import REPO, Layout

NO_IMAGE: Any = None  # local bundling never looks at the Docker image
DEV_ONLY = ("moto", "numpy", "onnxruntime", "onnx", "tokenizers", "pytest", "hypothesis", "requests")


def test_the_dependencies_layer_is_the_runtime_dependencies_and_nothing_dev() -> None:
    requirements = REPO.runtime_requirements()
    names = {r.split("==")[0].split("[")[0].lower() for r in requirements}

    assert {"aws-lambda-powertools", "pydantic", "boto3"} <= names
    assert not names & set(DEV_ONLY)
    assert all("==" in r for r in requirements), "the layer is built from exact pins"


def test_pip_bundling_installs_the_locked_wheels_for_lambda_arm64(monkeypatch: pytest.MonkeyPatch, tmp_path: Path
                                                                   ) -> None:
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    from infra.constructs import packaging

    calls: list[list[str]] = []
    monkeypatch.setattr(packaging.subprocess, "run", lambda command, check: calls.append(command))

    assert packaging.PipBundling(REPO.layer_lock).try_bundle(str(tmp_path), image=NO_IMAGE) is True
    command, compiled = calls
    # Then compiled for the runtime, under /opt where Lambda puts a layer (issue 35: no compiling at cold start).
    assert compiled == [sys.executable, *packaging.compile_command(str(tmp_path), "/opt")]
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    for option, value in (
        ("--platform", "manylinux2014_aarch64"),
        ("--python-version", "3.13"),
        ("--implementation", "cp"),
        ("--target", str(tmp_path / "python")),
        ("--requirement", str(REPO.layer_lock)),
    ):
        assert command[command.index(option) + 1] == value
    assert {"--only-binary=:all:", "--require-hashes"} <= set(command)


def test_the_layer_lock_agrees_with_pyprojects_runtime_pins() -> None:
    from infra.layer_lock import disagreements

    assert disagreements(REPO) == [], "run: .venv/bin/python -m infra.layer_lock"


def test_a_pin_changed_in_pyproject_alone_is_a_disagreement(tmp_path: Path) -> None:
    from infra.layer_lock import Lock, disagreements

    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "layer-requirements.txt").write_text(REPO.layer_lock.read_text())
    pinned = next(r for r in REPO.runtime_requirements() if r.startswith("pydantic=="))
    (tmp_path / "pyproject.toml").write_text(REPO.pyproject.read_text().replace(pinned, "pydantic==2.0.0"))
    lock = Lock.read(REPO.layer_lock)

    assert lock.pins["pydantic"] == pinned.split("==")[1]
    assert all(len(digest) == 64 for digests in lock.hashes.values() for digest in digests)
    found = disagreements(Layout(tmp_path))
    assert any("pydantic==2.0.0" in line for line in found), found


def test_the_core_layer_leaves_out_local_only_code(tmp_path: Path) -> None:
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    from infra.constructs.packaging import CORE_EXCLUDED_SUBPACKAGES, CopyBundling

    source = REPO.core_package_dir
    CopyBundling([(source, "python/uhp_memories")], excluded_dirs=CORE_EXCLUDED_SUBPACKAGES).try_bundle(
        str(tmp_path), image=NO_IMAGE
    )
    shipped = tmp_path / "python" / "uhp_memories"

    assert (shipped / "bootstrap.py").is_file()
    assert (shipped / "api" / "routes.py").is_file()
    assert not (shipped / "local").exists()
    assert not (shipped / "admin").exists()
    assert not (shipped / "harness").exists()
    assert not list(shipped.rglob("__pycache__"))


def test_shipped_code_carries_its_bytecode_compiled_for_where_lambda_runs_it(tmp_path: Path) -> None:
    """A read-only /opt and /var/task: a module shipped without its .pyc compiled on every cold start (issue 35).
    Each .pyc is hash-based and never checked against its source (CDK zips every file under one date), names
    the path Lambda runs it from, and is the same bytes when the asset is built again."""
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    import importlib.util
    import marshal

    from infra.constructs import packaging

    def built(into: Path) -> dict[str, bytes]:
        packaging.CopyBundling([(REPO.core_package_dir, "python/uhp_memories")],
                               excluded_dirs=packaging.CORE_EXCLUDED_SUBPACKAGES,
                               runtime_root=packaging.LAYER_ROOT).try_bundle(str(into), image=NO_IMAGE)
        compiled = {}
        for source in (into / "python" / "uhp_memories").rglob("*.py"):
            cached = Path(importlib.util.cache_from_source(str(source)))
            assert cached.is_file(), f"{source.relative_to(into)} is shipped without its bytecode"
            compiled[source.relative_to(into).as_posix()] = cached.read_bytes()
        return compiled

    first, second = built(tmp_path / "a"), built(tmp_path / "b")
    assert "python/uhp_memories/bootstrap.py" in first
    for pyc in first.values():
        assert pyc[:4] == importlib.util.MAGIC_NUMBER
        assert int.from_bytes(pyc[4:8], "little") == 0b01  # hash-based (bit 0), its source never checked (bit 1)
    code = marshal.loads(first["python/uhp_memories/bootstrap.py"][16:])
    assert code.co_filename == "/opt/python/uhp_memories/bootstrap.py"
    assert first == second


def test_function_code_is_the_package_under_functions(tmp_path: Path) -> None:
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    from infra.constructs.packaging import CopyBundling

    CopyBundling(
        [
            (REPO.functions_dir / "__init__.py", "functions/__init__.py"),
            (REPO.functions_dir / "memories", "functions/memories"),
        ]
    ).try_bundle(str(tmp_path), image=NO_IMAGE)

    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.py")) == [
        "functions/__init__.py",
        "functions/memories/__init__.py",
        "functions/memories/handler.py",
    ]


def test_a_new_function_package_must_declare_its_access(tmp_path: Path) -> None:
    from infra.catalog import UndeclaredFunction, access_of

    (tmp_path / "functions" / "newthing").mkdir(parents=True)
    (tmp_path / "functions" / "newthing" / "handler.py").write_text("")
    entries = lambda_entries(Layout(tmp_path))

    assert [e.name for e in entries] == ["newthing"]
    with pytest.raises(UndeclaredFunction, match="newthing"):
        access_of("newthing")


@pytest.mark.slow
def test_deployed_handlers_import_no_dev_only_module() -> None:
    """Import every deployed handler as Lambda would (only the core layer's code and the runtime
    dependencies), with dev-only modules and the local-only subpackages made unimportable."""
    handlers = sorted({f"functions.{e.package}.handler" for e in lambda_entries(REPO)})
    # httpx2 is no longer blocked: the official mcp SDK (a runtime dependency, for POST /mcp) imports it.
    blocked = [*DEV_ONLY, "uhp_memories.local", "uhp_memories.admin", "uhp_memories.harness", "a13n_harness"]
    script = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        BLOCKED = {blocked!r}
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                    raise ImportError(f"deployed code imported {{name}}")
        sys.meta_path.insert(0, Block())
        for handler in {handlers!r}:
            module = importlib.import_module(handler)
        leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        assert not leaked, leaked
    """)
    env: dict[str, Any] = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": str(REPO.root)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO.root, env=env, capture_output=True, text=True, timeout=120
    )

    assert result.returncode == 0, result.stderr[-3000:]


def test_the_mem0_lock_is_the_dependencies_lock_and_mem0_differing_only_where_mem0_requires() -> None:
    from infra.layer_lock import LAMBDA_UNZIPPED_LIMIT_MB, MEM0_OVERRIDES, Lock, digest_of

    core, mem0 = Lock.read(REPO.layer_lock), Lock.read(REPO.mem0_layer_lock)
    (pin,) = REPO.mem0_requirements()
    name, _, version = pin.partition("==")

    assert mem0.pins[name] == version
    assert set(core.pins) < set(mem0.pins)  # every package of the first layer is in the one that replaces it
    assert {n for n in core.pins if core.pins[n] != mem0.pins[n]} <= set(MEM0_OVERRIDES)
    assert mem0.beside == digest_of(REPO.layer_lock)
    assert mem0.unzipped_mb is not None
    assert mem0.unzipped_mb < LAMBDA_UNZIPPED_LIMIT_MB, "a function with the mem0 layer would not deploy"


def test_a_dependencies_lock_changed_alone_makes_the_mem0_lock_stale(tmp_path: Path) -> None:
    from infra.layer_lock import disagreements

    (tmp_path / "infra").mkdir()
    (tmp_path / "pyproject.toml").write_text(REPO.pyproject.read_text())
    (tmp_path / "infra" / "mem0-layer-requirements.txt").write_text(REPO.mem0_layer_lock.read_text())
    (tmp_path / "infra" / "layer-requirements.txt").write_text(REPO.layer_lock.read_text() + "\n")

    assert any("made beside another dependencies lock" in line for line in disagreements(Layout(tmp_path)))


def test_the_mem0_layer_is_built_from_the_mem0_lock_and_only_when_a_function_asks_for_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    from aws_cdk import App, RemovalPolicy, Stack

    from infra.constructs import packaging

    built: list[Path] = []

    def bundled(bundling: Any, output_dir: str, *options: Any, **more: Any) -> bool:
        """What would be installed, recorded (nothing is: this is about which lock feeds which layer)."""
        if isinstance(bundling, packaging.PipBundling):
            built.append(bundling._lock)
        (Path(output_dir) / "python").mkdir()
        return True

    monkeypatch.setattr(packaging.PipBundling, "try_bundle", bundled)
    monkeypatch.setattr(packaging.CopyBundling, "try_bundle", bundled)
    stack = Stack(App(outdir=str(tmp_path)), "Packaged")
    layers = packaging.Packaging(stack, "Packaging", layout=REPO, removal_policy=RemovalPolicy.DESTROY)

    assert layers.layers_for(mem0=False) == [layers.dependencies_layer, layers.core_layer]
    assert built == [REPO.layer_lock]
    with_mem0 = layers.layers_for(mem0=True)
    assert layers.layers_for(mem0=True) == with_mem0 == [layers.mem0_dependencies_layer, layers.core_layer]
    assert built == [REPO.layer_lock, REPO.mem0_layer_lock]


# What the core layer ships: every subpackage of uhp_memories that a deployed function runs, and no other.
# local/ (moto, the embedded engine, MiniLM), admin/ (the operator CLI) and harness/ (the a13n-harness
# client side) stay out by construction: the layer copies the package less those folders.
CORE_LAYER_PACKAGES = ["adapters", "api", "domain", "mcp", "tokens", "workflows"]
LOCAL_ONLY_LIBRARIES = ("numpy", "onnxruntime", "onnx", "tokenizers", "moto")
# The one import of local mode in the layer: bootstrap.build_recall_engine(local=True), never taken in Lambda.
LOCAL_BRANCH = {("bootstrap.py", "uhp_memories.local.embedded"), ("bootstrap.py", "uhp_memories.local.minilm")}


def test_the_core_layer_ships_the_deployed_subpackages_and_no_local_only_module(tmp_path: Path) -> None:
    pytest.importorskip("aws_cdk", reason="the infra extra is not installed")
    import ast

    from infra.constructs import packaging

    bundling = packaging.CopyBundling(
        [(REPO.core_package_dir, "python/uhp_memories")], excluded_dirs=packaging.CORE_EXCLUDED_SUBPACKAGES
    )
    assert bundling.try_bundle(str(tmp_path), image=NO_IMAGE) is True
    shipped = tmp_path / "python" / "uhp_memories"
    assert sorted(p.name for p in shipped.iterdir() if p.is_dir()) == CORE_LAYER_PACKAGES
    leaks = []
    for module in shipped.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            leaks += [f"{module.relative_to(shipped)}: {n}" for n in names if n.split(".")[0] in LOCAL_ONLY_LIBRARIES
                      or (n.startswith(("uhp_memories.local", "uhp_memories.admin", "uhp_memories.harness"))
                          and (module.relative_to(shipped).as_posix(), n) not in LOCAL_BRANCH)]
    assert not leaks, "the core layer imports what only local mode has:\n" + "\n".join(leaks)
