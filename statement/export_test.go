package statement

import "github.com/paykit/paykit/payment"

// ReadBillWithin is ReadBill with lower bounds on an entry's decompressed size and on a
// record, so that a test need not write hundreds of MiB to reach them.
func ReadBillWithin(path string, maxEntry, maxRecord int64, fn func(payment.BillLine) error) (Footer, error) {
	return readBill(path, limits{entry: maxEntry, record: maxRecord}, fn)
}
