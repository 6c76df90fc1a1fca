// A chat on WS {chat}/v1/chat?token=<chat token>[&call=<call>] (no build step, no library).
//
// The server speaks first: chat.ready.v1 {call, history, resumed}; the page sends
// chat.message.v1 {id, text} with an id of its own; the reply comes as chat.delta.v1 pieces, then
// chat.reply.v1 {message, text, replayed}. Resuming: when the socket ends with a code that says
// "dial again" (a replica stopping 1001 or killed, no close at all 1006, 1011, 4503), this dials
// again naming the call (?call=), to whichever replica answers, backing off from a quarter of a
// second to 10 s; the session is rebuilt from the call's log, whose turns come back as the
// history, and every message not yet answered is sent again with its same id: the service
// answers it once (one answered before comes back replayed, not twice). Any other code is a
// refusal that would come again (4401 a bad token, 4409 the call ended, …): the chat stops.

const DIAL_AGAIN = new Set([1001, 1005, 1006, 1011, 4503]);

export function openChat({ chat, token, onReady, onDelta, onReply, onState = () => {} }) {
  let call = null;
  let socket = null;
  let backoff = 250;
  let count = 0;
  const unanswered = new Map(); // message id → text, in the order sent
  const prefix = `m-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

  function send(id, text) {
    socket.send(JSON.stringify({ type: "chat.message.v1", id, text }));
  }

  function dial() {
    const url = new URL("/v1/chat", chat);
    url.searchParams.set("token", token);
    if (call) url.searchParams.set("call", call);
    socket = new WebSocket(url);
    socket.onmessage = (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "chat.ready.v1") {
        call = frame.call;
        backoff = 250;
        onState("ready");
        onReady(frame);
        for (const [id, text] of unanswered) send(id, text);
      } else if (frame.type === "chat.delta.v1") {
        onDelta(frame);
      } else if (frame.type === "chat.reply.v1") {
        unanswered.delete(frame.message);
        onReply(frame);
      }
    };
    socket.onclose = (event) => {
      if (!DIAL_AGAIN.has(event.code)) {
        onState(`closed ${event.code} ${event.reason}`.trim());
        return;
      }
      onState("dialling again");
      setTimeout(dial, backoff);
      backoff = Math.min(backoff * 2, 10000);
    };
  }

  dial();
  return {
    /** Send a message; its id, kept until it is answered (sent again after a cut). */
    say(text) {
      const id = `${prefix}-${++count}`;
      unanswered.set(id, text);
      if (socket.readyState === WebSocket.OPEN && call) send(id, text);
      return id;
    },
    get call() {
      return call;
    },
  };
}
