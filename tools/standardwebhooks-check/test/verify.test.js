// Verifies webhooks that paykit delivered (activities.DeliverWebhook to a real HTTP
// server, captured by the Go test TestStandardWebhooks) with the official Standard
// Webhooks library for Node, an implementation independent of paykit's Go code.
//
// Needs STANDARD_WEBHOOKS_DELIVERIES, the deliveries.json that test writes when
// PAYKIT_STANDARD_WEBHOOKS_OUT is set. run.sh does both.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

const file = process.env.STANDARD_WEBHOOKS_DELIVERIES;
if (!file) {
  throw new Error('set STANDARD_WEBHOOKS_DELIVERIES (or use run.sh)');
}
const { secrets, deliveries } = JSON.parse(readFileSync(file, 'utf8'));
const delivery = (name) => {
  const d = deliveries.find((x) => x.name === name);
  assert.ok(d, `no delivery ${name} in ${file}`);
  return d;
};

test('a delivery verifies with the secret of before in its shown whsec_ form; webhook-id is the signed event_id', () => {
  const d = delivery('legacy');
  const event = new Webhook(secrets.legacy).verify(d.body, d.headers);
  assert.equal(event.event_id, d.headers['webhook-id']);
  assert.equal(event.event_id, d.headers['paykit-event-id']);
});

test('a tampered body is refused', () => {
  const d = delivery('legacy');
  const tampered = d.body.replace('"payment.paid"', '"refund.succeeded"');
  assert.notEqual(tampered, d.body);
  assert.throws(() => new Webhook(secrets.legacy).verify(tampered, d.headers), WebhookVerificationError);
});

test('the signature covers webhook-id and webhook-timestamp', () => {
  const d = delivery('legacy');
  const wh = new Webhook(secrets.legacy);
  assert.throws(() => wh.verify(d.body, { ...d.headers, 'webhook-id': delivery('rotation').headers['webhook-id'] }),
    /No matching signature found/);
  const ts = String(Number(d.headers['webhook-timestamp']) + 1);
  assert.throws(() => wh.verify(d.body, { ...d.headers, 'webhook-timestamp': ts }), /No matching signature found/);
});

test('a delivery signed six minutes ago is refused as too old', () => {
  const d = delivery('replayed');
  assert.throws(() => new Webhook(secrets.legacy).verify(d.body, d.headers), /Message timestamp too old/);
});

test('a fresh delivery captured and replayed six minutes later is refused', (t) => {
  const d = delivery('legacy');
  const sent = Number(d.headers['webhook-timestamp']) * 1000;
  t.mock.method(Date, 'now', () => sent + 6 * 60 * 1000);
  assert.throws(() => new Webhook(secrets.legacy).verify(d.body, d.headers), /Message timestamp too old/);
  t.mock.restoreAll();
  new Webhook(secrets.legacy).verify(d.body, d.headers);
});

test('during a rotation the new and the old secret verify, another does not', () => {
  const d = delivery('rotation');
  assert.equal(d.headers['webhook-signature'].split(' ').length, 2);
  for (const s of [secrets.next, secrets.legacy]) {
    assert.equal(new Webhook(s).verify(d.body, d.headers).event_id, d.headers['webhook-id']);
  }
  assert.throws(() => new Webhook(secrets.other).verify(d.body, d.headers), WebhookVerificationError);
});
