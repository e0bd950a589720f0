package alipaysim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

func (s *Simulator) routes() *http.ServeMux {
	mux := http.NewServeMux()
	p := ControlPrefix
	mux.HandleFunc(GatewayPath, s.serveGateway)
	mux.HandleFunc("GET "+p+"/qr/{trade_no}", s.serveQR)
	mux.HandleFunc("POST "+p+"/cashier/pay", s.serveCashierPay)
	mux.HandleFunc("POST "+p+"/app/pay", s.handleAppPay)

	mux.HandleFunc("GET "+p, s.handleIndex)
	mux.HandleFunc("GET "+p+"/{$}", s.handleIndex)
	mux.HandleFunc("GET "+p+"/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+p+"/trades", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Trades())
	})
	mux.HandleFunc("GET "+p+"/trades/{out_trade_no}", func(w http.ResponseWriter, r *http.Request) {
		t, err := s.Trade(r.URL.Query().Get("app_id"), r.PathValue("out_trade_no"))
		s.writeTradeResult(w, t, err)
	})
	mux.HandleFunc("POST "+p+"/trades/{out_trade_no}/pay", s.handlePay)
	mux.HandleFunc("POST "+p+"/apps", s.handleAddApp)
	mux.HandleFunc("GET "+p+"/apps", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"app_ids": s.AppIDs()})
	})
	mux.HandleFunc("POST "+p+"/trades/{out_trade_no}/expire", func(w http.ResponseWriter, r *http.Request) {
		t, err := s.Expire(r.URL.Query().Get("app_id"), r.PathValue("out_trade_no"))
		s.writeTradeResult(w, t, err)
	})
	mux.HandleFunc("POST "+p+"/trades/{out_trade_no}/finish", func(w http.ResponseWriter, r *http.Request) {
		t, err := s.Finish(r.URL.Query().Get("app_id"), r.PathValue("out_trade_no"))
		s.writeTradeResult(w, t, err)
	})
	mux.HandleFunc("POST "+p+"/trades/{out_trade_no}/pay_on_close", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			BuyerID string `json:"buyer_id"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		no := r.PathValue("out_trade_no")
		s.PayOnClose(no, body.BuyerID)
		writeJSON(w, http.StatusOK, map[string]string{"armed": no})
	})
	mux.HandleFunc("GET "+p+"/refunds", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Refunds())
	})
	mux.HandleFunc("GET "+p+"/calls", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, s.Calls(r.URL.Query().Get("out_trade_no")))
	})
	mux.HandleFunc("GET "+p+"/notifications", s.handleNotifications)
	mux.HandleFunc("POST "+p+"/notifications/release", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Order string `json:"order"`
		}
		if !decodeBody(w, r, &body) {
			return
		}
		n, err := s.ReleaseNotifications(body.Order)
		if err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]int{"released": n})
	})
	mux.HandleFunc("GET "+p+"/faults", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("DELETE "+p+"/faults", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetFaults()
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST "+p+"/faults/gateway", func(w http.ResponseWriter, r *http.Request) {
		var f GatewayFault
		if !decodeBody(w, r, &f) {
			return
		}
		if err := s.InjectGatewayFault(f); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST "+p+"/faults/throttle", func(w http.ResponseWriter, r *http.Request) {
		var t Throttle
		if !decodeBody(w, r, &t) {
			return
		}
		if err := s.SetThrottle(t); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	})
	mux.HandleFunc("POST "+p+"/faults/notifications", s.handleNotificationFaults)
	mux.HandleFunc("POST "+p+"/faults/refunds", func(w http.ResponseWriter, r *http.Request) {
		var f RefundFaults
		if !decodeBody(w, r, &f) {
			return
		}
		if err := s.SetRefundFaults(f); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
		writeJSON(w, http.StatusOK, s.Faults())
	})
	s.billRoutes(mux)
	mux.HandleFunc("POST "+p+"/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]string{"status": "reset"})
	})
	return mux
}

func (s *Simulator) handleIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, ControlAPIDoc)
}

func (s *Simulator) handlePay(w http.ResponseWriter, r *http.Request) {
	var body struct {
		BuyerID string `json:"buyer_id"`
		AppID   string `json:"app_id"`
		// The merchant-funded discounts of the payment, in fen (see PayOptions).
		MerchantDiscountFen int64 `json:"merchant_discount_fen"`
		RedPacketFen        int64 `json:"red_packet_fen"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	appID := body.AppID
	if appID == "" {
		appID = r.URL.Query().Get("app_id")
	}
	t, err := s.PayWith(appID, r.PathValue("out_trade_no"), PayOptions{
		BuyerID: body.BuyerID, MerchantDiscountFen: body.MerchantDiscountFen, RedPacketFen: body.RedPacketFen,
	})
	s.writeTradeResult(w, t, err)
}

func (s *Simulator) handleNotifications(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all := s.Notifications()
	out := all[:0:0]
	for _, a := range all {
		if v := q.Get("out_trade_no"); v != "" && a.OutTradeNo != v {
			continue
		}
		if v := q.Get("notify_id"); v != "" && a.NotifyID != v {
			continue
		}
		out = append(out, a)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Simulator) handleNotificationFaults(w http.ResponseWriter, r *http.Request) {
	var body struct {
		DropNext *int   `json:"drop_next"`
		Copies   *int   `json:"copies"`
		DelayMS  *int64 `json:"delay_ms"`
		Hold     *bool  `json:"hold"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	f := s.Faults().Notifications
	if body.DropNext != nil {
		f.DropNext = *body.DropNext
	}
	if body.Copies != nil {
		f.Copies = *body.Copies
	}
	if body.DelayMS != nil {
		f.DelayMS = *body.DelayMS
	}
	if body.Hold != nil {
		f.Hold = *body.Hold
	}
	s.SetNotificationFaults(f)
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Simulator) writeTradeResult(w http.ResponseWriter, t Trade, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, t)
	case errors.Is(err, ErrTradeNotFound):
		writeError(w, http.StatusNotFound, err)
	case errors.Is(err, ErrAmbiguous):
		writeError(w, http.StatusConflict, err)
	case errors.Is(err, ErrBadDiscount):
		writeError(w, http.StatusBadRequest, err)
	default:
		writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "trade": t})
	}
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
