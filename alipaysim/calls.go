package alipaysim

// callCounts counts authenticated gateway calls by method, and by method for each
// out_trade_no, so that a test can tell how often a client asked Alipay about a trade
// (for example how many alipay.trade.query calls an unpaid payment cost).
type callCounts struct {
	byMethod map[string]int
	byTrade  map[string]map[string]int // out_trade_no → method → calls
}

// countCall records one authenticated call of method about outTradeNo ("" when the call
// names no trade).
func (s *Simulator) countCall(method, outTradeNo string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls.byMethod == nil {
		s.calls = callCounts{byMethod: map[string]int{}, byTrade: map[string]map[string]int{}}
	}
	s.calls.byMethod[method]++
	if outTradeNo == "" {
		return
	}
	m := s.calls.byTrade[outTradeNo]
	if m == nil {
		m = map[string]int{}
		s.calls.byTrade[outTradeNo] = m
	}
	m[method]++
}

// Calls returns the authenticated gateway calls by method since the start or the last
// Reset: of every trade when outTradeNo is "", or of that trade only.
func (s *Simulator) Calls(outTradeNo string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	src := s.calls.byMethod
	if outTradeNo != "" {
		src = s.calls.byTrade[outTradeNo]
	}
	out := make(map[string]int, len(src))
	for k, v := range src {
		out[k] = v
	}
	return out
}
