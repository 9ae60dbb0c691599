"""A real OpenSearch 2.19 node for the tests: the engine a deployed stage recalls with, run on this machine.

`url()` is the cluster of this test process: OPENSEARCH_URL when it is set, otherwise a node started here
once (on first use) and stopped at the end of the session (tests/conftest.py), at interpreter exit, or,
should this process be killed, by the kernel (the node is started with a parent-death signal).

The node is assembled from Maven Central with `mvn` into .opensearch/ (git-ignored, kept between runs):

- the distribution `org.opensearch.distribution.integ-test-zip:opensearch` (a runnable node whose
  modules/ holds only transport-netty4);
- the modules recall needs, published as jars and laid out here as module folders (the jar, its runtime
  dependencies resolved by mvn from its pom, a plugin descriptor, and the security policy from
  OpenSearch 2.19's sources where the module has one): lang-painless (the `cosineSimilarity` script, and
  k-NN extends it), analysis-common (the `english` analyzer), reindex (`_delete_by_query`);
- the k-NN plugin `org.opensearch.plugin:opensearch-knn`, installed with the distribution's own
  `bin/opensearch-plugin`. Its descriptor names OpenSearch 2.19.1 exactly, hence that version: the
  deployed domain's 2.19, with the `lucene` k-NN engine of queries.index_body (pure Java, no native
  library).

A node refuses to run as root, so as root (CI) it runs as `nobody`, its config, data and logs in a folder
of the session's own. Measured on the 2-core machine: assembling with a warm ~/.m2 takes ~12 s, a cold
fetch (58 MB from Maven Central) ~25 s; the node answers ~11 s after it is started (docs/performance.md).

`python -m tests.opensearch_node fetch` assembles ahead (`make opensearch`, which `make test` runs);
`python -m tests.opensearch_node serve` runs a node in the foreground and prints its URL (a developer's
OPENSEARCH_URL, or `make bench-recall SEARCH=opensearch`).
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".opensearch"
VERSION = "2.19.1"
KNN_VERSION = "2.19.1.0"
HOME = CACHE / f"opensearch-{VERSION}"
DISTRIBUTION = f"org.opensearch.distribution.integ-test-zip:opensearch:{VERSION}:zip"
KNN = f"org.opensearch.plugin:opensearch-knn:{KNN_VERSION}:zip"
# The goal's version is pinned: mvn's default for a bare `dependency:` prefix changes with mvn's own.
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
HEAP = "512m"
START_SECONDS = 180.0  # a cold JVM on a busy 2-core machine; measured ~11 s on a quiet one
STOP_SECONDS = 30.0


@dataclass(frozen=True)
class Module:
    """A module of the full distribution, rebuilt from its jar on Maven Central: what its
    build.gradle (`opensearchplugin { ... }`) and src/main/plugin-metadata say in OpenSearch 2.19."""

    name: str
    artifact: str  # groupId:artifactId of the jar (a module with a client jar publishes that one)
    description: str
    classname: str
    extended: str = ""
    policy: str = ""


MODULES = (
    Module(
        "lang-painless", "org.opensearch.plugin:lang-painless",
        "An easy, safe and fast scripting language for OpenSearch", "org.opensearch.painless.PainlessPlugin",
        policy="""grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";

  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
""",
    ),
    Module(
        "analysis-common", "org.opensearch.plugin:analysis-common",
        'Adds "built in" analyzers to OpenSearch.', "org.opensearch.analysis.common.CommonAnalysisPlugin",
        extended="lang-painless",
    ),
    Module(
        "reindex", "org.opensearch.plugin:reindex-client",
        "The Reindex module adds APIs to reindex from one index to another or update documents in place.",
        "org.opensearch.index.reindex.ReindexPlugin",
        policy="""grant {
   // reindex opens socket connections using the rest client
   permission java.net.SocketPermission "*", "connect";
};

grant codeBase "${codebase.opensearch-rest-client}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};

grant codeBase "${codebase.httpasyncclient}" {
  // rest client uses system properties which gets the default proxy
  permission java.net.NetPermission "getProxySelector";
};
""",
    ),
)
# What the assembled node was made from: a change here assembles it again.
RECIPE = hashlib.sha256(repr((DISTRIBUTION, KNN, DEPENDENCY_PLUGIN, MODULES)).encode()).hexdigest()[:16]
STAMP = HOME / ".assembled"


class NodeError(RuntimeError):
    """The node could not be fetched, assembled or started; the message says what to do."""


# -- fetch and assemble ------------------------------------------------------------------------


def fetch(say: bool = False) -> Path:
    """The assembled node's home, fetched and assembled first if it is missing or out of date."""
    if _assembled():
        return HOME
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be assembling it right now
        if not _assembled():
            started = time.monotonic()
            _assemble(say)
            if say:
                print(f"assembled OpenSearch {VERSION} in {HOME} in {time.monotonic() - started:.1f} s", flush=True)
    return HOME


def _assembled() -> bool:
    return STAMP.is_file() and STAMP.read_text().strip() == RECIPE


def _assemble(say: bool) -> None:
    if shutil.which("mvn") is None:
        raise NodeError("mvn is needed to fetch OpenSearch from Maven Central (Debian: apt-get install maven)")
    java_home = _java_home()
    work = Path(tempfile.mkdtemp(prefix="assembling-", dir=CACHE))
    try:
        downloads = work / "downloads"
        for artifact in (DISTRIBUTION, KNN):
            if say:
                print(f"fetching {artifact}", flush=True)
            _mvn(f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={downloads}")
        home = work / HOME.name
        _unzip(downloads / f"opensearch-{VERSION}.zip", work)
        core = {jar.name for jar in (home / "lib").glob("*.jar")}
        for module in MODULES:
            if say:
                print(f"assembling the {module.name} module", flush=True)
            _module(module, home / "modules" / module.name, work / module.name, core)
        if say:
            print(f"installing opensearch-knn {KNN_VERSION}", flush=True)
        knn_zip = downloads / f"opensearch-knn-{KNN_VERSION}.zip"
        _run(
            [str(home / "bin" / "opensearch-plugin"), "install", "--batch", knn_zip.as_uri()],
            env={**os.environ, "OPENSEARCH_JAVA_HOME": str(java_home)},
        )
        (home / STAMP.name).write_text(RECIPE + "\n")
        if HOME.exists():
            shutil.rmtree(HOME)
        home.rename(HOME)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _module(module: Module, folder: Path, scratch: Path, core: set[str]) -> None:
    """A module folder: the jar and its runtime dependencies (OpenSearch itself excluded: the node's
    lib/ has it, and a jar in both is jar hell), its descriptor and its policy."""
    scratch.mkdir(parents=True)
    group, artifact = module.artifact.split(":")
    (scratch / "pom.xml").write_text(f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>uhp-memories.tests</groupId>
  <artifactId>{module.name}-module</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{VERSION}</version>
      <exclusions><exclusion><groupId>org.opensearch</groupId><artifactId>opensearch</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
""")
    _mvn("-f", str(scratch / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy-dependencies",
         "-DincludeScope=runtime", f"-DoutputDirectory={folder}")
    for jar in folder.glob("*.jar"):
        if jar.name in core:
            jar.unlink()
    (folder / "plugin-descriptor.properties").write_text(
        f"description={module.description}\nversion={VERSION}\nname={module.name}\n"
        f"classname={module.classname}\njava.version=11\nopensearch.version={VERSION}\n"
        f"custom.foldername=\nextended.plugins={module.extended}\nhas.native.controller=false\n"
    )
    if module.policy:
        (folder / "plugin-security.policy").write_text(module.policy)


def _mvn(*args: str) -> None:
    _run(["mvn", "-B", "-q", *args])


def _run(command: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip().splitlines()
        raise NodeError(f"{' '.join(command[:4])} ... failed ({done.returncode}):\n" + "\n".join(output[-30:]))


def _unzip(archive: Path, into: Path) -> None:
    """zipfile does not keep a file's mode: bin/ must stay executable."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            path = Path(opened.extract(info, into))
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                path.chmod(mode)


def _java_home() -> Path:
    """OPENSEARCH_JAVA_HOME, JAVA_HOME, or the `java` on PATH (2.19 runs on 11 to 23: its security
    manager is gone from Java 24 on)."""
    for name in ("OPENSEARCH_JAVA_HOME", "JAVA_HOME"):
        if os.environ.get(name):
            return Path(os.environ[name])
    java = shutil.which("java")
    if java is None:
        raise NodeError("a JDK 17 or 21 is needed to run OpenSearch (Debian: apt-get install openjdk-17-jdk-headless)")
    return Path(java).resolve().parent.parent


# -- run ---------------------------------------------------------------------------------------


class Node:
    """One node process, its config, data and logs in a folder of its own, on a free port of 127.0.0.1."""

    def __init__(self, home: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.folder = Path(tempfile.mkdtemp(prefix="uhp-opensearch-"))
        self.log = self.folder / "logs" / "console.log"
        config = self.folder / "config"
        shutil.copytree(home / "config", config)
        for name in ("data", "logs"):
            (self.folder / name).mkdir()
        # The JVM's own files (GC log, heap dump, crash report) are relative to the node's home in
        # jvm.options, which the node's user may not write.
        options = config / "jvm.options"
        options.write_text(
            options.read_text()
            .replace("logs/", f"{self.folder}/logs/")
            .replace("HeapDumpPath=data", f"HeapDumpPath={self.folder}/data")
        )
        as_user: list[str] = []
        if os.geteuid() == 0:  # "can not run opensearch as root": run as nobody
            nobody = pwd.getpwnam("nobody")
            as_user = ["--reuid", str(nobody.pw_uid), "--regid", str(nobody.pw_gid), "--clear-groups"]
            if not _reachable_by_others(home):  # a clone under a private folder: a copy it can read
                home = _copy(home, self.folder / home.name)
            for path in [self.folder, *self.folder.rglob("*")]:
                if path.is_relative_to(self.folder / home.name):
                    continue
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
        # setpriv stays in the process (it execs bin/opensearch, which execs java): the node's pid is
        # this Popen's, and the kernel sends it SIGTERM when the thread that started it ends.
        launcher = ["setpriv", *as_user, "--pdeathsig", "TERM"] if shutil.which("setpriv") else []
        if as_user and not launcher:
            raise NodeError("setpriv (util-linux) is needed to run OpenSearch as nobody when the tests run as root")
        command = [
            *launcher, str(home / "bin" / "opensearch"),
            "-Ecluster.name=uhp-tests", "-Enode.name=uhp-tests", "-Ediscovery.type=single-node",
            "-Enetwork.host=127.0.0.1", f"-Ehttp.port={self.port}", "-Etransport.port=0",
            f"-Epath.data={self.folder / 'data'}", f"-Epath.logs={self.folder / 'logs'}",
            # A full disk elsewhere on the machine must not make the test indexes read-only.
            "-Ecluster.routing.allocation.disk.threshold_enabled=false",
        ]
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("JAVA_TOOL_OPTIONS", "JAVA_OPTS")},
            "OPENSEARCH_JAVA_HOME": str(_java_home()),
            "OPENSEARCH_PATH_CONF": str(config),
            "OPENSEARCH_JAVA_OPTS": f"-Xms{HEAP} -Xmx{HEAP}",
        }
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=self.folder, start_new_session=True,
            )
        self.started = time.monotonic()

    def wait_ready(self, seconds: float = START_SECONDS) -> Node:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise NodeError(f"OpenSearch exited ({self.process.returncode}) before answering:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_cluster/health?wait_for_status=green&timeout=1s",
                                            timeout=5) as answer:
                    if answer.status == 200:
                        self.ready_seconds = time.monotonic() - self.started
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise NodeError(f"OpenSearch did not answer within {seconds:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (the node closes its indexes), SIGKILL if it has not ended within STOP_SECONDS;
        then its folder goes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_SECONDS)
        shutil.rmtree(self.folder, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _reachable_by_others(home: Path) -> bool:
    """Whether another user can reach the node's home: every folder up to it lets others through."""
    return all(folder.stat().st_mode & stat.S_IXOTH for folder in [home, *home.parents])


def _copy(home: Path, to: Path) -> Path:
    """The node's home, linked file by file where it can be (the same file system), copied otherwise."""

    def link_or_copy(source: str, target: str) -> None:
        try:
            os.link(source, target)
        except OSError:
            shutil.copy2(source, target)

    shutil.copytree(home, to, copy_function=link_or_copy, symlinks=True)
    return to


_node: Node | None = None
_lock = threading.Lock()


def url() -> str:
    """The cluster of this test process: OPENSEARCH_URL, or the node started here on first use."""
    global _node
    if os.environ.get("OPENSEARCH_URL"):
        return os.environ["OPENSEARCH_URL"]
    with _lock:
        if _node is None:
            node = Node(fetch())
            atexit.register(node.stop)
            _node = node.wait_ready()
        return _node.url


def stop() -> None:
    """Stop the node started here, if any (the end of the test session)."""
    global _node
    with _lock:
        if _node is not None:
            _node.stop()
            _node = None


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "fetch"
    try:
        if command == "fetch":
            fetch(say=True)
            return 0
        if command == "serve":
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the node and clean up, as Ctrl-C does
            node = Node(fetch(say=True)).wait_ready()
            print(f"OpenSearch {VERSION} ready in {node.ready_seconds:.1f} s: {node.url} (Ctrl-C stops)", flush=True)
            try:
                node.process.wait()
            except KeyboardInterrupt:
                pass
            finally:
                node.stop()
            return 0
    except NodeError as error:
        print(f"opensearch_node: {error}", file=sys.stderr)
        return 1
    print("usage: python -m tests.opensearch_node [fetch|serve]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
