// The page: what its address names, shown. Its server (a tenant's, or `up`'s) mints the tokens
// with its app key and opens the page with them in the address; nothing here holds a key.
import { followLog } from "./stream.js";

const params = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);

// What the page saw, for the curious and for the browser tests: every seq in arrival order.
window.pinecall = { seen: [], states: [] };

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

if (!params.get("call_log") && !params.get("chat")) $("hint").hidden = false;
