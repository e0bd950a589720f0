package wechatpaysim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

func (s *Simulator) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for path, tradeType := range map[string]string{
		"jsapi": TradeTypeJSAPI, "native": TradeTypeNative, "app": TradeTypeApp, "h5": TradeTypeH5,
	} {
		mux.HandleFunc("POST /v3/pay/transactions/"+path, s.api(s.placeOrder(tradeType)))
	}
	mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{out_trade_no}", s.api(s.handleQueryByOutTradeNo))
	mux.HandleFunc("GET /v3/pay/transactions/id/{transaction_id}", s.api(s.handleQueryByTransactionID))
	mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{out_trade_no}/close", s.api(s.handleClose))
	mux.HandleFunc("GET /v3/certificates", s.api(s.handleCertificates))
	mux.HandleFunc("POST "+refundPath, s.api(s.handleRefund))
	mux.HandleFunc("GET "+refundPath+"/{out_refund_no}", s.api(s.handleRefundQuery))
	mux.HandleFunc("GET /v3/bill/tradebill", s.api(s.handleTradeBill))
	mux.HandleFunc("GET /v3/billdownload/file", s.api(s.handleBillDownload))
	mux.HandleFunc("/v3/", s.notFound)
	s.cashierRoutes(mux)
	s.controlRoutes(mux)
	return mux
}

func (s *Simulator) cashierRoutes(mux *http.ServeMux) {
	p := ControlPrefix + "/cashier"
	mux.HandleFunc("GET "+p+"/bizpayurl", s.serveCashierPage(TradeTypeNative))
	mux.HandleFunc("GET "+p+"/checkmweb", s.serveCashierPage(TradeTypeH5))
	mux.HandleFunc("GET /cgi-bin/mmpayweb-bin/checkmweb", s.serveCashierPage(TradeTypeH5))
	mux.HandleFunc("GET "+p+"/jsapi", s.serveCashierPage(TradeTypeJSAPI))
	mux.HandleFunc("GET "+p+"/app", s.serveCashierPage(TradeTypeApp))
	mux.HandleFunc("POST "+p+"/pay", s.serveCashierPay)
	mux.HandleFunc("POST "+p+"/jsapi", s.serveJSAPIPay)
	mux.HandleFunc("POST "+p+"/app", s.serveAppPay)
}

func (s *Simulator) controlRoutes(mux *http.ServeMux) {
	p := ControlPrefix
	mux.HandleFunc("GET "+p, s.handleIndex)
	mux.HandleFunc("GET "+p+"/{$}", s.handleIndex)
	mux.HandleFunc("GET "+p+"/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+p+"/merchants", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Merchants())
	})
	mux.HandleFunc("POST "+p+"/merchants", s.handleAddMerchant)
	mux.HandleFunc("POST "+p+"/merchants/{mchid}/notify_signer", s.handleNotifySigner)
	mux.HandleFunc("GET "+p+"/orders", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.withBase(r, s.Orders(r.URL.Query().Get("mchid"))...))
	})
	mux.HandleFunc("GET "+p+"/orders/{out_trade_no}", s.orderAction(func(mchid, no string, _ []byte) (Order, error) {
		return s.Order(mchid, no)
	}))
	mux.HandleFunc("POST "+p+"/orders/{out_trade_no}/pay", s.orderAction(func(mchid, no string, body []byte) (Order, error) {
		var opts PayOptions
		if err := unmarshalOptional(body, &opts); err != nil {
			return Order{}, err
		}
		return s.Pay(mchid, no, opts)
	}))
	mux.HandleFunc("POST "+p+"/orders/{out_trade_no}/payerror", s.orderAction(func(mchid, no string, _ []byte) (Order, error) {
		return s.FailPayment(mchid, no)
	}))
	mux.HandleFunc("POST "+p+"/orders/{out_trade_no}/expire", s.orderAction(func(mchid, no string, _ []byte) (Order, error) {
		return s.Expire(mchid, no)
	}))
	mux.HandleFunc("POST "+p+"/orders/{out_trade_no}/notifications", s.orderAction(func(mchid, no string, body []byte) (Order, error) {
		var f OrderNotifyFaults
		if err := unmarshalOptional(body, &f); err != nil {
			return Order{}, err
		}
		return s.SetOrderNotifyFaults(mchid, no, f)
	}))
	s.refundRoutes(mux)
	s.billRoutes(mux)
	s.notificationRoutes(mux)
	s.faultRoutes(mux)
	mux.HandleFunc("POST "+p+"/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]string{"status": "reset"})
	})
}

func (s *Simulator) notificationRoutes(mux *http.ServeMux) {
	p := ControlPrefix + "/notifications"
	mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		out := []NotificationAttempt{}
		for _, a := range s.Notifications() {
			if (q.Get("out_trade_no") == "" || a.OutTradeNo == q.Get("out_trade_no")) &&
				(q.Get("mchid") == "" || a.MchID == q.Get("mchid")) && (q.Get("id") == "" || a.ID == q.Get("id")) &&
				(q.Get("out_refund_no") == "" || a.OutRefundNo == q.Get("out_refund_no")) {
				out = append(out, a)
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST "+p+"/{id}/probe", func(w http.ResponseWriter, r *http.Request) {
		a, err := s.ProbeNotification(r.PathValue("id"))
		writeResult(w, a, err)
	})
	mux.HandleFunc("POST "+p+"/{id}/replay", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			AgeSeconds int64 `json:"age_seconds"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		a, err := s.ReplayNotification(r.PathValue("id"), time.Duration(body.AgeSeconds)*time.Second)
		writeResult(w, a, err)
	})
}

func (s *Simulator) faultRoutes(mux *http.ServeMux) {
	p := ControlPrefix + "/faults"
	mux.HandleFunc("GET "+p, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("DELETE "+p, func(w http.ResponseWriter, _ *http.Request) {
		s.ResetFaults()
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST "+p+"/api", func(w http.ResponseWriter, r *http.Request) {
		var f APIFault
		if decodeBody(w, r, &f) {
			writeResult(w, s.Faults, s.InjectFault(f))
		}
	})
	mux.HandleFunc("POST "+p+"/throttle", func(w http.ResponseWriter, r *http.Request) {
		var t Throttle
		if decodeBody(w, r, &t) {
			writeResult(w, s.Faults, s.SetThrottle(t))
		}
	})
	mux.HandleFunc("POST "+p+"/notifications", func(w http.ResponseWriter, r *http.Request) {
		f := s.Faults().Notifications
		if decodeBody(w, r, &f) {
			writeResult(w, s.Faults, s.SetNotificationFaults(f))
		}
	})
	mux.HandleFunc("POST "+p+"/refunds", func(w http.ResponseWriter, r *http.Request) {
		var f RefundFaults
		if decodeBody(w, r, &f) {
			writeResult(w, s.Faults, s.SetRefundFaults(f))
		}
	})
}

// refundSettlements maps the control API's refund actions to the statuses they settle in.
var refundSettlements = map[string]string{"success": RefundSuccess, "close": RefundClosed, "abnormal": RefundAbnormal}

func (s *Simulator) refundRoutes(mux *http.ServeMux) {
	p := ControlPrefix + "/refunds"
	mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Refunds(r.URL.Query().Get("mchid"), r.URL.Query().Get("out_trade_no")))
	})
	mux.HandleFunc("GET "+p+"/{out_refund_no}", func(w http.ResponseWriter, r *http.Request) {
		ref, err := s.Refund(r.URL.Query().Get("mchid"), r.PathValue("out_refund_no"))
		writeRefundResult(w, ref, err)
	})
	mux.HandleFunc("POST "+p+"/{out_refund_no}/{action}", func(w http.ResponseWriter, r *http.Request) {
		status, ok := refundSettlements[r.PathValue("action")]
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Errorf("unknown refund action %q (success, close, abnormal)", r.PathValue("action")))
			return
		}
		ref, err := s.SettleRefund(r.URL.Query().Get("mchid"), r.PathValue("out_refund_no"), status)
		writeRefundResult(w, ref, err)
	})
	mux.HandleFunc("POST "+ControlPrefix+"/orders/{out_trade_no}/refund", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ConsoleRefund
			MchID string `json:"mchid"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		mchid := r.URL.Query().Get("mchid")
		if mchid == "" {
			mchid = body.MchID
		}
		ref, err := s.ConsoleRefund(mchid, r.PathValue("out_trade_no"), body.ConsoleRefund)
		writeRefundResult(w, ref, err)
	})
}

func writeRefundResult(w http.ResponseWriter, ref Refund, err error) {
	var refusal *apiError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, ref)
	case errors.As(err, &refusal):
		writeJSON(w, refusal.status, map[string]string{"error": refusal.Message, "code": refusal.Code})
	case errors.Is(err, ErrRefundNotFound), errors.Is(err, ErrOrderNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrAmbiguous), errors.Is(err, ErrRefundFinal):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "refund": ref})
	default:
		writeError(w, http.StatusBadRequest, err)
	}
}

func (s *Simulator) billRoutes(mux *http.ServeMux) {
	p := ControlPrefix + "/bills/{bill_date}"
	mux.HandleFunc("GET "+p, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		b, err := s.TradeBill(q.Get("mchid"), r.PathValue("bill_date"), q.Get("bill_type"))
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		_, _ = w.Write(b)
	})
	for action, late := range map[string]bool{"late": true, "release": false} {
		mux.HandleFunc("POST "+p+"/"+action, func(w http.ResponseWriter, r *http.Request) {
			writeResult(w, s.Faults, s.SetBillLate(r.PathValue("bill_date"), late))
		})
	}
}

func (s *Simulator) handleIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, ControlAPIDoc)
}

func (s *Simulator) handleAddMerchant(w http.ResponseWriter, r *http.Request) {
	var m Merchant
	if !decodeBody(w, r, &m) {
		return
	}
	if err := s.AddMerchant(m); err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrMerchantExists) {
			status = http.StatusConflict
		}
		writeError(w, status, err)
		return
	}
	writeJSON(w, http.StatusOK, s.merchant(m.MchID).infoLocked(s))
}

func (s *Simulator) handleNotifySigner(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Signer string `json:"signer"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if err := s.SetNotifySigner(r.PathValue("mchid"), body.Signer); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	writeJSON(w, http.StatusOK, s.merchant(r.PathValue("mchid")).infoLocked(s))
}

// infoLocked reads the merchant's info under the simulator's lock.
func (m *merchant) infoLocked(s *Simulator) Merchant {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.info()
}

// orderAction serves a control route about one order: ?mchid= (or "mchid" in the body)
// picks the merchant when several have that out_trade_no.
func (s *Simulator) orderAction(do func(mchid, outTradeNo string, body []byte) (Order, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		var sel struct {
			MchID string `json:"mchid"`
		}
		if err := unmarshalOptional(body, &sel); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		mchid := r.URL.Query().Get("mchid")
		if mchid == "" {
			mchid = sel.MchID
		}
		o, err := do(mchid, r.PathValue("out_trade_no"), body)
		s.writeOrderResult(w, r, o, err)
	}
}

func (s *Simulator) writeOrderResult(w http.ResponseWriter, r *http.Request, o Order, err error) {
	if o.OutTradeNo != "" {
		o = s.withBase(r, o)[0]
	}
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, o)
	case errors.Is(err, ErrOrderNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrAmbiguous):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, ErrNotPayable):
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "order": o})
	default:
		writeError(w, http.StatusBadRequest, err)
	}
}

// withBase makes the orders' cashier URLs absolute, from PublicURL or the request's Host.
func (s *Simulator) withBase(r *http.Request, orders ...Order) []Order {
	if s.cfg.PublicURL != "" {
		return orders
	}
	base := "http://" + r.Host
	for i := range orders {
		orders[i].CashierURL = base + orders[i].CashierURL
	}
	return orders
}

func unmarshalOptional(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	return json.Unmarshal(body, v)
}

// decodeBody decodes an optional JSON body; an empty body leaves v untouched.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		return true
	}
	writeError(w, http.StatusBadRequest, err)
	return false
}

// writeResult writes v (or v() for a func() FaultState) or the error as 400 (404 for an
// unknown notification).
func writeResult[T any](w http.ResponseWriter, v T, err error) {
	switch {
	case errors.Is(err, ErrNotificationNotFound):
		writeError(w, http.StatusNotFound, err)
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
	default:
		if f, ok := any(v).(func() FaultState); ok {
			writeJSON(w, http.StatusOK, f())
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}
