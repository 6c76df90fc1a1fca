"""Typed clients of the services' internal REST, for the worker and the overflow.

:mod:`pinecall_clients.calllog`: the call log's client; :mod:`pinecall_clients.writer`: a call's
one writer.
"""
