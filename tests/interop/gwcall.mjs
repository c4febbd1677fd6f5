// Calls the real Clawdbot gateway through Clawdbot's own client (dist/gateway/call.js: the code
// behind `clawdbot gateway call`), several calls per Node start-up.
// usage: node gwcall.mjs <clawdbot dist dir>
// stdin: {"parallel": bool, "calls": [{"method", "params", "expectFinal", "timeoutMs"}]}
// stdout: one JSON line, [{"ok": true, "result": ...} | {"ok": false, "error": "..."}] in call order.
// Connection settings (port, token, state dir) come from the environment, as for the CLI.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const dist = process.argv[2];
const { callGateway } = await import(pathToFileURL(`${dist}/gateway/call.js`).href);
const req = JSON.parse(readFileSync(0, "utf8"));

async function one(c) {
  try {
    const result = await callGateway({
      method: c.method,
      params: c.params ?? {},
      expectFinal: Boolean(c.expectFinal),
      timeoutMs: c.timeoutMs ?? 30000,
    });
    return { ok: true, result };
  } catch (err) {
    return { ok: false, error: String((err && err.message) || err) };
  }
}

let out;
if (req.parallel) {
  out = await Promise.all(req.calls.map(one));
} else {
  out = [];
  for (const c of req.calls) out.push(await one(c));
}
process.stdout.write(`${JSON.stringify(out)}\n`);
process.exit(0);
