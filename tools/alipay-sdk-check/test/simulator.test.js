// Checks the Go Alipay simulator with Alipay's official Node SDK (alipay-sdk), an
// implementation independent of the Go client: request signing, response verification
// over the exact bytes, notification verification, page-pay URLs, app pay order strings
// and the cashier's signed return parameters.
//
// Needs a running simulator: ALIPAYSIM_URL (e.g. http://127.0.0.1:18090) and
// ALIPAYSIM_KEY_DIR (the directory written by `alipaysim keygen`). run.sh does both.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { AlipaySdk } from 'alipay-sdk';

const simURL = process.env.ALIPAYSIM_URL;
const keyDir = process.env.ALIPAYSIM_KEY_DIR;
if (!simURL || !keyDir) {
  throw new Error('set ALIPAYSIM_URL and ALIPAYSIM_KEY_DIR (or use run.sh)');
}
const appId = process.env.ALIPAYSIM_APP_ID || '2021000000000001';
const key = (name) => readFileSync(join(keyDir, name), 'utf8');

const sdk = new AlipaySdk({
  appId,
  privateKey: key('app_private_key.pem'),
  keyType: 'PKCS8',
  alipayPublicKey: key('alipay_public_key.pem'),
  gateway: `${simURL}/gateway.do`,
  timeout: 5000,
});

// A merchant notify_url that records notifications and acknowledges them.
const received = [];
let waiters = [];
const notifyServer = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => { body += c; });
  req.on('end', () => {
    const form = Object.fromEntries(new URLSearchParams(body));
    received.push(form);
    waiters.forEach((w) => w());
    waiters = [];
    res.end('success');
  });
});
let notifyURL;

async function notificationFor(outTradeNo, status) {
  const deadline = Date.now() + 5000;
  for (;;) {
    const n = received.find((f) => f.out_trade_no === outTradeNo && f.trade_status === status);
    if (n) return n;
    if (Date.now() > deadline) throw new Error(`no ${status} notification for ${outTradeNo}`);
    await new Promise((r) => { waiters.push(r); setTimeout(r, 200); });
  }
}

const run = `N${Date.now()}`;
const exec = (method, bizContent, extra = {}) =>
  sdk.exec(method, { bizContent, ...extra }, { validateSign: true });

before(async () => {
  await new Promise((r) => notifyServer.listen(0, '127.0.0.1', r));
  notifyURL = `http://127.0.0.1:${notifyServer.address().port}/notify`;
});
after(() => notifyServer.close());

test('precreate, query, pay, notification, close refused, refund', async () => {
  const no = `${run}_paid`;
  const pre = await exec('alipay.trade.precreate',
    { out_trade_no: no, total_amount: '9.90', subject: '节点 SDK 测试' }, { notify_url: notifyURL });
  assert.equal(pre.code, '10000');
  assert.equal(pre.outTradeNo, no);
  assert.match(pre.qrCode, /\/_sim\/qr\//);

  let q = await exec('alipay.trade.query', { out_trade_no: no });
  assert.equal(q.tradeStatus, 'WAIT_BUYER_PAY');
  assert.equal(q.totalAmount, '9.90');

  const pay = await fetch(`${simURL}/_sim/trades/${no}/pay`, { method: 'POST', body: '{"buyer_id":"2088000000000777"}' });
  assert.equal(pay.status, 200);

  const n = await notificationFor(no, 'TRADE_SUCCESS');
  assert.equal(sdk.checkNotifySignV2(n), true, 'notification signature');
  assert.equal(n.total_amount, '9.90');
  assert.equal(sdk.checkNotifySignV2({ ...n, total_amount: '0.01' }), false, 'tampered notification accepted');

  q = await exec('alipay.trade.query', { out_trade_no: no });
  assert.equal(q.tradeStatus, 'TRADE_SUCCESS');
  assert.equal(q.buyerUserId, '2088000000000777');

  const closed = await exec('alipay.trade.close', { out_trade_no: no });
  assert.equal(closed.code, '40004');
  assert.equal(closed.subCode, 'ACQ.TRADE_STATUS_ERROR');

  const r1 = await exec('alipay.trade.refund', { out_trade_no: no, refund_amount: '1.00', out_request_no: 'R1' });
  assert.equal(r1.fundChange, 'Y');
  const r2 = await exec('alipay.trade.refund', { out_trade_no: no, refund_amount: '1.00', out_request_no: 'R1' });
  assert.equal(r2.fundChange, 'N');
  const rq = await exec('alipay.trade.fastpay.refund.query', { out_trade_no: no, out_request_no: 'R1' });
  assert.equal(rq.refundStatus, 'REFUND_SUCCESS');
  assert.equal(rq.refundAmount, '1.00');
});

test('precreate then close', async () => {
  const no = `${run}_closed`;
  const pre = await exec('alipay.trade.precreate', { out_trade_no: no, total_amount: 1, subject: 'close me' });
  assert.equal(pre.code, '10000');
  const c = await exec('alipay.trade.close', { out_trade_no: no });
  assert.equal(c.code, '10000');
  const q = await exec('alipay.trade.query', { out_trade_no: no });
  assert.equal(q.tradeStatus, 'TRADE_CLOSED');
});

test('unknown trade: query and close answer ACQ.TRADE_NOT_EXIST', async () => {
  const q = await exec('alipay.trade.query', { out_trade_no: `${run}_none` });
  assert.equal(q.subCode, 'ACQ.TRADE_NOT_EXIST');
  const c = await exec('alipay.trade.close', { out_trade_no: `${run}_none` });
  assert.equal(c.subCode, 'ACQ.TRADE_NOT_EXIST');
});

test('page pay URL opens the cashier', async () => {
  const no = `${run}_page`;
  const url = sdk.pageExec('alipay.trade.page.pay', 'GET', {
    bizContent: { out_trade_no: no, total_amount: '29.90', subject: 'page pay', product_code: 'FAST_INSTANT_TRADE_PAY' },
    notifyUrl: notifyURL,
  });
  const res = await fetch(url);
  const html = await res.text();
  assert.equal(res.status, 200, html);
  assert.match(html, /29\.90/);
  assert.match(html, /id="pay"/);
  const q = await exec('alipay.trade.query', { out_trade_no: no });
  assert.equal(q.tradeStatus, 'WAIT_BUYER_PAY');
});

test('a request signed with the wrong key gets a signed isv.invalid-signature', async () => {
  const other = new AlipaySdk({
    appId,
    privateKey: key('alipay_private_key.pem'), // not the app key
    keyType: 'PKCS8',
    alipayPublicKey: key('alipay_public_key.pem'),
    gateway: `${simURL}/gateway.do`,
  });
  const r = await other.exec('alipay.trade.query', { bizContent: { out_trade_no: 'x' } }, { validateSign: true });
  assert.equal(r.code, '40002');
  assert.equal(r.subCode, 'isv.invalid-signature');
});

test('answers verified with the wrong Alipay public key are rejected by the SDK', async () => {
  const wrong = new AlipaySdk({
    appId,
    privateKey: key('app_private_key.pem'),
    keyType: 'PKCS8',
    alipayPublicKey: key('app_public_key.pem'), // not Alipay's key
    gateway: `${simURL}/gateway.do`,
  });
  await assert.rejects(
    wrong.exec('alipay.trade.query', { bizContent: { out_trade_no: 'x' } }, { validateSign: true }),
    /验签失败/,
  );
});

test('an app pay order string from the SDK is verified and paid like the Alipay app does', async () => {
  const no = `${run}_app`;
  const orderString = sdk.sdkExecute('alipay.trade.app.pay', {
    bizContent: { out_trade_no: no, total_amount: '6.60', subject: 'app pay', product_code: 'QUICK_MSECURITY_PAY' },
    notifyUrl: notifyURL,
  });
  const appPay = (s) => fetch(`${simURL}/_sim/app/pay`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ order_string: s }),
  });
  const tampered = await appPay(orderString.replace('6.60', '0.01'));
  assert.equal(tampered.status, 400);
  assert.equal((await tampered.json()).result_status, '4000');

  const res = await appPay(orderString);
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.equal(body.result_status, '9000');
  assert.equal(body.trade.total_amount, '6.60');
  const n = await notificationFor(no, 'TRADE_SUCCESS');
  assert.equal(sdk.checkNotifySignV2(n), true, 'notification signature');
});

test('the wap cashier returns to return_url with parameters the SDK verifies', async () => {
  const no = `${run}_wap`;
  const url = sdk.pageExec('alipay.trade.wap.pay', 'GET', {
    bizContent: { out_trade_no: no, total_amount: '3.30', subject: 'wap pay', product_code: 'QUICK_WAP_WAY', quit_url: 'https://shop.example/cart' },
    notifyUrl: notifyURL,
    returnUrl: 'https://shop.example/return',
  });
  const html = await (await fetch(url)).text();
  const m = html.match(/name="trade_no" value="([^"]+)"/);
  assert.ok(m, html);
  const pay = await fetch(`${simURL}/_sim/cashier/pay`, { method: 'POST', body: new URLSearchParams({ trade_no: m[1] }), redirect: 'manual' });
  assert.equal(pay.status, 303);
  const loc = new URL(pay.headers.get('location'));
  assert.equal(loc.origin + loc.pathname, 'https://shop.example/return');
  const params = Object.fromEntries(loc.searchParams);
  assert.equal(params.method, 'alipay.trade.wap.pay.return');
  assert.equal(params.out_trade_no, no);
  assert.equal(sdk.checkNotifySignV2(params), true, 'return signature');
  assert.equal(sdk.checkNotifySignV2({ ...params, total_amount: '0.01' }), false, 'tampered return accepted');
});
