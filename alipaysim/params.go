package alipaysim

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// gatewayParams reads a gateway request's parameters from both places real clients put
// them: the URL query (Alipay's Java SDK sends the common parameters there, other
// clients post to gateway.do?charset=utf-8) and the form body. A parameter sent more
// than once with the same value counts once, so it is also verified once. One sent with
// different values is ambiguous: the merchant signed one of them, and a gateway that
// picked the other would act on a value nobody signed. Such keys are returned in dups,
// sorted, and the request must be refused.
func gatewayParams(r *http.Request) (params url.Values, dups []string, err error) {
	if err := r.ParseForm(); err != nil {
		return nil, nil, err
	}
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, nil, err
	}
	params, dups = collapseParams(query, r.PostForm)
	return params, dups, nil
}

// collapseParams merges parameter lists, counting a value sent more than once as one,
// and returns the keys left with different values, sorted: those are ambiguous and the
// request must be refused.
func collapseParams(lists ...url.Values) (params url.Values, dups []string) {
	params = url.Values{}
	for _, from := range lists {
		for k, vs := range from {
			for _, v := range vs {
				if !slices.Contains(params[k], v) {
					params[k] = append(params[k], v)
				}
			}
		}
	}
	for k, vs := range params {
		if len(vs) > 1 {
			dups = append(dups, k)
		}
	}
	slices.Sort(dups)
	return params, dups
}

// refuseDuplicates answers a request with conflicting duplicate parameters. Alipay has no
// code of its own for this; the simulator uses the generic invalid-parameter one,
// 40002 isv.invalid-parameter, signed like every gateway answer. The answer is named
// after the method unless the method itself is ambiguous; page and wap pay get the
// cashier's error page.
func (s *Simulator) refuseDuplicates(w http.ResponseWriter, params url.Values, dups []string) {
	fail := invalidArgs("isv.invalid-parameter",
		"参数重复且取值不一致 (duplicate parameter "+strings.Join(dups, ", ")+" with different values)")
	s.log.Warn("gateway request rejected", "app_id", params.Get("app_id"), "sub_code", fail.get("sub_code"), "duplicates", dups)
	name := "error_response"
	if !slices.Contains(dups, "method") {
		method := params.Get("method")
		switch {
		case method == "alipay.trade.page.pay" || method == "alipay.trade.wap.pay":
			s.renderFailure(w, http.StatusBadRequest, fail, Trade{})
			return
		case s.api(method) != nil:
			name = responseName(method)
		}
	}
	s.writeSigned(w, name, fail)
}
