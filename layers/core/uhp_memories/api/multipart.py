"""multipart/form-data bodies, read with the standard library's email parser."""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP

from uhp_memories.domain.errors import InvalidRequest


@dataclass(frozen=True)
class Part:
    name: str
    filename: str | None
    media_type: str
    data: bytes


def parse(content_type: str, body: bytes) -> dict[str, Part]:
    if "boundary=" not in content_type:
        raise InvalidRequest("multipart/form-data needs a boundary")
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + body)
    if not message.is_multipart():
        raise InvalidRequest("the body is not multipart/form-data")
    parts: dict[str, Part] = {}
    for item in message.iter_parts():
        name = item.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = item.get_payload(decode=True)
        parts[name] = Part(
            name=name,
            filename=item.get_filename(),
            media_type=item.get_content_type() if item.get("content-type") else "application/octet-stream",
            data=payload if isinstance(payload, bytes) else b"",
        )
    return parts
