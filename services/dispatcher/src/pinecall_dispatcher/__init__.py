"""The dispatcher: the runtime chooses who answers every call (seed 000, "Who takes a call").

So far its rules (``domain``); the webhook consumer, the offers table, the sweep and the token
endpoint are issue 7's next steps.
"""
