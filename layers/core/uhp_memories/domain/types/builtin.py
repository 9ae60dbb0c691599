"""The extension types built into the server (§8): calendar events and tasks.

Their schemas and projections are data, as a registered type's are (domain/types/service.py). Their write
operations that only set fields (`complete`, `reopen`, `assign`) are declarative like a registered
type's; those that need arithmetic (`reschedule`, `free_slots`, `blocked`) are code, in
domain/types/operations.py.
"""

from __future__ import annotations

from typing import Any

from uhp_memories.domain.types.model import Operation, TypeDefinition

CALENDAR_EVENT = "x.calendar.event"
TASK = "x.task"
TASK_STATUSES = ("open", "in_progress", "done")
DONE = "done"
RECORD_ID = {"type": "string", "pattern": "^hrec_[0-9a-f]{32}$"}
INSTANT = {"type": "string", "format": "date-time"}
CLOCK = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


EVENT = TypeDefinition(
    type=CALENDAR_EVENT,
    description="A meeting or a block of time.",
    schema=_object(
        {
            "title": {"type": "string", "minLength": 1, "maxLength": 500},
            "starts_at": INSTANT,
            "ends_at": INSTANT,
            "attendees": {"type": "array", "items": {"type": "string", "maxLength": 320}, "maxItems": 200},
            "location": {"type": "string", "maxLength": 500},
        },
        ["title", "starts_at", "ends_at"],
    ),
    text="{title}. From {starts_at} to {ends_at}. Attendees: {attendees}. Location: {location}. {content}",
    operations=(
        Operation(
            name="reschedule",
            description="Move the event to a new time: a new version. Without ends_at it keeps its length.",
            input=_object({"starts_at": INSTANT, "ends_at": INSTANT}, ["starts_at"]),
            requires="write",
            builtin=True,
        ),
        Operation(
            name="free_slots",
            description=(
                "Open time around this event among the memory's events: on the event's day (and the days "
                "after it, `days`), within working hours in the caller's time zone, at least min_minutes long."
            ),
            input=_object(
                {
                    "time_zone": {"type": "string", "minLength": 1, "maxLength": 64, "default": "UTC"},
                    "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
                    "day_starts": {**CLOCK, "default": "09:00"},
                    "day_ends": {**CLOCK, "default": "17:00"},
                    "min_minutes": {"type": "integer", "minimum": 1, "maximum": 1440, "default": 30},
                },
                [],
            ),
            requires="read",
            builtin=True,
        ),
    ),
    builtin=True,
    not_before=(("ends_at", "starts_at"),),
)

TASK_TYPE = TypeDefinition(
    type=TASK,
    description="A piece of work on a board: open, in progress or done, maybe due, assigned, after others.",
    schema=_object(
        {
            "title": {"type": "string", "minLength": 1, "maxLength": 500},
            "status": {"enum": list(TASK_STATUSES)},
            "due": INSTANT,
            "assignee": {"type": "string", "minLength": 1, "maxLength": 200},
            "depends_on": {"type": "array", "items": RECORD_ID, "maxItems": 50, "uniqueItems": True},
        },
        ["title"],
    ),
    text="{title}. Status: {status}. Due: {due}. Assignee: {assignee}. {content}",
    operations=(
        Operation(
            name="complete",
            description="Mark the task done: a new version.",
            input=_object({}, []),
            requires="write",
            set={"status": DONE},
        ),
        Operation(
            name="reopen",
            description="Mark the task open again: a new version.",
            input=_object({}, []),
            requires="write",
            set={"status": "open"},
        ),
        Operation(
            name="assign",
            description="Give the task to someone: a new version.",
            input=_object({"assignee": {"type": "string", "minLength": 1, "maxLength": 200}}, ["assignee"]),
            requires="write",
            set={"assignee": "{{assignee}}"},
        ),
        Operation(
            name="blocked",
            description=(
                "The memory's tasks not done whose dependencies (depends_on, tasks of the same memory) are "
                "not done yet, in the shape of recall."
            ),
            input=_object({}, []),
            requires="read",
            builtin=True,
        ),
    ),
    builtin=True,
)

BUILTIN_TYPES: tuple[TypeDefinition, ...] = (EVENT, TASK_TYPE)
