"""The CDK app: one MemoryServiceStack for the stage named by `-c stage=NAME` (default dev).

Run it through the CDK CLI from the repository root (cdk.json: `python -m infra.app`). Never as
`python infra/app.py`: that would put infra/ first on sys.path, where infra/constructs would shadow
the `constructs` library.

`-c bundle=false` synthesizes without building the Lambda assets (offline and fast: `make synth`,
tests); deploying needs the real bundles, so `cdk deploy` must not set it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Tags

from infra.config import load_stage
from infra.layout import REPO, Layout
from infra.nag import add_checks
from infra.stacks.memory_service import MemoryServiceStack

BUNDLE_CONTEXT_KEY = "bundle"
BUNDLING_STACKS_KEY = "aws:cdk:bundling-stacks"


def cdk_json_context(root: Path = REPO.root) -> dict[str, Any]:
    """The context cdk.json gives the CLI (for running the app in process: tests, tools)."""
    return dict(json.loads((root / "cdk.json").read_text()).get("context", {}))


def _wants_bundling(context: dict[str, Any] | None) -> bool:
    value = (context or {}).get(BUNDLE_CONTEXT_KEY)
    if value is None:
        value = json.loads(os.environ.get("CDK_CONTEXT_JSON", "{}")).get(BUNDLE_CONTEXT_KEY, True)
    return str(value).lower() not in ("false", "0", "no")


def create_app(
    context: dict[str, Any] | None = None,
    *,
    outdir: str | None = None,
    layout: Layout = REPO,
    nag: bool = True,
    **stack_kwargs: Any,
) -> App:
    post_cli: dict[str, Any] = {} if _wants_bundling(context) else {BUNDLING_STACKS_KEY: []}
    app = App(context=context, outdir=outdir, post_cli_context=post_cli or None)
    config = load_stage(app.node)
    stack = MemoryServiceStack(
        app,
        config.stack_name,
        config=config,
        layout=layout,
        env=Environment(
            account=config.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
            region=config.region or os.environ.get("CDK_DEFAULT_REGION"),
        ),
        **stack_kwargs,
    )
    Tags.of(stack).add("project", "uhp-memories")
    Tags.of(stack).add("stage", config.name)
    if nag:
        add_checks(app)
    return app


def main() -> None:
    create_app().synth()


if __name__ == "__main__":
    main()
