package devstack

import (
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/paykit/paykit/activities"
	"github.com/paykit/paykit/alipay"
	"github.com/paykit/paykit/webhook"
)

// ReturnVerifier verifies the signed parameters of the cashier's return redirect.
type ReturnVerifier interface {
	VerifyReturn(ctx context.Context, q url.Values) (alipay.Return, error)
}

// Merchant plays the demo merchant, whose webhooks are signed with webhookSecret: GET /return is the return_url page the cashier sends
// the buyer back to, which verifies Alipay's signed return parameters and shows them;
// every other request is the webhook endpoint, which verifies each signature and logs the
// event, so the walk-through shows the whole loop.
func Merchant(logger *slog.Logger, returns ReturnVerifier, webhookSecret string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /return", func(w http.ResponseWriter, r *http.Request) {
		ret, err := returns.VerifyReturn(r.Context(), r.URL.Query())
		logger.Info("demo merchant: buyer returned from the cashier", "component", "merchant", "payment_no", r.URL.Query().Get("out_trade_no"),
			"signature_ok", err == nil, "err", err)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "<!doctype html><title>Return not verified</title><h1 id=\"result\">Return NOT verified</h1><p>%s</p>\n",
				html.EscapeString(err.Error()))
			return
		}
		fmt.Fprintf(w, "<!doctype html><title>Thank you</title><h1 id=\"result\">Return verified</h1>"+
			"<p>payment <code id=\"payment_no\">%s</code> · Alipay trade <code id=\"trade_no\">%s</code> · ¥ <span id=\"amount\">%s</span> (%s)</p>"+
			"<p>The buyer is back; the order is paid once paykit says so (webhook payment.paid or GET /v1/payments/%[1]s), not because of this page.</p>\n",
			html.EscapeString(ret.PaymentNo), html.EscapeString(ret.TradeNo), ret.Amount.Yuan(), html.EscapeString(ret.Method))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		id, err := webhook.VerifyEvent(r.Header.Get(activities.SignatureHeader), r.Header.Get(activities.EventIDHeader),
			body, webhookSecret, webhook.DefaultTolerance)
		ok := err == nil
		logger.Info("demo merchant received webhook", "component", "merchant", "event_id", id,
			"type", r.Header.Get(activities.EventTypeHeader), "signature_ok", ok, "body", string(body))
		if !ok {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}
