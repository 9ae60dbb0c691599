"""Local mode's patches to the libraries it runs on (moto, Powertools): one module each.

Every patch module offers `install()` and `uninstall()`, which the local runtime calls
(uhp_memories.local.moto_env.LocalAws.start and stop), and names in WRITTEN_FOR the one version of
its library whose internals it replaces. It refuses to install on another version
(PatchVersionMismatch). To upgrade the library, read each patch beside the new version's code, keep
or change it, then move its WRITTEN_FOR and the pin in pyproject.toml together.

Installs are counted: a test's own moto session inside a running local server installs and
uninstalls too, and the library's own code comes back when the last user uninstalls. Nothing here is
deployed: the Lambda layer leaves uhp_memories.local out (infra/constructs/packaging.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Protocol


class PatchVersionMismatch(RuntimeError):
    """A patch met another version of its library than the one it was written for."""


def installed_version(distribution: str) -> str:
    return metadata.version(distribution)


@dataclass(frozen=True)
class WrittenFor:
    """The library version a patch replaces the internals of."""

    distribution: str
    version: str

    def check(self, patch: str) -> None:
        found = installed_version(self.distribution)
        if found != self.version:
            raise PatchVersionMismatch(
                f"{patch} was written for {self.distribution}=={self.version} and would replace internals of "
                f"{self.distribution}=={found}: read the patch against {found}'s code, then update its "
                f"WRITTEN_FOR and the pin in pyproject.toml (or install {self.distribution}=={self.version})"
            )


_MISSING = object()


class Replacements:
    """Attributes a patch replaced, each put back as it was (an inherited one by deleting the
    replacement), in reverse order."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def __call__(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, vars(owner).get(name, _MISSING)))
        setattr(owner, name, value)

    def restore(self) -> None:
        while self._saved:
            owner, name, before = self._saved.pop()
            if before is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, before)


class Patch:
    """One patch: `apply` replaces what it needs through the Replacements it is given; `cleanup`, if
    any, drops state the patch kept (after the replaced attributes are put back)."""

    def __init__(
        self,
        name: str,
        written_for: WrittenFor,
        apply: Callable[[Replacements], None],
        cleanup: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.written_for = written_for
        self._apply = apply
        self._cleanup = cleanup
        self._users = 0
        self._replaced: Replacements | None = None
        self._lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._users > 0

    def install(self) -> None:
        with self._lock:
            if self._users == 0:
                self.written_for.check(self.name)
                replaced = Replacements()
                try:
                    self._apply(replaced)
                except BaseException:
                    replaced.restore()
                    raise
                self._replaced = replaced
            self._users += 1

    def uninstall(self) -> None:
        with self._lock:
            if self._users == 0:
                return
            self._users -= 1
            if self._users == 0 and self._replaced is not None:
                self._replaced.restore()
                self._replaced = None
                if self._cleanup is not None:
                    self._cleanup()


class PatchModule(Protocol):
    """What the local runtime needs of a patch module."""

    def install(self) -> None: ...

    def uninstall(self) -> None: ...


def install_all(patches: Sequence[PatchModule]) -> None:
    """Install each patch in order; if one refuses, uninstall those installed before it."""
    done: list[PatchModule] = []
    try:
        for patch in patches:
            patch.install()
            done.append(patch)
    except BaseException:
        uninstall_all(done)
        raise


def uninstall_all(patches: Iterable[PatchModule]) -> None:
    for patch in reversed(list(patches)):
        patch.uninstall()


class Listened[L]:
    """A patch that tells a listener what it saw (the journal patches: what moto changed). Installed
    with its listener and uninstalled with it, counted like any patch; the latest listener hears."""

    def __init__(self, patch: Patch) -> None:
        self.patch = patch
        self._listeners: list[L] = []
        self._lock = threading.Lock()

    def install(self, listener: L) -> None:
        self.patch.install()
        with self._lock:
            self._listeners.append(listener)

    def uninstall(self, listener: L) -> None:
        with self._lock:
            if listener not in self._listeners:
                return
            self._listeners.remove(listener)
        self.patch.uninstall()

    def listener(self) -> L | None:
        with self._lock:
            return self._listeners[-1] if self._listeners else None
