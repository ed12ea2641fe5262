"""An agent on the Claude Agent SDK that remembers its user across sessions, through `episodes`.

    pip install claude-agent-sdk
    python examples/agent_sdk_memory.py --tenant acme --user ann "Which database did we pick?"

At start it recalls the user's ``<previous_episodes>`` block (recent episodes, open items, and what
relates to the prompt) for this project and appends it to Claude Code's system prompt; the system
prompt is not conversation, so the block never comes back as memory. At the end it hands over the
session file the SDK reports (a Stop hook's ``transcript_path``), closed, through the reader of
`episodes ingest --format claude-code`; `episodes serve` (or `episodes run`) then summarises it.
The record is the one `episodes claude-code` hooks and `sync` make of the same file (same session id,
project purpose ``cc-<folder>-<hash>``), so storing it twice never doubles it, and sessions of this
agent and of Claude Code in the same folder share one memory.

Local mode (default): the database of DATABASE_URL, or the embedded one. Remote mode: ``--api URL``
of `episodes api`, with a key of scopes recall and ingest in $EPISODES_API_KEY (``--key-env``; the
tenant is the key's). Memory fails open: if it cannot be loaded or stored, the agent still answers,
and `episodes claude-code sync` stores the session later (it was noted as ended first).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ResultMessage,
    TextBlock,
    query,
)

from jobs.formats.claude_code import default_user, project_purpose

BUDGET_TOKENS = 1500


def load_memory(args: argparse.Namespace, cwd: str) -> str:
    """The ``<previous_episodes>`` block for the prompt, in this project (and the user's general episodes)."""
    purpose = project_purpose(cwd)
    if args.api:
        from jobs.claude_code.remote import post

        answer = post(
            args.api,
            args.key_env,
            "/v1/recall",
            {"user_id": args.user, "message": args.prompt, "purpose": purpose, "budget_tokens": BUDGET_TOKENS},
        )
        return str(answer["block"])
    from jobs.recall import recall

    return recall(args.tenant, args.user, args.prompt, purpose=purpose, budget_tokens=BUDGET_TOKENS).render()


def hand_over(args: argparse.Namespace, event: dict[str, Any]) -> None:
    """Store the finished session, closed so that it is summarised: what the SessionEnd hook of
    `episodes claude-code install` does with the same event (session id, transcript path, cwd)."""
    if args.api:
        from jobs.claude_code import remote

        remote.hand_over(args, args.user, event, close=True)
    else:
        from jobs.claude_code import local

        local.hand_over(args, args.user, event, close=True)


async def run(args: argparse.Namespace) -> int:
    cwd = os.getcwd()
    try:
        memory = load_memory(args, cwd)
    except Exception as exc:  # memory is a help, never a reason not to answer
        print(f"memory not loaded ({exc}); going on without it", file=sys.stderr)
        memory = ""
    stopped: list[dict[str, Any]] = []

    async def on_stop(event: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        stopped.append(dict(event))  # session_id, transcript_path (where Claude Code keeps it), cwd
        return {}

    options = ClaudeAgentOptions(
        system_prompt={"type": "preset", "preset": "claude_code", "append": memory},
        hooks={"Stop": [HookMatcher(hooks=[on_stop])]},
        # This agent loads and stores memory itself; the hooks of `episodes claude-code install`
        # in ~/.claude/settings.json would do it a second time.
        setting_sources=[],
        cwd=cwd,
        cli_path=args.cli_path,
    )
    failed = False
    async for message in query(prompt=args.prompt, options=options):
        if isinstance(message, AssistantMessage):
            print("".join(block.text for block in message.content if isinstance(block, TextBlock)), flush=True)
        elif isinstance(message, ResultMessage):
            failed = message.is_error
    if stopped:
        try:
            hand_over(args, stopped[-1])
            print(f"session {stopped[-1]['session_id']} handed over", file=sys.stderr)
        except Exception as exc:
            print(f"session not handed over ({exc}); `episodes claude-code sync` stores it later", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("prompt", help="what to ask the agent")
    parser.add_argument("--tenant", default="local", help="the tenant (local mode; default: local)")
    parser.add_argument("--user", default=default_user(), help="whose memory (default: the login name)")
    parser.add_argument("--api", help="URL of `episodes api` (remote mode)")
    parser.add_argument("--key-env", default="EPISODES_API_KEY", help="remote mode: the variable holding the API key")
    parser.add_argument("--cli-path", help="the Claude Code CLI to run (default: the one bundled with the SDK)")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
