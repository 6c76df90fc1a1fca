"""Cordons: durable in a JetStream KV bucket, standing on every replica and across restarts.

Each replica watches the bucket (the watch replays every key's current value, then live
changes) and keeps the newest setting of each worker by the server's revision; a setting made
here is applied at once with the revision the server gave it. Keyed by ``<fleet>/<worker>``
(escaped), so a cordon stands across the worker's restarts (seed 000, "Deploys drain, cordons
shrink").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import msgspec
from nats.js.kv import KeyValue

from pinecall_contracts.base import decode, encode
from pinecall_contracts.fleet import CordonSetting
from pinecall_contracts.ids import WorkerKey, worker_key
from pinecall_contracts.subjects import Subjects
from pinecall_roster import domain
from pinecall_servicekit.changes import Changes

_log = logging.getLogger(__name__)


class CordonBook:
    """The newest cordon setting of each worker, fed by the bucket's watch."""

    def __init__(self, kv: KeyValue, subjects: Subjects) -> None:
        self._kv = kv
        self._subjects = subjects
        self._settings: dict[WorkerKey, tuple[int, CordonSetting]] = {}
        self.loaded = asyncio.Event()
        """Set once the watch replayed every stored cordon."""
        self._task: asyncio.Task[None] | None = None
        self.changes = Changes()
        """Notified after each setting the watch applies."""

    def apply(self, revision: int, setting: CordonSetting) -> None:
        """Keep ``setting`` if it is the newest of its worker (by revision)."""
        key = WorkerKey(setting.worker)
        current = self._settings.get(key)
        newest = domain.newest_cordon(
            [current, (revision, setting)] if current else [(revision, setting)]
        )
        if newest is setting:
            self._settings[key] = (revision, setting)

    def holds(self, key: WorkerKey) -> bool:
        """Whether a cordon setting (set or lifted) is stored for ``key``."""
        return key in self._settings

    def is_cordoned(self, key: WorkerKey) -> bool:
        entry = self._settings.get(key)
        return bool(entry and entry[1].cordoned)

    def settings(self) -> list[CordonSetting]:
        return [s for _, s in self._settings.values()]

    async def put(self, setting: CordonSetting) -> int:
        """Store ``setting``; returns the revision the server gave it, applied here at once."""
        revision = await self._kv.put(self._subjects.cordon_key(setting.worker), encode(setting))
        self.apply(revision, setting)
        return revision

    async def start(self) -> None:
        """Watch the bucket until :meth:`stop`; returns once the stored cordons are loaded."""
        watcher = await self._kv.watchall()

        async def follow() -> None:
            async for entry in watcher:
                if entry is None:  # the end of the replay of stored values
                    self.loaded.set()
                    continue
                if entry.value is None or entry.operation is not None:
                    continue  # deletes and purges are not settings; nothing here makes them
                try:
                    self.apply(entry.revision, decode(entry.value, CordonSetting))
                except msgspec.MsgspecError as exc:
                    _log.warning("a malformed cordon under %s: %s", entry.key, exc)
                    continue
                await self.changes.notify()

        self._task = asyncio.create_task(follow(), name="cordons-watch")
        self._watcher = watcher
        await self.loaded.wait()

    async def stop(self) -> None:
        if self._task is not None:
            await self._watcher.stop()
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def cordon_key(worker: str) -> WorkerKey:
    """The cordon key of a worker named with or without its start."""
    return worker_key(worker)
