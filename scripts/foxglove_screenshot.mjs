// One look as a user: a log opened in the open-source Foxglove Studio web app (1.48, the @foxglove/studio-base
// bundle) in headless Chromium, with a 3D panel, a Plot panel and the /events messages; a PNG of it and a list of
// the problems Studio reports. Not part of the suite (it needs Chromium and takes a minute); docs/viewers.md says
// what it showed.
//
//   cd tools/foxglove && npm ci && cd ../..                     # Studio's bundle and React 17 (node_modules)
//   apt-get install chromium                                     # Debian's
//   node scripts/foxglove_screenshot.mjs LOG.mcap OUT.png [--host 127.0.0.115] [--wait 600] [--settle 30] [--at F]
//
// It serves scripts/foxglove_studio/ (a page mounting Studio's App, as its own web package did), the bundle, React
// and the log over HTTP with byte ranges on HOST, starts Chromium headless (fresh profile, no network beyond HOST),
// opens ?ds=remote-file&ds.url=<the log>&layoutId=aiko&time=<FRACTION of the log>, waits, prints JSON {problems,
// topics, text} read from the page, and saves the screenshot.
import { spawn } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "..", "tools", "foxglove", "package.json"));
const WebSocket = require("ws");
const studioAssets = path.join(path.dirname(require.resolve("@foxglove/studio-base/package.json")), "assets");
const reactDir = path.dirname(require.resolve("react/package.json"));
const reactDomDir = path.dirname(require.resolve("react-dom/package.json"));
const pageDir = path.join(here, "foxglove_studio");

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const host = option("--host", "127.0.0.115");
const waitS = Number(option("--wait", "600"));
const settleS = Number(option("--settle", "30"));
const at = Number(option("--at", "0.6"));
const [logPath, outPng] = args;
if (!logPath || !outPng) {
  process.stderr.write("usage: node scripts/foxglove_screenshot.mjs LOG.mcap OUT.png [--host H] [--wait S] [--at F]\n");
  process.exit(2);
}

function serveFile(req, res, file) {
  if (!fs.existsSync(file) || !fs.statSync(file).isFile()) {
    res.writeHead(404).end();
    return;
  }
  const size = fs.statSync(file).size;
  const types = { ".js": "text/javascript", ".html": "text/html", ".json": "application/json", ".wasm": "application/wasm" };
  const headers = {
    "content-type": types[path.extname(file)] ?? "application/octet-stream",
    "accept-ranges": "bytes",
    "access-control-allow-origin": "*",
  };
  const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
  if (range) {  // Studio reads a remote MCAP by byte ranges (summary first, then the chunks it needs)
    const start = Number(range[1]);
    const end = range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
    res.writeHead(206, { ...headers, "content-range": `bytes ${start}-${end}/${size}`, "content-length": end - start + 1 });
    fs.createReadStream(file, { start, end }).pipe(res);
  } else {
    res.writeHead(200, { ...headers, "content-length": size });
    fs.createReadStream(file).pipe(res);
  }
}

const server = http.createServer((req, res) => {
  const url = new URL(req.url, `http://${host}`);
  const name = decodeURIComponent(url.pathname);
  if (name === "/" || name === "/index.html") return serveFile(req, res, path.join(pageDir, "index.html"));
  if (name === "/page.js" || name === "/layout.json") return serveFile(req, res, path.join(pageDir, name.slice(1)));
  if (name === "/log.mcap") return serveFile(req, res, path.resolve(logPath));
  for (const [prefix, dir] of [["/studio/", studioAssets], ["/react/", reactDir], ["/react-dom/", reactDomDir]]) {
    if (name.startsWith(prefix)) return serveFile(req, res, path.join(dir, path.normalize(name.slice(prefix.length))));
  }
  res.writeHead(404).end();
});
await new Promise((resolve) => server.listen(0, host, resolve));
const base = `http://${host}:${server.address().port}`;

// the log's time range, from its summary (MCAP Statistics record), to seek to a moment inside it
function logTimeRange(file) {
  const data = fs.readFileSync(file);
  // the Footer record (opcode, length, summary start u64, summary offset start u64, crc u32) before the end magic
  const footer = data.length - 8 - 29;
  const summaryStart = Number(data.readBigUInt64LE(footer + 9));
  for (let offset = summaryStart; offset < footer;) {
    const op = data[offset];
    const length = Number(data.readBigUInt64LE(offset + 1));
    if (op === 0x0b) {  // Statistics: message count u64, schema count u16, channel count u32, attachment u32,
      const body = offset + 9; // metadata u32, chunk u32, start u64, end u64
      return [data.readBigUInt64LE(body + 26), data.readBigUInt64LE(body + 34)];
    }
    offset += 9 + length;
  }
  throw new Error(`${file}: no statistics record in the summary`);
}
const [startNs, endNs] = logTimeRange(path.resolve(logPath));
const seekNs = startNs + BigInt(Math.round(Number(endNs - startNs) * at));
const seek = new Date(Number(seekNs / 1_000_000n)).toISOString();
const pageUrl = `${base}/?ds=remote-file&ds.url=${encodeURIComponent(`${base}/log.mcap`)}&layoutId=aiko&time=${seek}`;

const profile = fs.mkdtempSync(path.join(os.tmpdir(), "aiko-chromium-"));
const chromium = spawn("chromium", [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  `--user-data-dir=${profile}`, "--window-size=1600,1000", "--remote-debugging-port=0",
  "--enable-unsafe-swiftshader", "about:blank",
], { stdio: ["ignore", "ignore", "pipe"], detached: true });  // its own process group: ended as one
const devtools = await new Promise((resolve, reject) => {
  let text = "";
  chromium.stderr.on("data", (chunk) => {
    text += chunk;
    const match = /DevTools listening on (ws:\/\/\S+)/.exec(text);
    if (match) resolve(match[1]);
  });
  chromium.on("exit", (code) => reject(new Error(`chromium exited (${code}): ${text.slice(-2000)}`)));
});
const port = new URL(devtools).port;
const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
const ws = new WebSocket(targets.find((t) => t.type === "page").webSocketDebuggerUrl, { maxPayload: 1 << 30 });
await new Promise((resolve) => ws.on("open", resolve));
let nextId = 0;
const pending = new Map();
const consoleLines = [];  // the page's console errors and uncaught exceptions, for the report
ws.on("message", (raw) => {
  const message = JSON.parse(raw);
  if (message.method === "Runtime.exceptionThrown") {
    const details = message.params.exceptionDetails;
    consoleLines.push(`exception: ${details.exception?.description ?? details.text}`.slice(0, 2000));
  } else if (message.method === "Runtime.consoleAPICalled" && ["error", "warning"].includes(message.params.type)) {
    const parts = message.params.args.map((a) => a.value ?? a.description ?? "").join(" ");
    consoleLines.push(`${message.params.type}: ${parts}`.slice(0, 2000));
  }
  if (pending.has(message.id)) {
    pending.get(message.id)(message);
    pending.delete(message.id);
  }
});
const send = (method, params = {}) =>
  new Promise((resolve) => {
    const id = ++nextId;
    pending.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params }));
  });
const evaluate = async (expression) =>
  (await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true })).result?.result?.value;

await send("Runtime.enable");
await send("Emulation.setDeviceMetricsOverride", { width: 1600, height: 1000, deviceScaleFactor: 1, mobile: false });
await send("Page.navigate", { url: pageUrl });
// Studio's bundle is 56 MB of JavaScript: on a busy machine it takes minutes to start. Wait until the layout's panels
// show the log's topics, then a settle time for the data to load and draw, at most --wait seconds in all.
const deadline = Date.now() + waitS * 1000;
let text = "";
while (Date.now() < deadline) {
  text = (await evaluate("document.body ? document.body.innerText : ''")) ?? "";
  if (text.includes("/events")) break;
  await new Promise((resolve) => setTimeout(resolve, 2000));
}
await new Promise((resolve) => setTimeout(resolve, Math.min(settleS * 1000, Math.max(0, deadline - Date.now()))));
text = (await evaluate("document.body ? document.body.innerText : ''")) ?? "";
const shot = await send("Page.captureScreenshot", { format: "png" });
fs.writeFileSync(outPng, Buffer.from(shot.result.data, "base64"));
// then the data source's "Problems" tab, as a user would open it: what Studio says about the channels (a second
// screenshot, OUT-problems.png, and the sidebar's text)
const clicked = await evaluate(`(() => {
  const tab = [...document.querySelectorAll("button, [role=tab]")].find((e) => e.innerText.trim().startsWith("Problems"));
  if (tab) tab.click();
  return Boolean(tab);
})()`);
await new Promise((resolve) => setTimeout(resolve, 5000));
const afterClick = (await evaluate("document.body.innerText")) ?? "";
const sidebar = afterClick.slice(afterClick.indexOf("Problems"), afterClick.indexOf("joint 1 and link 6"));
const problemsShot = await send("Page.captureScreenshot", { format: "png" });
fs.writeFileSync(outPng.replace(/\.png$/, "") + "-problems.png", Buffer.from(problemsShot.result.data, "base64"));
const problemsTab = clicked ? sidebar : "no Problems tab";
const unsupported = `${text}\n${afterClick}`.split("\n").filter((line) => /Unsupported|Error in topic/i.test(line));
ws.close();
const exited = new Promise((resolve) => chromium.on("exit", resolve));
process.kill(-chromium.pid, "SIGTERM");
await exited;
await new Promise((resolve) => setTimeout(resolve, 1000));  // its helper processes leave the profile
server.close();
fs.rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
const report = { url: pageUrl, screenshot: outPng, problems: unsupported, problemsTab, console: consoleLines, text };
process.stdout.write(JSON.stringify(report, null, 1) + "\n", () => process.exit(0));
