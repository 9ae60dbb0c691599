"""In-memory fake of a harness's attachment list: the contract of DynamoAttachmentRepository."""

from __future__ import annotations

from collections.abc import Sequence

from tests.fakes.tree import InMemoryMemoryRepository
from uhp_memories.domain.access.model import Grant
from uhp_memories.domain.agents.model import Attachment, AttachmentsChanged, HarnessList
from uhp_memories.domain.errors import TreeChanged


class InMemoryAttachmentRepository:
    def __init__(self, memories: InMemoryMemoryRepository) -> None:
        self.memories = memories
        self.lists: dict[tuple[str, str], HarnessList] = {}

    def get(self, tenant: str, harness_id: str) -> list[Attachment] | None:
        found = self.get_list(tenant, harness_id)
        return found.entries if found is not None else None

    def get_list(self, tenant: str, harness_id: str) -> HarnessList | None:
        found = self.lists.get((tenant, harness_id))
        return HarnessList(list(found.entries), found.owners) if found is not None else None

    def replace(
        self,
        tenant: str,
        harness_id: str,
        attachments: Sequence[Attachment],
        grants: Sequence[Grant],
        *,
        owners: Sequence[str],
        as_read: HarnessList | None,
    ) -> None:
        with self.memories.lock:
            if self.get_list(tenant, harness_id) != as_read:
                raise AttachmentsChanged(harness_id)
            for grant in grants:
                if not self.memories.live(tenant, grant.memory_id):
                    raise TreeChanged(grant.memory_id)
            for grant in grants:
                self.memories.grants[(tenant, grant.id)] = grant
            self.lists[(tenant, harness_id)] = HarnessList(list(attachments), tuple(owners))
