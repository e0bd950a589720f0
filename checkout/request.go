package checkout

import (
	"strings"

	"github.com/paykit/paykit/payment"
)

// Request is a checkout: the body of POST /v1/payments.
type Request struct {
	OrderID   string         `json:"order_id"`
	AmountFen int64          `json:"amount_fen"`
	Currency  string         `json:"currency"`
	Subject   string         `json:"subject"`
	Method    payment.Method `json:"method"`
	ReturnURL string         `json:"return_url,omitempty"`
	// QuitURL is where the wap cashier sends a buyer who gives up (method wap only).
	QuitURL string `json:"quit_url,omitempty"`
	// CheckoutToken is the optional one-time token from POST /v1/checkout-tokens.
	CheckoutToken string `json:"checkout_token,omitempty"`
	// Repurchase opts in to charging an order again after one of its payments was PAID.
	// Without it a paid order is final: the answer is 409 order_already_paid.
	Repurchase bool `json:"repurchase,omitempty"`
	// Payer is what a WeChat Pay method needs to know of the buyer: the openid
	// (wechat_jsapi) or the IP address (wechat_h5). It goes to the channel with the
	// trade and is not stored.
	Payer payment.Payer `json:"payer,omitzero"`
}

// Normalize fills in the defaults (CNY, the page method) and checks the request: the
// order id, the amount, the currency, the subject, the method and the URLs it allows.
func (r *Request) Normalize() error {
	if r.Currency == "" {
		r.Currency = "CNY"
	}
	if r.Method == "" {
		r.Method = payment.MethodPage
	}
	if err := payment.ValidateOrderID(r.OrderID); err != nil {
		return err
	}
	if err := payment.Amount(r.AmountFen).Validate(); err != nil {
		return err
	}
	if r.Currency != "CNY" {
		return payment.Errorf(payment.EINVALID, "currency must be CNY")
	}
	if r.Subject == "" || len(r.Subject) > payment.MaxSubjectBytes {
		return payment.Errorf(payment.EINVALID, "subject must be 1-%d bytes", payment.MaxSubjectBytes)
	}
	if err := r.checkMethod(); err != nil {
		return err
	}
	if len(r.CheckoutToken) > 128 {
		return payment.Errorf(payment.EINVALID, "checkout_token is too long")
	}
	return nil
}

// checkMethod checks the method, the page URLs it allows and what it needs of the payer.
func (r *Request) checkMethod() error {
	if err := r.Method.Validate(); err != nil {
		return err
	}
	if err := r.Payer.ValidateFor(r.Method); err != nil {
		return err
	}
	if err := checkPageURL("return_url", r.ReturnURL, payment.MaxReturnURLBytes); err != nil {
		return err
	}
	if err := checkPageURL("quit_url", r.QuitURL, payment.MaxQuitURLBytes); err != nil {
		return err
	}
	if r.QuitURL != "" && r.Method != payment.MethodWap {
		return payment.Errorf(payment.EINVALID, "quit_url is only for method %q", payment.MethodWap)
	}
	if r.ReturnURL != "" && r.Method == payment.MethodApp {
		// Alipay app pay returns the buyer to the merchant's app, never to a URL.
		return payment.Errorf(payment.EINVALID, "return_url is not used by method %q", payment.MethodApp)
	}
	return nil
}

// checkPageURL checks a URL the cashier sends the buyer's browser to. Its bound is
// checked before anything is signed: the signed pay link must fit its column.
func checkPageURL(name, v string, maxBytes int) error {
	if len(v) > maxBytes {
		return payment.Errorf(payment.EINVALID, "%s must be at most %d bytes", name, maxBytes)
	}
	if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		return payment.Errorf(payment.EINVALID, "%s must be an http(s) URL", name)
	}
	return nil
}
