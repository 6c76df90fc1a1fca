"""Typed clients of the services, one per service reached, each with one key.

:mod:`pinecall_clients.calllog`: the call log's client; :mod:`pinecall_clients.writer`: a call's
one writer; :mod:`pinecall_clients.roster`: the roster's (a worker's heartbeat over HTTP, the rows
over NATS); :mod:`pinecall_clients.dispatcher`: the dispatcher's ops reads. Their errors are
:mod:`pinecall_clients.errors`' one tree per service.
"""
