package alipaysim

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"sort"
)

// ErrAppConflict means an app_id is already registered with other keys or seller.
var ErrAppConflict = errors.New("alipaysim: app_id already registered differently")

// AddApp registers a further merchant app while the simulator runs, as a platform adds
// its tenants' apps. Each app's trades are its own: another app's out_trade_no does not
// exist for it. Registering the same app again is a no-op; the same app_id with other
// keys or seller is ErrAppConflict.
func (s *Simulator) AddApp(a App) error {
	apps, err := Config{Apps: []App{a}}.apps(s.certs)
	if err != nil {
		return fmt.Errorf("alipaysim: %w", err)
	}
	na := apps[a.AppID]
	s.appsMu.Lock()
	defer s.appsMu.Unlock()
	if old := s.apps[a.AppID]; old != nil {
		if old.sellerID == na.sellerID && old.certSN == na.certSN && old.pub.Equal(na.pub) && sameKey(old.alipayKey, na.alipayKey) {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrAppConflict, a.AppID)
	}
	s.apps[a.AppID] = na
	s.log.Info("app registered", "app_id", a.AppID, "seller_id", na.sellerID, "own_alipay_key", na.alipayKey != nil)
	return nil
}

// AppIDs returns the registered app_ids, sorted.
func (s *Simulator) AppIDs() []string {
	s.appsMu.RLock()
	defer s.appsMu.RUnlock()
	ids := make([]string, 0, len(s.apps))
	for id := range s.apps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// app returns a registered app, or nil.
func (s *Simulator) app(id string) *app {
	s.appsMu.RLock()
	defer s.appsMu.RUnlock()
	return s.apps[id]
}

// signingKey is the key that signs what Alipay sends for an app: the app's own Alipay
// key if it has one, else the simulator's.
func (s *Simulator) signingKey(a *app) *rsa.PrivateKey {
	if a != nil && a.alipayKey != nil {
		return a.alipayKey
	}
	return s.alipayKey
}

func sameKey(a, b *rsa.PrivateKey) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

// appRequest is the body of POST /_sim/apps.
type appRequest struct {
	AppID               string `json:"app_id"`
	SellerID            string `json:"seller_id"`
	PublicKeyPEM        string `json:"app_public_key"`
	AlipayPrivateKeyPEM string `json:"alipay_private_key,omitempty"`
}

func (s *Simulator) handleAddApp(w http.ResponseWriter, r *http.Request) {
	var body appRequest
	if !decodeBody(w, r, &body) {
		return
	}
	err := s.AddApp(App{AppID: body.AppID, SellerID: body.SellerID, PublicKeyPEM: body.PublicKeyPEM, AlipayPrivateKeyPEM: body.AlipayPrivateKeyPEM})
	switch {
	case errors.Is(err, ErrAppConflict):
		writeError(w, http.StatusConflict, err)
	case err != nil:
		writeError(w, http.StatusBadRequest, err)
	default:
		writeJSON(w, http.StatusOK, map[string]any{"app_ids": s.AppIDs()})
	}
}
