"""The ``pinecall-runtime`` CLI: the operator's and the worker's front door.

It mounts every installed service's commands (entry points ``pinecall_runtime.commands``), loading
each only when invoked, so an image that installs one service has a working CLI with that
service's verbs, and the lab's commands exist only where ``loadlab`` is installed.
"""
