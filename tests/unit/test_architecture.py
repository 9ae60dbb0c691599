"""The shape of the source, read statically (the standard library's `ast`; nothing checked is imported):
no import circle, a domain free of adapters, frameworks and cloud SDKs, features that meet only through
their model and ports, one place that builds record versions, documented services, names that say what
a thing is, and modules and services small enough to read."""

from __future__ import annotations

import ast
import functools
import gc
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE_DIR = ROOT / "layers" / "core"
PACKAGE_DIR = CORE_DIR / "uhp_memories"
DOMAIN_DIR = PACKAGE_DIR / "domain"
DOMAIN = "uhp_memories.domain"

# What a domain module may not import, anywhere in its file (TYPE_CHECKING blocks and function bodies too),
# by why not. A pattern names a module and everything under it; a trailing `*` matches any name it begins.
FORBIDDEN_IN_DOMAIN: dict[str, tuple[str, ...]] = {
    # the project's adapters, entry points and wiring: they depend on the domain, never the other way round
    "an adapter, entry point or the wiring": (
        "uhp_memories.adapters",
        "uhp_memories.api",
        "uhp_memories.local",
        "uhp_memories.mcp",
        "uhp_memories.harness",
        "uhp_memories.admin",
        "uhp_memories.bootstrap",
        "uhp_memories.settings",
    ),
    # adapters of other providers, derivation models, search engines and embedders: the domain owns their ports
    "an adapter of a provider, a model or a search engine": (
        "uhp_memories.providers",
        "uhp_memories.derivation",
        "uhp_memories.search",
    ),
    # the Lambda handlers and the CDK app
    "a handler or the infrastructure": ("functions", "infra"),
    # AWS SDKs, their type stubs, Lambda tooling and their fakes
    "an AWS SDK or AWS tooling": ("boto3", "botocore", "mypy_boto3_*", "aws_lambda_powertools", "moto"),
    # search engines' clients, numerical and ML runtimes, the other memory provider
    "a search, numerical or ML library": ("opensearchpy", "numpy", "onnxruntime", "tokenizers", "mem0"),
    # HTTP clients and the MCP framework
    "an HTTP client or a protocol framework": ("httpx", "httpx2", "requests", "mcp"),
    # storage and validation frameworks (the domain's values are dataclasses)
    "a storage or validation framework": ("sqlite3", "pydantic"),
}

# The modules of a feature other features (and the shared kernel) may import.
FEATURE_FACES = ("model", "ports")
# Beyond those, what a feature publishes for the others: records' chain transitions and its one writer,
# which every writer (derivation, consolidation and its revert) must go through.
PUBLISHED_FACES: dict[str, tuple[str, ...]] = {"records": ("lifecycle", "writer")}

# Where record versions are built: a write, a restore and a consolidation all go through the lifecycle.
RECORD_LIFECYCLE = DOMAIN_DIR / "records" / "lifecycle.py"

# Classes held to the docstring rule of services although their name does not end in Service.
EXTRA_DOCUMENTED_CLASSES: tuple[str, ...] = ()

# Names that said how a thing works or where it sits instead of what it is; each was renamed.
RETIRED_NAMES = ("_BESIDE", "Pace", "UsualPace", "Checked", "settled")
RETIRED_DOMAIN_MODULES = ("context.py",)

MODULE_LINES_MAX = 420  # "about 400"
SERVICE_LINES_MAX = 320  # "about 300"


@dataclass(frozen=True, eq=False)  # one per file: identity is enough (and cheap to hash for the caches)
class Source:
    name: str  # the dotted module name; a package's __init__.py is the package
    path: Path
    text: str
    tree: ast.Module
    is_package: bool
    in_bench: bool  # a bench script: bench/ is on sys.path, so a sibling is imported by its bare name

    @property
    def lines(self) -> int:
        """Physical lines."""
        return len(self.text.splitlines())

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT))


@dataclass(frozen=True)
class Imported:
    line: int
    module: str  # absolute: relative imports resolved, bench siblings named bench.<name>
    name: str | None  # for `from module import name`; None for `import module`


def _module_name(path: Path, base: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(base).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


def _parse(path: Path, base: Path, in_bench: bool = False) -> Source:
    name, is_package = _module_name(path, base)
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text, filename=str(path))
    return Source(name, path, text, tree, is_package, in_bench)


@functools.cache
def _sources() -> tuple[Source, ...]:
    """Every module of the core package, the functions and the bench scripts, one per file, parsed once for
    all the tests (about 1.4 MB of source: the one cost that matters, paid by whichever test runs first)."""
    collecting = gc.isenabled()
    gc.disable()  # else the collector walks the new tree nodes again and again: much of the parse time
    try:
        core = [_parse(path, CORE_DIR) for path in sorted(PACKAGE_DIR.rglob("*.py"))]
        functions = [_parse(path, ROOT) for path in sorted((ROOT / "functions").rglob("*.py"))]
        bench = [_parse(path, ROOT, in_bench=True) for path in sorted((ROOT / "bench").glob("*.py"))]
    finally:
        if collecting:
            gc.enable()
    return (*core, *functions, *bench)


@pytest.fixture(scope="module", autouse=True)
def _parsed_once() -> Iterator[None]:
    """The parse is the module's setup: each test below only reads the trees, kept for the module's tests
    alone. Frozen meanwhile: else the collector's next full sweep walks all their nodes (nearly a second)."""
    _sources()
    gc.freeze()
    yield
    gc.unfreeze()
    for cached in (_sources, _modules, _bench_siblings, _imports, _graph):
        cached.cache_clear()


@functools.cache
def _modules() -> dict[str, Source]:
    """The modules by name. Mid-move, x.py and x/__init__.py may both exist: Python imports the package
    (a directory with an __init__.py is found before a module file of the same name), so the package wins."""
    named: dict[str, Source] = {}
    for source in _sources():
        if source.name not in named or source.is_package:
            named[source.name] = source
    return named


def _domain_sources() -> list[Source]:
    return [s for s in _sources() if s.name == DOMAIN or s.name.startswith(DOMAIN + ".")]


@functools.cache
def _bench_siblings() -> frozenset[str]:
    return frozenset(path.stem for path in (ROOT / "bench").glob("*.py"))


def _absolute(source: Source, module: str | None, level: int) -> str:
    if level == 0:
        assert module is not None
        if source.in_bench and module.split(".")[0] in _bench_siblings():
            return f"bench.{module}"  # `import recall_locomo` in a bench script is bench/recall_locomo.py
        return module
    package = source.name.split(".") if source.is_package else source.name.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _statements(tree: ast.Module) -> Iterator[ast.stmt]:
    """Every statement of a module, at any depth (in functions, classes, if/try/with/for/match blocks).
    Imports and definitions are statements, so the expressions (most of a tree) are never visited."""
    pending: list[ast.stmt] = list(reversed(tree.body))
    while pending:
        node = pending.pop()
        yield node
        inner: list[ast.stmt] = []
        for block in ("body", "orelse", "finalbody"):
            inner.extend(getattr(node, block, ()))
        for handler in getattr(node, "handlers", ()):
            inner.extend(handler.body)
        for case in getattr(node, "cases", ()):
            inner.extend(case.body)
        pending.extend(reversed(inner))


@functools.cache
def _imports(source: Source) -> tuple[Imported, ...]:
    """Every import statement in the file, wherever it stands."""
    found: list[Imported] = []
    for node in _statements(source.tree):
        if isinstance(node, ast.Import):
            found.extend(Imported(node.lineno, _absolute(source, alias.name, 0), None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(source, node.module, node.level)
            found.extend(Imported(node.lineno, module, alias.name) for alias in node.names)
    return tuple(sorted(found, key=lambda i: (i.line, i.module, i.name or "")))


def _named_target(imported: Imported) -> str:
    """The module whose code gives the imported name: `from a.b import c` is a.b.c if that is a module,
    else a.b (c is a name a.b defines)."""
    if imported.name is not None and imported.name != "*":
        submodule = f"{imported.module}.{imported.name}"
        if submodule in _modules():
            return submodule
    return imported.module


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _is_within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    """module -> {imported module: line of its first import}, for the modules of the graph only.

    Importing a.b.c runs a and a.b first, so an import names its target's parent packages too; but not
    the importer's own parent packages. A submodule never starts its own package: the package is already
    running (or ran) before any of its submodules can, so a.b.x importing its sibling a.b.y puts no edge
    a.b.x -> a.b. Were it counted, every package whose __init__.py imports a submodule that imports a
    sibling (search/__init__.py imports search.engine, which imports search.ports) would be a false
    circle. An __init__.py's own edges to its submodules are kept: they close a circle only with an
    explicit import of the package by a module it starts (`from a.b import name` in a.b.x), and that
    circle is real (a.b.x runs while a.b is half done, so the name may not be there yet).
    """
    modules = _modules()
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, source in modules.items():
        edges = graph[name]
        for imported in _imports(source):
            target = _named_target(imported)
            implied = [p for p in _parents(target) if not _is_within(name, p)]
            for module in (target, *implied):
                if module in modules and module != name:
                    edges.setdefault(module, imported.line)
    return graph


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative (no recursion limit on deep chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)

    for root in sorted(graph):
        if root in index:
            continue
        visit(root)
        work = [(root, iter(sorted(graph[root])))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    visit(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _example_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[str]:
    """A shortest circle through the component's first module (breadth first, within the component)."""
    start, members = component[0], set(component)
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for successor in sorted(graph[node]):
            if successor == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            if successor in members and successor not in came_from:
                came_from[successor] = node
                queue.append(successor)
    raise AssertionError(f"no circle through {start} in its own component")  # Tarjan would be wrong


def test_no_import_circle_in_the_core_package_or_the_benchmarks() -> None:
    graph, modules = _graph(), _modules()
    circles = [c for c in _strongly_connected(graph) if len(c) > 1]
    reports = []
    for component in circles:
        cycle = _example_cycle(graph, component)
        steps = [f"    {a} imports {b} ({modules[a].where}:{graph[a][b]})" for a, b in itertools.pairwise(cycle)]
        reports.append(
            f"a circle of {len(component)} modules: {', '.join(component)}\n"
            f"  for one: {' -> '.join(cycle)}\n" + "\n".join(steps)
        )
    assert not circles, f"{len(circles)} import circle(s):\n" + "\n".join(reports)


def _forbidden_because(name: str) -> str | None:
    for reason, patterns in FORBIDDEN_IN_DOMAIN.items():
        for pattern in patterns:
            if pattern.endswith("*") and name.startswith(pattern[:-1]):
                return reason
            if _is_within(name, pattern):
                return reason
    return None


def test_the_domain_imports_no_adapter_no_framework_and_no_cloud_sdk() -> None:
    violations = []
    for source in _domain_sources():
        for imported in _imports(source):
            # `from uhp_memories import settings` imports uhp_memories.settings: judge the full name.
            name = imported.module
            if imported.name is not None and imported.name != "*":
                name = f"{imported.module}.{imported.name}"
            reason = _forbidden_because(name)
            if reason is not None:
                violations.append(f"{source.name} ({source.where}:{imported.line}): {name} ({reason})")
    assert not violations, f"{len(violations)} forbidden import(s) in the domain:\n" + "\n".join(violations)


def _features() -> frozenset[str]:
    return frozenset(
        folder.name
        for folder in DOMAIN_DIR.iterdir()
        if folder.is_dir() and folder.name != "__pycache__" and any(folder.rglob("*.py"))
    )


def _feature_of(module: str, features: frozenset[str]) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and _is_within(module, DOMAIN) and parts[2] in features:
        return parts[2]
    return None


def _spelled(module: str, names: list[str]) -> str:
    return f"from {module} import {', '.join(names)}" if names else f"import {module}"


def test_features_see_each_other_only_through_their_model_and_ports() -> None:
    features = _features()
    crossings: dict[tuple[str, str, str], list[str]] = {}  # (importer and line, imported, feature) -> names
    for source in _domain_sources():
        own = _feature_of(source.name, features)  # None: the shared kernel (modules directly in domain/)
        for imported in _imports(source):
            target = _named_target(imported)
            feature = _feature_of(target, features)
            if feature is None or feature == own:
                continue
            faces_of_feature = (*FEATURE_FACES, *PUBLISHED_FACES.get(feature, ()))
            if any(_is_within(target, f"{DOMAIN}.{feature}.{face}") for face in faces_of_feature):
                continue
            key = (f"{source.name} ({source.where}:{imported.line})", imported.module, feature)
            crossings.setdefault(key, []).extend([] if imported.name is None else [imported.name])
    faces = " and ".join(FEATURE_FACES)
    violations = [
        f"{importer}: {_spelled(module, names)} (of feature {feature!r}, whose {faces} alone are for others)"
        for (importer, module, feature), names in crossings.items()
    ]
    assert not violations, f"{len(violations)} import(s) across features:\n" + "\n".join(violations)


def _names_bound_to(tree: ast.Module, class_name: str) -> set[str]:
    """The names the class goes by in a module: its own and any `import ... as` alias of it."""
    names = {class_name}
    for node in _statements(tree):
        if isinstance(node, ast.ImportFrom):
            names.update(alias.asname for alias in node.names if alias.name == class_name and alias.asname)
    return names


def test_only_the_record_lifecycle_builds_record_versions() -> None:
    builders = []
    for source in _domain_sources():
        if source.path == RECORD_LIFECYCLE or "RecordVersion" not in source.text:
            continue  # no call without the name in the text: an alias is imported by it, an attribute spells it
        names = _names_bound_to(source.tree, "RecordVersion")
        for node in ast.walk(source.tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (isinstance(func, ast.Name) and func.id in names) or (
                isinstance(func, ast.Attribute) and func.attr == "RecordVersion"
            ):
                builders.append(f"{source.where}:{node.lineno}")
    lifecycle = RECORD_LIFECYCLE.relative_to(ROOT)
    assert not builders, (
        f"RecordVersion( outside {lifecycle}"
        + ("" if RECORD_LIFECYCLE.exists() else " (which does not exist yet)")
        + f", {len(builders)} call(s):\n"
        + "\n".join(builders)
    )


def _is_overload(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        (isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
        for d in function.decorator_list
    )


def _undocumented(source: Source, cls: ast.ClassDef) -> Iterator[str]:
    if ast.get_docstring(cls) is None:
        yield f"{source.name}.{cls.name} ({source.where}:{cls.lineno})"
    for node in cls.body:
        # The methods its own body defines; one inherited (from a Protocol or any base) is not looked for.
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if node.name.startswith("_") or _is_overload(node):
            continue
        if ast.get_docstring(node) is None:
            yield f"{source.name}.{cls.name}.{node.name} ({source.where}:{node.lineno})"


def test_every_public_service_class_and_method_says_what_it_is_for() -> None:
    missing = []
    for source in _domain_sources():
        for node in source.tree.body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            if node.name.endswith("Service") or node.name in EXTRA_DOCUMENTED_CLASSES:
                missing.extend(_undocumented(source, node))
    assert not missing, f"{len(missing)} public service class(es)/method(s) without a docstring:\n" + "\n".join(missing)


def _assigned_names(target: ast.expr) -> Iterator[ast.Name]:
    if isinstance(target, ast.Name):
        yield target
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _assigned_names(element)
    elif isinstance(target, ast.Starred):
        yield from _assigned_names(target.value)


def _module_level_names(body: list[ast.stmt]) -> Iterator[tuple[str, int]]:
    """Names a module binds by assignment at its top level (inside a top-level if/try/with too)."""
    for node in body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                yield from ((n.id, n.lineno) for n in _assigned_names(target))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            yield from ((n.id, n.lineno) for n in _assigned_names(node.target))
        elif isinstance(node, ast.TypeAlias) and isinstance(node.name, ast.Name):
            yield node.name.id, node.lineno
        elif isinstance(node, ast.If | ast.Try | ast.TryStar | ast.With):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_level_names(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_level_names(handler.body)


def _defined_names(tree: ast.Module) -> Iterator[tuple[str, int]]:
    for node in _statements(tree):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node.lineno
    yield from _module_level_names(tree.body)


def test_names_say_what_a_thing_is() -> None:
    found = [
        f"{source.where}:{line}: {name}"
        for source in _sources()
        if source.path.is_relative_to(PACKAGE_DIR)
        for name, line in _defined_names(source.tree)
        if name in RETIRED_NAMES
    ]
    found += [
        f"{(DOMAIN_DIR / module).relative_to(ROOT)}: a module named {module}"
        for module in RETIRED_DOMAIN_MODULES
        if (DOMAIN_DIR / module).exists()
    ]
    assert not found, f"{len(found)} retired name(s) still defined:\n" + "\n".join(found)


def test_no_domain_module_is_over_400_lines_and_no_service_class_over_300() -> None:
    offenders = []
    for source in _domain_sources():
        if source.lines > MODULE_LINES_MAX:
            offenders.append(f"{source.where}: {source.lines} lines (module, at most {MODULE_LINES_MAX})")
        for node in _statements(source.tree):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Service") and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > SERVICE_LINES_MAX:
                    offenders.append(
                        f"{source.where}:{node.lineno}: {node.name} {size} lines (class, at most {SERVICE_LINES_MAX})"
                    )
    assert not offenders, f"{len(offenders)} over size:\n" + "\n".join(offenders)
