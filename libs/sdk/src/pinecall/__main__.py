"""``python -m pinecall start MODULE:APP``: the ``pinecall`` command."""

from pinecall.cli import main

main()
