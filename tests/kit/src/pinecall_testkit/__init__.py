"""The services' test support: what a test needs to run a service and speak to it.

One module per service, one of what they share, and the call-log's faulty transport:

- :mod:`.common`: what every service's part does alike: one key of each kind (``make_keys``),
  a key as a header (``bearer``), a replica in the test's loop (``replica_of``);
- :mod:`.call_log`: request bodies, replicas in the test's loop or as
  ``pinecall-runtime call-log serve`` processes;
- :mod:`.appsocket`: an app's socket as call-log's tests play it, and the replica it dials
  (``serving``: the ``serve`` fixture of call-log's tests and the SDK's);
- :mod:`.faults`: a transport that loses requests and answers on command (the writer's tests);
- :mod:`.relay`: a TCP relay that cuts and holds connections (an app's network failing);
- :mod:`.roster`: heartbeat bodies, a replica in the test's loop;
- :mod:`.webhook_ingest`: a webhook signed as LiveKit signs one;
- :mod:`.worker`: an offer as the dispatcher makes it, the call log's events heard on NATS, a
  worker run until a block ends.

It is test-only: no image installs this distribution (it is in the workspace's dev group and no
service depends on it), and no library, service or the CLI imports it (``.importlinter``,
build-support/macros.py). A service's tests reach another service through this kit (the
service started whole, spoken to over HTTP or NATS), never through the other service's modules.
No fixtures here: they are in each test directory's conftest.
"""
