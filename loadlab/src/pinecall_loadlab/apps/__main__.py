"""``python -m pinecall_loadlab.apps MODULE:APP --ledger FILE``: ``lab app`` without the CLI's
other commands, so a process started again (``up --app-restarts``) imports only the SDK and this
package."""

from pinecall_loadlab.apps.command import app

app(prog_name="python -m pinecall_loadlab.apps")
