"""The reaper."""
