// Package wechatpaysim is a local simulator of WeChat Pay API v3 for direct merchants
// (直连商户), built from the protocol rather than from any client library, so that any v3
// client (gopay's wechat/v3, wechatpay-go, wechatpay-axios-plugin, …) can talk to it over
// real HTTP.
//
// It verifies WECHATPAY2-SHA256-RSA2048 request signatures over the raw request-target
// and body, signs every successful answer (204 included) with the platform certificate
// or, when the request names its ID, the WeChat Pay public key, lists the platform
// certificate encrypted under the APIv3 key at GET /v3/certificates, keeps each
// merchant's orders (Native, JSAPI, H5, App; query; close), serves a cashier where a
// buyer pays (checking JSAPI's paySign and App's sign), and delivers TRANSACTION.SUCCESS
// notifications with an AEAD_AES_256_GCM resource, freshly signed at every delivery, on
// WeChat Pay's redelivery schedule (15s, 15s, 30s, 3m, 10m, 20m, 30m, 30m, 30m, 60m, 3h,
// 3h, 3h, 6h, 6h; scaled by Config.TimeScale) until the merchant answers 200 or 204.
//
// Refunds (POST /v3/refund/domestic/refunds and its query) are idempotent on
// out_refund_no, keep WeChat Pay's limits (what is left, 50 per order, a minute apart,
// 365 days after payment; each a setting), answer PROCESSING first and settle after
// Config.RefundDelay (SUCCESS, or CLOSED or ABNORMAL through faults and the control API)
// with REFUND.* notifications on the same schedule. A paid order with a refund queries
// REFUND. Trade bills (GET /v3/bill/tradebill, then the unsigned download) follow the
// real ALL bill byte for byte: UTF-8 BOM, CRLF, backtick-prefixed fields, the
// float-style summary.
//
// Where WeChat Pay's sources disagree or say nothing, the behaviour is a Config setting
// (ClosePaid, CloseClosed, TimeExpireCeiling, LegacyOutTradeNoCharset,
// NotifyRequireSuccessCode, RejectReplayedNonce, SignErrors, RefundMismatch, OverRefund,
// RefundTooSoon, BillReadyHour, BillURLLifetime, BillHashCompressed; Merchant.KeyMode
// and Merchant.NotifySigner) whose default is documented on the setting.
//
// Embed it in tests with httptest:
//
//	keys, _ := wechatpaysim.GenerateKeys("", "", 2048)
//	cfg := keys.Config()
//	cfg.TimeScale = 3600
//	sim, _ := wechatpaysim.New(cfg)
//	srv := httptest.NewServer(sim.Handler())
//	defer srv.Close(); defer sim.Close()
//	// point the client's base URL (gopay: SetProxyHost) at srv.URL
//
// or run it as a process with cmd/wechatpaysim. Answer URLs keep the production host
// (APIHost); clients reach the simulator through their proxy or base-URL settings. The
// control API is described by ControlAPIDoc and served at GET /_sim.
package wechatpaysim

// ControlAPIDoc documents the control API; GET /_sim serves it.
const ControlAPIDoc = `WeChat Pay API v3 simulator control API (JSON). Amounts are integer fen.

API v3 (signed requests; every 2xx answer signed, errors not)
  POST /v3/pay/transactions/{native,jsapi,h5,app}     place an order (repeat: same answer)
  GET  /v3/pay/transactions/out-trade-no/{no}?mchid=  query
  GET  /v3/pay/transactions/id/{transaction_id}?mchid= query a paid order
  POST /v3/pay/transactions/out-trade-no/{no}/close   {"mchid"} -> 204
  GET  /v3/certificates[?algorithm_type=RSA|SM2|ALL]  the platform certificate, encrypted
  POST /v3/refund/domestic/refunds                    {"out_trade_no"|"transaction_id","out_refund_no","reason"?,"notify_url"?,
                                                       "funds_account"?,"amount":{"refund","total","currency":"CNY"}}
                                                      -> 200 the refund, PROCESSING (repeat: the refund as it stands)
  GET  /v3/refund/domestic/refunds/{out_refund_no}    the refund; 404 RESOURCE_NOT_EXISTS 退款单不存在
       refund: {refund_id (503…, 29 digits),out_refund_no,transaction_id,out_trade_no,channel,user_received_account,
                success_time (SUCCESS only),create_time,status,funds_account,amount{total,refund,from,payer_total,
                payer_refund,settlement_refund,settlement_total,discount_refund,currency,refund_fee},promotion_detail}
       refusals: 404 RESOURCE_NOT_EXISTS (order unknown or unpaid); 400 INVALID_REQUEST (total other than the
                 order's, past the refund window, more than the per-order count); above what is left: 400
                 INVALID_REQUEST (setting: 403 NOT_ENOUGH); out_refund_no reused with another amount or order:
                 400 INVALID_REQUEST (setting: 400 REFUND_FEE_MISMATCH); within the interval of the order's
                 previous refund: 429 FREQUENCY_LIMITED (setting: 400 INVALID_REQUEST); 400 PARAM_ERROR
  GET  /v3/bill/tradebill?bill_date=YYYY-MM-DD[&bill_type=ALL|SUCCESS|REFUND][&tar_type=GZIP]
                                                      -> {"hash_type":"SHA1","hash_value","download_url":
                                                      "https://api.mch.weixin.qq.com/v3/billdownload/file?token=…[&tartype=gzip]"};
                                                      400 STATEMENT_CREATING before the ready hour the next day (or
                                                      while late), NO_STATEMENT_EXIST for a day without trades,
                                                      INVALID_REQUEST for a bad, future or over 3 months old date
  GET  /v3/billdownload/file?token=                   the bill (gzip if asked), unsigned; 400 INVALID_REQUEST once
                                                      the URL expired, 403 NO_AUTH for another merchant

Cashier (where a buyer pays)
  GET  /_sim/cashier/bizpayurl?pr=P                   Native: the page behind code_url weixin://wxpay/bizpayurl?pr=P
  GET  /_sim/cashier/checkmweb?prepay_id=&package=    H5: h5_url's page (also at /cgi-bin/mmpayweb-bin/checkmweb,
                                                      so replacing https://wx.tenpay.com with the simulator's base works);
                                                      with &redirect_url=URL, paying sends the buyer there (303)
  POST /_sim/cashier/pay                              the Pay button (form: prepay_id, openid, redirect_url)
  GET  /_sim/cashier/jsapi?prepay_id=                 a form for the JSAPI call
  POST /_sim/cashier/jsapi                            WeixinJSBridge getBrandWCPayRequest (JSON or form):
                                                      {"appId","timeStamp","nonceStr","package":"prepay_id=…",
                                                       "signType":"RSA","paySign","openid"?}; paySign is checked
                                                      with the merchant's key -> {"err_msg":"get_brand_wcpay_request:ok","order"}
                                                      or 4xx {"err_msg":"get_brand_wcpay_request:fail","reason"}
  GET  /_sim/cashier/app?prepay_id=                   a form for the App call
  POST /_sim/cashier/app                              the WeChat app's pay call (JSON or form; keys in any case):
                                                      {"appid","partnerid","prepayid","package":"Sign=WXPay",
                                                       "noncestr","timestamp","sign","openid"?}
                                                      -> {"errCode":0,"errStr":"","order"} or 4xx {"errCode":-1,"errStr"}

Merchants (each merchant's orders are its own)
  GET  /_sim/merchants                                [Merchant] (no keys)
  POST /_sim/merchants                                {"mchid","appids":[...],"serial_no"?,"public_key","apiv3_key",
                                                       "key_mode"?:"both"|"platform"|"public_key","notify_signer"?}
                                                      public_key: the merchant API certificate or its public key;
                                                      409 if the mchid exists with other credentials
  POST /_sim/merchants/{mchid}/notify_signer          {"signer":"platform"|"public_key"}: signs the merchant's
                                                      later deliveries (redeliveries too), as mid-switch

Orders
  GET  /_sim/orders[?mchid=]                          [Order]
  GET  /_sim/orders/{out_trade_no}[?mchid=]           Order (mchid needed only if several merchants have it)
  POST /_sim/orders/{out_trade_no}/pay                {"mchid"?,"openid"?,"discount_fen"?,"bank_type"?} -> Order;
                                                      payer_total = total - discount_fen; 409 if not NOTPAY
  POST /_sim/orders/{out_trade_no}/payerror           NOTPAY -> PAYERROR
  POST /_sim/orders/{out_trade_no}/expire             close as if time_expire passed
  POST /_sim/orders/{out_trade_no}/notifications      {"mchid"?,"delay_ms":D,"fail_next":N}: hold the first delivery
                                                      of its next notification D ms; the merchant's answers to its
                                                      next N deliveries are lost (counted failed, redelivered)
  POST /_sim/orders/{out_trade_no}/refund             {"mchid"?,"refund"?,"reason"?,"notify_url"?}: a refund made in the
                                                      merchant's console (refund 0: all that is left; out_refund_no made
                                                      up: "C" and the refund_id; notify_url: the order's) -> Refund;
                                                      a refusal -> its status and {"error","code"}
  Order: {mchid,appid,out_trade_no,trade_type,trade_state,transaction_id,description,attach,notify_url,
          total,payer_total,discount_fen,openid,payer_openid,bank_type,prepay_id,code_url,h5_url,
          cashier_url,close_reason,created_at,expire_at,paid_at,refunded_fen,closed_at}
  (an order's notification faults apply to its refund notifications too)

Refunds
  GET  /_sim/refunds[?mchid=&out_trade_no=]           [Refund] in the order taken
  GET  /_sim/refunds/{out_refund_no}[?mchid=]         Refund
  POST /_sim/refunds/{out_refund_no}/success          settle it SUCCESS, CLOSED or ABNORMAL now, with its REFUND.*
  POST /_sim/refunds/{out_refund_no}/close            notification (summaries 退款成功, 退款关闭, 退款异常); PROCESSING
  POST /_sim/refunds/{out_refund_no}/abnormal         and ABNORMAL move, SUCCESS and CLOSED are final (409)
  Refund: {mchid,out_trade_no,transaction_id,out_refund_no,refund_id,status,refund,total,payer_refund,
           discount_refund,reason,notify_url,funds_account,user_received_account,console,created_at,success_at}
  A refund is PROCESSING, then SUCCESS after RefundDelay (scaled by the time scale; negative: never by itself).

Bills
  GET  /_sim/bills/{bill_date}[?mchid=&bill_type=]    the plain bill as it stands, ready or not (text/csv)
  POST /_sim/bills/{bill_date}/late                   that day's bills answer STATEMENT_CREATING until released
  POST /_sim/bills/{bill_date}/release                that day's bills are ready now (today's too, as they stand)
  A day's bill: its payments (by success time) and successful refunds (by their success time), 27 columns;
  费率 the fee rate (FeeRateBP, default 0.60%), 手续费 each row's fee rounded to the fen (negative on refunds).

Notifications
  GET  /_sim/notifications[?out_trade_no=&out_refund_no=&mchid=&id=]
                                                      [Attempt] in send order
       Attempt: {id,event_type,mchid,out_trade_no,transaction_id,out_refund_no,notify_url,kind(delivery|probe|replay),
                 attempt(1..16),at,timestamp,nonce,serial,signature,status_code,response_body,error,
                 acknowledged,dropped}
  POST /_sim/notifications/{id}/probe                 send a signature probe (Wechatpay-Signature:
                                                      WECHATPAY/SIGNTEST/…) now -> Attempt
  POST /_sim/notifications/{id}/replay                {"age_seconds":360}: send it again, genuinely signed with a
                                                      timestamp that old -> Attempt (a merchant must refuse it)

Faults
  GET    /_sim/faults                                 {"api":[APIFault],"notifications":{...},"throttle":{...},
                                                       "refunds":{...},"late_bills":{date:late},"throttled":n}
  DELETE /_sim/faults                                 clear all faults, the throttle, refund faults and late bills
  POST   /_sim/faults/api                             {"mode":"system_error"|"http_error"|"hang"|"bad_signature"|"sign_probe"|
                                                       "frequency_limited","count":1,"path":"/v3/pay/transactions/native"?,
                                                       "status":502?,"after_processing":false}: after_processing carries
                                                       the call out first and loses its answer (500 SYSTEM_ERROR: state
                                                       unknown; 429 FREQUENCY_LIMITED: a refund accepted all the same)
  POST   /_sim/faults/throttle                        {"rate":R,"burst":B,"accept_refunds":false}: each merchant's calls
                                                       past R a second answer 429 FREQUENCY_LIMITED, carrying nothing
                                                       out (with accept_refunds a refund is taken first); rate 0 lifts it
  POST   /_sim/faults/refunds                         {"next":N,"status":"CLOSED"|"ABNORMAL"|"PROCESSING"}: the next N new
                                                       refunds end in that status instead of SUCCESS (PROCESSING: they
                                                       stay so until settled through /_sim/refunds)
  POST   /_sim/faults/notifications                   {"drop_deliveries":N,"lose_next":N,"probes":true}: lose the next N
                                                       deliveries in transit (retried), never send the next N
                                                       notifications, probe before every first delivery

Other
  GET  /_sim/healthz                                  {"status":"ok"}
  POST /_sim/reset                                    forget orders, refunds, bills, notifications and faults
                                                      (merchants stay)
`
