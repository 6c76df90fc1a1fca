"""A day at cell scale on a virtual clock, through the production rules (issue 23).

``pinecall-runtime lab simulate`` runs a day of callers through the dispatcher's, the roster's
and the worker's own ``domain`` rules (imported, never re-written: who is offered a room, when it
is offered again or overflows, which worker is silent or failing, how many scaled workers are
wanted, what load a worker tells LiveKit) on SimPy's discrete-event clock, with the world around
them modelled from stated numbers (:mod:`.params`) within the bounds of a day it runs
(:mod:`.limits`): callers (:mod:`.day`), workers and the roster (:mod:`.workers`), pods, nodes,
KEDA and faults (:mod:`.cluster`), the two dispatchers (:mod:`.choosing`), the run
(:mod:`.engine`), what it says (:mod:`.report`), the lab's experiments at their sizes
(:mod:`.experiments`), the plot (:mod:`.plot`).
"""
