// Package alipaysim is a local simulator of Alipay's classic OpenAPI gateway
// (gateway.do), built from the protocol rather than from any client library, so that
// any Alipay client (github.com/smartwalle/alipay/v3, the official Node SDK, …) can talk
// to it over real HTTP.
//
// It verifies RSA2 request signatures, signs every response over the exact bytes of the
// "<method>_response" object, keeps trades and refunds in memory, serves the page-pay
// cashier (the trade is created when the buyer opens it), honours time_expire, and sends
// signed asynchronous notifications with Alipay's redelivery schedule (4m, 10m, 10m, 1h,
// 2h, 6h, 15h; scaled by Config.TimeScale) until the merchant answers exactly "success".
//
// Parameters are read from the URL query and the form body, so every client's request
// shape works; one sent in both places counts once, and one sent with two different
// values is refused (40002 isv.invalid-parameter). In certificate mode (Config.AppCertPEM,
// AlipayCertPEM, AlipayRootCertPEM; see GenerateCerts) requests must carry app_cert_sn and
// alipay_root_cert_sn and answers carry alipay_cert_sn; CertSN and RootCertSN compute them.
//
// Embed it in tests with httptest:
//
//	keys, _ := alipaysim.GenerateKeys(2048)
//	sim, _ := alipaysim.New(alipaysim.Config{AppPublicKeyPEM: keys.AppPublicKeyPEM, AlipayPrivateKeyPEM: keys.AlipayPrivateKeyPEM, TimeScale: 3600})
//	srv := httptest.NewServer(sim.Handler())
//	defer srv.Close(); defer sim.Close()
//	// point the client at srv.URL + alipaysim.GatewayPath
//
// or run it as a process with cmd/alipaysim. The control API is described by
// ControlAPIDoc and served at GET /_sim.
package alipaysim

// ControlAPIDoc documents the control API; GET /_sim serves it.
const ControlAPIDoc = `Alipay simulator control API (JSON). Amounts are yuan strings plus *_fen integers.

Gateway
  POST|GET /gateway.do            Alipay OpenAPI: alipay.trade.precreate, .query, .close, .refund,
                                  .fastpay.refund.query (signed JSON); alipay.trade.page.pay and
                                  .wap.pay open the HTML cashier (creates the trade).
  GET  /_sim/qr/{trade_no}        cashier for a precreate qr_code
  POST /_sim/cashier/pay          the cashier's Pay button (form: trade_no, buyer_id); 303 to return_url
                                  with the signed synchronous-return parameters
  POST /_sim/app/pay              {"order_string","buyer_id"?}: the buyer's Alipay app submits an
                                  alipay.trade.app.pay order string (signature verified), the trade
                                  is created and paid -> {"result_status":"9000","result","trade"};
                                  refused: 4xx {"result_status":"4000","result"} (signed error)

Apps (each app's trades are its own: another app's out_trade_no is ACQ.TRADE_NOT_EXIST)
  GET  /_sim/apps                           {"app_ids":[...]}
  POST /_sim/apps                           {"app_id","seller_id","app_public_key","alipay_private_key"?}
                                            register a further app; alipay_private_key signs its answers
                                            and notifications (default: the simulator's key); 409 if
                                            the app_id exists with other keys

Trades
  GET  /_sim/trades                         [Trade]
  GET  /_sim/trades/{out_trade_no}          Trade                       (?app_id= if ambiguous)
  POST /_sim/trades/{out_trade_no}/pay      {"buyer_id"?, "app_id"?, "merchant_discount_fen"?, "red_packet_fen"?} -> Trade;
                                            404 unknown, 409 {"error","trade"} if not WAIT_BUYER_PAY, 400 if the
                                            discounts are negative or not less than the total. Both discounts are
                                            the merchant's own: the buyer pays and the merchant receives
                                            (receipt_amount, 商家实收) the total less both; total_amount (订单金额)
                                            is unchanged; a refund gives back its pro-rata share of each
  POST /_sim/trades/{out_trade_no}/expire   close as if time_expire passed -> Trade
  POST /_sim/trades/{out_trade_no}/finish   TRADE_SUCCESS -> TRADE_FINISHED (+ notification) -> Trade
  POST /_sim/trades/{out_trade_no}/pay_on_close {"buyer_id"?}: the next alipay.trade.close of
                                            this trade finds the buyer paying first -> ACQ.TRADE_STATUS_ERROR
  GET  /_sim/refunds                        [Refund]
  Trade: {app_id,out_trade_no,trade_no,method,subject,trade_status,total_amount,total_fen,
          refunded_amount,refunded_fen,merchant_discount_fen,red_packet_fen,receipt_fen,buyer_id,
          notify_url,return_url,quit_url,qr_code,close_reason,created_at,expire_at,paid_at,closed_at}
  Refund: {app_id,out_trade_no,trade_no,out_request_no,refund_amount,refund_fen,merchant_discount_fen,
           red_packet_fen,reason,replays,created_at}

Notifications
  GET  /_sim/notifications                  [Attempt] in send order (?out_trade_no=, ?notify_id=)
       Attempt: {notify_id,kind(payment|close|refund|finish),app_id,out_trade_no,trade_no,
                 trade_status,notify_url,attempt(1..8),copy,at,status_code,response_body,
                 error,acknowledged,dropped}
  POST /_sim/notifications/release          {"order":"fifo"|"lifo"|"random"} -> {"released":n}

Bills (alipay.data.dataservice.bill.downloadurl.query, bill_type=trade; see bill.go)
  A day's bill is every payment (by paid time) and refund (by refund time) of the app that
  completed on that China-time day. Days after the last published one answer isp.bill_not_exist.
  Each line: 订单金额 (total or refund amount), 商家优惠 and 商家红包消费金额 (the merchant's discounts),
  商家实收 = 订单金额 - both, 服务费 0.6% of 商家实收; refund lines negative. The footer totals 商家实收
  and 商家优惠; the summary's one 合计 row nets each detail column of the day.
  GET  /_sim/bills                          {"published_through","last_available","corruptions"}
  POST /_sim/bills/publish                  {"through":"yyyy-MM-dd"|"today"|""}: days up to through are
                                            available ("" = default: every day before today)
  POST /_sim/bills/{date}/corrupt           {"op":"drop"|"amount"|"received"|"add","out_trade_no","out_request_no"?,
                                             "amount":"9.99","app_id"?,"subject"?}: amount rewrites 订单金额
                                             (商家实收 follows), received rewrites 商家实收 alone
  GET  /_sim/bills/{date}                   the bill zip, unsigned (?app_id=)
  GET  /_sim/bills/downloadBillFile.resource?...&token=   the signed bill_download_url (valid 30 s)

Faults
  GET    /_sim/faults                       {"gateway":[GatewayFault],"notifications":{...},"held":n}
  DELETE /_sim/faults                       clear all faults (and pay_on_close)
  POST   /_sim/faults/gateway               {"mode":"system_error"|"http_error"|"hang","count":1,
                                             "method":"alipay.trade.query"?,"status":502?,
                                             "after_processing":false}
  POST   /_sim/faults/throttle              {"app_id"?,"rate":R,"burst":B}: each app's calls past R a second
                                             (bursts of B) are answered code 40005 (调用频次超限) and not
                                             carried out; rate 0 lifts it. With app_id, that app's own
                                             throttle, in place of the all-apps one for it alone (the other
                                             apps keep theirs; rate 0 lifts the app's own). GET /_sim/faults
                                             shows them ("throttle", "app_throttles") and counts the calls
                                             refused ("throttled", "throttled_by_app")
  POST   /_sim/faults/notifications         any of {"drop_next":N,"copies":K,"delay_ms":D,"hold":true}
  POST   /_sim/faults/refunds               {"processing_next":N,"settle_ms":D,"fail":false,"query_lag_ms":L}:
                                             the next N new refunds answer fund_change "N" while processing,
                                             then succeed (or fail) after D ms; the refund query is blind
                                             to a refund for L ms after it succeeded

Other
  GET  /_sim/healthz                        {"status":"ok"}
  POST /_sim/reset                          forget all trades, refunds, notifications and faults
`
