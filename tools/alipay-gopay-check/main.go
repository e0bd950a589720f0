// Command alipay-gopay-check drives the Alipay simulator (cmd/alipaysim) with a second,
// independent Go Alipay client, github.com/go-pay/gopay. gopay posts every call to
// gateway.do?charset=utf-8 and sends charset again in the form body, computes the
// certificate SNs itself, and verifies answers by cutting the signed bytes out of the
// raw JSON. The check builds the simulator, generates throw-away keys (and certificates,
// for -mode cert), starts it, runs precreate, query, page pay (opening the URL),
// payment, the notification (verified), close, refund and refund query, and exits
// non-zero on the first failure.
//
//	go run . [-mode pubkey|cert|both] [-root ../..]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-pay/gopay"
	"github.com/go-pay/gopay/alipay"
	"github.com/go-pay/gopay/pkg/xhttp"
)

const appID = "2021000000000001" // the simulator's default app

func main() {
	mode := flag.String("mode", "both", "pubkey, cert or both")
	root := flag.String("root", "../..", "the paykit repository root")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("alipay-gopay-check: ")
	modes := []string{*mode}
	if *mode == "both" {
		modes = []string{"pubkey", "cert"}
	}
	work, err := os.MkdirTemp("", "gopay-check-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "alipaysim")
	build := exec.Command("go", "build", "-o", bin, "./cmd/alipaysim")
	build.Dir, build.Stdout, build.Stderr = *root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		log.Fatalf("build the simulator: %v", err)
	}
	failed := false
	for _, m := range modes {
		if err := runMode(bin, filepath.Join(work, m), m == "cert"); err != nil {
			log.Printf("FAIL %s mode: %v", m, err)
			failed = true
			continue
		}
		log.Printf("ok %s mode", m)
	}
	if failed {
		os.Exit(1)
	}
}

// sim is a running simulator process.
type sim struct {
	base string
	cmd  *exec.Cmd
	log  *os.File
}

func startSim(bin, dir string, cert bool) (*sim, error) {
	args := []string{"keygen", "-out", filepath.Join(dir, "keys")}
	if cert {
		args = append(args, "-cert")
	}
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("keygen: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(filepath.Join(dir, "sim.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(), "ALIPAYSIM_KEY_DIR="+filepath.Join(dir, "keys"), "ALIPAYSIM_ADDR="+addr,
		"ALIPAYSIM_LOG_LEVEL=warn", "ALIPAYSIM_TIME_SCALE=600")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &sim{base: "http://" + addr, cmd: cmd, log: logf}
	for range 100 {
		if resp, err := http.Get(s.base + "/_sim/healthz"); err == nil {
			resp.Body.Close()
			return s, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	return nil, errors.New("the simulator did not become healthy")
}

func (s *sim) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.log.Close()
}

// toSim sends gopay's requests, addressed to Alipay's sandbox host, to the simulator,
// keeping the path and the query (gateway.do?charset=utf-8) exactly as gopay built them.
type toSim struct{ base *url.URL }

func (t toSim) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = t.base.Scheme, t.base.Host, t.base.Host
	return http.DefaultTransport.RoundTrip(r)
}

func read(dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		log.Fatal(err)
	}
	return b
}

// pemBody is a PEM block's base64 body on one line, the form gopay's VerifySign takes.
func pemBody(p []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(p), "\n") {
		if !strings.HasPrefix(line, "-----") {
			b.WriteString(strings.TrimSpace(line))
		}
	}
	return b.String()
}

func runMode(bin, dir string, cert bool) (err error) {
	s, err := startSim(bin, dir, cert)
	if err != nil {
		return err
	}
	defer func() {
		s.stop()
		if err != nil {
			if b, rerr := os.ReadFile(s.log.Name()); rerr == nil {
				err = fmt.Errorf("%w\n--- simulator log ---\n%s", err, b)
			}
		}
	}()
	keys := filepath.Join(dir, "keys")
	base, _ := url.Parse(s.base)

	notes := make(chan gopay.BodyMap, 16)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bm, perr := alipay.ParseNotifyToBodyMap(r)
		if perr != nil {
			http.Error(w, perr.Error(), http.StatusBadRequest)
			return
		}
		notes <- bm
		_, _ = io.WriteString(w, "success")
	}))
	defer sink.Close()

	client, err := alipay.NewClient(appID, string(read(keys, "app_private_key.pem")), false)
	if err != nil {
		return fmt.Errorf("new client: %w", err)
	}
	client.SetHttpClient(xhttp.NewClient().SetTransport(toSim{base}).SetTimeout(10 * time.Second))
	client.SetLocation("Asia/Shanghai").SetNotifyUrl(sink.URL + "/notify")
	var verifyNote func(bm gopay.BodyMap) (bool, error)
	if cert {
		appCert, rootCert, aliCert := read(keys, "app_cert.pem"), read(keys, "alipay_root_cert.pem"), read(keys, "alipay_cert.pem")
		if err := client.SetCertSnByContent(appCert, rootCert, aliCert); err != nil {
			return fmt.Errorf("certificate SNs: %w", err)
		}
		client.AutoVerifySign(aliCert)
		verifyNote = func(bm gopay.BodyMap) (bool, error) { return alipay.VerifySignWithCert(aliCert, bm) }
	} else {
		aliPub := read(keys, "alipay_public_key.pem")
		client.AutoVerifySign(aliPub)
		verifyNote = func(bm gopay.BodyMap) (bool, error) { return alipay.VerifySign(pemBody(aliPub), bm) }
	}
	ctx := context.Background()
	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	qrNo, pageNo := "GOPAY_QR_"+suffix, "GOPAY_PAGE_"+suffix

	// precreate, then query the new trade.
	pre, err := client.TradePrecreate(ctx, gopay.BodyMap{"out_trade_no": qrNo, "total_amount": "12.34", "subject": "gopay check"})
	if err != nil {
		return fmt.Errorf("precreate: %w", err)
	}
	if pre.Response.OutTradeNo != qrNo || !strings.Contains(pre.Response.QrCode, "/_sim/qr/") {
		return fmt.Errorf("precreate answer %+v", pre.Response)
	}
	if err := wantStatus(ctx, client, qrNo, "WAIT_BUYER_PAY"); err != nil {
		return err
	}

	// page pay: gopay builds the URL; the buyer's browser opens it and gets the cashier.
	payURL, err := client.TradePagePay(ctx, gopay.BodyMap{"out_trade_no": pageNo, "total_amount": "0.50",
		"subject": "gopay page", "product_code": "FAST_INSTANT_TRADE_PAY"})
	if err != nil {
		return fmt.Errorf("page pay URL: %w", err)
	}
	u, err := url.Parse(payURL)
	if err != nil {
		return fmt.Errorf("page pay URL %q: %w", payURL, err)
	}
	u.Scheme, u.Host = base.Scheme, base.Host
	page, err := get(u.String())
	if err != nil {
		return fmt.Errorf("open page pay URL: %w", err)
	}
	if !strings.Contains(page, pageNo) || !strings.Contains(page, "0.50") {
		return fmt.Errorf("cashier page does not show the trade:\n%s", page)
	}
	// close the unpaid page-pay trade.
	if _, err := client.TradeClose(ctx, gopay.BodyMap{"out_trade_no": pageNo}); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	if err := wantStatus(ctx, client, pageNo, "TRADE_CLOSED"); err != nil {
		return err
	}

	// the buyer pays the QR trade; the notification must verify with gopay.
	resp, err := http.Post(s.base+"/_sim/trades/"+qrNo+"/pay", "application/json", strings.NewReader("{}"))
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pay: HTTP %d", resp.StatusCode)
	}
	// Every notification must verify: the page-pay trade's TRADE_CLOSED may come first.
	var note gopay.BodyMap
	for note == nil {
		var n gopay.BodyMap
		select {
		case n = <-notes:
		case <-time.After(10 * time.Second):
			return errors.New("no payment notification")
		}
		if ok, err := verifyNote(n); !ok || err != nil {
			return fmt.Errorf("notification does not verify: %v (%v)", err, n)
		}
		if n.GetString("out_trade_no") == qrNo {
			note = n
		}
	}
	if note.GetString("trade_status") != "TRADE_SUCCESS" || note.GetString("total_amount") != "12.34" {
		return fmt.Errorf("notification %v", note)
	}
	tampered := gopay.BodyMap{}
	for k, v := range note {
		tampered[k] = v
	}
	tampered.Set("total_amount", "0.01")
	if ok, _ := verifyNote(tampered); ok {
		return errors.New("a tampered notification verified")
	}
	if err := wantStatus(ctx, client, qrNo, "TRADE_SUCCESS"); err != nil {
		return err
	}

	// a paid trade cannot be closed.
	_, err = client.TradeClose(ctx, gopay.BodyMap{"out_trade_no": qrNo})
	var biz *alipay.BizErr
	if !errors.As(err, &biz) || biz.SubCode != "ACQ.TRADE_STATUS_ERROR" {
		return fmt.Errorf("close of a paid trade: %v; want ACQ.TRADE_STATUS_ERROR", err)
	}

	// refund, replay it (no second fund change), and query it.
	for i, want := range []string{"Y", "N"} {
		rf, err := client.TradeRefund(ctx, gopay.BodyMap{"out_trade_no": qrNo, "refund_amount": "2.00", "out_request_no": "R1"})
		if err != nil {
			return fmt.Errorf("refund #%d: %w", i+1, err)
		}
		if rf.Response.FundChange != want || rf.Response.RefundFee != "2.00" {
			return fmt.Errorf("refund #%d answer %+v; want fund_change %s", i+1, rf.Response, want)
		}
	}
	rq, err := client.TradeFastPayRefundQuery(ctx, gopay.BodyMap{"out_trade_no": qrNo, "out_request_no": "R1"})
	if err != nil {
		return fmt.Errorf("refund query: %w", err)
	}
	if rq.Response.RefundStatus != "REFUND_SUCCESS" || rq.Response.RefundAmount != "2.00" {
		return fmt.Errorf("refund query answer %+v", rq.Response)
	}
	return nil
}

func wantStatus(ctx context.Context, c *alipay.Client, no, status string) error {
	q, err := c.TradeQuery(ctx, gopay.BodyMap{"out_trade_no": no})
	if err != nil {
		return fmt.Errorf("query %s: %w", no, err)
	}
	if q.Response.TradeStatus != status {
		b, _ := json.Marshal(q.Response)
		return fmt.Errorf("query %s: trade_status %s; want %s (%s)", no, q.Response.TradeStatus, status, b)
	}
	return nil
}

func get(u string) (string, error) {
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}
