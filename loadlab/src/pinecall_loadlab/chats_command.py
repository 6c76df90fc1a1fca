"""``pinecall-runtime lab chats``: simulated chat visitors (:mod:`pinecall_loadlab.chats`), as a
process of their own (``up --chats`` runs it; a developer can too). Heavy imports happen inside
the command, so ``--help`` loads no lab code."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="A JSON ChatPlan: each environment's app key, the chat replicas' URLs, the agent, "
    "how many visitors (pinecall_loadlab.chats).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Append each visitor's state here as it changes (JSON lines, lab.chat.v1).",
)
def chats(plan_file: Path, out: Path) -> None:
    """Visitors who chat with an agent over WS /v1/chat until each sent its messages and had
    them answered, or SIGTERM/SIGINT; a cut socket is dialled again with ?call=."""
    import asyncio
    import signal

    import msgspec

    from pinecall_loadlab.chats import ChatPlan, chat

    try:
        plan = msgspec.json.decode(plan_file.read_bytes(), type=ChatPlan)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise click.BadParameter(f"{plan_file}: {exc}", param_hint="--plan") from None

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        with out.open("ab") as sink:
            reports = await chat(plan, sink, stop)
        done = sum(r.state == "done" for r in reports)
        click.echo(f"chats: {len(reports)} visitors, {done} done", err=True)

    asyncio.run(main())
