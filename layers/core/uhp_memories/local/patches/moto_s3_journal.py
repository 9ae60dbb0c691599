"""moto's S3 object changes reported with every version of the object, before the answer leaves moto
(persistent local mode).

While installed with a listener (the journal of `serve --data-dir`), each S3 request that put or
deleted an object (PutObject, a presigned PUT through moto's server, CopyObject, DeleteObject(s),
a completed multipart upload) is followed, inside the same request, by the object's versions as the
bucket now lists them, oldest first: id, bytes, metadata, time; delete markers too. The listener is
told after the whole request, not inside the backend call: moto sets an object's metadata (its
Content-Type) after storing its bytes. Object writes run one at a time while installed.

`restore` puts versions back into a bucket with the same version ids, at start: the version a file
record names is still there to read.

Replaces `moto.s3.responses.S3Response.bucket_response` and `.key_response`, and
`moto.s3.models.S3Backend.put_object` and `.delete_object` (to note which objects a request changed).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable, Sequence
from typing import Any

from uhp_memories.local.journal import ObjectVersion
from uhp_memories.local.patches import Listened, Patch, Replacements, WrittenFor

WRITTEN_FOR = WrittenFor("moto", "5.2.1")

ObjectListener = Callable[[str, str, Sequence[ObjectVersion]], None]
_writing = threading.RLock()
_touched = threading.local()  # the (bucket, key) pairs the current request changed


def versions_of(backend: Any, bucket_name: str, key_name: str) -> list[ObjectVersion]:
    """The object's versions as the bucket lists them, oldest first (none once it is gone)."""
    from moto.s3.models import FakeKey

    bucket = backend.buckets.get(bucket_name)
    if bucket is None:
        return []
    found = []
    for version in bucket.keys.getlist(key_name, []):
        if isinstance(version, FakeKey):
            found.append(
                ObjectVersion(version.version_id, False, version.value, dict(version.metadata),
                              version.last_modified.isoformat())
            )
        else:
            found.append(ObjectVersion(version.version_id, True, None, {}, version.last_modified.isoformat()))
    return found


def _noting(original: Callable[..., Any]) -> Callable[..., Any]:
    def changed(self: Any, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
        noted = getattr(_touched, "keys", None)
        if noted is not None:
            noted.append((bucket_name, key_name))
        return original(self, bucket_name, key_name, *args, **kwargs)

    return changed


def _reporting(original: Callable[..., Any]) -> Callable[..., Any]:
    def respond(self: Any, *args: Any, **kwargs: Any) -> Any:
        listener = HOOK.listener()
        if listener is None:
            return original(self, *args, **kwargs)
        with _writing:
            outer = getattr(_touched, "keys", None)
            _touched.keys = []
            try:
                return original(self, *args, **kwargs)
            finally:
                noted, _touched.keys = _touched.keys, outer
                for bucket_name, key_name in dict.fromkeys(noted):
                    listener(bucket_name, key_name, versions_of(self.backend, bucket_name, key_name))

    return respond


def _apply(replace: Replacements) -> None:
    from moto.s3.models import S3Backend
    from moto.s3.responses import S3Response

    replace(S3Backend, "put_object", _noting(S3Backend.put_object))
    replace(S3Backend, "delete_object", _noting(S3Backend.delete_object))
    replace(S3Response, "bucket_response", _reporting(S3Response.bucket_response))
    replace(S3Response, "key_response", _reporting(S3Response.key_response))


def restore(bucket_name: str, key_name: str, versions: Sequence[ObjectVersion]) -> None:
    """Put an object's versions back into a bucket of moto's S3 (default account), with their ids,
    bytes, metadata and times, without reporting them."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import FakeDeleteMarker, FakeKey, s3_backends

    WRITTEN_FOR.check(__name__)
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    bucket = backend.get_bucket(bucket_name)
    listed: list[Any] = []
    for version in versions:
        modified = datetime.datetime.fromisoformat(version.last_modified)
        if version.delete_marker:
            marker: Any = FakeDeleteMarker.__new__(FakeDeleteMarker)  # its key may be gone: built by hand
            marker.key = listed[-1] if listed else None
            marker.name = key_name
            marker.last_modified = modified
            marker._version_id = version.version_id
            listed.append(marker)
            continue
        key = FakeKey(
            name=key_name, value=version.body or b"", account_id=backend.account_id,
            region_name=backend.region_name, is_versioned=bucket.is_versioned, version_id=version.version_id,
            bucket_name=bucket_name,
        )
        key.set_metadata(dict(version.metadata))
        key.last_modified = modified
        listed.append(key)
    if listed:
        bucket.keys.setlist(key_name, listed)


HOOK: Listened[ObjectListener] = Listened(Patch(__name__, WRITTEN_FOR, _apply))
install = HOOK.install
uninstall = HOOK.uninstall
PATCH = HOOK.patch
