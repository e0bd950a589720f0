package activities

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// WebhookPolicy says where merchant webhooks may go. A tenant chooses its notify_url, so
// without it a tenant could make paykit's worker POST to hosts inside paykit's own
// network (Redis, Temporal's frontend, a metrics endpoint) and read the error back in
// its events feed. The zero value allows everything; the paykit binary requires https
// and refuses internal destinations unless PAYKIT_WEBHOOK_ALLOW_HTTP and
// PAYKIT_WEBHOOK_ALLOW_PRIVATE say otherwise (dev and tests).
type WebhookPolicy struct {
	// RequireHTTPS refuses a notify_url that is not https.
	RequireHTTPS bool
	// RefusePrivate refuses to connect to an address that is not public unicast:
	// loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local (169.254/16,
	// fe80::/10, cloud metadata), carrier-grade NAT (100.64/10), unspecified, multicast
	// and the other special-purpose ranges. It is checked on connect, after DNS, for
	// every address tried, so a name that resolves (or later re-resolves) inside is
	// refused too.
	RefusePrivate bool
}

// ErrDestinationNotAllowed is the cause of a delivery the policy refused.
var ErrDestinationNotAllowed = errors.New("webhook destination not allowed")

// CheckURL validates a notify_url: an absolute http or https URL with a host and no
// user info, https if required, and not a literal internal address if those are refused.
func (p WebhookPolicy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%w: notify_url must be an absolute http(s) URL", ErrDestinationNotAllowed)
	}
	if u.User != nil {
		return fmt.Errorf("%w: notify_url must not carry user info", ErrDestinationNotAllowed)
	}
	if p.RequireHTTPS && u.Scheme != "https" {
		return fmt.Errorf("%w: notify_url must be https", ErrDestinationNotAllowed)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && p.RefusePrivate && !publicUnicast(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrDestinationNotAllowed, ip)
	}
	return nil
}

// special are the ranges, beyond those netip classifies, that are not public unicast.
var special = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("::/96"), // IPv4-compatible
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"), // IETF protocol assignments, Teredo among them
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"), // 6to4, which can carry a private IPv4
	netip.MustParsePrefix("fec0::/10"), // site-local
}

func publicUnicast(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range special {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// control is the dialer's hook on every connection about to be made, with the
// resolved address.
func (p WebhookPolicy) control(_, address string, _ syscall.RawConn) error {
	if !p.RefusePrivate {
		return nil
	}
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrDestinationNotAllowed, address)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !publicUnicast(ip) {
		return fmt.Errorf("%w: %s is not a public address", ErrDestinationNotAllowed, host)
	}
	return nil
}

// NewWebhookTransport returns the transport of merchant webhooks, which applies p to
// every connection. It uses no proxy: a proxy would make the connection for paykit,
// past the address check.
func NewWebhookTransport(p WebhookPolicy) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: p.control}
	t.DialContext = d.DialContext
	return t
}

// failureClass names what went wrong with a delivery in the words a tenant is shown
// (the events feed's last_error, a redelivery's answer): the class of the failure, never
// an internal address, port or error text. The whole error goes to paykit's own log.
func failureClass(err error) string {
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var recordErr tls.RecordHeaderError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrDestinationNotAllowed):
		return "destination not allowed: notify_url must reach a public address"
	case errors.As(err, &dnsErr):
		return "notify_url host not found"
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostnameErr), errors.As(err, &recordErr):
		return "TLS handshake failed"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	default:
		return "connection failed"
	}
}
