"""A persistent local server's folder (`uhp-memories serve --data-dir DIR`).

- journal.sqlite3: moto's state (DynamoDB items, S3 object versions, workflows in flight), written
  inside each moto call by the journal patches and read back into moto at start (journal.py);
- search.sqlite3: the embedded search index itself (WAL), as in-memory mode keeps it in memory;
- dev-key: the development key, when the server runs without a keys file, so it stays the same;
- lock: held while a server uses the folder (two servers on one journal would each lose the
  other's writes).

After an unclean stop (kill -9, a crash) the search index may miss what the last requests wrote to
the tables (the index is written after the table, as deployed): the server catches it up from the
tables at start (LocalAws.catch_up_index), and starts again every workflow that had not ended.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import IO

from uhp_memories.local.journal import Journal, JournalError
from uhp_memories.local.patches import moto_dynamodb_journal, moto_s3_journal


class DataDirError(Exception):
    """The folder cannot be used: one line for the operator."""


class DataDirInUse(DataDirError):
    """Another process (a server, or a `keys --data-dir` command) holds the folder."""


@dataclass
class Restored:
    items: int = 0
    objects: int = 0
    seconds: float = 0.0


class DataDir:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self.journal: Journal | None = None
        self.clean_start = True  # the previous server stopped cleanly (or there was none)
        self._lock_file: IO[str] | None = None

    @property
    def search_index_path(self) -> Path:
        return self.path / "search.sqlite3"

    def open(self) -> DataDir:
        """Create the folder if needed, take it for this server, open the journal."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            if not os.access(self.path, os.R_OK | os.W_OK | os.X_OK):
                raise PermissionError(f"no read and write permission on {self.path}")
            self._lock_file = (self.path / "lock").open("a")
        except OSError as error:
            raise DataDirError(f"data dir {self.path} is not usable: {error.strerror or error}") from None
        try:
            fcntl.flock(self._lock_file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            self._lock_file = None
            raise DataDirInUse(f"data dir {self.path} is in use by another uhp-memories server") from None
        try:
            self.journal = Journal(self.path / "journal.sqlite3")
        except JournalError as error:
            self._release()
            raise DataDirError(f"data dir {self.path}: {error}") from None
        self.clean_start = self.journal.open_for_writing()
        return self

    def restore(self, region: str) -> Restored:
        """Put the journal's items and object versions back into moto (its tables and bucket exist)."""
        assert self.journal is not None
        started = time.monotonic()
        restored = Restored()
        for table, rows in groupby(self.journal.items(), key=lambda row: row[0]):
            restored.items += moto_dynamodb_journal.restore(region, table, (item for _, item in rows))
        for bucket, key, versions in self.journal.objects():
            moto_s3_journal.restore(bucket, key, versions)
            restored.objects += 1
        restored.seconds = time.monotonic() - started
        return restored

    def dev_key(self) -> str:
        """The development key of this folder: made once, kept (owner-only) so it outlives a restart."""
        path = self.path / "dev-key"
        if path.exists():
            return path.read_text().strip()
        key = "uhp_dev_" + secrets.token_hex(16)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(key + "\n")
        return key

    def close(self, *, clean: bool) -> None:
        if self.journal is not None:
            if clean:
                self.journal.mark_clean_stop()
            self.journal.close()
            self.journal = None
        self._release()

    def _release(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing the file lets go of the lock
            self._lock_file = None
