"""Extension types' values (§8): definitions, operations, a version as its type has it."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any

from uhp_memories.domain.errors import MemoryInvalid
from uhp_memories.domain.records.model import CORE_TYPES


@dataclass(frozen=True)
class TypedAttributes:
    """A version's attributes as its type has them (validated, times in one form), and its text
    projection (None: a core type, or one the server does not know), from domain/types/service.py."""

    attributes: dict[str, Any]
    projection: str | None


EXTENSION_PREFIX = "x."


TYPE_NAME = re.compile(r"^x(\.[a-z][a-z0-9_]*){1,4}$")


OPERATION_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


REQUIRES = ("read", "write")


# Registering a type is a tenant administrator's act: a key of the tenant in this group
# (`uhp-memories keys create --groups group:admins`). A harness's key never is one, whatever its
# groups: nothing an agent does widens what records may be (domain/agents/model.py, is_tenant_admin).
TENANT_ADMIN_GROUP = "group:admins"


MAX_OPERATIONS = 16


MAX_DEFINITION_BYTES = 32 * 1024


MAX_TEXT_CHARS = 1_000


MAX_DESCRIPTION_CHARS = 1_000


MAX_TYPES_PER_TENANT = 100


TEXT_FIELD = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


# Fields of a record a write operation may never set: they are not attributes, or not the operation's.
UNSETTABLE = ("content", "type")


@dataclass(frozen=True)
class Operation:
    name: str
    description: str
    input: dict[str, Any]  # JSON Schema of the input (an object)
    requires: str  # read | write
    set: dict[str, Any] | None = None  # declarative write: attribute -> constant or "{{param}}"
    recall: dict[str, Any] | None = None  # declarative read: a recall template on the record's memory
    builtin: bool = False  # run by code (domain/types/builtin.py)


@dataclass(frozen=True)
class TypeDefinition:
    type: str
    description: str
    schema: dict[str, Any]
    text: str  # the projection template
    operations: tuple[Operation, ...] = ()
    version: int = 1
    builtin: bool = False
    # (later, earlier): date-time attributes where `later`, when given, is not before `earlier` (an
    # event's end and start). Built-in types only: JSON Schema cannot compare two fields.
    not_before: tuple[tuple[str, str], ...] = ()
    registered_by: str | None = None
    registered_at: int | None = None  # epoch ms

    def operation(self, name: str) -> Operation | None:
        return next((o for o in self.operations if o.name == name), None)


class TypeVersionTaken(Exception):
    pass


def check_stated_type(type_name: str) -> None:
    """A new record's type is a core type (§4.1) or an extension (§8: any other type carries the `x.`
    prefix), registered or not; anything else is 422 `memory_invalid` naming the core types. Only what a
    caller states is checked: a stored record of an unknown type is read, revised and forgotten as it is."""
    if type_name in CORE_TYPES or type_name.startswith(EXTENSION_PREFIX):
        return
    close = difflib.get_close_matches(type_name, CORE_TYPES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise MemoryInvalid(
        f"unknown type {type_name!r}{hint}: a record's type is a core type ({', '.join(CORE_TYPES)}) or an "
        "extension named x.<name>, such as x.calendar.event (GET /v1/memories/types lists them)"
    )
