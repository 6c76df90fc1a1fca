"""The load lab's experiments, run against the LiveKit stand-in."""
