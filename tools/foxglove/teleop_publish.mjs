// Publishes what Foxglove's Teleop panel publishes, with the client library the app itself uses
// (@foxglove/ws-protocol's FoxgloveClient): advertise a geometry_msgs/Twist channel in JSON, then
// {"linear": {x, y, z}, "angular": {x, y, z}} at a rate while a "button" is held, then unadvertise and close.
//
//   node teleop_publish.mjs ws://127.0.0.1:8765 /aiko/teleop SCRIPT_JSON [SUBPROTOCOL]
//
// SUBPROTOCOL: the client library's own (foxglove.websocket.v1, what Foxglove Studio 1.x and Lichtblick speak) by
// default; foxglove.sdk.v1 is what the current Foxglove app asks foxglove-sdk servers for (same messages).
// SCRIPT_JSON: [[seconds, linear_x, angular_z, rate_hz], ...] (each step held for its seconds; rate 0 = released:
// nothing is published, as when no button is held). Prints one JSON line: what the server offered and what was sent.
import wsProtocol from "@foxglove/ws-protocol";
import WebSocket from "ws";

const { FoxgloveClient } = wsProtocol;

const [url, topic, scriptText, subprotocolArg] = process.argv.slice(2);
const subprotocol = subprotocolArg ?? FoxgloveClient.SUPPORTED_SUBPROTOCOL;
const script = JSON.parse(scriptText ?? "[[2, 1, 0, 5]]");
const client = new FoxgloveClient({ ws: new WebSocket(url, [subprotocol]) });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const report = { subprotocol, sent: 0 };

const info = await new Promise((resolve, reject) => {
  client.on("serverInfo", resolve);
  client.on("error", reject);
  setTimeout(() => reject(new Error("no serverInfo within 10 s")), 10000);
});
report.capabilities = info.capabilities;
report.supportedEncodings = info.supportedEncodings ?? null;
if (!info.capabilities.includes("clientPublish")) {
  console.log(JSON.stringify({ ...report, error: "the server does not offer clientPublish" }));
  process.exit(1);
}
// the app picks the first of its publication encodings ["json", "ros1", "cdr"] that the server supports
const encoding = (info.supportedEncodings ?? ["json"]).find((e) => ["json", "ros1", "cdr"].includes(e));
report.encoding = encoding;
const channelId = client.advertise({ topic, encoding, schemaName: "geometry_msgs/Twist" });
await sleep(300);
for (const [seconds, x, z, rate] of script) {
  const end = Date.now() + seconds * 1000;
  while (Date.now() < end) {
    if (rate > 0) {
      const message = { linear: { x, y: 0, z: 0 }, angular: { x: 0, y: 0, z } };
      client.sendMessage(channelId, new Uint8Array(Buffer.from(JSON.stringify(message))));
      report.sent += 1;
      await sleep(1000 / rate);
    } else {
      await sleep(50);
    }
  }
}
client.unadvertise(channelId);
await sleep(300);
client.close();
console.log(JSON.stringify(report));
