"""App processes under watch: a tenant's app (the SDK's ``pinecall.App``) run as ``pinecall
start`` runs it, each thing it does written to a ledger of its own (``lab app``, or ``python -m
pinecall_loadlab.apps``: :mod:`.command`), and a console that holds an agent and is handed no call
(:mod:`.console`). ``up`` and ``lab run handover`` read
the ledgers (issue 16, "In the main job")."""
