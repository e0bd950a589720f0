package alipay

import (
	"context"
	"time"

	"github.com/paykit/paykit/payment"
	"github.com/smartwalle/alipay/v3"
)

const (
	opBillURL = "alipay.data.dataservice.bill.downloadurl.query"
	// SubCodeBillNotExist answers a day with no bill, or one not yet published.
	SubCodeBillNotExist = "isp.bill_not_exist"
)

var _ payment.BillSource = (*Gateway)(nil)

// BillDownloadURL asks for the download URL of the trade bill of billDate (yyyy-MM-dd,
// China time). A day without a bill, or not yet published, is a non-retryable
// *payment.ChannelError wrapping payment.ErrBillNotAvailable.
func (g *Gateway) BillDownloadURL(ctx context.Context, billDate string) (string, error) {
	if _, err := time.ParseInLocation("2006-01-02", billDate, g.loc); err != nil {
		return "", invalidRequest(opBillURL, payment.Errorf(payment.EINVALID, "bill_date %q is not yyyy-MM-dd", billDate))
	}
	ctx, call := g.begin(ctx, opBillURL, "")
	rsp, err := g.client.BillDownloadURLQuery(ctx, alipay.BillDownloadURLQuery{BillType: "trade", BillDate: billDate})
	url, err := billURLResult(rsp, err)
	call.end(err, "bill_date", billDate)
	return url, err
}

func billURLResult(rsp *alipay.BillDownloadURLQueryRsp, err error) (string, error) {
	if err != nil {
		return "", withBillNotExist(callError(opBillURL, err))
	}
	if !rsp.IsSuccess() {
		return "", withBillNotExist(businessError(opBillURL, rsp.Error, nil))
	}
	if rsp.BillDownloadURL == "" {
		return "", badAnswer(opBillURL, "success without bill_download_url", nil)
	}
	return rsp.BillDownloadURL, nil
}

// withBillNotExist marks isp.bill_not_exist so that callers can wait for the bill.
func withBillNotExist(ce *payment.ChannelError) *payment.ChannelError {
	if ce.SubCode == SubCodeBillNotExist || ce.SubCode == "aop."+SubCodeBillNotExist {
		ce.Retryable = false
		ce.Err = payment.ErrBillNotAvailable
	}
	return ce
}
