// A call's live log, followed with EventSource on its log token (no build step, no library).
//
// GET {callLog}/v1/calls/{call}/stream?log_token=… answers every entry of the call as a
// Server-Sent Event: `id` its seq, `data` the entry as JSON ({seq, kind, ts, data, counted}).
// Resuming is two things:
//  - a cut (a call-log replica restarting): the browser reconnects on its own and sends the
//    last id it saw as the Last-Event-ID header; the log answers from the next seq, so
//    nothing is missed and nothing repeated;
//  - a non-200 on that reconnection (a 503 while no replica answers, a 401 once the log token
//    expired) makes the browser give up (readyState CLOSED): this rebuilds the EventSource
//    with ?last_event_id=<the last seq seen>, backing off from half a second to 15 s.
// The call's `call.sealed` entry is its last: the stream is closed then (a reconnection after
// the seal would be answered 204).

export function followLog({ callLog, call, token, onEntry, onState = () => {}, freshToken }) {
  let last = 0; // the seq of the last entry handed to onEntry
  let source = null;
  let timer = null;
  let backoff = 500;
  let stopped = false;

  function open() {
    const url = new URL(`/v1/calls/${encodeURIComponent(call)}/stream`, callLog);
    url.searchParams.set("log_token", token);
    if (last > 0) url.searchParams.set("last_event_id", String(last));
    source = new EventSource(url);
    source.onopen = () => {
      backoff = 500;
      onState("open");
    };
    source.onmessage = (event) => {
      const entry = JSON.parse(event.data);
      last = Number(event.lastEventId);
      onEntry(entry);
      if (entry.kind === "call.sealed") stop("sealed");
    };
    source.onerror = () => {
      if (stopped) return;
      if (source.readyState === EventSource.CONNECTING) {
        onState("reconnecting"); // the browser's own, with Last-Event-ID
        return;
      }
      source.close(); // CLOSED: a non-200; the browser will not try again
      onState("rebuilding");
      timer = setTimeout(async () => {
        if (freshToken) token = await freshToken().catch(() => token);
        if (!stopped) open();
      }, backoff);
      backoff = Math.min(backoff * 2, 15000);
    };
  }

  function stop(why = "stopped") {
    stopped = true;
    clearTimeout(timer);
    if (source) source.close();
    onState(why);
  }

  open();
  return { stop, get last() { return last; } };
}
