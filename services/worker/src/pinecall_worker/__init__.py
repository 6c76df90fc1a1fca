"""The worker: a livekit-agents ``AgentServer`` that counts its seats, says how it is, drains,
and runs its calls onto the call log.

Layers: ``domain`` (pure: LiveKit's load threshold, the two loads, the minute, the startup
probe's rule) and ``offer`` (pure: the JobOffer a job carries, or one derived from the job) ←
``measures`` (the datagram socket the job processes report on), ``heartbeat`` (to the roster),
``health`` (the startup probe) and ``jobs`` (each running job's call, ended ``failed`` when its process
dies) ← ``server`` (one worker process: the AgentServer, its name, signals, drain and cordon)
← ``main`` (``worker start``). The calls themselves are ``call`` (a package: the pipeline, the
call's record on the log, the ``answer`` and ``sentence`` jobs), run in the job processes.
Source: seed 000, "Capacity is counted in calls", "The gateway hears every worker", "A worker that
is up but bad", "Deploys drain, cordons shrink"; seed 002, "The gateway restarts".
"""
