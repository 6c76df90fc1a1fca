// The page: what its address names, shown. Its server (a tenant's, or `up`'s) mints the tokens
// with its app key and opens the page with them in the address; nothing here holds a key.
import { openChat } from "./chat.js";
import { followLog } from "./stream.js";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

// What the page saw, for the curious and for the browser tests: every seq in arrival order.
window.pinecall = { seen: [], states: [], chat: [] };

if (params.get("call_log") && params.get("call") && params.get("log_token")) {
  $("log").hidden = false;
  $("log-call").textContent = params.get("call");
  followLog({
    callLog: params.get("call_log"),
    call: params.get("call"),
    token: params.get("log_token"),
    onEntry(entry) {
      window.pinecall.seen.push(entry.seq);
      const li = document.createElement("li");
      const what = entry.data.text ?? JSON.stringify(entry.data);
      li.innerHTML = '<span class="seq"></span><span class="kind"></span><span class="what"></span>';
      li.querySelector(".seq").textContent = entry.seq;
      li.querySelector(".kind").textContent = entry.kind;
      li.querySelector(".what").textContent = what;
      $("log-entries").append(li);
    },
    onState(state) {
      window.pinecall.states.push(state);
      $("log-state").textContent = state;
    },
  });
}

if (params.get("chat") && params.get("chat_token")) {
  $("chat").hidden = false;
  const turns = $("chat-turns");
  const shown = new Map(); // message id → its reply's <li>, while it is being made
  const say = (role, text, message) => {
    const li = document.createElement("li");
    li.className = role;
    li.dataset.message = message;
    li.textContent = text;
    turns.append(li);
    return li;
  };
  const replyOf = (message) => {
    if (!shown.has(message)) shown.set(message, say("agent", "", message));
    return shown.get(message);
  };
  const pending = new Map(); // message id → text, until its reply is whole
  const session = openChat({
    chat: params.get("chat"),
    token: params.get("chat_token"),
    onReady(ready) {
      // the history is the call's log: what was shown is shown again from it, once
      turns.replaceChildren();
      shown.clear();
      for (const turn of ready.history) {
        say(turn.role === "user" ? "user" : "agent", turn.text, turn.message);
      }
      for (const id of pending.keys()) {
        if (!ready.history.some((t) => t.role === "user" && t.message === id)) {
          say("user", pending.get(id), id);
        }
      }
    },
    onDelta(delta) {
      replyOf(delta.message).textContent += delta.text;
    },
    onReply(reply) {
      pending.delete(reply.message);
      if (turns.querySelector(`li.agent[data-message="${reply.message}"]`) && !shown.has(reply.message)) {
        return; // in the history already (answered before the cut)
      }
      replyOf(reply.message).textContent = reply.text;
      shown.delete(reply.message);
      window.pinecall.chat.push(reply.message);
    },
    onState(state) {
      window.pinecall.states.push(`chat ${state}`);
      $("chat-state").textContent = state;
    },
  });
  $("chat-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("chat-text").value.trim();
    if (!text) return;
    $("chat-text").value = "";
    const id = session.say(text);
    pending.set(id, text);
    say("user", text, id);
  });
}

if (!params.get("call_log") && !params.get("chat")) $("hint").hidden = false;
