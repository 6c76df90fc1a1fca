"""``pinecall-runtime up``: the whole platform on one machine (issue 8).

- :mod:`.command`: the click command, start to stop;
- :mod:`.stage`: the run's own database, namespace and keys;
- :mod:`.services`: what runs, in order, and each process's environment;
- :mod:`.apps`: the app processes' ledgers (tool runs per id, calls handed) and the kills of
  ``--app-restarts``;
- :mod:`.supervise`: processes in groups of their own, logs, readiness, restarts, tiered stops;
- :mod:`.watch`: the calls as the callers, the call log and the dispatcher say them; the table;
- :mod:`.report`: every call's log read back and verified; the JSON report.
"""

from pinecall_runtime.up.command import up

__all__ = ["up"]
