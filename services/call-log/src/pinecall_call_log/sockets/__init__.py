"""The app socket, ``WS /v1/apps/socket`` (issue 16; seed 002, "A call is its agent's, not a
socket's"): apps hold agents; a call is handed to one socket that holds its agent, parked when
that socket goes and handed again at once, or to the next socket that registers the agent.

:mod:`.rules` (pure: which socket takes a call, which version is spoken), :mod:`.hub` (this
replica's sockets and the calls each holds), :mod:`.route` (the handshake and the frames). The
frames and close codes are ``pinecall_contracts.appsocket``'s.
"""
