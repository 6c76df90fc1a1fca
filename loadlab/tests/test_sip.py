"""Issue 18, "LiveKit SIP on the stand-in": livekit-api's SipService against the stand-in —
trunks and rules, an inbound call made into a room by its rule, outbound legs that ring, answer,
fail and lose their BYE."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from livekit import api
from livekit.protocol import sip

from pinecall_labroom import LabRoom
from pinecall_loadlab.livekit import StandIn, StandInConfig
from pinecall_loadlab.livekit import events as ev
from pinecall_loadlab.livekit.callers import agent_token
from pinecall_loadlab.livekit.testing import API_KEY, API_SECRET, WebhookSink

Reason = api.DisconnectReason


@pytest.fixture
def standin_config(webhook_sink: WebhookSink) -> StandInConfig:
    """A short media timeout, so a lost BYE ends within the test."""
    return StandInConfig(
        keys={API_KEY: API_SECRET}, port=0, webhook_urls=[webhook_sink.url], sip_media_timeout_s=1.0
    )


@pytest.fixture
async def control(standin: StandIn) -> AsyncIterator[aiohttp.ClientSession]:
    tok = api.AccessToken(API_KEY, API_SECRET).to_jwt()
    async with aiohttp.ClientSession(
        base_url=standin.url, headers={"Authorization": f"Bearer {tok}"}
    ) as s:
        yield s


async def outbound_trunk(lk: api.LiveKitAPI) -> str:
    trunk = await lk.sip.create_outbound_trunk(
        sip.CreateSIPOutboundTrunkRequest(
            trunk=sip.SIPOutboundTrunkInfo(
                name="lab out", address="sip.lab.invalid", numbers=["+15550199"]
            )
        )
    )
    return trunk.sip_trunk_id


async def test_trunks_and_rules_round_trip_and_refuse_conflicts(
    standin: StandIn, livekit_api: api.LiveKitAPI
) -> None:
    s = livekit_api.sip
    t = await s.create_inbound_trunk(
        sip.CreateSIPInboundTrunkRequest(trunk=sip.SIPInboundTrunkInfo(numbers=["+15550199"]))
    )
    assert t.sip_trunk_id.startswith("ST_")
    with pytest.raises(api.TwirpError) as taken:
        await s.create_inbound_trunk(
            sip.CreateSIPInboundTrunkRequest(
                trunk=sip.SIPInboundTrunkInfo(numbers=["+1 555 0199"])  # the same, normalized
            )
        )
    assert (taken.value.code, taken.value.status) == ("invalid_argument", 400)
    assert "Conflicting inbound SIP Trunks" in taken.value.message
    out = await outbound_trunk(livekit_api)
    listed = await s.list_inbound_trunk(sip.ListSIPInboundTrunkRequest(numbers=["+15550199"]))
    assert [x.sip_trunk_id for x in listed.items] == [t.sip_trunk_id]
    outs = await s.list_outbound_trunk(sip.ListSIPOutboundTrunkRequest())
    assert [x.sip_trunk_id for x in outs.items] == [out]

    rule = sip.SIPDispatchRuleInfo(
        trunk_ids=[t.sip_trunk_id],
        rule=sip.SIPDispatchRule(
            dispatch_rule_individual=sip.SIPDispatchRuleIndividual(room_prefix="call")
        ),
    )
    made = await s.create_dispatch_rule(sip.CreateSIPDispatchRuleRequest(dispatch_rule=rule))
    assert made.sip_dispatch_rule_id.startswith("SDR_")
    with pytest.raises(api.TwirpError) as clash:
        await s.create_dispatch_rule(sip.CreateSIPDispatchRuleRequest(dispatch_rule=rule))
    assert clash.value.code == "invalid_argument"
    rules = await s.list_dispatch_rule(sip.ListSIPDispatchRuleRequest(trunk_ids=[t.sip_trunk_id]))
    assert [r.sip_dispatch_rule_id for r in rules.items] == [made.sip_dispatch_rule_id]

    await s.delete_dispatch_rule(
        sip.DeleteSIPDispatchRuleRequest(sip_dispatch_rule_id=made.sip_dispatch_rule_id)
    )
    gone = await s.delete_trunk(sip.DeleteSIPTrunkRequest(sip_trunk_id=t.sip_trunk_id))
    assert gone.kind == sip.SIPTrunkInfo.TrunkKind.TRUNK_INBOUND
    for call in (
        s.delete_trunk(sip.DeleteSIPTrunkRequest(sip_trunk_id=t.sip_trunk_id)),
        s.delete_dispatch_rule(
            sip.DeleteSIPDispatchRuleRequest(sip_dispatch_rule_id=made.sip_dispatch_rule_id)
        ),
    ):
        with pytest.raises(api.TwirpError) as missing:
            await call
        assert missing.value.code == "not_found"
    assert standin.sip.store.inbound == {}
    assert standin.sip.store.rules == {}


async def test_sip_methods_need_the_sip_grants(standin: StandIn) -> None:
    video_only = api.AccessToken(API_KEY, API_SECRET).with_grants(
        api.VideoGrants(room_admin=True, room_create=True, room_list=True)
    )
    async with aiohttp.ClientSession() as http:
        for method in ("ListSIPInboundTrunk", "CreateSIPParticipant"):
            r = await http.post(
                f"{standin.url}/twirp/livekit.SIP/{method}",
                json={},
                headers={"Authorization": f"Bearer {video_only.to_jwt()}"},
            )
            assert r.status == 401
            assert (await r.json())["msg"] == "permissions denied"


async def test_an_inbound_call_makes_the_rules_room_dispatch_and_sip_participant(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    s = livekit_api.sip
    trunk = await s.create_inbound_trunk(
        sip.CreateSIPInboundTrunkRequest(trunk=sip.SIPInboundTrunkInfo(numbers=["+15550199"]))
    )
    rule = await s.create_dispatch_rule(
        sip.CreateSIPDispatchRuleRequest(
            dispatch_rule=sip.SIPDispatchRuleInfo(
                trunk_ids=[trunk.sip_trunk_id],
                rule=sip.SIPDispatchRule(
                    dispatch_rule_individual=sip.SIPDispatchRuleIndividual(room_prefix="call")
                ),
                room_config=api.RoomConfiguration(
                    agents=[api.RoomAgentDispatch(agent_name="acme", metadata='{"ring":1}')]
                ),
            )
        )
    )
    r = await control.post(
        "/lab/control/sip/inbound", json={"from": "+15550100", "to": "+15550199"}
    )
    assert r.status == 200, await r.text()
    call = await r.json()
    assert call["room"].startswith("call_+15550100_")
    assert len(call["room"]) == len("call_+15550100_") + 12
    caller = await LabRoom.connect(standin.url, call["token"])
    async with asyncio.timeout(10):
        [joined] = await standin.events.wait_for(
            ev.ParticipantJoined, lambda e: e.room == call["room"]
        )
    assert (joined.identity, joined.kind) == ("sip_+15550100", api.ParticipantInfo.Kind.SIP)
    p = await livekit_api.room.get_participant(
        api.RoomParticipantIdentity(room=call["room"], identity="sip_+15550100")
    )
    assert p.name == "Phone +15550100"
    assert dict(p.attributes) == {
        "sip.callID": call["call_id"],
        "sip.trunkID": trunk.sip_trunk_id,
        "sip.ruleID": rule.sip_dispatch_rule_id,
        "sip.phoneNumber": "+15550100",
        "sip.trunkPhoneNumber": "+15550199",
        "sip.callStatus": "active",
    }
    [d] = await livekit_api.agent_dispatch.list_dispatch(call["room"])
    assert (d.agent_name, d.metadata) == ("acme", '{"ring":1}')
    await caller.leave()


async def test_an_inbound_call_no_rule_takes_is_refused_404(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    await livekit_api.sip.create_inbound_trunk(
        sip.CreateSIPInboundTrunkRequest(trunk=sip.SIPInboundTrunkInfo(numbers=["+15550199"]))
    )
    for to in ("+15550199", "+15550198"):  # a trunk without a rule; no trunk for the number
        r = await control.post("/lab/control/sip/inbound", json={"from": "+15550100", "to": to})
        assert r.status == 404
        assert (await r.json())["sip_status_code"] == 404
    r = await control.post("/lab/control/sip/inbound", json={"from": "+15550100"})
    assert r.status == 400
    assert standin.rooms.rooms == {}


async def test_an_answered_leg_joins_rings_turns_active_and_hears_the_room(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    trunk = await outbound_trunk(livekit_api)
    agent = await LabRoom.connect(
        standin.url, agent_token(API_KEY, API_SECRET, room="out-1", identity="agent-1")
    )
    info = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk,
            sip_call_to="+15550142",
            room_name="out-1",
            participant_attributes={"pinecall.call": "c1"},
            wait_until_answered=True,
        )
    )
    assert (info.participant_identity, info.room_name) == ("sip_+15550142", "out-1")
    assert info.sip_call_id.startswith("SCL_")
    statuses = []
    while event := agent.presence.get_nowait() if not agent.presence.empty() else None:
        if event["participant"]["identity"] == "sip_+15550142":
            statuses.append(event["participant"]["attributes"]["sip.callStatus"])
    assert statuses == ["dialing", "ringing", "active"]
    attrs = agent.participants["sip_+15550142"]["attributes"]
    assert attrs == {
        "pinecall.call": "c1",
        "sip.callID": info.sip_call_id,
        "sip.trunkID": trunk,
        "sip.phoneNumber": "+15550142",
        "sip.hostname": "sip.lab.invalid",
        "sip.trunkPhoneNumber": "+15550199",
        "sip.callStatus": "active",
    }
    await agent.send(b"\x00\x01" * 480)
    r = await control.post(f"/lab/control/sip/calls/{info.sip_call_id}/hangup", json={})
    assert r.status == 200
    async with asyncio.timeout(10):
        [ended] = await standin.events.wait_for(
            ev.SipCallEnded, lambda e: e.call_id == info.sip_call_id
        )
    assert (ended.how, ended.sip_status, ended.reason) == ("hangup", 200, Reason.CLIENT_INITIATED)
    [leg] = await (await control.get("/lab/control/sip/calls")).json()
    assert leg["heard"]["agent-1"]["bytes"] == 960
    await agent.leave()


@pytest.mark.parametrize(
    ("number", "code", "status", "reason"),
    [
        ("+15005550486", "resource_exhausted", 486, Reason.USER_REJECTED),
        ("+15005550603", "permission_denied", 603, Reason.USER_REJECTED),
        ("+15005550480", "resource_exhausted", 480, Reason.USER_UNAVAILABLE),
        ("+15005550503", "failed_precondition", 503, Reason.SIP_TRUNK_FAILURE),
    ],
)
async def test_a_failed_leg_answers_with_its_sip_status_and_leaves(
    standin: StandIn, livekit_api: api.LiveKitAPI, number: str, code: str, status: int, reason: int
) -> None:
    trunk = await outbound_trunk(livekit_api)
    with pytest.raises(api.SipCallError) as failed:
        await livekit_api.sip.create_sip_participant(
            sip.CreateSIPParticipantRequest(
                sip_trunk_id=trunk, sip_call_to=number, room_name="out-2", wait_until_answered=True
            )
        )
    assert (failed.value.code, failed.value.sip_status_code) == (code, status)
    [left] = standin.events.of(ev.ParticipantLeft, lambda e: e.identity == f"sip_{number}")
    assert left.reason == reason


async def test_an_unanswered_leg_rings_out_and_one_not_waited_for_answers_at_once(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    trunk = await outbound_trunk(livekit_api)
    r = await control.put("/lab/control/sip/callees/+15550177", json={"answer": 0})
    assert r.status == 200
    req = sip.CreateSIPParticipantRequest(
        sip_trunk_id=trunk, sip_call_to="+15550177", room_name="out-3", wait_until_answered=True
    )
    req.ringing_timeout.seconds = 1
    with pytest.raises(api.TwirpError) as rang_out:
        await livekit_api.sip.create_sip_participant(req)
    assert (rang_out.value.code, rang_out.value.message) == ("canceled", "sip request timed out")
    assert "sip_status_code" not in rang_out.value.metadata
    [ended] = standin.events.of(ev.SipCallEnded)
    assert (ended.how, ended.sip_status, ended.reason) == ("no_answer", 0, Reason.USER_UNAVAILABLE)

    r = await control.put("/lab/control/sip/callees/+15550178", json={"ring_s": 0.5})
    at_once = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk, sip_call_to="+15550178", room_name="out-4"
        )
    )
    leg = standin.sip.legs[at_once.sip_call_id]
    assert leg.status == "ringing"  # answered the request before the callee picked up
    await asyncio.wait_for(asyncio.shield(leg.answered), 10)
    assert leg.status == "active"


async def test_anyone_not_set_answers_as_the_default_callee_and_a_set_number_as_itself(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    trunk = await outbound_trunk(livekit_api)
    r = await control.put("/lab/control/sip/callee", json={"hangup_after_s": 0.1})
    assert r.status == 200
    r = await control.put("/lab/control/sip/callees/+15550166", json={"answer": 486})
    assert r.status == 200

    anyone = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk, sip_call_to="+15550165", room_name="out-7", wait_until_answered=True
        )
    )
    async with asyncio.timeout(10):
        [ended] = await standin.events.wait_for(
            ev.SipCallEnded, lambda e: e.call_id == anyone.sip_call_id
        )
    assert (ended.how, ended.answered) == ("hangup", True)
    with pytest.raises(api.TwirpError) as busy:
        await livekit_api.sip.create_sip_participant(
            sip.CreateSIPParticipantRequest(
                sip_trunk_id=trunk, sip_call_to="+15550166", room_name="out-8",
                wait_until_answered=True,
            )
        )  # fmt: skip
    assert busy.value.sip_status_code == 486

    r = await control.delete("/lab/control/sip/callee")
    assert r.status == 200
    kept = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk, sip_call_to="+15550167", room_name="out-9", wait_until_answered=True
        )
    )
    assert standin.sip.legs[kept.sip_call_id].status == "active"
    assert standin.sip.callee_for("+15550167").hangup_after_s is None


async def test_a_lost_bye_or_stopped_media_ends_the_leg_at_the_media_timeout(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    trunk = await outbound_trunk(livekit_api)
    await control.put(
        "/lab/control/sip/callees/+15550155", json={"hangup_after_s": 0.1, "bye_lost": True}
    )
    lost = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk, sip_call_to="+15550155", room_name="out-5", wait_until_answered=True
        )
    )
    stopped = await livekit_api.sip.create_sip_participant(
        sip.CreateSIPParticipantRequest(
            sip_trunk_id=trunk, sip_call_to="+15550156", room_name="out-6", wait_until_answered=True
        )
    )
    r = await control.post(f"/lab/control/sip/calls/{stopped.sip_call_id}/media_stop")
    assert r.status == 200
    async with asyncio.timeout(10):
        for call in (lost, stopped):
            [ended] = await standin.events.wait_for(
                ev.SipCallEnded, lambda e, c=call: e.call_id == c.sip_call_id
            )
            assert (ended.how, ended.reason) == ("media_timeout", Reason.UNKNOWN_REASON)
    # the participant stayed in the room until then, still "active": LiveKit never heard a BYE
    [joined_lost] = standin.events.of(ev.ParticipantLeft, lambda e: e.room == "out-5")
    [started] = standin.events.of(ev.SipCallStarted, lambda e: e.call_id == lost.sip_call_id)
    assert joined_lost.at - started.at >= 1.0


async def test_bad_dial_requests_and_bad_control_bodies_are_refused(
    standin: StandIn, livekit_api: api.LiveKitAPI, control: aiohttp.ClientSession
) -> None:
    trunk = await outbound_trunk(livekit_api)
    bad = [
        (sip.CreateSIPParticipantRequest(sip_call_to="+1555", room_name="r"), "invalid_argument"),
        (sip.CreateSIPParticipantRequest(sip_trunk_id=trunk, room_name="r"), "invalid_argument"),
        (sip.CreateSIPParticipantRequest(sip_trunk_id=trunk, sip_call_to="+1"), "invalid_argument"),
        (
            sip.CreateSIPParticipantRequest(
                sip_trunk_id="ST_nope", sip_call_to="+1", room_name="r"
            ),
            "not_found",
        ),
        (
            sip.CreateSIPParticipantRequest(
                sip_trunk_id=trunk, sip_call_to="+1", room_name="r", play_dialtone=True
            ),
            "invalid_argument",
        ),
    ]
    for req, code in bad:
        with pytest.raises(api.TwirpError) as refused:
            await livekit_api.sip.create_sip_participant(req)
        assert refused.value.code == code
    assert standin.rooms.rooms == {}
    assert standin.sip.legs == {}
    for path, body in [
        ("/lab/control/sip/callees/+1555", {"answer": 100}),
        ("/lab/control/sip/callees/+1555", {"ring_s": -1}),
        ("/lab/control/sip/callees/+1555", {"answer": "busy"}),
    ]:
        r = await control.put(path, json=body)
        assert r.status == 400, body
    assert standin.sip.callees == {}
    r = await control.post("/lab/control/sip/calls/SCL_nope/hangup", json={})
    assert r.status == 404
