"""File bytes on S3, in a versioned bucket: nothing is overwritten in place."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from uhp_memories.domain.files.model import Upload, content_disposition


class S3ObjectStore:
    def __init__(self, client: Any, bucket: str, presign_client: Any | None = None) -> None:
        self._client = client
        self._bucket = bucket
        # Presigned addresses must be reachable by the client: in local mode they point at the
        # in-process moto server, not at the in-process mock.
        self._presign = presign_client or client

    def put(self, key: str, data: bytes, media_type: str) -> str:
        answer = self._client.put_object(Bucket=self._bucket, Key=key, Body=data, ContentType=media_type)
        return str(answer["VersionId"])

    def size(self, key: str) -> int | None:
        try:
            return int(self._client.head_object(Bucket=self._bucket, Key=key)["ContentLength"])
        except ClientError as error:
            if error.response["Error"]["Code"] in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def copy(self, source_key: str, target_key: str) -> str:
        answer = self._client.copy_object(
            Bucket=self._bucket, Key=target_key, CopySource={"Bucket": self._bucket, "Key": source_key}
        )
        return str(answer["VersionId"])

    def read(self, key: str, version: str) -> bytes:
        return bytes(self._client.get_object(Bucket=self._bucket, Key=key, VersionId=version)["Body"].read())

    def presign_put(self, key: str, media_type: str, size: int, expires_in: int) -> Upload:
        url = self._presign.generate_presigned_url(
            "put_object",
            Params={"Bucket": self._bucket, "Key": key, "ContentType": media_type, "ContentLength": size},
            ExpiresIn=expires_in,
        )
        return Upload(url=url, method="PUT", headers={"Content-Type": media_type}, expires_in=expires_in)

    def presign_get(self, key: str, version: str, name: str, expires_in: int) -> str:
        return str(
            self._presign.generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self._bucket,
                    "Key": key,
                    "VersionId": version,
                    "ResponseContentDisposition": content_disposition(name),
                },
                ExpiresIn=expires_in,
            )
        )

    def delete_all_versions(self, prefix: str) -> int:
        deleted = 0
        paginator = self._client.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            doomed = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for start in range(0, len(doomed), 1000):
                batch = doomed[start : start + 1000]
                self._client.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
                deleted += len(batch)
        return deleted
