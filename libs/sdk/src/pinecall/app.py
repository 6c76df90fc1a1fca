"""The app: one process's socket to call-log, holding its agents (issue 16, "The app's SDK").

:meth:`App.run` opens the socket (``hello``/``welcome``), registers every agent, and serves
frames in the order they come until :meth:`App.close`. When the socket goes for any reason a
reconnect can mend (the replica stopping, a network error, a missed heartbeat), the calls it
served are detached (``"lost"``: the server parks them and hands them on at once) and the app
connects again, to any replica behind the URL, backing off while none answers (stamina); it
registers its agents again and hears ``call.attached`` for what it is handed, then the tool calls
still waiting. A close that a reconnect would get again (a bad key, an agent out of scope, …) is
raised from ``run`` (:mod:`pinecall.errors`).

Every frame is handled before the next is read, so a call is attached before its tool calls
run; handlers, hooks and the answers' delivery run as tasks (:meth:`App.spawn`), so a slow one
never stops the reading or the heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from pinecall.agent import Agent, CallEvent, call_maybe_async
from pinecall.call import Call, Detached
from pinecall.commands import Commands
from pinecall.connection import Connection
from pinecall.errors import BadKey
from pinecall.link import SDK, Link, default_instance, socket_url
from pinecall.tools import Answers
from pinecall_contracts.agents import AgentDefinition
from pinecall_contracts.appsocket import (
    VERSIONS,
    AgentDrain,
    AgentDraining,
    AgentRegister,
    AgentRegistered,
    CallAttached,
    CallCommandAck,
    CallDetached,
    CallReady,
    CallSetup,
    ErrorFrame,
    FromApp,
    Hello,
    ToApp,
    ToolCallFrame,
    ToolResultAck,
)
from pinecall_contracts.base import encode

log = logging.getLogger("pinecall")


class Changes:
    """Whoever changes the app's state calls :meth:`notify`; whoever needs a state awaits
    :meth:`wait_for`."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            await self._event.wait()


class App:
    """One app process holding its org's agents over the app socket at ``url`` with the org's
    app ``key`` (``BadURL``/``BadKey`` at once for ones that cannot be).

    ``org``: the org the agents are of (keys carry no org yet: the socket names it).
    ``instance``: the process's stable id (``<host>-<pid>`` by default): two processes must not
    share one. ``takes_unclaimed``: False makes every agent's registration a console's, handed
    no call. ``reconnect_wait_max_s``: the longest wait between two attempts to connect.
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        org: str,
        instance: str | None = None,
        takes_unclaimed: bool = True,
        reconnect_wait_max_s: float = 10.0,
    ) -> None:
        self.url = socket_url(url)
        if not key:
            raise BadKey(
                "no app key: give the org's app key (pinecall-runtime keys create --kind app)"
            )
        self.instance = instance or default_instance()
        try:  # the contract's grammar of an org and an instance id
            self._hello = msgspec.convert(
                {"versions": list(VERSIONS), "instance": self.instance, "org": org, "sdk": SDK},
                Hello,
            )
        except msgspec.ValidationError as exc:
            raise ValueError(f"not an org and an instance id: {exc}") from None
        self.org = org
        self.takes_unclaimed = takes_unclaimed
        self.reconnect_wait_max_s = reconnect_wait_max_s
        self.agents: dict[str, Agent] = {}
        self.calls: dict[str, Call] = {}
        """The calls this app serves now, by id."""
        self.answers = Answers(self)
        self._connection = Connection(
            self.url, key, self._hello, wait_max_s=reconnect_wait_max_s,
            opened=self._opened, heard=self._frame, lost=self._lost,
        )  # fmt: skip
        self._registered: set[str] = set()
        self._drained: dict[str, AgentDraining] = {}
        self.commands = Commands(self)
        self._work: set[asyncio.Task[None]] = set()
        self._changes = Changes()
        self._running = False

    def __repr__(self) -> str:
        return f"App({self.url!r}, org={self.org!r}, instance={self.instance!r})"

    def agent(
        self,
        name: str,
        *,
        definition: AgentDefinition | Mapping[str, Any] | str | Path | None = None,
        takes_unclaimed: bool | None = None,
    ) -> Agent:
        """The handle of agent ``name`` (made the first time): ``@agent.tool``,
        ``@agent.on_call``. ``definition`` (an ``AgentDefinition``, its fields, or the YAML/JSON
        file ``pinecall-runtime agents put`` takes) is sent as ``call.setup`` on every call
        handed to this app."""
        if name in self.agents and definition is None and takes_unclaimed is None:
            return self.agents[name]
        if name in self.agents:
            raise ValueError(f"the agent {name!r} is made already: give its definition once")
        if self._running:
            raise RuntimeError("agents are added before the app runs")
        takes = self.takes_unclaimed if takes_unclaimed is None else takes_unclaimed
        made = self.agents[name] = Agent(name, definition=definition, takes_unclaimed=takes)
        return made

    # -- the state, as others read it ------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether a socket is open and every agent registered on it."""
        return self._connection.link is not None and self._registered >= set(self.agents)

    @property
    def max_frame_bytes(self) -> int | None:
        link = self._connection.link
        return link.welcome.limits.max_frame_bytes if link else None

    @property
    def busy(self) -> int:
        """Tool handlers, hooks and results on their way, running now (a drain waits for 0)."""
        return len(self._work)

    @property
    def heartbeats(self) -> int:
        """Pings the server answered on the socket the app has now."""
        return self._connection.pongs

    def holds(self, call: str) -> bool:
        """Whether this app serves ``call`` now."""
        return call in self.calls

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds, checked after every frame and state change."""
        await self._changes.wait_for(predicate)

    def spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        """Run ``work`` as a task the app waits for when it drains."""
        task = asyncio.create_task(work, name=name)
        self._work.add(task)

        def done(task: asyncio.Task[None]) -> None:
            self._work.discard(task)
            if not task.cancelled() and (exc := task.exception()) is not None:
                log.error("%s failed", task.get_name(), exc_info=exc)
            self._changes.notify()

        task.add_done_callback(done)

    async def send(self, frame: FromApp) -> bool:
        """Send ``frame`` on the socket the app has now; False when it has none."""
        return await self._connection.send(frame)

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Hold the agents until :meth:`close` (or :meth:`drain`), reconnecting whenever the
        socket goes. Raises a :class:`pinecall.Refused` (a bad key, an agent out of scope, …)
        or :class:`pinecall.BadURL`: what connecting again would meet again."""
        if not self.agents:
            raise ValueError("the app holds no agent: app.agent(name) first")
        if self._running:
            raise RuntimeError("the app runs already")
        for agent in self.agents.values():
            if missing := agent.unhandled():
                log.warning("%s: no handler for the tools %s", agent.name, ", ".join(missing))
        self._running = True
        try:
            await self._connection.hold()
        finally:
            self._running = False
            self._changes.notify()

    async def _opened(self, link: Link) -> None:
        """A socket opened: every agent registered on it."""
        for agent in self.agents.values():
            await link.ws.send(
                encode(
                    AgentRegister(agent=agent.name, takes_unclaimed=agent.takes_unclaimed)
                ).decode()
            )
        self._changes.notify()

    async def _lost(self, link: Link) -> None:
        """The socket went: what was waiting on it is told, its calls are detached ("lost")."""
        self._registered.clear()
        self.answers.lost()
        self.commands.lost(list(self.calls))
        for call in list(self.calls):
            self._detach(call, "lost")
        self._changes.notify()

    # -- frames ----------------------------------------------------------------------------

    async def _frame(self, frame: ToApp) -> None:
        match frame:
            case AgentRegistered(agent=agent, parked=parked):
                self._registered.add(agent)
                log.info("app %s holds %s (%d parked calls follow)", self.instance, agent, parked)
            case CallAttached():
                await self._attached(frame)
            case CallReady(call=call) if call in self.calls:
                held = self.calls[call]
                held.prompt_hash, held.prompt_matches = frame.prompt_hash, frame.matches
                if not frame.matches:
                    log.warning(
                        "call %s did not open with %s's prompt (another version's, or none said)",
                        call,
                        held.agent,
                    )
            case ToolCallFrame():
                self.answers.asked(frame, self.calls.get(frame.call))
            case ToolResultAck():
                self.answers.acked(frame)
            case CallCommandAck():
                self.commands.acked(frame)
            case AgentDraining(agent=agent):
                self._drained[agent] = frame
                log.info(
                    "%s drained: %d calls handed, %d parked", agent, frame.handed, frame.parked
                )
            case CallDetached(call=call, why=why):
                self._detach(call, why)
            case ErrorFrame():
                self._refused(frame)
        self._changes.notify()

    async def _attached(self, frame: CallAttached) -> None:
        call = self.calls[frame.call] = Call(self, frame)
        self.commands.attached(frame.call)
        agent = self.agents.get(frame.agent)
        if agent is not None and agent.definition is not None:
            definition = agent.definition
            setup = CallSetup(call=frame.call, prompt=definition.prompt, tools=definition.tools)
            if len(encode(setup)) > (self.max_frame_bytes or len(encode(setup))):
                # over the limit the server closes the socket (1009), and every call with it
                log.error("%s's call.setup is over the socket's frame limit: not sent", agent.name)
            else:
                await self.send(setup)
        self._hooks(frame.agent, "attached", call)

    def _detach(self, call_id: str, why: Detached) -> None:
        call = self.calls.pop(call_id, None)
        if why == "ended":
            self.answers.forget(call_id)
        if call is not None:
            call.detached = why
            self._hooks(call.agent, "detached", call)

    def _refused(self, frame: ErrorFrame) -> None:
        if self.commands.refused(frame) or self.answers.refused(frame):
            return
        log.warning("app socket: %s (%s): %s", frame.code, frame.re, frame.message)

    def _hooks(self, agent: str, event: CallEvent, call: Call) -> None:
        held = self.agents.get(agent)
        for hook in held.hooks[event] if held is not None else []:
            self.spawn(self._hook(hook, call), f"{event} hook {hook.__name__} {call.id}")

    async def _hook(self, hook: Callable[[Call], Any], call: Call) -> None:
        try:
            await call_maybe_async(hook, call)
        except Exception:
            log.exception("the hook %s of %s (call %s) failed", hook.__name__, call.agent, call.id)

    # -- commands --------------------------------------------------------------------------

    async def command(
        self,
        call: str,
        kind: Literal["say", "end"],
        text: str | None,
        *,
        id: str | None = None,
        timeout_s: float = 10.0,
    ) -> CallCommandAck:
        """``call.command`` once per ``id`` (minted when None): :meth:`pinecall.Call.say` and
        :meth:`pinecall.Call.end` (:mod:`pinecall.commands`)."""
        return await self.commands.send(call, kind, text, id=id, timeout_s=timeout_s)

    # -- stopping --------------------------------------------------------------------------

    async def drain(self, timeout_s: float | None = None) -> None:
        """``agent.drain`` for each agent (its calls go to another process or wait parked; the
        tools it runs still answer), then return once this app serves no call and runs no tool
        or hook (``TimeoutError`` after ``timeout_s``). The app reconnects no more; call
        :meth:`close` after."""
        self._connection.stop.set()
        link = self._connection.link
        if link is not None:
            agents = [name for name in self.agents if name in self._registered]
            for name in agents:
                await self.send(AgentDrain(agent=name))
            await self.wait_for(
                lambda: (
                    self._connection.link is not link
                    or all(name in self._drained for name in agents)
                )
            )
        async with asyncio.timeout(timeout_s):
            await self.wait_for(lambda: not self.calls and not self._work)

    @property
    def drained(self) -> dict[str, AgentDraining]:
        """Each agent drained, with what the server said of it (calls handed and parked)."""
        return dict(self._drained)

    async def close(self) -> None:
        """Close the socket (1000) and stop: :meth:`run` returns; tools still running are
        cancelled (:meth:`drain` first lets them answer)."""
        await self._connection.close()
        await self.wait_for(lambda: not self._running)
        for task in list(self._work):
            task.cancel()
        await asyncio.gather(*self._work, return_exceptions=True)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[App]:
        """``run`` in a task until the block ends (then :meth:`close`); enters once the socket
        is open and every agent registered, raises what ``run`` raised if it stopped first."""
        task = asyncio.create_task(self.run(), name="pinecall-app")
        done = asyncio.create_task(self.wait_for(lambda: self.connected or task.done()))
        await asyncio.wait({task, done}, return_when=asyncio.FIRST_COMPLETED)
        done.cancel()
        if task.done():
            await task
            raise RuntimeError("the app stopped before it held its agents")
        try:
            yield self
        finally:
            await self.close()
            await task
