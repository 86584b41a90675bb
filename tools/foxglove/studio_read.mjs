// Opens MCAP logs with Foxglove Studio 1.48's own reader, unmodified, in node, and prints what Studio made of them.
//
// Foxglove Studio's MCAP code (`@foxglove/mcap-support`: parseChannel, parseJsonSchema, the protobuf and
// JSON deserializers) was never published on npm on its own: it ships compiled into the `@foxglove/studio-base`
// bundle (npm, MPL-2.0; Lichtblick is a fork of this code). Studio opens a file in a Web Worker,
// `McapIterableSourceWorker`: this script runs that worker bundle as is (its webpack runtime and chunks from
// `@foxglove/studio-base/assets`), gives it the browser globals a worker has (`self`, `importScripts`,
// `postMessage`), and talks to it over comlink exactly as Studio's UI thread does: `initialize({file})`, then
// `initialize()` (channels parsed: every rejected schema is a "problem"), then `getMessageCursor` over every topic
// (every message deserialized by the channel's own deserializer; a message that fails is a "problem").
//
// Usage: node studio_read.mjs [--keep TOPIC ...] LOG.mcap [LOG2.mcap ...]
// Prints one JSON object per file on stdout: {path, topics: [{name, schemaName}], problems: [...],
// datatypes: {name: [{name, type, isArray, isComplex}]}, counts: {topic: n}, first: {topic: message},
// kept: {topic: [every message]} (for --keep topics), messageProblems: [...]}.
import fs from "node:fs";
import path from "node:path";
import vm from "node:vm";
import { createRequire } from "node:module";
import { MessageChannel } from "node:worker_threads";

import * as Comlink from "comlink";

const require = createRequire(import.meta.url);
const studioDir = path.dirname(require.resolve("@foxglove/studio-base/package.json"));
const studioVersion = JSON.parse(fs.readFileSync(path.join(studioDir, "package.json"), "utf8")).version;
const assetsDir = path.join(studioDir, "assets");
const ASSETS_URL = "http://studio-assets.invalid/assets/";

/** The worker entry: the bundle file whose webpack runtime starts McapIterableSourceWorker.worker.ts. */
function mcapWorkerEntry() {
  const files = fs.readdirSync(assetsDir).filter((f) => f.endsWith(".js"));
  const chunk = files.find((f) => {
    const text = fs.readFileSync(path.join(assetsDir, f), "utf8");
    return text.startsWith("\"use strict\";\n(self[\"webpackChunk") && text.includes("McapIterableSourceWorker.worker.ts");
  });
  if (!chunk) throw new Error(`no McapIterableSourceWorker chunk in ${assetsDir}`);
  const chunkId = chunk.split(".")[0];
  const entry = files.find((f) => {
    const text = fs.readFileSync(path.join(assetsDir, f), "utf8");
    return text.includes("webpackBootstrap") && new RegExp(`\\.O\\(undefined, \\[[0-9,]*\\b${chunkId}\\]`).test(text);
  });
  if (!entry) throw new Error(`no worker entry loading chunk ${chunkId} in ${assetsDir}`);
  return entry;
}

/** The worker's global scope, in this process: what a browser gives a dedicated worker and the bundle uses. */
function startWorker() {
  const { port1: workerSide, port2: uiSide } = new MessageChannel();
  const entry = mcapWorkerEntry();
  globalThis.self = globalThis;
  globalThis.location = new URL(ASSETS_URL + entry);
  globalThis.importScripts = (...urls) => {
    for (const url of urls) {
      const file = path.join(assetsDir, path.basename(new URL(url, globalThis.location).pathname));
      vm.runInThisContext(fs.readFileSync(file, "utf8"), { filename: file });
    }
  };
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    if (url.startsWith(ASSETS_URL)) {  // the bundle's own assets (the zstd/lz4 decoders' wasm)
      const file = path.join(assetsDir, path.basename(new URL(url).pathname));
      const type = file.endsWith(".wasm") ? "application/wasm" : "application/octet-stream";
      return new Response(fs.readFileSync(file), { headers: { "content-type": type } });
    }
    return await realFetch(input, init);
  };
  globalThis.addEventListener = (type, listener) => workerSide.addEventListener(type, listener);
  globalThis.removeEventListener = (type, listener) => workerSide.removeEventListener(type, listener);
  globalThis.postMessage = (message, transfer) => workerSide.postMessage(message, transfer);
  workerSide.start();
  globalThis.importScripts(ASSETS_URL + entry);
  return { initialize: Comlink.wrap(uiSide), close: () => { uiSide.close(); workerSide.close(); } };
}

function plain(value) {
  // Messages hold typed arrays and bigints (protobuf int64): JSON-printable copies.
  return JSON.parse(JSON.stringify(value, (_k, v) => {
    if (typeof v === "bigint") return Number(v);
    if (ArrayBuffer.isView(v)) return Array.from(v);
    return v;
  }));
}

async function readLog(worker, file, keep) {
  const bytes = fs.readFileSync(file);
  const source = await worker.initialize({ file: new Blob([bytes]) });
  const init = await source.initialize();
  const datatypes = {};
  for (const [name, { definitions }] of init.datatypes) {
    datatypes[name] = definitions.map(({ name: field, type, isArray, isComplex }) => ({
      name: field, type, isArray: isArray === true, isComplex: isComplex === true,
    }));
  }
  const topics = init.topics.map(({ name, schemaName }) => ({ name, schemaName }));
  const counts = {};
  const first = {};
  const kept = Object.fromEntries([...keep].map((topic) => [topic, []]));
  const messageProblems = [];
  const cursor = await source.getMessageCursor({
    topics: topics.map((t) => t.name), start: init.start, end: init.end, consumptionType: "full",
  });
  for (;;) {
    const batch = await cursor.nextBatch(60_000);
    if (!batch) break;
    for (const result of batch) {
      if (result.type === "problem") {
        messageProblems.push(plain(result.problem));
      } else if (result.type === "message-event") {
        const { topic, message } = result.msgEvent;
        counts[topic] = (counts[topic] ?? 0) + 1;
        if (!(topic in first)) first[topic] = plain(message);
        if (keep.has(topic)) kept[topic].push(plain(message));
      }
    }
  }
  return {
    path: file,
    studio: `@foxglove/studio-base ${studioVersion}`,
    topics,
    problems: plain(init.problems ?? []),
    datatypes,
    counts,
    first,
    kept,
    messageProblems,
  };
}

const files = [];
const keep = new Set();
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i] === "--keep") keep.add(process.argv[++i]);
  else files.push(process.argv[i]);
}
if (files.length === 0) {
  process.stderr.write("usage: node studio_read.mjs [--keep TOPIC ...] LOG.mcap [LOG2.mcap ...]\n");
  process.exit(2);
}
const worker = startWorker();
try {
  for (const file of files) {
    process.stdout.write(JSON.stringify(await readLog(worker, file, keep)) + "\n");
  }
} finally {
  worker.close();
}
// The worker's comlink proxies keep message ports open; a browser ends them with the tab. Exit once stdout is out.
process.stdout.write("", () => process.exit(0));
