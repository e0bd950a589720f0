// The TypeScript client against a running paykit, driven by e2e/TestTypeScriptClient
// (which starts the stack, builds dist/ and passes PAYKIT_URL, PAYKIT_API_KEY and
// PAYKIT_SIM_URL, the Alipay simulator's control address).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { test } from "node:test";
import { Paykit, PaykitError } from "../dist/index.js";

const baseUrl = process.env.PAYKIT_URL;
const apiKey = process.env.PAYKIT_API_KEY;
const simUrl = process.env.PAYKIT_SIM_URL;

async function sim(method, path, body) {
  const res = await fetch(simUrl + path, {
    method,
    headers: { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.ok(res.ok, `simulator ${method} ${path}: HTTP ${res.status} ${text}`);
  return JSON.parse(text);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, get, ok, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await get();
    if (ok(v)) return v;
    if (Date.now() > deadline) assert.fail(`${what}: ${JSON.stringify(v)}`);
    await sleep(100);
  }
}

async function rejectsWith(promise, status, code) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof PaykitError, `not a PaykitError: ${err}`);
    assert.equal(err.status, status);
    assert.equal(err.code, code);
    return true;
  });
}

test("the TypeScript client against a running paykit", async () => {
  assert.ok(baseUrl && apiKey && simUrl, "PAYKIT_URL, PAYKIT_API_KEY and PAYKIT_SIM_URL: run it through e2e/TestTypeScriptClient");
  const c = new Paykit(baseUrl, apiKey);
  const once = new Paykit(baseUrl, apiKey, { maxAttempts: 1 });
  const order = { order_id: "tc1", amount_fen: 2990, subject: "TypeScript client" };

  // Create with a key, and the same request again: the first answer, replayed.
  const first = await c.createPayment(order);
  assert.equal(first.status, 201);
  assert.equal(first.replayed, false);
  assert.equal(first.value.status, "PENDING");
  const again = await c.createPayment(order, { idempotencyKey: first.idempotencyKey });
  assert.equal(again.replayed, true);
  assert.equal(again.value.payment_no, first.value.payment_no);
  // The same key with another body: 422 key_mismatch.
  await rejectsWith(c.createPayment({ ...order, amount_fen: 2991 }, { idempotencyKey: first.idempotencyKey }), 422, "key_mismatch");

  // 409 in_flight: the first request with a key is held at Alipay's precreate; a second
  // one with the key gets in_flight; the first, retried with its key, ends 201.
  await sim("POST", "/_sim/faults/gateway", { mode: "hang", count: 1, method: "alipay.trade.precreate" });
  const qrOrder = { order_id: "tc2", amount_fen: 600, subject: "QR", method: "qr" };
  const key = "tc2-" + randomBytes(6).toString("hex");
  const held = c.createPayment(qrOrder, { idempotencyKey: key });
  await until("the held precreate", () => sim("GET", "/_sim/faults"), (f) => f.gateway.length === 0, 20000);
  await rejectsWith(once.createPayment(qrOrder, { idempotencyKey: key }), 409, "in_flight");
  const qr = await held;
  assert.equal(qr.status, 201);
  assert.ok(qr.value.qr_code);

  // Paid, then refused as paid, with the paid payment.
  const cashier = await fetch(first.value.pay_url);
  assert.equal(cashier.status, 200);
  await cashier.text();
  await sim("POST", `/_sim/trades/${first.value.payment_no}/pay`, {});
  const paid = await until("paid", () => c.getPayment(first.value.payment_no), (p) => p.status === "PAID");
  await assert.rejects(c.createPayment(order), (err) => {
    assert.ok(err instanceof PaykitError);
    assert.equal(err.code, "order_already_paid");
    assert.equal(err.problem.payment.payment_no, paid.payment_no);
    assert.equal(err.problem.payment.status, "PAID");
    return true;
  });

  // Cancel the QR payment, and the cancel replayed.
  const cancelled = await c.cancelPayment(qr.value.payment_no);
  assert.equal(cancelled.status, 200);
  assert.equal(cancelled.value.status, "CLOSED");
  assert.equal(cancelled.value.close_reason, "cancelled");
  assert.equal((await c.cancelPayment(qr.value.payment_no, { idempotencyKey: cancelled.idempotencyKey })).replayed, true);

  // Two refunds, the first replayed by its key, then listed once they succeed.
  const r1 = await c.createRefund(paid.payment_no, { amount_fen: 900 });
  assert.equal(r1.status, 201);
  const r1again = await c.createRefund(paid.payment_no, { amount_fen: 900 }, { idempotencyKey: r1.idempotencyKey });
  assert.equal(r1again.replayed, true);
  assert.equal(r1again.value.refund_no, r1.value.refund_no);
  const r2 = await c.createRefund(paid.payment_no, { amount_fen: 1100 });
  assert.notEqual(r2.value.refund_no, r1.value.refund_no);
  for (const r of [r1, r2]) {
    await until("refund succeeded", () => c.getRefund(r.value.refund_no), (x) => x.status === "SUCCEEDED");
  }
  const refunds = await c.refunds(paid.payment_no);
  assert.deepEqual(refunds.map((r) => r.refund_no), [r1.value.refund_no, r2.value.refund_no]);

  // The events feed, paged two at a time from the start to its end: the payment paid,
  // the QR payment closed and the two refunds, each once.
  const want = {
    [`payment.paid ${paid.payment_no}`]: 1,
    [`payment.closed ${qr.value.payment_no}`]: 1,
    [`refund.succeeded ${paid.payment_no}`]: 2,
  };
  const feed = c.events("", 2);
  const seen = new Set();
  const got = {};
  const deadline = Date.now() + 60000;
  while (seen.size < 4 && Date.now() < deadline) {
    const { events, more } = await feed.next();
    for (const e of events) {
      assert.ok(!seen.has(e.event_id), `event ${e.event_id} on two pages`);
      seen.add(e.event_id);
      const k = `${e.type} ${e.payment_no}`;
      got[k] = (got[k] ?? 0) + 1;
      assert.ok(got[k] <= (want[k] ?? 0), `unexpected event ${k}`);
    }
    if (!more && seen.size < 4) await sleep(200); // the end for now: poll again from the same cursor
  }
  assert.deepEqual(got, want);
  const past = await feed.next();
  assert.equal(past.events.length, 0);
  assert.equal(past.more, false);
});
