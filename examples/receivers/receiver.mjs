// A webhook receiver in Node with the built-in crypto module only (Node 18 or later): it verifies
// X-Service-Signature (signatureScheme stripe or both) or, without it, the Standard Webhooks headers
// (standard), with several secrets during a rotation and the 300 s tolerance.
//
//   PORT=3000 node receiver.mjs whsec_current... [whsec_previous...]
//
// Prints "verified: <event id> <type>" (answers 204) or "refused: <why>" (answers 400) per delivery.
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

const SECRETS = process.argv.slice(2);
const TOLERANCE = 300; // seconds, either direction

function anyEqual(expected, candidates) {
  // Every pair is compared: the time taken says nothing about which one matched.
  let ok = false;
  for (const sig of candidates) {
    ok = (sig.length === expected.length && timingSafeEqual(sig, expected)) || ok;
  }
  return ok;
}

function inWindow(t, now = Date.now() / 1000) {
  return Math.abs(now - t) <= TOLERANCE;
}

// X-Service-Signature: t=<unix>,v1=<hex>[,v1=<hex>]; HMAC-SHA256 keyed by the whole secret string.
export function verifyServiceSignature(rawBody, header, secrets) {
  const pairs = header.split(",").map((p) => p.trim().split("="));
  const stamps = pairs.filter(([k]) => k === "t").map(([, v]) => v);
  const sigs = pairs.filter(([k]) => k === "v1").map(([, v]) => Buffer.from(v ?? "", "hex"));
  if (stamps.length !== 1 || !/^\d+$/.test(stamps[0]) || sigs.length === 0) return "malformed X-Service-Signature";
  const ok = secrets.some((secret) =>
    anyEqual(createHmac("sha256", secret).update(`${stamps[0]}.`).update(rawBody).digest(), sigs),
  );
  if (!ok) return "no v1 signature matches";
  return inWindow(Number(stamps[0])) ? "" : "timestamp outside the tolerance";
}

// Standard Webhooks: HMAC-SHA256 keyed by the secret's base64 part decoded, over "<id>.<timestamp>.<body>";
// webhook-signature lists "v1,<base64>" entries (and "v1a," ed25519 ones, skipped here).
export function verifyStandard(rawBody, headers, secrets) {
  const id = headers["webhook-id"];
  const t = headers["webhook-timestamp"];
  const list = headers["webhook-signature"];
  if (!id || !/^\d+$/.test(t ?? "") || !list) return "missing webhook-* headers";
  const sigs = list
    .split(" ")
    .filter((e) => e.startsWith("v1,"))
    .map((e) => Buffer.from(e.slice(3), "base64"));
  const ok = secrets.some((secret) => {
    const key = Buffer.from(secret.replace(/^whsec_/, ""), "base64");
    return anyEqual(createHmac("sha256", key).update(`${id}.${t}.`).update(rawBody).digest(), sigs);
  });
  if (!ok) return "no v1 signature of webhook-signature matches";
  return inWindow(Number(t)) ? "" : "timestamp outside the tolerance";
}

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks); // the bytes as received: never parse and re-serialise to verify
    const header = req.headers["x-service-signature"];
    const problem = header ? verifyServiceSignature(raw, header, SECRETS) : verifyStandard(raw, req.headers, SECRETS);
    if (problem) {
      console.log(`refused: ${problem}`);
      res.writeHead(400).end();
      return;
    }
    const event = JSON.parse(raw.toString("utf8"));
    console.log(`verified: ${event.id} ${event.type}`);
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT ?? 3000), "127.0.0.1");
