"""``POST /v1/evals/voice`` (operator or app key): the simulated caller's result.

An app key rings in its own environment (a body naming another is 403 ``forbidden``); an
operator key names the environment (422 without one, or with one that is not an environment).
The rest of the refusals, and why the request waits for the result, are :mod:`.runs`'.
"""

from __future__ import annotations

from litestar import Request, post
from litestar.datastructures import State
from litestar.params import JSONBody

from pinecall_contracts.evals import VoiceEval, VoiceEvalResult
from pinecall_contracts.ids import ENVIRONMENTS
from pinecall_dispatcher.service import DispatcherService
from pinecall_servicekit.errors import Forbidden, Unprocessable
from pinecall_servicekit.http import problems, request_key


@post("/v1/evals/voice", status_code=200, responses=problems(400, 401, 403, 422, 429, 503))
async def voice_eval(
    request: Request[object, object, State], data: JSONBody[VoiceEval]
) -> VoiceEvalResult:
    """Ring the agent with the runtime's own caller, say the script, and answer what it heard:
    each turn's words and first audio (ms), and how the call went. Waits for the call."""
    service: DispatcherService = request.app.state.dispatcher
    key = await request_key(request, service.keyring, org=data.org or None, agent=data.agent)
    if key.kind == "app":
        environment = key.environment or ""
        if data.environment not in (None, environment):
            raise Forbidden(f"an app key of {environment} rings agents of {environment} only")
    elif data.environment is None or data.environment not in ENVIRONMENTS:
        raise Unprocessable(
            f"an operator names the environment: {' or '.join(ENVIRONMENTS)}",
            errors=[{"message": "no such environment", "key": "environment", "source": "body"}],
        )
    else:
        environment = data.environment
    return await service.evals.run(data, environment)


ROUTES = [voice_eval]
