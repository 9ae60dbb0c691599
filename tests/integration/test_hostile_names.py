"""Hostile file names (issue 36): a file's name is free text, kept as sent and read back by another
reader in a download's Content-Disposition. A control character is refused at upload (a CR/LF wrote a
header of its own into the download); every other name is sent as RFC 6266 / RFC 5987 spell it, an
ASCII fallback and `filename*`, so a quote adds no parameter and a name beyond Latin-1 reaches the
reader instead of dropping the connection."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import pytest
import requests

from tests.integration.conftest import Client, error_code
from uhp_memories.domain.files.service import FileService

INJECTION = "a\r\nX-Injected: yes"
# C0 (CR, LF, NUL, TAB, ESC), DEL and C1 (NEL U+0085, CSI U+009B): no file name holds one.
CONTROLS = {"CRLF": INJECTION, "LF": "a\nX-Injected: yes", "CR": "a\rb.txt", "NUL": "a\x00b.txt",
            "TAB": "a\tb.txt", "ESC": "a\x1b[31mred.txt", "DEL": "a\x7fb.txt", "NEL": "a\x85b.txt",
            "CSI": "a\x9bb.txt"}
# Free text that is not a control character: read back exactly, one filename= parameter.
NAMES = {"quote": 'say "hi".txt', "second parameter": 'a.txt"; filename="evil.exe',
         "percent": "100%25 done.txt", "accents and curly quotes": "résumé “final”.txt",
         "beyond Latin-1": "日本.txt", "emoji": "plan 🚀.md", "semicolon": "a; b=c.txt"}


def _multipart_body(disposition_params: bytes, data: bytes) -> tuple[str, bytes]:
    """A multipart/form-data body whose file part's Content-Disposition ends with `disposition_params`,
    as sent: a client may spell any name with RFC 2231's `filename*` (requests percent-encodes CR/LF
    in `filename=` itself, so only a raw body carries them)."""
    body = (b'--BOUNDARY\r\nContent-Disposition: form-data; name="file"; ' + disposition_params
            + b"\r\nContent-Type: text/plain\r\n\r\n" + data + b"\r\n--BOUNDARY--\r\n")
    return "multipart/form-data; boundary=BOUNDARY", body


def _upload_multipart(client: Client, name: str, data: bytes) -> requests.Response:
    content_type, body = _multipart_body(b"filename*=UTF-8''" + quote(name, safe="").encode(), data)
    return client.session.post(client.base_url + "/v1/files", data=body, timeout=30,
                               headers={"x-api-key": client.key, "Content-Type": content_type})


def _upload_json(client: Client, name: str, data: bytes) -> requests.Response:
    """POST /v1/files {name, media_type, bytes}, then the bytes by the presigned PUT it answers."""
    started = client.post("/v1/files", {"name": name, "media_type": "text/plain", "bytes": len(data)})
    if started.status_code == 201:
        upload = started.json()["upload"]
        put = requests.put(upload["url"], data=data, headers=upload["headers"], timeout=60)
        assert put.status_code == 200, put.text
    return started


UPLOADS = {"multipart": _upload_multipart, "json": _upload_json}


def _download(reader: Client, owner: Client, file_id: str) -> requests.Response:
    """`owner` keeps the file in a record of a memory `reader` may read; `reader` downloads it."""
    memory = owner.create_memory("hostile names")
    record = owner.remember(memory["id"], type="note", content={"file": {"id": file_id}})  # type: ignore[arg-type]
    if reader is not owner:
        owner.grant(memory["id"], reader.principal, "read")
    return reader.session.get(f"{reader.base_url}/v1/memories/{memory['id']}/records/{record['id']}/content",
                              headers={"x-api-key": reader.key}, allow_redirects=False, timeout=30)


# RFC 6266: a disposition type, then `; name=value` parameters, each value a token or a quoted string.
_PARAM = re.compile(r'; *([!#$&+.^_`|~0-9A-Za-z*-]+)=("(?:[^"\\\x00-\x1f\x7f]|\\[ -~])*"|[!#$%&\'*+.^_`|~0-9A-Za-z-]+)')


def _parameters(header: str) -> list[tuple[str, str]]:
    """The header's parameters as sent (quoted values unquoted), the whole header read: nothing in it
    is left over that a reader could take another way."""
    assert header.startswith("attachment"), header
    found = list(_PARAM.finditer(header, len("attachment")))
    assert "".join(m.group(0) for m in found) == header[len("attachment"):], header
    return [(m.group(1).lower(), re.sub(r"\\(.)", r"\1", m.group(2).strip('"'))) for m in found]


def _assert_names(header: str, name: str) -> None:
    """Exactly one `filename=` (ASCII, nothing a reader would unescape or decode) and one `filename*`
    that decodes to `name`."""
    assert header.isascii(), header
    assert "\r" not in header
    assert "\n" not in header
    params = _parameters(header)
    keys = [key for key, _ in params]
    assert keys.count("filename") == 1, header
    assert keys.count("filename*") == 1, header
    fallback, extended = dict(params)["filename"], dict(params)["filename*"]
    assert fallback.isprintable(), header
    assert not set(fallback) & set('"\\%'), header
    charset, _, encoded = extended.partition("''")
    assert charset.upper() == "UTF-8", header
    assert unquote(encoded, errors="strict") == name, header


@pytest.mark.parametrize("upload", list(UPLOADS.values()), ids=list(UPLOADS))
@pytest.mark.parametrize("name", list(CONTROLS.values()), ids=list(CONTROLS))
def test_a_file_name_with_a_control_character_is_refused_at_upload(alice: Client, upload: Any, name: str) -> None:
    """`a\\r\\nX-Injected: yes` came back to the file's readers as a header of its own."""
    answer = upload(alice, name, b"bytes")
    assert answer.status_code == 422, answer.text
    assert error_code(answer) == "memory_invalid"
    assert "control character" in answer.json()["error"]["message"]


@pytest.mark.parametrize("upload", list(UPLOADS.values()), ids=list(UPLOADS))
@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_a_file_name_reaches_another_reader_as_one_encoded_filename(
    alice: Client, bob: Client, upload: Any, name: str
) -> None:
    """A quote added a second `filename=`, and a name beyond Latin-1 dropped the connection."""
    uploaded = upload(alice, name, b"the bytes")
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["name"] == name
    answer = _download(bob, alice, uploaded.json()["id"])
    assert answer.status_code == 200, answer.text
    assert answer.content == b"the bytes"
    assert "X-Injected" not in answer.headers
    _assert_names(answer.headers["Content-Disposition"], name)


def test_a_name_kept_before_the_rule_cannot_write_a_header(
    alice: Client, bob: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name with CR/LF that an earlier server took is still sent encoded: the header is written from
    the name by one rule, whatever the store holds."""
    monkeypatch.setattr(FileService, "_check", staticmethod(lambda *_: None))
    uploaded = _upload_multipart(alice, INJECTION, b"old bytes")
    assert uploaded.status_code == 201, uploaded.text
    monkeypatch.undo()
    answer = _download(bob, alice, uploaded.json()["id"])
    assert answer.status_code == 200, answer.text
    assert "X-Injected" not in answer.headers
    _assert_names(answer.headers["Content-Disposition"], INJECTION)


def test_a_large_files_presigned_download_names_it_by_the_same_rule(alice: Client) -> None:
    name = "résumé “final”.txt"
    data = b"x" * (4 * 1024 * 1024 + 1)  # above the inline limit: the download is a presigned S3 GET
    uploaded = _upload_json(alice, name, data)
    assert uploaded.status_code == 201, uploaded.text
    answer = _download(alice, alice, uploaded.json()["id"])
    assert answer.status_code == 302, answer.text
    location = answer.headers["Location"]
    download = requests.get(location, timeout=60)
    assert download.status_code == 200
    assert download.content == data
    # S3 answers the header the signed address names (moto does not echo it, so it is read there).
    _assert_names(parse_qs(urlsplit(location).query)["response-content-disposition"][0], name)


@pytest.mark.parametrize("name", ["résumé “final”.txt", "日本.txt"])
def test_a_browser_forms_raw_utf8_name_is_read_back_encoded(alice: Client, bob: Client, name: str) -> None:
    """A browser (and requests) sends a name beyond ASCII as raw UTF-8 in `filename=`."""
    uploaded = alice.upload(name, b"form bytes")
    assert uploaded["name"] == name
    answer = _download(bob, alice, uploaded["id"])
    assert answer.status_code == 200, answer.text
    _assert_names(answer.headers["Content-Disposition"], name)
