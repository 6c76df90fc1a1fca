"""JSON Schema of every wire type, for other languages and for review of contract changes.

``python -m pinecall_contracts.schema > contracts.schema.json`` prints it.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from pinecall_contracts import (
    agents,
    appsocket,
    calls,
    dispatch,
    evals,
    fleet,
    keys,
    lab,
    livekit,
    outbound,
    persons,
    phones,
    problems,
    whatsapp,
    worker,
)

CONTRACTS: tuple[type[msgspec.Struct], ...] = (
    fleet.WorkerMinute,
    fleet.WorkerHeartbeat,
    fleet.HeartbeatReply,
    fleet.CordonSetting,
    fleet.CordonRequest,
    fleet.WorkerRow,
    fleet.FleetTotals,
    fleet.FleetView,
    fleet.RosterSnapshot,
    fleet.FleetRecord,
    fleet.FleetRecords,
    fleet.Wanted,
    fleet.FleetListRequest,
    keys.KeyInfo,
    keys.KeyCreated,
    keys.KeyRevoked,
    persons.OrgInfo,
    persons.PersonInfo,
    persons.PersonChanged,
    livekit.LiveKitEvent,
    livekit.WebhookDropped,
    worker.TurnMeasured,
    worker.CallError,
    worker.CallEnded,
    problems.ProblemDetails,
    calls.Entry,
    calls.CallOpen,
    calls.Reopened,
    calls.CallRecord,
    calls.EntryBatch,
    calls.BatchWritten,
    calls.EventWritten,
    calls.LoggedEntry,
    calls.CallLog,
    calls.CallCommandEntry,
    calls.CallCommands,
    calls.CallSummary,
    calls.CallPage,
    calls.CallEnd,
    calls.ToolCall,
    calls.ToolAsked,
    calls.ToolAnswer,
    calls.ToolResult,
    calls.CallbackRequest,
    calls.Callback,
    calls.CallbackPage,
    calls.AgentEntry,
    calls.AgentLog,
    calls.CallEvent,
    calls.Appended,
    calls.LogToken,
    calls.CallLogRequest,
    calls.CallLogPage,
    dispatch.CallRing,
    dispatch.JobOffer,
    dispatch.TokenRequest,
    dispatch.VisitorToken,
    dispatch.Quota,
    dispatch.WrittenAdmission,
    dispatch.WrittenAdmitted,
    dispatch.JournalLine,
    dispatch.JournalRequest,
    dispatch.Journal,
    dispatch.KeptRoom,
    dispatch.FleetOffers,
    dispatch.OffersRequest,
    dispatch.OffersSnapshot,
    lab.CallerReport,
    lab.AppEvent,
    lab.ChatReport,
    agents.AgentTool,
    agents.AgentDefinition,
    agents.AgentVersion,
    agents.AgentList,
    appsocket.Limits,
    appsocket.Hello,
    appsocket.Welcome,
    appsocket.Ping,
    appsocket.Pong,
    appsocket.AgentRegister,
    appsocket.AgentRegistered,
    appsocket.CallAttached,
    appsocket.CallSetup,
    appsocket.CallReady,
    appsocket.ToolCallFrame,
    appsocket.ToolResultFrame,
    appsocket.ToolResultAck,
    appsocket.CallCommand,
    appsocket.CallCommandAck,
    appsocket.AgentDrain,
    appsocket.AgentDraining,
    appsocket.CallDetached,
    appsocket.ErrorFrame,
    appsocket.Holding,
    appsocket.HandCall,
    appsocket.Handed,
    whatsapp.WhatsAppNumberPut,
    whatsapp.WhatsAppNumber,
    whatsapp.WhatsAppNumberList,
    whatsapp.WhatsAppNumberSecrets,
    whatsapp.WhatsAppVerify,
    whatsapp.WhatsAppItem,
    phones.PhoneNumberPut,
    phones.PhoneNumber,
    phones.PhoneNumberList,
    evals.VoiceEval,
    evals.EvalTurn,
    evals.VoiceEvalResult,
    outbound.OutboundRequest,
    outbound.OutboundCall,
    outbound.Dialled,
)
"""Every wire type; a test holds this list to the modules so none is forgotten."""


def export() -> dict[str, Any]:
    """``{"$defs": {...}, "contracts": {tag: {"$ref": ...}}}``: one schema document for all."""
    refs, components = msgspec.json.schema_components(CONTRACTS, ref_template="#/$defs/{name}")
    contracts: dict[str, Any] = {}
    for kind, ref in zip(CONTRACTS, refs, strict=True):
        name = kind.__struct_config__.tag or kind.__name__
        contracts[str(name)] = ref
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": components,
        "contracts": contracts,
    }


if __name__ == "__main__":
    print(json.dumps(export(), indent=2, sort_keys=True))
