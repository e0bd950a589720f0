package gateways

import (
	"context"
	"fmt"

	"github.com/paykit/paykit/payment"
)

// Channel resolves the merchant accounts of one channel: Resolver for Alipay's apps,
// Merchant for a channel with one account.
type Channel interface {
	// For returns the tenant's current account, on which a new payment is opened.
	For(ctx context.Context, tenantID string) (payment.App, error)
	// ForPayment returns the account a tenant's payment was opened on, by the ID it
	// recorded.
	ForPayment(ctx context.Context, tenantID, appID string) (payment.App, error)
	// ForApp returns the gateway of an account, to verify a notification with its key.
	ForApp(ctx context.Context, appID string) (payment.Gateway, error)
	// ForNotification returns the gateway of the account raw names (ForApp), raw being a
	// notification of the channel as it arrived or was recorded.
	ForNotification(ctx context.Context, raw payment.RawNotification) (payment.Gateway, error)
}

// Channels is payment.Gateways over the channels the deployment is configured for: each
// call goes to the channel it names ("" is Alipay, for payments recorded before their
// channel was), and a channel not among them is refused as not configured.
type Channels map[payment.Channel]Channel

var (
	_ payment.Gateways      = Channels(nil)
	_ payment.ChannelOffers = Channels(nil)
	_ Channel               = (*Resolver)(nil)
	_ Channel               = Merchant{}
)

// Offers implements payment.ChannelOffers.
func (c Channels) Offers(ch payment.Channel) error {
	_, err := c.of(ch)
	return err
}

func (c Channels) of(ch payment.Channel) (Channel, error) {
	if r := c[ch.OrAlipay()]; r != nil {
		return r, nil
	}
	return nil, payment.Errorf(payment.EUNPROCESSABLE, "%s is not configured on this deployment", ch.Name())
}

// For implements payment.Gateways.
func (c Channels) For(ctx context.Context, tenantID string, ch payment.Channel) (payment.App, error) {
	r, err := c.of(ch)
	if err != nil {
		return payment.App{}, err
	}
	return r.For(ctx, tenantID)
}

// ForPayment implements payment.Gateways.
func (c Channels) ForPayment(ctx context.Context, tenantID string, ch payment.Channel, appID string) (payment.App, error) {
	r, err := c.of(ch)
	if err != nil {
		return payment.App{}, err
	}
	return r.ForPayment(ctx, tenantID, appID)
}

// ForApp implements payment.Gateways.
func (c Channels) ForApp(ctx context.Context, ch payment.Channel, appID string) (payment.Gateway, error) {
	r, err := c.of(ch)
	if err != nil {
		return nil, err
	}
	return r.ForApp(ctx, appID)
}

// ForNotification implements payment.Gateways.
func (c Channels) ForNotification(ctx context.Context, ch payment.Channel, raw payment.RawNotification) (payment.Gateway, error) {
	r, err := c.of(ch)
	if err != nil {
		return nil, err
	}
	return r.ForNotification(ctx, raw)
}

// Merchant is a channel's one merchant account, on which every tenant's payments are
// opened: the deployment's WeChat Pay merchant (WECHATPAY_*), until tenants have their
// own. A payment that recorded another account is not its to serve.
type Merchant struct {
	// ID is what its payments record (a WeChat Pay mchid), and SellerID, AppID what its
	// notifications carry (mchid, appid).
	ID, AppID, SellerID string
	Gateway             payment.Gateway
}

func (m Merchant) app() payment.App {
	return payment.App{ID: m.ID, AppID: m.AppID, SellerID: m.SellerID, Gateway: m.Gateway}
}

// For implements Channel.
func (m Merchant) For(context.Context, string) (payment.App, error) { return m.app(), nil }

// ForPayment implements Channel: only a payment opened on this account is.
func (m Merchant) ForPayment(_ context.Context, tenantID, appID string) (payment.App, error) {
	if appID != m.ID {
		return payment.App{}, &payment.Error{Code: payment.ENOTFOUND,
			Message: fmt.Sprintf("payment of tenant %s was opened on merchant %q, not this deployment's %q", tenantID, appID, m.ID), Err: payment.ErrNotFound}
	}
	return m.app(), nil
}

// ForApp implements Channel: "" is this account, whose notify URL names no account.
func (m Merchant) ForApp(_ context.Context, appID string) (payment.Gateway, error) {
	if appID != "" && appID != m.ID {
		return nil, &payment.Error{Code: payment.ENOTFOUND, Message: fmt.Sprintf("no merchant %q", appID), Err: payment.ErrNotFound}
	}
	return m.Gateway, nil
}

// ForNotification implements Channel: WeChat Pay's notifications name no account (the
// notify URL is the merchant's), so it is this one, whose key alone verifies them.
func (m Merchant) ForNotification(context.Context, payment.RawNotification) (payment.Gateway, error) {
	return m.Gateway, nil
}
