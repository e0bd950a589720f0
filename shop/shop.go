// Package shop is the demo merchant of `paykit dev`: a server-rendered product page with
// a choice of Alipay or WeChat Pay and a Pay button, as a buyer meets paykit's entry
// layer. The page gets a one-time checkout token when it renders and carries it, with an
// Idempotency-Key made once per page view, in its form; the button greys out on submit.
// The shop's backend creates the payment with both (Alipay's page pay, or WeChat Pay's H5
// payment for the buyer's address) and sends the buyer to the cashier; Alipay's return
// redirect, or WeChat Pay's redirect_url, brings the buyer back to a result page that
// shows the payment's status from the API.
package shop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Config is what the shop needs: the paykit API, a tenant's key, what it sells, and its
// own public URL (for Alipay's return redirect).
type Config struct {
	APIURL    string
	APIKey    string
	PublicURL string
	Product   string
	AmountFen int64
	HTTP      *http.Client
	Logger    *slog.Logger
}

// Shop is the demo merchant's web server.
type Shop struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the shop.
func New(cfg Config) *Shop {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 40 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Product == "" {
		cfg.Product = "Paykit mug"
	}
	if cfg.AmountFen <= 0 {
		cfg.AmountFen = 990
	}
	s := &Shop{cfg: cfg, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /{$}", s.product)
	s.mux.HandleFunc("POST /pay", s.pay)
	s.mux.HandleFunc("GET /result", s.result)
	return s
}

// ServeHTTP makes the shop an http.Handler.
func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var pages = template.Must(template.New("shop").Parse(`
{{define "product"}}<!doctype html>
<html><head><meta charset="utf-8"><title>Demo shop</title>
<style>body{font-family:sans-serif;margin:3em} button{font-size:1.2em;padding:.5em 2em} button:disabled{background:#ccc;color:#888}</style>
</head><body>
<h1>{{.Product}}</h1>
<p class="price">{{.Yuan}} CNY</p>
<form id="checkout" method="post" action="/pay" onsubmit="document.getElementById('pay').disabled = true">
<input type="hidden" name="order_id" value="{{.OrderID}}">
<input type="hidden" name="checkout_token" value="{{.Token}}">
<input type="hidden" name="idempotency_key" value="{{.IdemKey}}">
<p><label><input type="radio" name="channel" id="channel-alipay" value="alipay" checked> Alipay</label>
<label><input type="radio" name="channel" id="channel-wechatpay" value="wechatpay"> WeChat Pay</label></p>
<button id="pay" type="submit">Pay</button>
</form>
</body></html>{{end}}
{{define "result"}}<!doctype html>
<html><head><meta charset="utf-8"><title>Payment {{.Status}}</title>
{{if eq .Status "PENDING"}}<meta http-equiv="refresh" content="1">{{end}}</head><body>
<h1 id="status" data-status="{{.Status}}">{{.Status}}</h1>
<p>Order <code id="order">{{.OrderID}}</code>, payment <code id="payment">{{.PaymentNo}}</code></p>
<p><a href="/">Shop again</a></p>
</body></html>{{end}}
{{define "error"}}<!doctype html>
<html><head><meta charset="utf-8"><title>Payment not started</title></head><body>
<h1 id="error">{{.}}</h1><p><a href="/">Back to the shop</a></p>
</body></html>{{end}}
`))

// product renders the product page for a new order, with a fresh checkout token and an
// Idempotency-Key made for this page view.
func (s *Shop) product(w http.ResponseWriter, r *http.Request) {
	orderID := "shop-" + randomID(6)
	var tok struct {
		CheckoutToken string `json:"checkout_token"`
	}
	status, err := s.call(r.Context(), http.MethodPost, "/v1/checkout-tokens", "", map[string]string{"order_id": orderID}, &tok)
	if err != nil || status != http.StatusCreated {
		s.fail(w, http.StatusBadGateway, fmt.Sprintf("cannot get a checkout token (HTTP %d): %v", status, err))
		return
	}
	_ = pages.ExecuteTemplate(w, "product", map[string]any{
		"Product": s.cfg.Product, "Yuan": fmt.Sprintf("%d.%02d", s.cfg.AmountFen/100, s.cfg.AmountFen%100),
		"OrderID": orderID, "Token": tok.CheckoutToken, "IdemKey": "shop-" + randomID(12),
	})
}

// pay creates the payment with the page's token and key and sends the buyer to the
// cashier. A second submission of the same page (a double click that got through)
// carries the same key, so it gets the same payment.
func (s *Shop) pay(w http.ResponseWriter, r *http.Request) {
	orderID, key := r.PostFormValue("order_id"), r.PostFormValue("idempotency_key")
	back := s.cfg.PublicURL + "/result?order_id=" + url.QueryEscape(orderID)
	wechat := r.PostFormValue("channel") == "wechatpay"
	body := s.checkoutBody(r, back, wechat)
	var res struct {
		PaymentNo string `json:"payment_no"`
		PayURL    string `json:"pay_url"`
		Code      string `json:"code"`
	}
	var status int
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		status, err = s.call(r.Context(), http.MethodPost, "/v1/payments", key, body, &res)
		if err != nil || status != http.StatusConflict || (res.Code != "in_flight" && res.Code != "payment_finishing") {
			break
		}
		time.Sleep(250 * time.Millisecond) // the first submission is still being answered
	}
	switch {
	case err != nil:
		s.fail(w, http.StatusBadGateway, "cannot reach the payment service: "+err.Error())
	case status == http.StatusCreated && res.PayURL != "" && wechat:
		// WeChat Pay's H5 cashier sends the buyer to redirect_url, appended to h5_url.
		http.Redirect(w, r, res.PayURL+"&redirect_url="+url.QueryEscape(back), http.StatusSeeOther)
	case status == http.StatusCreated && res.PayURL != "":
		http.Redirect(w, r, res.PayURL, http.StatusSeeOther)
	case res.Code == "order_already_paid" || res.Code == "token_used":
		http.Redirect(w, r, "/result?order_id="+url.QueryEscape(orderID), http.StatusSeeOther)
	default:
		s.fail(w, http.StatusBadGateway, fmt.Sprintf("the payment was not started (HTTP %d %s)", status, res.Code))
	}
}

// checkoutBody is the checkout of the page's order and token: Alipay's page pay, which
// returns to back, or a WeChat Pay H5 payment for the buyer's address (which WeChat Pay
// checks against the phone that pays).
func (s *Shop) checkoutBody(r *http.Request, back string, wechat bool) map[string]any {
	body := map[string]any{
		"order_id": r.PostFormValue("order_id"), "amount_fen": s.cfg.AmountFen, "subject": s.cfg.Product,
		"checkout_token": r.PostFormValue("checkout_token"),
	}
	if !wechat {
		body["return_url"] = back
		return body
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	body["method"] = "wechat_h5"
	body["payer"] = map[string]string{"client_ip": ip}
	return body
}

// result shows the status of the order's newest payment, as the API has it. Alipay's
// return redirect, and WeChat Pay's redirect_url, can arrive before the channel's
// notification has been handled, so a PENDING page refreshes itself.
func (s *Shop) result(w http.ResponseWriter, r *http.Request) {
	orderID := r.URL.Query().Get("order_id")
	var list struct {
		Payments []struct {
			PaymentNo string `json:"payment_no"`
			Status    string `json:"status"`
		} `json:"payments"`
	}
	status, err := s.call(r.Context(), http.MethodGet, "/v1/orders/"+url.PathEscape(orderID)+"/payments?limit=1", "", nil, &list)
	if err != nil || status != http.StatusOK || len(list.Payments) == 0 {
		s.fail(w, http.StatusNotFound, fmt.Sprintf("no payment for order %q (HTTP %d, %v)", orderID, status, err))
		return
	}
	_ = pages.ExecuteTemplate(w, "result", map[string]any{
		"OrderID": orderID, "PaymentNo": list.Payments[0].PaymentNo, "Status": list.Payments[0].Status,
	})
}

func (s *Shop) fail(w http.ResponseWriter, status int, msg string) {
	s.cfg.Logger.Warn("demo shop", "component", "shop", "err", msg)
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, "error", msg)
}

// call sends one request to the API and decodes its JSON answer (a problem too) into out.
func (s *Shop) call(ctx context.Context, method, path, idemKey string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.cfg.APIURL+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.cfg.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := s.cfg.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return resp.StatusCode, nil
}
