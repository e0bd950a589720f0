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
// buyer pays (checking JSAPI's paySign and App's sign), and delivers TRADE.SUCCESS
// notifications with an AEAD_AES_256_GCM resource, freshly signed at every delivery, on
// WeChat Pay's redelivery schedule (15s, 15s, 30s, 3m, 10m, 20m, 30m, 30m, 30m, 60m, 3h,
// 3h, 3h, 6h, 6h; scaled by Config.TimeScale) until the merchant answers 200 or 204.
//
// Where WeChat Pay's sources disagree or say nothing, the behaviour is a Config setting
// (ClosePaid, CloseClosed, TimeExpireCeiling, LegacyOutTradeNoCharset,
// NotifyRequireSuccessCode, RejectReplayedNonce, SignErrors; Merchant.KeyMode and
// Merchant.NotifySigner) whose default is documented on the setting.
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

Cashier (where a buyer pays)
  GET  /_sim/cashier/bizpayurl?pr=P                   Native: the page behind code_url weixin://wxpay/bizpayurl?pr=P
  GET  /_sim/cashier/checkmweb?prepay_id=&package=    H5: h5_url's page (also at /cgi-bin/mmpayweb-bin/checkmweb,
                                                      so replacing https://wx.tenpay.com with the simulator's base works)
  POST /_sim/cashier/pay                              the Pay button (form: prepay_id, openid)
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
  Order: {mchid,appid,out_trade_no,trade_type,trade_state,transaction_id,description,attach,notify_url,
          total,payer_total,discount_fen,openid,payer_openid,bank_type,prepay_id,code_url,h5_url,
          cashier_url,close_reason,created_at,expire_at,paid_at,closed_at}

Notifications
  GET  /_sim/notifications[?out_trade_no=&mchid=&id=] [Attempt] in send order
       Attempt: {id,event_type,mchid,out_trade_no,transaction_id,notify_url,kind(delivery|probe|replay),
                 attempt(1..16),at,timestamp,nonce,serial,signature,status_code,response_body,error,
                 acknowledged,dropped}
  POST /_sim/notifications/{id}/probe                 send a signature probe (Wechatpay-Signature:
                                                      WECHATPAY/SIGNTEST/…) now -> Attempt
  POST /_sim/notifications/{id}/replay                {"age_seconds":360}: send it again, genuinely signed with a
                                                      timestamp that old -> Attempt (a merchant must refuse it)

Faults
  GET    /_sim/faults                                 {"api":[APIFault],"notifications":{...},"throttle":{...},"throttled":n}
  DELETE /_sim/faults                                 clear all faults and the throttle
  POST   /_sim/faults/api                             {"mode":"system_error"|"http_error"|"hang"|"bad_signature"|"sign_probe",
                                                       "count":1,"path":"/v3/pay/transactions/native"?,"status":502?,
                                                       "after_processing":false}: after_processing carries the call
                                                       out first and loses its answer (500 SYSTEM_ERROR: state unknown)
  POST   /_sim/faults/throttle                        {"rate":R,"burst":B}: each merchant's calls past R a second answer
                                                       429 FREQUENCY_LIMITED, carrying nothing out; rate 0 lifts it
  POST   /_sim/faults/notifications                   {"drop_deliveries":N,"lose_next":N,"probes":true}: lose the next N
                                                       deliveries in transit (retried), never send the next N
                                                       notifications, probe before every first delivery

Other
  GET  /_sim/healthz                                  {"status":"ok"}
  POST /_sim/reset                                    forget orders, notifications and faults (merchants stay)
`
