"""The simulated caller (issue 18, "The simulated caller"): ``POST /v1/evals/voice`` rings an
org's agent with a caller the runtime makes itself, through the offer path every call takes.

Modules: ``runs`` (the endpoint's work: refusals, admission, the result on the agent's log),
``caller`` (the caller in its room: mouth, ears, turns), ``voices`` (the environment's voice and
ears: Cartesia and Deepgram, as the workers use them), ``rtc`` (its room on a real LiveKit),
``api`` (the route). It is production code: it imports nothing of the load lab
(``pinecall_loadlab``), which an import contract of ``.importlinter`` holds.
"""

from pinecall_dispatcher.evals.runs import VoiceEvals

__all__ = ["VoiceEvals"]
