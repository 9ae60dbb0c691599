"""cdk-nag (AwsSolutions) on the whole app, and acknowledgments that always carry a reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, App, Validations
from cdk_nag import AwsSolutionsChecks
from constructs import IConstruct

MIN_REASON_CHARS = 20


def acknowledge(scope: IConstruct, rule_id: str, reason: str) -> None:
    """Accept one cdk-nag finding on a construct (and its children), saying why."""
    if len(reason.strip()) < MIN_REASON_CHARS:
        raise ValueError(f"acknowledging {rule_id} needs a real reason, got {reason!r}")
    Validations.of(scope).acknowledge(Acknowledgment(id=rule_id, reason=reason))


def add_checks(app: App) -> None:
    # Acknowledgments are also written into each resource's Metadata (cdk_nag.rules_to_suppress), so
    # a reviewer of the template sees every accepted finding and its reason.
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, write_suppressions_to_cloud_formation=True))
