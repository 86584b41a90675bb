// Connects to a live Foxglove WebSocket server with the real @foxglove/ws-protocol client (FoxgloveClient, the code
// Foxglove Studio 1.x and Lichtblick use to talk to servers), subscribes to every advertised channel and prints what
// arrived.
//
// Usage: node ws_listen.mjs URL SUBPROTOCOL SECONDS [TOPIC ...]
//   SUBPROTOCOL: the one the client offers in its handshake (foxglove.websocket.v1 as Studio 1.x; foxglove.sdk.v1
//   as newer apps). Stops after SECONDS, or earlier once every TOPIC has delivered 3 messages.
// Prints one JSON object: {subprotocol (the server's choice), serverInfo, channels: [{topic, encoding, schemaName,
// schemaEncoding, schema}], counts: {topic: n}, first: {topic: JSON message}, events: [every /events message],
// errors: [...]}; exit 1 if the connection failed.
import WebSocket from "ws";
import wsProtocol from "@foxglove/ws-protocol";

const { FoxgloveClient } = wsProtocol;  // a CommonJS package

const [url, subprotocol, secondsText, ...wanted] = process.argv.slice(2);
if (!url || !subprotocol || !secondsText) {
  process.stderr.write("usage: node ws_listen.mjs URL SUBPROTOCOL SECONDS [TOPIC ...]\n");
  process.exit(2);
}
const ws = new WebSocket(url, [subprotocol]);
const client = new FoxgloveClient({ ws });
const decoder = new TextDecoder();
const out = { subprotocol: null, serverInfo: null, channels: [], counts: {}, first: {}, events: [], errors: [] };
const channelsById = new Map();
const topicBySubscription = new Map();

let finished = false;
function finish(code) {
  if (finished) return;
  finished = true;
  try {
    ws.close();
  } catch {
    // already closed
  }
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(code));
}

function done() {
  return wanted.length > 0 && wanted.every((topic) => (out.counts[topic] ?? 0) >= 3);
}

ws.on("open", () => {
  out.subprotocol = ws.protocol;
});
ws.on("unexpected-response", (_req, res) => {
  out.errors.push(`handshake refused: HTTP ${res.statusCode}`);
  finish(1);
});
client.on("error", (error) => out.errors.push(String(error?.message ?? error)));
client.on("serverInfo", (info) => {
  out.serverInfo = info;
});
client.on("advertise", (channels) => {
  for (const channel of channels) {
    channelsById.set(channel.id, channel);
    out.channels.push({
      topic: channel.topic,
      encoding: channel.encoding,
      schemaName: channel.schemaName,
      schemaEncoding: channel.schemaEncoding ?? null,
      schema: channel.schema,
    });
    topicBySubscription.set(client.subscribe(channel.id), channel.topic);
  }
});
client.on("message", ({ subscriptionId, data }) => {
  const topic = topicBySubscription.get(subscriptionId);
  const channel = channelsById.get([...channelsById.values()].find((c) => c.topic === topic)?.id);
  out.counts[topic] = (out.counts[topic] ?? 0) + 1;
  if (channel?.encoding === "json") {
    const message = JSON.parse(decoder.decode(data));
    if (!(topic in out.first)) out.first[topic] = message;
    if (topic === "/events") out.events.push(message);
  } else if (!(topic in out.first)) {
    out.first[topic] = { bytes: data.byteLength };
  }
  if (done()) finish(0);
});
client.on("close", () => finish(out.subprotocol ? 0 : 1));
setTimeout(() => finish(out.subprotocol ? 0 : 1), Number(secondsText) * 1000);
