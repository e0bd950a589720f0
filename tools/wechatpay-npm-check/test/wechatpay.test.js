// Drives the Go WeChat Pay simulator with wechatpay-axios-plugin: its own request signing,
// its answer verification (204 included) and its AES-GCM; its response verifier also
// judges notifications, timestamp window included.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import wechatpay from 'wechatpay-axios-plugin';

const { Wechatpay, Rsa, Aes, Decorator, Formatter, Hash } = wechatpay;
const base = process.env.WECHATPAYSIM_URL;
const dir = process.env.WECHATPAYSIM_KEY_DIR;
assert.ok(base && dir, 'WECHATPAYSIM_URL and WECHATPAYSIM_KEY_DIR must be set (run run.sh)');
const read = (name) => readFileSync(join(dir, name), 'utf8').trim();
const mchid = read('mchid.txt');
const appid = read('appid.txt');
const serial = read('merchant_serial_no.txt');
const apiv3Key = read('apiv3_key.txt');
const privateKey = Rsa.from(readFileSync(join(dir, 'apiclient_key.pem')), Rsa.KEY_TYPE_PRIVATE);
const platformSerial = read('platform_serial_no.txt');
const platformCert = readFileSync(join(dir, 'platform_cert.pem'), 'utf8');
const pubKeyId = read('pub_key_id.txt');
const pubKey = readFileSync(join(dir, 'pub_key.pem'), 'utf8');
const certs = {
  [platformSerial]: Rsa.from(platformCert, Rsa.KEY_TYPE_PUBLIC),
  [pubKeyId]: Rsa.from(pubKey, Rsa.KEY_TYPE_PUBLIC),
};

const wxpay = new Wechatpay({ mchid, serial, privateKey, certs, baseURL: `${base}/` });

async function control(method, path, body) {
  const res = await fetch(base + path, {
    method, headers: { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  assert.equal(res.status, 200, `${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

// The merchant's notify_url: the plugin's response verifier (the same one it runs on every
// answer: four headers, ±300 s, the serial's key, the signature) judges each notification.
const notifications = [];
const waiting = [];
const verify = Decorator.responseVerifier(certs);
const merchant = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const verdict = verify.call({ url: '/notify' }, body, req.headers);
    const n = { body, headers: req.headers, refusal: verdict instanceof Error ? verdict.code : null };
    if (!n.refusal) {
      const { resource } = JSON.parse(body);
      n.resource = JSON.parse(Aes.AesGcm.decrypt(resource.ciphertext, apiv3Key, resource.nonce, resource.associated_data));
    }
    res.writeHead(n.refusal ? 401 : 204).end();
    const w = waiting.shift();
    if (w) w(n); else notifications.push(n);
  });
});
const nextNotification = () => new Promise((resolve, reject) => {
  if (notifications.length) { resolve(notifications.shift()); return; }
  const timer = setTimeout(() => reject(new Error('no notification within 10 s')), 10000);
  waiting.push((n) => { clearTimeout(timer); resolve(n); });
});
let notifyURL;

before(async () => {
  await new Promise((resolve) => merchant.listen(0, '127.0.0.1', resolve));
  notifyURL = `http://127.0.0.1:${merchant.address().port}/notify`;
});
after(() => merchant.close());

const order = (no, total, extra = {}) => ({
  appid, mchid, description: 'Image形象店-深圳腾大-QQ公仔', out_trade_no: no, notify_url: notifyURL,
  amount: { total, currency: 'CNY' }, ...extra,
});

test('GET /v3/certificates: verified, decrypted with AES-GCM to the platform certificate', async () => {
  const { data } = await wxpay.v3.certificates.get();
  assert.equal(data.data.length, 1);
  const [{ serial_no: sn, encrypt_certificate: ec }] = data.data;
  assert.equal(sn, platformSerial);
  assert.equal(Aes.AesGcm.decrypt(ec.ciphertext, apiv3Key, ec.nonce, ec.associated_data), platformCert);
});

test('orders of every kind, a repeat, OUT_TRADE_NO_USED', async () => {
  const native = await wxpay.v3.pay.transactions.native.post(order('NPM-NATIVE-1', 1));
  assert.match(native.data.code_url, /^weixin:\/\/wxpay\/bizpayurl\?pr=/);
  const jsapi = await wxpay.v3.pay.transactions.jsapi.post(order('NPM-JSAPI-1', 2, { payer: { openid: 'o-npm' } }));
  assert.match(jsapi.data.prepay_id, /^wx\d{14}/);
  const h5 = await wxpay.v3.pay.transactions.h5.post(order('NPM-H5-1', 3, {
    scene_info: { payer_client_ip: '127.0.0.1', h5_info: { type: 'Wap' } },
  }));
  assert.match(h5.data.h5_url, /^https:\/\/wx\.tenpay\.com\/cgi-bin\/mmpayweb-bin\/checkmweb\?prepay_id=/);
  const app = await wxpay.v3.pay.transactions.app.post(order('NPM-APP-1', 4));
  assert.match(app.data.prepay_id, /^wx\d{14}/);
  const repeat = await wxpay.v3.pay.transactions.native.post(order('NPM-NATIVE-1', 1));
  assert.equal(repeat.data.code_url, native.data.code_url);
  await assert.rejects(wxpay.v3.pay.transactions.native.post(order('NPM-NATIVE-1', 2)), (err) => {
    assert.equal(err.response.status, 403);
    assert.equal(err.response.data.code, 'OUT_TRADE_NO_USED');
    return true;
  });
});

test('query NOTPAY, pay, a verified notification, query SUCCESS', async () => {
  const notpay = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({ params: { mchid }, out_trade_no: 'NPM-NATIVE-1' });
  assert.equal(notpay.data.trade_state, 'NOTPAY');
  assert.equal(notpay.data.transaction_id, undefined);
  await control('POST', '/_sim/orders/NPM-NATIVE-1/pay', { openid: 'o-npm-buyer' });
  const n = await nextNotification();
  assert.equal(n.refusal, null);
  assert.equal(n.headers['wechatpay-serial'], platformSerial);
  assert.equal(n.resource.trade_state, 'SUCCESS');
  assert.equal(n.resource.payer.openid, 'o-npm-buyer');
  const success = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({ params: { mchid }, out_trade_no: 'NPM-NATIVE-1' });
  assert.equal(success.data.trade_state, 'SUCCESS');
  assert.equal(success.data.transaction_id, n.resource.transaction_id);
  assert.match(success.data.transaction_id, /^42000\d{23}$/);
  const byId = await wxpay.v3.pay.transactions.id.$transaction_id$.get({ params: { mchid }, transaction_id: success.data.transaction_id });
  assert.equal(byId.data.out_trade_no, 'NPM-NATIVE-1');
});

test('close: 204 verified by the plugin; a paid order refused', async () => {
  const closed = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.close.post({ mchid }, { out_trade_no: 'NPM-H5-1' });
  assert.equal(closed.status, 204);
  assert.ok(closed.headers['wechatpay-signature']);
  await assert.rejects(
    wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.close.post({ mchid }, { out_trade_no: 'NPM-NATIVE-1' }),
    (err) => err.response.status === 400 && err.response.data.code === 'ORDERPAID',
  );
});

test('public-key mode: a request naming PUB_KEY_ID gets an answer signed with the public key', async () => {
  const res = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({
    params: { mchid }, out_trade_no: 'NPM-APP-1', headers: { 'Wechatpay-Serial': pubKeyId },
  });
  assert.equal(res.headers['wechatpay-serial'], pubKeyId);
  const onlyPublicKey = new Wechatpay({ mchid, serial, privateKey, certs: { [pubKeyId]: pubKey }, baseURL: `${base}/` });
  const closed = await onlyPublicKey.v3.pay.transactions.outTradeNo.$out_trade_no$.close.post(
    { mchid }, { out_trade_no: 'NPM-APP-1', headers: { 'Wechatpay-Serial': pubKeyId } },
  );
  assert.equal(closed.status, 204);
  assert.equal(closed.headers['wechatpay-serial'], pubKeyId);
});

test('a request tampered in transit is refused 401 SIGN_ERROR', async () => {
  await assert.rejects(
    wxpay.v3.pay.transactions.native.post(order('NPM-TAMPER-1', 100), {
      // transformRequest runs after the plugin signed the body: the bytes sent differ.
      transformRequest: [(data) => JSON.stringify({ ...data, amount: { total: 1, currency: 'CNY' } })],
    }),
    (err) => {
      assert.equal(err.response.status, 401);
      assert.equal(err.response.data.code, 'SIGN_ERROR');
      assert.equal(err.response.data.detail.sign_information.method, 'POST');
      return true;
    },
  );
});

test('a forged answer signature is refused by the plugin', async () => {
  await control('POST', '/_sim/faults/api', { mode: 'bad_signature', path: '/v3/pay/transactions/out-trade-no/' });
  await assert.rejects(
    wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({ params: { mchid }, out_trade_no: 'NPM-NATIVE-1' }),
    (err) => err.code === 'EV3_RES_HEADER_SIGNATURE_DIGEST',
  );
});

test('notifications: a probe, a replay 6 minutes old and a tampered body are refused by the plugin', async () => {
  const [first] = await control('GET', '/_sim/notifications?out_trade_no=NPM-NATIVE-1');
  const probe = await control('POST', `/_sim/notifications/${first.id}/probe`);
  assert.equal((await nextNotification()).refusal, 'EV3_RES_HEADER_SIGNATURE_DIGEST');
  assert.equal(probe.status_code, 401);
  const replay = await control('POST', `/_sim/notifications/${first.id}/replay`, { age_seconds: 360 });
  const replayed = await nextNotification();
  assert.equal(replayed.refusal, 'EV3_RES_HEADER_TIMESTAMP_OFFSET');
  assert.equal(replay.status_code, 401);
  assert.equal(replay.acknowledged, false);
  // The same delivery with its body changed: the signature no longer matches.
  const headers = { ...replayed.headers, 'wechatpay-timestamp': String(Math.floor(Date.now() / 1000)) };
  const verdict = verify.call({ url: '/notify' }, replayed.body.replace('支付成功', '支付成功 '), headers);
  assert.equal(verdict.code, 'EV3_RES_HEADER_SIGNATURE_DIGEST');
});

test('refunds: PROCESSING, over-refund, too soon, REFUND.SUCCESS, a repeat, query, unknown refund', async () => {
  await wxpay.v3.pay.transactions.native.post(order('NPM-REFUND-1', 100));
  await control('POST', '/_sim/orders/NPM-REFUND-1/pay', {});
  assert.equal((await nextNotification()).resource.trade_state, 'SUCCESS');
  const body = {
    out_trade_no: 'NPM-REFUND-1', out_refund_no: 'NPM-R-1', reason: '商品已售完', notify_url: notifyURL,
    amount: { refund: 40, total: 100, currency: 'CNY' },
  };
  const { data: refund } = await wxpay.v3.refund.domestic.refunds.post(body);
  assert.equal(refund.status, 'PROCESSING');
  assert.equal(refund.success_time, undefined);
  assert.match(refund.refund_id, /^503\d{26}$/);
  assert.equal(refund.amount.refund, 40);
  await assert.rejects(
    wxpay.v3.refund.domestic.refunds.post({ ...body, out_refund_no: 'NPM-R-2', amount: { refund: 70, total: 100, currency: 'CNY' } }),
    (err) => err.response.status === 400 && err.response.data.code === 'INVALID_REQUEST',
  );
  await assert.rejects(
    wxpay.v3.refund.domestic.refunds.post({ ...body, out_refund_no: 'NPM-R-3', amount: { refund: 10, total: 100, currency: 'CNY' } }),
    (err) => err.response.status === 429 && err.response.data.code === 'FREQUENCY_LIMITED',
  );
  await assert.rejects(
    wxpay.v3.refund.domestic.refunds.post({ ...body, amount: { refund: 41, total: 100, currency: 'CNY' } }),
    (err) => err.response.status === 400 && err.response.data.code === 'INVALID_REQUEST',
  );
  const n = await nextNotification();
  assert.equal(n.refusal, null);
  const envelope = JSON.parse(n.body);
  assert.equal(envelope.event_type, 'REFUND.SUCCESS');
  assert.equal(envelope.resource.original_type, 'refund');
  assert.equal(envelope.resource.associated_data, 'refund');
  assert.equal(n.resource.out_refund_no, 'NPM-R-1');
  assert.equal(n.resource.refund_id, refund.refund_id);
  assert.equal(n.resource.refund_status, 'SUCCESS');
  assert.equal(n.resource.amount.payer_refund, 40);
  const { data: again } = await wxpay.v3.refund.domestic.refunds.post(body);
  assert.equal(again.refund_id, refund.refund_id);
  assert.equal(again.status, 'SUCCESS');
  const { data: query } = await wxpay.v3.refund.domestic.refunds.$out_refund_no$.get({ out_refund_no: 'NPM-R-1' });
  assert.equal(query.status, 'SUCCESS');
  assert.equal(query.success_time, n.resource.success_time);
  await assert.rejects(
    wxpay.v3.refund.domestic.refunds.$out_refund_no$.get({ out_refund_no: 'NPM-NO-SUCH-REFUND' }),
    (err) => err.response.status === 404 && err.response.data.code === 'RESOURCE_NOT_EXISTS',
  );
  const { data: trade } = await wxpay.v3.pay.transactions.outTradeNo.$out_trade_no$.get({ params: { mchid }, out_trade_no: 'NPM-REFUND-1' });
  assert.equal(trade.trade_state, 'REFUND');
});

test('the trade bill: STATEMENT_CREATING, then downloaded and parsed by Formatter.castCsvBill, plain and GZIP', async () => {
  const today = new Date(Date.now() + 8 * 3600 * 1000).toISOString().slice(0, 10); // Beijing date
  await assert.rejects(
    wxpay.v3.bill.tradebill.get({ params: { bill_date: today } }),
    (err) => err.response.status === 400 && err.response.data.code === 'STATEMENT_CREATING',
  );
  await control('POST', `/_sim/bills/${today}/release`);
  const download = async (tarType) => {
    const params = { bill_date: today, bill_type: 'ALL', ...(tarType ? { tar_type: tarType } : {}) };
    const { data: bill } = await wxpay.v3.bill.tradebill.get({ params });
    assert.equal(bill.hash_type, 'SHA1');
    const url = new URL(bill.download_url);
    assert.equal(url.origin, 'https://api.mch.weixin.qq.com');
    const file = await wxpay.v3.billdownload.file.get({ params: Object.fromEntries(url.searchParams), responseType: 'arraybuffer' });
    assert.equal(file.headers['wechatpay-signature'], undefined);
    return { bill, bytes: Buffer.from(file.data) };
  };
  const plain = await download();
  assert.equal(Hash.sha1(plain.bytes), plain.bill.hash_value);
  assert.deepEqual([...plain.bytes.subarray(0, 3)], [0xef, 0xbb, 0xbf]);
  const text = plain.bytes.toString('utf8');
  assert.ok(text.endsWith('\r\n') && !/[^\r]\n/.test(text), 'CRLF line ends');
  const { rows, summary } = Formatter.castCsvBill(plain.bytes);
  assert.equal(rows.length, 3);
  for (const row of rows) assert.equal(Object.keys(row).length, 27);
  const paid = rows.find((r) => r['商户订单号'] === 'NPM-REFUND-1' && r['交易状态'] === 'SUCCESS');
  assert.equal(paid['订单金额'], '1.00');
  assert.equal(paid['费率'], '0.60%');
  assert.equal(paid['手续费'], '0.01000');
  const refunded = rows.find((r) => r['交易状态'] === 'REFUND');
  assert.equal(refunded['商户退款单号'], 'NPM-R-1');
  assert.equal(refunded['退款金额'], '0.40');
  assert.equal(refunded['退款状态'], 'SUCCESS');
  assert.equal(summary['总交易单数'], '3.0');
  assert.equal(summary['退款总金额'], '0.4');
  const gz = await download('GZIP');
  assert.deepEqual(gunzipSync(gz.bytes), plain.bytes);
  assert.equal(Hash.sha1(gunzipSync(gz.bytes)), gz.bill.hash_value);
});
