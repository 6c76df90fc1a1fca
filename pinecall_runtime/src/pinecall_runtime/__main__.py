"""``python -m pinecall_runtime``: the same CLI as ``pinecall-runtime``."""

from pinecall_runtime.cli import main

main()
