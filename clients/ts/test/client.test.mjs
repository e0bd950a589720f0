// The wrapper's own rules against a scripted local server: the key kept over retries,
// problems as PaykitError, the feed's cursor.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { test } from "node:test";
import { CursorExpiredError, Paykit, PaykitError } from "../dist/index.js";

const checkout = {
  payment_no: "P1", tenant_id: "t", order_id: "o1", status: "PENDING", amount_fen: 100,
  currency: "CNY", subject: "s", expire_at: "2026-12-04T18:00:00Z",
};

const problem = (status, code, retryAfter) => (req, res) => {
  if (retryAfter) res.setHeader("Retry-After", String(retryAfter));
  res.writeHead(status, { "Content-Type": "application/problem+json" });
  res.end(JSON.stringify({ type: `https://paykit.dev/problems/${code}`, title: code, status, code }));
};
const json = (status, body, headers = {}) => (req, res) => {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(body));
};

// fake serves the answers in turn and records each request.
async function fake(t, ...answers) {
  const seen = [];
  const srv = createServer((req, res) => {
    seen.push({ key: req.headers["idempotency-key"], auth: req.headers.authorization, url: req.url });
    const a = answers[seen.length - 1];
    if (!a) return res.writeHead(418).end();
    a(req, res);
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  t.after(() => {
    srv.closeAllConnections();
    srv.close();
  });
  const c = new Paykit(`http://127.0.0.1:${srv.address().port}/`, "sk_test", { backoffMs: 1 });
  return { c, seen };
}

const order = { order_id: "o1", amount_fen: 100, subject: "s" };

test("one logical request keeps its key over its retries", async (t) => {
  const { c, seen } = await fake(t, problem(503, "unavailable"), problem(409, "in_flight"), problem(429, "rate_limited"),
    json(201, checkout, { "Idempotent-Replayed": "true" }));
  const r = await c.createPayment(order);
  assert.equal(r.value.payment_no, "P1");
  assert.equal(r.replayed, true);
  assert.equal(seen.length, 4);
  for (const s of seen) {
    assert.equal(s.key, r.idempotencyKey);
    assert.equal(s.auth, "Bearer sk_test");
  }
});

test("two logical requests have two keys, or the caller's", async (t) => {
  const { c, seen } = await fake(t, json(201, checkout), json(201, checkout), json(201, checkout));
  await c.createPayment(order);
  await c.createPayment(order);
  await c.createPayment(order, { idempotencyKey: "order-o1-attempt" });
  assert.notEqual(seen[0].key, seen[1].key);
  assert.equal(seen[2].key, "order-o1-attempt");
});

test("problems are PaykitError; only temporary ones are retried", async (t) => {
  const cases = [
    { answers: [problem(422, "key_mismatch")], status: 422, code: "key_mismatch", requests: 1 },
    { answers: [problem(500, "internal")], status: 500, code: "internal", requests: 1 },
    { answers: Array(4).fill(problem(409, "in_flight")), status: 409, code: "in_flight", requests: 4 },
    { answers: [(req, res) => res.writeHead(404, { "Content-Type": "text/plain" }).end("no")], status: 404, code: undefined, requests: 1 },
  ];
  for (const tc of cases) {
    const { c, seen } = await fake(t, ...tc.answers);
    await assert.rejects(c.createPayment(order), (err) => {
      assert.ok(err instanceof PaykitError);
      assert.equal(err.status, tc.status);
      assert.equal(err.code, tc.code);
      return true;
    });
    assert.equal(seen.length, tc.requests, tc.code);
  }
});

test("Retry-After is waited", async (t) => {
  const { c } = await fake(t, problem(429, "rate_limited", 1), json(201, checkout));
  const start = Date.now();
  await c.createPayment(order);
  assert.ok(Date.now() - start >= 1000, `retried after ${Date.now() - start} ms`);
});

test("the feed moves its cursor and stays put on an empty page", async (t) => {
  const ev = (id) => ({
    event_id: id, type: "payment.paid", payment_no: "P1", created_at: "2026-12-04T17:00:00Z", payload: {},
    delivery: { state: "delivered", attempts: 1 }, cursor: "c" + id,
  });
  const { c, seen } = await fake(t,
    json(200, { events: [ev("1"), ev("2")], has_more: true, next_cursor: "c2" }),
    json(200, { events: [ev("3")], has_more: false, next_cursor: "c3" }),
    json(200, { events: [], has_more: false, next_cursor: "c3" }));
  const feed = c.events("", 2);
  const ids = [];
  for (const wantMore of [true, false, false]) {
    const { events, more } = await feed.next();
    assert.equal(more, wantMore);
    ids.push(...events.map((e) => e.event_id));
  }
  assert.deepEqual(ids, ["1", "2", "3"]);
  assert.equal(feed.cursor, "c3");
  assert.deepEqual(seen.map((s) => s.url), ["/v1/events?limit=2", "/v1/events?after=c2&limit=2", "/v1/events?after=c3&limit=2"]);
});

test("a cursor past the purge horizon throws CursorExpiredError with the oldest cursor", async (t) => {
  const { c, seen } = await fake(t, (req, res) => {
    res.writeHead(410, { "Content-Type": "application/problem+json" });
    res.end(JSON.stringify({
      type: "https://paykit.dev/problems/cursor_expired", title: "Gone", status: 410, code: "cursor_expired",
      detail: "events after cursor 2 were deleted", oldest_cursor: "40",
    }));
  });
  const feed = c.events("2");
  await assert.rejects(feed.next(), (err) => {
    assert.ok(err instanceof CursorExpiredError, `not a CursorExpiredError: ${err}`);
    assert.ok(err instanceof PaykitError);
    assert.equal(err.status, 410);
    assert.equal(err.code, "cursor_expired");
    assert.equal(err.oldestCursor, "40");
    return true;
  });
  assert.equal(seen.length, 1);
  assert.equal(feed.cursor, "2");
});
