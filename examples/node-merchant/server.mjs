// A merchant backend on paykit, about a page: it creates a payment with an
// Idempotency-Key, sends the buyer to pay_url, receives the webhook and verifies it with
// the official Standard Webhooks library, fulfils each order once (deduping on
// webhook-id, the event id), and refunds.
//
//   PAYKIT_URL=http://127.0.0.1:8080 PAYKIT_API_KEY=sk_... PAYKIT_WEBHOOK_SECRET=whsec_... node server.mjs
//
// POST /buy?order=ID&amount_fen=N answers 303 to pay_url; POST /refund?order=ID refunds it
// in full; GET /orders/ID shows what happened. An order's state lives in memory here; keep
// it in your database, and record the event id in the transaction that fulfils.
import { createServer } from 'node:http';
import { Webhook } from 'standardwebhooks';

const { PAYKIT_URL, PAYKIT_API_KEY, PAYKIT_WEBHOOK_SECRET } = process.env;
const wh = new Webhook(PAYKIT_WEBHOOK_SECRET); // whsec_...
const orders = new Map(); // order id -> { payment_no, amount_fen, fulfilled, refunded, events_seen }
const seen = new Set(); // webhook-ids handled

// The Idempotency-Key is the same on every retry of one logical request, so a retry after
// a timeout never makes a second payment or refund.
async function call(path, key, body) {
  const res = await fetch(PAYKIT_URL + path, {
    method: 'POST',
    headers: { Authorization: `Bearer ${PAYKIT_API_KEY}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
    body: JSON.stringify(body),
  });
  if (res.status >= 300) throw new Error(`paykit ${path}: HTTP ${res.status} ${await res.text()}`); // problem+json
  return res.json();
}

const readBody = (req) => new Promise((resolve, reject) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  req.on('error', reject);
});

const routes = {
  'POST /buy': async (req, res, q) => {
    const id = q.get('order');
    const amount = Number(q.get('amount_fen'));
    const p = await call('/v1/payments', `buy-${id}`, { order_id: id, amount_fen: amount, subject: `Order ${id}` });
    if (!orders.has(id)) orders.set(id, { payment_no: p.payment_no, amount_fen: amount, fulfilled: 0, refunded: false, events_seen: [] });
    res.writeHead(303, { Location: p.pay_url }).end(); // the buyer pays at Alipay's cashier
  },
  'POST /webhooks/paykit': async (req, res) => {
    const body = await readBody(req); // the exact bytes; 5 minutes' tolerance
    let ev;
    try {
      ev = wh.verify(body, req.headers);
    } catch {
      return res.writeHead(401).end();
    }
    const id = req.headers['webhook-id']; // signed: the body's event_id
    if (!seen.has(id)) { // else a retry or a redelivery: already handled
      seen.add(id);
      for (const [orderID, o] of orders) {
        if (ev.type === 'payment.paid' && orderID === ev.order_id) { o.fulfilled++; o.events_seen.push(id); }
        if (ev.type === 'refund.succeeded' && o.payment_no === ev.payment_no) { o.refunded = true; o.events_seen.push(id); }
      }
    }
    res.writeHead(204).end(); // 2xx once recorded; anything else is retried
  },
  'POST /refund': async (req, res, q) => {
    const o = orders.get(q.get('order'));
    if (!o) return res.writeHead(404).end();
    const r = await call(`/v1/payments/${o.payment_no}/refunds`, `refund-${q.get('order')}`, { amount_fen: o.amount_fen });
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(r));
  },
};

createServer(async (req, res) => {
  const url = new URL(req.url, 'http://x');
  try {
    const route = routes[`${req.method} ${url.pathname}`];
    if (route) return await route(req, res, url.searchParams);
    const o = req.method === 'GET' && url.pathname.startsWith('/orders/') && orders.get(url.pathname.slice(8));
    if (o) return res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(o));
    res.writeHead(404).end();
  } catch (err) {
    res.writeHead(502).end(String(err.message));
  }
}).listen(Number(process.env.PORT || 8082), '127.0.0.1', () => console.log(`node-merchant on ${process.env.PORT || 8082}`));
