"""Typed clients of the services, one per service reached, each with one key, and of LiveKit.

:mod:`pinecall_clients.calllog`: the call log's client; :mod:`pinecall_clients.writer`: a call's
one writer; :mod:`pinecall_clients.roster`: the roster's (a worker's heartbeat over HTTP, the rows
over NATS); :mod:`pinecall_clients.dispatcher`: the dispatcher's ops reads;
:mod:`pinecall_clients.livekit`: one LiveKit's server API, its rooms, participants and dispatches
(the dispatcher, the reaper, the sentence job); :mod:`pinecall_clients.answers`: one request's
answer in a client's own error pair (the roster's heartbeat, the dispatcher's reads). Their errors
are :mod:`pinecall_clients.errors`' one tree per service.
"""
