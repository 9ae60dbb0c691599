"""`make deploy`'s first line: which account, region and identity the deploy is about to use, or why it
cannot start (no credentials, no region), in one line and exit status 2, before 40-odd seconds of
bundling end in the CDK's own message. Reads only STS's GetCallerIdentity, which needs no permission."""

from __future__ import annotations

import argparse
import sys

from uhp_memories.admin.target import aws_refusal, aws_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m uhp_memories.admin.preflight")
    parser.add_argument("--stage", required=True)
    parser.add_argument("--region")
    parser.add_argument("--profile")
    args = parser.parse_args(argv)
    try:
        session = aws_session(args.profile, args.region)
        if not session.region_name:
            print("uhp-memories: no AWS region for the deploy: set AWS_REGION (or a region in your AWS profile)",
                  file=sys.stderr)
            return 2
        who = session.client("sts").get_caller_identity()
    except Exception as error:
        refusal = aws_refusal(error)
        if refusal is None:
            raise
        print(f"uhp-memories: cannot deploy: {refusal}", file=sys.stderr)
        return 2
    print(f"deploying stage {args.stage} into account {who['Account']} ({session.region_name}) as {who['Arn']}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
