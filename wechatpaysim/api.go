package wechatpaysim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxBody bounds a request body; v3 request bodies are small JSON documents.
const maxBody = 1 << 20

// apiError is a refusal in WeChat Pay's error envelope.
type apiError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Detail  any    `json:"detail,omitempty"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func refuse(status int, code, msg string) *apiError {
	return &apiError{status: status, Code: code, Message: msg}
}

// errorDetail is the detail of a PARAM_ERROR: field is a JSON pointer for body fields,
// the parameter's name for URL and query fields.
type errorDetail struct {
	Field    string `json:"field"`
	Value    string `json:"value,omitempty"`
	Issue    string `json:"issue"`
	Location string `json:"location"`
}

func paramError(field, value, issue, location string) *apiError {
	e := refuse(http.StatusBadRequest, "PARAM_ERROR", "参数错误")
	e.Detail = errorDetail{Field: field, Value: value, Issue: issue, Location: location}
	return e
}

func signError(msg string) *apiError { return refuse(http.StatusUnauthorized, "SIGN_ERROR", msg) }

func systemError() *apiError {
	return refuse(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
}

func frequencyLimited() *apiError {
	return refuse(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "频率超限")
}

// frequencyLimitedAt is the 429 of a path: a refund's warns it may have been accepted.
func frequencyLimitedAt(path string) *apiError {
	if strings.HasPrefix(path, refundPath) {
		return refuse(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "该笔退款为受理中，请调用查单接口确认或降低频率原单重试")
	}
	return frequencyLimited()
}

func mchNotExists() *apiError {
	return refuse(http.StatusBadRequest, "MCH_NOT_EXISTS", "商户号不存在")
}

// signInformation is the sign_information of a signature mismatch's detail.
type signInformation struct {
	Method               string `json:"method"`
	URL                  string `json:"url"`
	TruncatedSignMessage string `json:"truncated_sign_message"`
	SignMessageLength    int    `json:"sign_message_length"`
}

// truncatedMessageLen is how much of the signing string a mismatch's detail shows.
const truncatedMessageLen = 256

func signMismatch(method, target, msg string) *apiError {
	e := signError(msgSignMismatch)
	cut := msg
	if len(cut) > truncatedMessageLen {
		cut = strings.ToValidUTF8(cut[:truncatedMessageLen], "")
	}
	e.Detail = map[string]any{
		"field": "signature", "issue": "sign not match", "location": "authorization",
		"sign_information": signInformation{Method: method, URL: target, TruncatedSignMessage: cut, SignMessageLength: len(msg)},
	}
	return e
}

// call is one authenticated v3 request.
type call struct {
	r      *http.Request
	body   []byte
	m      *merchant
	auth   authParams
	serial string // the request's Wechatpay-Serial
}

// answer is a successful v3 answer; a nil body is 204 No Content. An unsigned answer
// (the bill download) is written as it is, with its content type.
type answer struct {
	status      int
	body        []byte
	unsigned    bool
	contentType string
}

func jsonAnswer(v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only simulator-built values are marshalled
	}
	return answer{status: http.StatusOK, body: b}
}

func noContent() answer { return answer{status: http.StatusNoContent} }

type apiHandler func(c *call) (answer, *apiError)

// api wraps a v3 handler: Request-ID, authentication, the merchant's frequency limit,
// faults, then the handler's answer, signed.
func (s *Simulator) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-ID", newRequestID())
		c, e := s.authenticate(r)
		if e != nil {
			s.log.Info("request refused", "path", r.URL.Path, "code", e.Code, "message", e.Message)
			s.writeError(w, nil, e)
			return
		}
		if s.overLimit(c.m.id) {
			s.throttled429(w, c, h)
			return
		}
		f, faulty := s.takeFault(r.URL.Path)
		if faulty && !f.AfterProcessing && f.Mode != FaultBadSignature && f.Mode != FaultSignProbe {
			s.applyFault(w, r, c, f)
			return
		}
		a, e := h(c)
		switch {
		case faulty && (f.Mode == FaultBadSignature || f.Mode == FaultSignProbe) && e == nil:
			s.writeSigned(w, c, a, f.Mode)
		case faulty && f.AfterProcessing:
			s.log.Info("answer replaced by fault after processing", "path", r.URL.Path, "mode", f.Mode)
			s.applyFault(w, r, c, f)
		case e != nil:
			s.writeError(w, c, e)
		default:
			s.writeSigned(w, c, a, "")
		}
	}
}

// throttled429 answers a call over the merchant's limit 429; with
// Throttle.AcceptRefunds a refund is carried out first.
func (s *Simulator) throttled429(w http.ResponseWriter, c *call, h apiHandler) {
	s.mu.Lock()
	accept := s.throttle.AcceptRefunds && c.r.Method == http.MethodPost && c.r.URL.Path == refundPath
	s.mu.Unlock()
	if accept {
		_, _ = h(c)
	}
	s.writeError(w, c, frequencyLimitedAt(c.r.URL.Path))
}

// authenticate checks the headers, the merchant, its certificate serial, the timestamp
// and the signature over the raw request-target and body.
func (s *Simulator) authenticate(r *http.Request) (*call, *apiError) {
	p, m, e := s.authorize(r)
	if e != nil {
		return nil, e
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, refuse(http.StatusBadRequest, "INVALID_REQUEST", "读取请求体失败")
	}
	if len(body) > maxBody {
		return nil, refuse(http.StatusBadRequest, "INVALID_REQUEST", "请求体过大")
	}
	target := r.RequestURI
	if target == "" || strings.HasPrefix(target, "http") {
		target = r.URL.RequestURI()
	}
	if signed, ok := verifyRequest(m.pub, r.Method, target, p, body); !ok {
		return nil, signMismatch(r.Method, target, signed)
	}
	if s.cfg.RejectReplayedNonce && !s.freshNonce(m.id, p.NonceStr) {
		return nil, signError(msgNonceReplayed)
	}
	return &call{r: r, body: body, m: m, auth: p, serial: r.Header.Get("Wechatpay-Serial")}, nil
}

// authorize checks everything but the signature: the headers, the merchant, its
// certificate serial and the timestamp.
func (s *Simulator) authorize(r *http.Request) (authParams, *merchant, *apiError) {
	if !s.cfg.AllowMissingAcceptOrUA && (r.Header.Get("Accept") == "" || r.Header.Get("User-Agent") == "") {
		return authParams{}, nil, refuse(http.StatusBadRequest, "INVALID_REQUEST", "Http头缺少Accept或User-Agent")
	}
	p, msg := parseAuthorization(r.Header.Get("Authorization"))
	if msg != "" {
		return p, nil, signError(msg)
	}
	m := s.merchant(p.MchID)
	if m == nil {
		return p, nil, mchNotExists()
	}
	if !strings.EqualFold(p.SerialNo, m.serial) {
		return p, nil, signError(msgSerialMismatch)
	}
	if !checkTimestamp(p.Timestamp, s.now(), s.cfg.ClockSkew) {
		return p, nil, signError(msgTimestampSkew)
	}
	return p, m, nil
}

// freshNonce records a merchant's nonce and reports whether it was unused within the
// clock skew window.
func (s *Simulator) freshNonce(mchid, nonce string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, at := range s.nonces {
		if now.Sub(at) > 2*s.cfg.ClockSkew {
			delete(s.nonces, k)
		}
	}
	key := mchid + "\x00" + nonce
	if _, used := s.nonces[key]; used {
		return false
	}
	s.nonces[key] = now
	return true
}

// answerKey picks the key that signs an answer for merchant m: the WeChat Pay public
// key when the request names its ID and the merchant's switch is on (or the merchant
// has nothing else), the platform certificate otherwise.
func (s *Simulator) answerKey(m *merchant, requestSerial string) (signer string) {
	switch {
	case m.keyMode == KeyModePublicKey:
		return SignerPublicKey
	case m.keyMode == KeyModeBoth && requestSerial == s.cfg.PublicKeyID:
		return SignerPublicKey
	}
	return SignerPlatform
}

// sign returns the Wechatpay-* headers for body, signed now by signer.
func (s *Simulator) sign(signer string, body []byte, at time.Time) (map[string]string, error) {
	key, serial := s.platformKey, s.platform.serial
	if signer == SignerPublicKey {
		key, serial = s.pubKey, s.cfg.PublicKeyID
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	nonce := randomHex(16)
	sig, err := signRSA(key, responseMessage(ts, nonce, body))
	if err != nil {
		return nil, err
	}
	return map[string]string{
		"Wechatpay-Timestamp": ts, "Wechatpay-Nonce": nonce, "Wechatpay-Signature": sig,
		"Wechatpay-Serial": serial, "Wechatpay-Signature-Type": AuthScheme,
	}, nil
}

// writeSigned writes a successful answer with its signature (an unsigned one as it is).
// A fault mode other than "" spoils the signature: FaultBadSignature signs other bytes,
// FaultSignProbe sends a probe.
func (s *Simulator) writeSigned(w http.ResponseWriter, c *call, a answer, fault string) {
	if a.unsigned {
		w.Header().Set("Content-Type", a.contentType)
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
		return
	}
	signed := a.body
	if fault == FaultBadSignature {
		signed = append([]byte("tampered"), a.body...)
	}
	h, err := s.sign(s.answerKey(c.m, c.serial), signed, s.now())
	if err != nil {
		s.log.Error("sign answer", "err", err)
		s.writeError(w, nil, systemError())
		return
	}
	if fault == FaultSignProbe {
		h["Wechatpay-Signature"] = ProbePrefix + randomHex(16)
	}
	for k, v := range h {
		w.Header().Set(k, v)
	}
	if a.body == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// writeError writes a refusal. It is unsigned unless SignErrors is set and the request
// verified (c != nil).
func (s *Simulator) writeError(w http.ResponseWriter, c *call, e *apiError) {
	body, _ := json.Marshal(e)
	if s.cfg.SignErrors && c != nil {
		if h, err := s.sign(s.answerKey(c.m, c.serial), body, s.now()); err == nil {
			for k, v := range h {
				w.Header().Set(k, v)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// newRequestID is shaped like WeChat Pay's Request-ID: 44 upper-case hex digits and "-0".
func newRequestID() string { return randomHex(22) + "-0" }

// notFound answers an unknown v3 path as WeChat Pay does: 404 with an empty body.
func (s *Simulator) notFound(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Request-ID", newRequestID())
	w.WriteHeader(http.StatusNotFound)
}

// decodeJSON decodes a request body strictly enough to tell a malformed body and
// mistyped fields apart, naming the field as a JSON pointer.
func decodeJSON(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return paramError("/"+strings.ReplaceAll(te.Field, ".", "/"), te.Value, "类型错误: "+te.Type.String(), "body")
	}
	return paramError("/", "", "请求体不是合法的JSON: "+err.Error(), "body")
}
