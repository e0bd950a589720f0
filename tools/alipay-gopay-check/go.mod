module github.com/paykit/paykit/tools/alipay-gopay-check

go 1.26

require github.com/go-pay/gopay v1.5.115

require (
	github.com/go-pay/crypto v0.0.1 // indirect
	github.com/go-pay/xlog v0.0.3 // indirect
	github.com/go-pay/xtime v0.0.2 // indirect
)
