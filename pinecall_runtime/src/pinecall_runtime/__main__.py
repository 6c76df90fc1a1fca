"""``python -m pinecall_runtime``: the same CLI as ``pinecall-runtime``."""

from pinecall_runtime.cli import main

if __name__ == "__main__":  # not when a driver process of ``load`` imports it (spawn)
    main()
