package payment_test

import (
	"testing"

	"github.com/paykit/paykit/payment"
)

func TestParseYuan(t *testing.T) {
	tests := []struct {
		in      string
		want    payment.Amount
		wantErr bool
	}{
		{in: "9.90", want: 990},
		{in: "9.9", want: 990},
		{in: "10", want: 1000},
		{in: "0.01", want: 1},
		{in: "0.10", want: 10},
		{in: "100000000.00", want: 100_000_000_00},
		{in: "123456789012.34", want: 12345678901234},
		{in: "", wantErr: true},
		{in: "9.999", wantErr: true},
		{in: "-1.00", wantErr: true},
		{in: "+1.00", wantErr: true},
		{in: "1e2", wantErr: true},
		{in: ".5", wantErr: true},
		{in: "5.", wantErr: true},
		{in: "1,00", wantErr: true},
		{in: " 1.00", wantErr: true},
		{in: "9999999999999.00", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := payment.ParseYuan(tc.in)
			if tc.wantErr {
				if err == nil || payment.ErrorCode(err) != payment.EINVALID {
					t.Fatalf("ParseYuan(%q) = %d, %v; want an invalid error", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseYuan(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestYuanRoundTripsExactly(t *testing.T) {
	for _, fen := range []payment.Amount{1, 9, 10, 99, 100, 990, 1001, 123456789, payment.MaxAmount} {
		s := fen.Yuan()
		back, err := payment.ParseYuan(s)
		if err != nil || back != fen {
			t.Fatalf("%d → %q → %d, %v", fen, s, back, err)
		}
	}
	if got := payment.Amount(-5).Yuan(); got != "-0.05" {
		t.Fatalf("negative: %q", got)
	}
}

func TestAmountValidate(t *testing.T) {
	for _, a := range []payment.Amount{0, -1, payment.MaxAmount + 1} {
		if err := a.Validate(); err == nil {
			t.Errorf("%d accepted", a)
		}
	}
	for _, a := range []payment.Amount{1, payment.MaxAmount} {
		if err := a.Validate(); err != nil {
			t.Errorf("%d refused: %v", a, err)
		}
	}
}
